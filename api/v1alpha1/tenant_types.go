package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// ThreadPolicy says how threads inside a tenant's pods share the pod's CPU
// (docs/design.md §Fairness model, level 3).
// +kubebuilder:validation:Enum=TWRS;PFS;TFPS;None
// +kubebuilder:validation:MaxLength=4
type ThreadPolicy string

const (
	// ThreadPolicyTWRS readjusts each thread's weight by the threads on its
	// CPU run queue (thesis eq. 3.3).
	ThreadPolicyTWRS ThreadPolicy = "TWRS"
	// ThreadPolicyPFS divides a process's weight among its threads.
	ThreadPolicyPFS ThreadPolicy = "PFS"
	// ThreadPolicyTFPS scales thread weights by online CPUs / threads.
	ThreadPolicyTFPS ThreadPolicy = "TFPS"
	// ThreadPolicyNone leaves threads to the stock scheduler.
	ThreadPolicyNone ThreadPolicy = "None"
)

// Workload weights a group of a tenant's pods (a VM, a service) inside the
// tenant's entitlement.
type Workload struct {
	// Name identifies the workload in status and reports.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:XValidation:rule="self.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?$')",message="workload name must be a DNS label: lower-case letters, digits and '-'"
	// +required
	Name string `json:"name"`

	// PodSelector selects the tenant's pods that belong to this workload.
	// A pod two workloads select belongs to the first listed; the tenant
	// is Degraded (WorkloadsOverlap) when one workload's selector surely
	// selects pods of another's.
	// +required
	PodSelector LabelSelector `json:"podSelector"`

	// Weight of this workload against the tenant's other workloads (1..10000).
	// Pods matched by no workload share the rest equally, one default
	// weight (100) per pod.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=10000
	// +required
	Weight int32 `json:"weight"`
}

// TenantSpec declares who a tenant is and what CPU weight it has.
// +kubebuilder:validation:XValidation:rule="has(self.tier) != has(self.weight)",message="exactly one of spec.tier and spec.weight must be set"
// +kubebuilder:validation:XValidation:rule="(has(self.namespaces) && size(self.namespaces) > 0) || has(self.namespaceSelector)",message="at least one of spec.namespaces or spec.namespaceSelector must be set"
type TenantSpec struct {
	// Tier names the PricingTier whose weight and price the tenant uses.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +optional
	Tier string `json:"tier,omitempty"`

	// Weight sets the tenant's CPU weight directly (1..10000), unpriced.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=10000
	// +optional
	Weight *int32 `json:"weight,omitempty"`

	// Namespaces are namespaces that belong to the tenant, by name. The
	// cluster's own (kube-system, kube-public, kube-node-lease) and
	// kubefair's (kubefair-system) cannot be a tenant's.
	// +kubebuilder:validation:MaxItems=256
	// +kubebuilder:validation:items:MaxLength=63
	// +kubebuilder:validation:XValidation:rule="self.all(n, n.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?$'))",message="namespaces must be DNS labels"
	// +kubebuilder:validation:XValidation:rule="!self.exists(n, n in ['kube-system', 'kube-public', 'kube-node-lease', 'kubefair-system'])",messageExpression="'namespace ' + self.filter(n, n in ['kube-system', 'kube-public', 'kube-node-lease', 'kubefair-system'])[0] + ' cannot belong to a tenant: kube-system, kube-public, kube-node-lease and kubefair-system run the cluster and kubefair itself'"
	// +listType=set
	// +optional
	Namespaces []string `json:"namespaces,omitempty"`

	// NamespaceSelector adds every namespace whose labels match. It cannot
	// be empty (that would match every namespace), nor name kube-system,
	// kube-public, kube-node-lease or kubefair-system by their
	// kubernetes.io/metadata.name label.
	// +kubebuilder:validation:XValidation:rule="(has(self.matchLabels) && size(self.matchLabels) > 0) || (has(self.matchExpressions) && size(self.matchExpressions) > 0)",message="namespaceSelector must not be empty: an empty selector matches every namespace, kube-system included; give matchLabels or matchExpressions, or list spec.namespaces instead"
	// +kubebuilder:validation:XValidation:rule="!has(self.matchLabels) || !('kubernetes.io/metadata.name' in self.matchLabels) || !(self.matchLabels['kubernetes.io/metadata.name'] in ['kube-system', 'kube-public', 'kube-node-lease', 'kubefair-system'])",messageExpression="'namespaceSelector selects namespace ' + self.matchLabels['kubernetes.io/metadata.name'] + ' by name, which cannot belong to a tenant: kube-system, kube-public, kube-node-lease and kubefair-system run the cluster and kubefair itself'"
	// +kubebuilder:validation:XValidation:rule="!has(self.matchExpressions) || !self.matchExpressions.exists(e, e.key == 'kubernetes.io/metadata.name' && e.operator == 'In' && has(e.values) && e.values.exists(v, v in ['kube-system', 'kube-public', 'kube-node-lease', 'kubefair-system']))",message="namespaceSelector selects kube-system, kube-public, kube-node-lease or kubefair-system by name (kubernetes.io/metadata.name In ...), which cannot belong to a tenant: they run the cluster and kubefair itself"
	// +optional
	NamespaceSelector *LabelSelector `json:"namespaceSelector,omitempty"`

	// Workloads weight groups of pods (VMs, services) inside the tenant.
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:XValidation:rule="self.all(w, self.exists_one(x, x.name == w.name))",message="workload names must be unique"
	// +optional
	Workloads []Workload `json:"workloads,omitempty"`

	// ThreadPolicy shares a pod's CPU among its processes and threads.
	// +kubebuilder:default=PFS
	// +optional
	ThreadPolicy ThreadPolicy `json:"threadPolicy,omitempty"`

	// RequestElevation raises, inside the tenant, a workload whose
	// processes receive requests on their sockets, for a time that grows
	// with the node's load (request-based elevation, after seed 002): its
	// weight against the tenant's other workloads goes up, the tenant's
	// share of the node and its bill do not. Nodes whose agent cannot
	// count requests (eBPF) say so, and the tenant is Degraded.
	// +optional
	RequestElevation bool `json:"requestElevation,omitempty"`
}

