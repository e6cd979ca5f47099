package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// UsageRecord is one node's billing ledger for one billing period (a UTC
// day): the CPU each tenant used there at each price, how the node's CPU
// time splits, the reports refused, and the cursor — how far the node's
// cumulative counters have been counted. Only the controller writes it, one
// report at a time, and the cursor and the amounts change in the same
// write, so no report is counted twice. A node's open record is named
// <node>.current; when a day ends its period moves on, after the day is
// archived in a closed record named <node>.<period>.
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Cluster,shortName=ur
// +kubebuilder:selectablefield:JSONPath=`.node`
// +kubebuilder:selectablefield:JSONPath=`.period`
// +kubebuilder:printcolumn:name="NODE",type=string,JSONPath=`.node`
// +kubebuilder:printcolumn:name="PERIOD",type=string,JSONPath=`.period`
// +kubebuilder:printcolumn:name="CLOSED",type=boolean,JSONPath=`.closed`
// +kubebuilder:printcolumn:name="COUNTED-TO",type=date,JSONPath=`.cursor.through`
// +kubebuilder:printcolumn:name="ACCEPTED",type=string,JSONPath=`.conditions[?(@.type=="ReportAccepted")].status`
// +kubebuilder:printcolumn:name="REASON",type=string,JSONPath=`.conditions[?(@.type=="ReportAccepted")].reason`
// +kubebuilder:printcolumn:name="AGE",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:validation:XValidation:rule="self.node == oldSelf.node",message="node identifies a usage record and cannot change"
// +kubebuilder:validation:XValidation:rule="self.period == oldSelf.period || (!(has(oldSelf.closed) && oldSelf.closed) && self.period > oldSelf.period)",message="period only moves forward, and only on a node's open record"
// +kubebuilder:validation:XValidation:rule="!(has(oldSelf.closed) && oldSelf.closed) || (has(self.closed) && self.closed)",message="a closed usage record cannot be reopened"
type UsageRecord struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Node is the node's name.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +required
	Node string `json:"node"`
	// Period is the UTC day the record covers, e.g. "2026-11-25": a report
	// window is billed to the day it ends in.
	// +kubebuilder:validation:MaxLength=10
	// +kubebuilder:validation:Pattern=`^[0-9]{4}-[0-9]{2}-[0-9]{2}$`
	// +required
	Period string `json:"period"`
	// Closed records take nothing more: a later period's record holds the
	// cursor now. Only the newest record of a node is open.
	// +optional
	Closed bool `json:"closed,omitempty"`
	// Cursor is how far the node's counters have been counted.
	// +required
	Cursor LedgerCursor `json:"cursor"`
	// Lines are the CPU billed to each tenant at each price in the period.
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=32768
	// +optional
	Lines []ChargeLine `json:"lines,omitempty"`
	// CPU is how the node's CPU time over the period's accepted windows
	// splits: Capacity = Tenants + OtherPods + System + Idle, exactly.
	// +optional
	CPU NodeCPUTime `json:"cpu"`
	// Refusals counts what was refused in the period, by reason.
	// +listType=map
	// +listMapKey=reason
	// +kubebuilder:validation:MaxItems=32
	// +optional
	Refusals []Refusal `json:"refusals,omitempty"`
	// LastReport is what became of the node's last report.
	// +optional
	LastReport *ReportOutcome `json:"lastReport,omitempty"`
	// Conditions: ReportAccepted (the last report's outcome).
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=16
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// LedgerCursor is where the node's cumulative counters were last counted.
type LedgerCursor struct {
	// Through is the end of the last window counted (a report's
	// observedTime): a report observed at or before it is stale.
	// +optional
	Through *metav1.Time `json:"through,omitempty"`
	// Sequence counts the reports counted on the node, over all its
	// records: a record with a larger one counted further.
	// +optional
	Sequence int64 `json:"sequence,omitempty"`
	// BootID is the agent run whose counters Tenants and Node hold.
	// +kubebuilder:validation:MaxLength=64
	// +optional
	BootID string `json:"bootID,omitempty"`
	// BootTime is when that run started counting.
	// +optional
	BootTime *metav1.Time `json:"bootTime,omitempty"`
	// RetiredBoots are earlier runs of the node's agent, most recent last:
	// their reports are refused.
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=8
	// +kubebuilder:validation:items:MaxLength=64
	// +optional
	RetiredBoots []string `json:"retiredBoots,omitempty"`
	// Tenants are the boot's counters as last counted, one per tenant UID:
	// the last report's tenants and those whose CPU is held.
	// +listType=map
	// +listMapKey=uid
	// +kubebuilder:validation:MaxItems=65536
	// +optional
	Tenants []TenantCounter `json:"tenants,omitempty"`
	// Node are the boot's node counters as last counted.
	// +optional
	Node *NodeCPU `json:"node,omitempty"`
}

// TenantCounter is one tenant's cumulative counter as last counted.
type TenantCounter struct {
	// UID of the Tenant.
	// +kubebuilder:validation:MaxLength=64
	UID string `json:"uid"`
	// CPUNanoseconds is the counter value counted.
	CPUNanoseconds int64 `json:"cpuNanoseconds"`
	// At is the observedTime of the report it was counted from (the start
	// of the tenant's next window).
	At metav1.Time `json:"at"`
	// Final: the agent said the counter will not grow again.
	// +optional
	Final bool `json:"final,omitempty"`
	// HeldNanoseconds is CPU counted but not billed yet because the
	// tenant's price is unknown (its tier is missing): it is billed when the
	// tier is back, carried across agent runs until then.
	// +optional
	HeldNanoseconds int64 `json:"heldNanoseconds,omitempty"`
	// HeldSince and HeldUntil bound when the held CPU was used.
	// +optional
	HeldSince *metav1.Time `json:"heldSince,omitempty"`
	// +optional
	HeldUntil *metav1.Time `json:"heldUntil,omitempty"`
}

// ChargeLine is the CPU one tenant used on the node in the period at one
// price.
type ChargeLine struct {
	// TenantUID identifies the Tenant the line bills.
	// +kubebuilder:validation:MaxLength=64
	TenantUID string `json:"tenantUID"`
	// Tenant is the Tenant's name.
	// +kubebuilder:validation:MaxLength=253
	Tenant string `json:"tenant"`
	// Tier is the PricingTier priced at, empty for a tenant with
	// spec.weight (unpriced).
	// +kubebuilder:validation:MaxLength=253
	// +optional
	Tier string `json:"tier,omitempty"`
	// Currency of Cost, empty when unpriced.
	// +kubebuilder:validation:MaxLength=3
	// +optional
	Currency string `json:"currency,omitempty"`
	// PricePerCPUHour in force while the CPU was used.
	// +kubebuilder:validation:MaxLength=13
	PricePerCPUHour string `json:"pricePerCPUHour"`
	// CPUNanoseconds used at that price.
	CPUNanoseconds int64 `json:"cpuNanoseconds"`
	// Cost is CPUNanoseconds at PricePerCPUHour, rounded down to a
	// millionth.
	// +kubebuilder:validation:MaxLength=64
	Cost string `json:"cost"`
	// From and To bound the report windows the line holds.
	From metav1.Time `json:"from"`
	To   metav1.Time `json:"to"`
}

// NodeCPUTime splits the node's CPU time over a period's accepted report
// windows, in nanoseconds: Capacity = Tenants + OtherPods + System + Idle.
// Parts may be slightly negative when the agent's reads of different
// counters were a few milliseconds apart.
type NodeCPUTime struct {
	// CapacityNanoseconds is the Node's CPUs × the windows' wall time.
	CapacityNanoseconds int64 `json:"capacityNanoseconds"`
	// TenantsNanoseconds is what was billed to tenants.
	TenantsNanoseconds int64 `json:"tenantsNanoseconds"`
	// OtherPodsNanoseconds is what the node's other pods used: pods of no
	// tenant, and tenant CPU that was refused or not billed yet.
	OtherPodsNanoseconds int64 `json:"otherPodsNanoseconds"`
	// SystemNanoseconds is what the node used outside pods.
	SystemNanoseconds int64 `json:"systemNanoseconds"`
	// IdleNanoseconds is capacity nobody used.
	IdleNanoseconds int64 `json:"idleNanoseconds"`
	// RefusedNanoseconds is the tenant CPU that refused reports claimed
	// (never billed; outside the sum, as a claim may be impossible).
	// +optional
	RefusedNanoseconds int64 `json:"refusedNanoseconds,omitempty"`
}