// TenantStatus is what the controller resolved, what the nodes measure now,
// and what the tenant was billed in the current billing period. The bill
// itself lives in TenantBills, summed from the nodes' UsageRecords, so
// wiping this status loses nothing.
type TenantStatus struct {
	// ObservedGeneration is the generation this status was computed from.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// Conditions: Ready, TierResolved, Enforced, Degraded, Billed.
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=16
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// EffectiveWeight is the weight in force: the tier's or spec.weight.
	// +optional
	EffectiveWeight int32 `json:"effectiveWeight,omitempty"`
	// LatencyClass is the latency class in force: the tier's (none with
	// spec.weight). Agents give the tenant's threads its slice.
	// +optional
	LatencyClass LatencyClass `json:"latencyClass,omitempty"`
	// Namespaces the tenant owns now (names and selector, minus namespaces
	// another tenant wins), sorted: the first 10000 when it owns more
	// (Degraded=True/TooManyNamespaces).
	// +listType=set
	// +kubebuilder:validation:MaxItems=10000
	// +kubebuilder:validation:items:MaxLength=63
	// +optional
	Namespaces []string `json:"namespaces,omitempty"`
	// EntitledShare of the CPUs of the nodes that report the tenant now, as
	// a percentage.
	// +kubebuilder:validation:MaxLength=8
	// +optional
	EntitledShare string `json:"entitledShare,omitempty"`
	// AchievedShare of those CPUs in their last window, as a percentage.
	// +kubebuilder:validation:MaxLength=8
	// +optional
	AchievedShare string `json:"achievedShare,omitempty"`
	// ReportingNodes is how many nodes report the tenant now. A node whose
	// last report is older than three report windows (at least 30 s) no
	// longer counts, here or in the shares.
	// +optional
	ReportingNodes int32 `json:"reportingNodes,omitempty"`
	// Period is the billing period CPUSeconds and Cost are for: the UTC day,
	// e.g. "2026-11-25".
	// +kubebuilder:validation:MaxLength=10
	// +optional
	Period string `json:"period,omitempty"`
	// CPUSeconds billed in Period over all nodes, an exact decimal.
	// +kubebuilder:validation:MaxLength=64
	// +optional
	CPUSeconds string `json:"cpuSeconds,omitempty"`
	// Cost billed in Period in Currency, an exact decimal (millionths).
	// +kubebuilder:validation:MaxLength=64
	// +optional
	Cost string `json:"cost,omitempty"`
	// Currency of Cost: the tier's.
	// +kubebuilder:validation:MaxLength=3
	// +optional
	Currency string `json:"currency,omitempty"`
	// Bill is the name of the TenantBill of Period.
	// +kubebuilder:validation:MaxLength=253
	// +optional
	Bill string `json:"bill,omitempty"`
}

// Tenant is a group of namespaces that shares CPU by one weight.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Cluster,shortName=tn
// +kubebuilder:printcolumn:name="TIER",type=string,JSONPath=`.spec.tier`
// +kubebuilder:printcolumn:name="WEIGHT",type=integer,JSONPath=`.status.effectiveWeight`
// +kubebuilder:printcolumn:name="LATENCY",type=string,JSONPath=`.status.latencyClass`,priority=1
// +kubebuilder:printcolumn:name="ENTITLED",type=string,JSONPath=`.status.entitledShare`
// +kubebuilder:printcolumn:name="ACHIEVED",type=string,JSONPath=`.status.achievedShare`
// +kubebuilder:printcolumn:name="PERIOD",type=string,JSONPath=`.status.period`,priority=1
// +kubebuilder:printcolumn:name="CPU-SECONDS",type=string,JSONPath=`.status.cpuSeconds`
// +kubebuilder:printcolumn:name="COST",type=string,JSONPath=`.status.cost`
// +kubebuilder:printcolumn:name="CURRENCY",type=string,JSONPath=`.status.currency`,priority=1
// +kubebuilder:printcolumn:name="READY",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="AGE",type=date,JSONPath=`.metadata.creationTimestamp`
type Tenant struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +required
	Spec TenantSpec `json:"spec"`
	// +optional
	Status TenantStatus `json:"status,omitempty"`
}

// TenantList is a list of Tenants.
// +kubebuilder:object:root=true
type TenantList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Tenant `json:"items"`
}

func init() {
	SchemeBuilder.Register(func(s *runtime.Scheme) error {
		s.AddKnownTypes(GroupVersion, &Tenant{}, &TenantList{})
		return nil
	})
}