// Refusal counts the refusals of one reason in a period.
type Refusal struct {
	// Reason, as in the ReportAccepted condition.
	// +kubebuilder:validation:MaxLength=64
	Reason string `json:"reason"`
	// Count of reports (or tenants in reports) refused.
	Count int64 `json:"count"`
	// Last is the observedTime of the last report refused.
	Last metav1.Time `json:"last"`
	// Message of the last refusal.
	// +kubebuilder:validation:MaxLength=1024
	Message string `json:"message"`
}

// ReportOutcome is what became of one report.
type ReportOutcome struct {
	// BootID and ObservedTime identify the report.
	// +kubebuilder:validation:MaxLength=64
	BootID       string      `json:"bootID"`
	ObservedTime metav1.Time `json:"observedTime"`
	// BilledNanoseconds is the CPU it billed.
	BilledNanoseconds int64 `json:"billedNanoseconds"`
	// Refused are its tenants' counters that were not billed, and why.
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=65536
	// +optional
	Refused []RefusedTenant `json:"refused,omitempty"`
	// Reason the whole report was refused, empty when it was not.
	// +kubebuilder:validation:MaxLength=64
	// +optional
	Reason string `json:"reason,omitempty"`
}

// RefusedTenant is one tenant's counter a report was refused for.
type RefusedTenant struct {
	// UID and name of the tenant the report named.
	// +kubebuilder:validation:MaxLength=64
	UID string `json:"uid"`
	// +kubebuilder:validation:MaxLength=253
	Tenant string `json:"tenant"`
	// Reason and Message, as in the ReportAccepted condition.
	// +kubebuilder:validation:MaxLength=64
	Reason string `json:"reason"`
	// +kubebuilder:validation:MaxLength=1024
	Message string `json:"message"`
	// CPUNanoseconds claimed and not billed.
	CPUNanoseconds int64 `json:"cpuNanoseconds"`
}

// UsageRecordList is a list of UsageRecords.
// +kubebuilder:object:root=true
type UsageRecordList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []UsageRecord `json:"items"`
}

// TenantBill is what one tenant was billed in one billing period (a UTC
// day), over every node: the sum of the period's UsageRecords. It outlives
// the Tenant, and a tenant created again under the same name gets bills of
// its own (they follow the UID). Its name is <tenant>.<period>.<uid prefix>.
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Cluster,shortName=bill
// +kubebuilder:selectablefield:JSONPath=`.tenant`
// +kubebuilder:selectablefield:JSONPath=`.tenantUID`
// +kubebuilder:selectablefield:JSONPath=`.period`
// +kubebuilder:printcolumn:name="TENANT",type=string,JSONPath=`.tenant`
// +kubebuilder:printcolumn:name="PERIOD",type=string,JSONPath=`.period`
// +kubebuilder:printcolumn:name="CPU-SECONDS",type=string,JSONPath=`.cpuSeconds`
// +kubebuilder:printcolumn:name="COST",type=string,JSONPath=`.costs[0].amount`
// +kubebuilder:printcolumn:name="CURRENCY",type=string,JSONPath=`.costs[0].currency`
// +kubebuilder:printcolumn:name="FINAL",type=boolean,JSONPath=`.final`
// +kubebuilder:printcolumn:name="AGE",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:validation:XValidation:rule="self.tenantUID == oldSelf.tenantUID && self.period == oldSelf.period",message="tenantUID and period identify a bill and cannot change"
type TenantBill struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Tenant is the Tenant's name.
	// +kubebuilder:validation:MaxLength=253
	// +required
	Tenant string `json:"tenant"`
	// TenantUID identifies the Tenant.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=64
	// +required
	TenantUID string `json:"tenantUID"`
	// Period is the UTC day billed, e.g. "2026-11-25".
	// +kubebuilder:validation:MaxLength=10
	// +kubebuilder:validation:Pattern=`^[0-9]{4}-[0-9]{2}-[0-9]{2}$`
	// +required
	Period string `json:"period"`
	// CPUSeconds billed over all nodes, an exact decimal.
	// +kubebuilder:validation:MaxLength=64
	CPUSeconds string `json:"cpuSeconds"`
	// Costs are the amounts billed, one per currency (one unless the
	// tenant moved to a tier in another currency during the period): at
	// most 26³, the three-letter codes.
	// +listType=map
	// +listMapKey=currency
	// +kubebuilder:validation:MaxItems=17576
	// +optional
	Costs []Amount `json:"costs,omitempty"`
	// Lines are the CPU billed at each price: the period's CPU at that
	// price over all nodes, priced once and rounded down to a millionth.
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=65536
	// +optional
	Lines []BillLine `json:"lines,omitempty"`
	// Nodes is how many nodes' UsageRecords the bill sums.
	Nodes int32 `json:"nodes"`
	// Sources are, per node, what the node's UsageRecord of the period
	// billed the tenant, from the record that counted furthest: the bill
	// keeps them when UsageRecords are deleted.
	// +listType=map
	// +listMapKey=node
	// +kubebuilder:validation:MaxItems=65536
	// +optional
	Sources []BillSource `json:"sources,omitempty"`
	// Final is true once every UsageRecord it sums is closed: the figures
	// no longer change, and the period's UsageRecords may be deleted.
	// +optional
	Final bool `json:"final,omitempty"`
}

// Amount is money in one currency, an exact decimal (millionths).
type Amount struct {
	// Currency is an ISO 4217 code.
	// +kubebuilder:validation:MaxLength=3
	Currency string `json:"currency"`
	// Amount is a decimal with six fraction digits.
	// +kubebuilder:validation:MaxLength=64
	Amount string `json:"amount"`
}

// BillLine is a tenant's CPU in a period at one price.
type BillLine struct {
	// Tier priced at, empty when unpriced.
	// +kubebuilder:validation:MaxLength=253
	// +optional
	Tier string `json:"tier,omitempty"`
	// Currency of Cost, empty when unpriced.
	// +kubebuilder:validation:MaxLength=3
	// +optional
	Currency string `json:"currency,omitempty"`
	// PricePerCPUHour in force while the CPU was used.
	// +kubebuilder:validation:MaxLength=13
	PricePerCPUHour string `json:"pricePerCPUHour"`
	// CPUSeconds at that price, an exact decimal.
	// +kubebuilder:validation:MaxLength=64
	CPUSeconds string `json:"cpuSeconds"`
	// Cost is CPUSeconds at PricePerCPUHour, rounded down to a millionth
	// (not set in Sources).
	// +kubebuilder:validation:MaxLength=64
	// +optional
	Cost string `json:"cost,omitempty"`
}

// BillSource is what one node's UsageRecord billed a tenant in a period.
type BillSource struct {
	// Node is the node's name.
	// +kubebuilder:validation:MaxLength=253
	Node string `json:"node"`
	// Sequence is how far the record had counted (its cursor's sequence).
	Sequence int64 `json:"sequence"`
	// Lines are its CPU by price.
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=65536
	Lines []BillLine `json:"lines"`
}

// TenantBillList is a list of TenantBills.
// +kubebuilder:object:root=true
type TenantBillList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []TenantBill `json:"items"`
}

func init() {
	SchemeBuilder.Register(func(s *runtime.Scheme) error {
		s.AddKnownTypes(GroupVersion, &UsageRecord{}, &UsageRecordList{}, &TenantBill{}, &TenantBillList{})
		return nil
	})
}
