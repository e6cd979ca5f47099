package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// Backend is the enforcement layer a node agent uses.
// +kubebuilder:validation:Enum=syscall;cgroup;nice
// +kubebuilder:validation:MaxLength=7
type Backend string

const (
	BackendSyscall Backend = "syscall"
	BackendCgroup  Backend = "cgroup"
	BackendNice    Backend = "nice"
)

// TenantShare is what one node measured for one tenant in the last window.
type TenantShare struct {
	// Name of the Tenant.
	// +kubebuilder:validation:MaxLength=253
	// +required
	Name string `json:"name"`
	// UID of the Tenant: counters and bills follow the object, not its
	// name, so a tenant deleted and created again starts from zero.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=64
	// +required
	UID string `json:"uid"`
	// EntitledShare of the node's CPUs (0..1) by the fairness model.
	EntitledShare float64 `json:"entitledShare"`
	// AchievedShare of the node's CPUs (0..1): CPU used / (CPUs × window).
	AchievedShare float64 `json:"achievedShare"`
	// WaitingFraction is the tenant's runnable-but-waiting time over the
	// window, per CPU of the node (0..1 per CPU).
	WaitingFraction float64 `json:"waitingFraction"`
	// Backlogged is true when the tenant's threads waited for CPU, so its
	// error counts towards the node's fairness error.
	// +optional
	Backlogged bool `json:"backlogged,omitempty"`
	// LimitedShare is the most of the node's CPUs (0..1) the tenant's pods
	// may use under their CPU limits, set when that keeps it below what its
	// weight would entitle it to: EntitledShare is then capped there and
	// the rest goes to the other tenants. 0: not limited.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=1
	// +optional
	LimitedShare float64 `json:"limitedShare,omitempty"`
	// Bound names what kept the backlogged tenant more than a point off
	// its entitlement in the window, when it was a limit of kubefair's
	// own: WeightRange (its pods' weights were cut to the cgroup weight
	// range, e.g. tenants 1:10000 where kubelet's requests leave too few
	// weight units) or Correction (the closed loop's multiplier reached its
	// 1/8–8 range). Empty: no bound hit, or not off by more than a point.
	// +optional
	Bound WeightBound `json:"bound,omitempty"`
	// ExclusiveCPUs are the CPUs kubelet's static CPU manager gave the
	// tenant's pods alone at the end of the window. Those pods run outside
	// the shared pool kubefair divides by weight: they are not weighed, and
	// their CPU is in neither EntitledShare nor AchievedShare (it is in
	// CPUNanoseconds, so billed).
	// +kubebuilder:validation:Minimum=0
	// +optional
	ExclusiveCPUs int32 `json:"exclusiveCPUs,omitempty"`
	// RunnableThreads seen at the end of the window.
	RunnableThreads int32 `json:"runnableThreads"`
	// Pods of the tenant on the node.
	Pods int32 `json:"pods"`
	// SlicedThreads are the threads of the tenant's pods running with its
	// latency class's scheduler slice at the end of the window.
	// +kubebuilder:validation:Minimum=0
	// +optional
	SlicedThreads int32 `json:"slicedThreads,omitempty"`
	// LatencyClassOff is set when the node does not give the tenant's
	// threads its latency class's slice (the report's LatencyClasses
	// condition says why).
	// +optional
	LatencyClassOff bool `json:"latencyClassOff,omitempty"`
	// ElevatedWorkloads are the tenant's workloads on the node raised
	// inside it for requests they received (spec.requestElevation), at the
	// end of the window.
	// +kubebuilder:validation:Minimum=0
	// +optional
	ElevatedWorkloads int32 `json:"elevatedWorkloads,omitempty"`
	// RequestElevationOff is set when the tenant asks for request-based
	// elevation and the node does not apply it (the report's
	// RequestElevation condition says why).
	// +optional
	RequestElevationOff bool `json:"requestElevationOff,omitempty"`
	// CPUNanoseconds is a cumulative counter of the tenant's CPU time on this
	// node since BootID started; it never decreases within one boot.
	// +kubebuilder:validation:Minimum=0
	CPUNanoseconds int64 `json:"cpuNanoseconds"`
	// Final is true once the agent no longer counts CPU for the tenant (it
	// is being deleted, or gone): CPUNanoseconds will not grow again in
	// this boot, so the controller may close the tenant's bill.
	// +optional
	Final bool `json:"final,omitempty"`
}

// NodeCPU are cumulative CPU counters of the whole node since BootTime,
// from the same agent as the tenants' counters: what the controller
// splits into tenants, pods of no tenant, the system and idle time.
type NodeCPU struct {
	// CPUNanoseconds is the CPU time of everything on the node (the
	// cgroup root the agent reads).
	// +kubebuilder:validation:Minimum=0
	CPUNanoseconds int64 `json:"cpuNanoseconds"`
	// PodsCPUNanoseconds is the CPU time of all pods (kubelet's kubepods
	// cgroup), tenants' or not.
	// +kubebuilder:validation:Minimum=0
	PodsCPUNanoseconds int64 `json:"podsCPUNanoseconds"`
}

// UnmeasuredPods counts one tenant's running pods on the node whose
// cgroups the agent could not find: they are neither enforced nor
// measured (nor billed) until it can.
type UnmeasuredPods struct {
	// Tenant is the Tenant's name.
	// +kubebuilder:validation:MaxLength=253
	// +required
	Tenant string `json:"tenant"`
	// Pods is how many of its running pods have no cgroup the agent found.
	// +kubebuilder:validation:Minimum=1
	Pods int32 `json:"pods"`
}

// NodeShareReport is one node's measurement of the tenants it runs. Its name
// is the node's name, only that node's agent writes it, and the controller
// makes the Node its owner, so it goes when the Node does. Deleting it
// bills nothing again: what was billed is in the node's UsageRecords.
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Cluster,shortName=nsr
// +kubebuilder:printcolumn:name="BACKEND",type=string,JSONPath=`.backend`
// +kubebuilder:printcolumn:name="ABI",type=integer,JSONPath=`.kernelABI`
// +kubebuilder:printcolumn:name="CPUS",type=integer,JSONPath=`.cpus`
// +kubebuilder:printcolumn:name="PODS-FOUND",type=string,JSONPath=`.conditions[?(@.type=="PodCgroupsFound")].status`
// +kubebuilder:printcolumn:name="ERROR-POINTS",type=number,JSONPath=`.fairnessErrorPoints`
// +kubebuilder:printcolumn:name="JAIN",type=number,JSONPath=`.jainIndex`
// +kubebuilder:printcolumn:name="OBSERVED",type=date,JSONPath=`.observedTime`
// +kubebuilder:printcolumn:name="AGE",type=date,JSONPath=`.metadata.creationTimestamp`
type NodeShareReport struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Backend is the enforcement layer in use on the node.
	// +required
	Backend Backend `json:"backend"`
	// KernelABI is the version of the sched_setweight ABI the kernel
	// publishes, 0 when the kernel has none.
	// +optional
	KernelABI int32 `json:"kernelABI,omitempty"`
	// CPUs the node's tenants share; never more than the Node's capacity
	// (the controller refuses a report that says otherwise).
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=100000
	CPUs int32 `json:"cpus"`
	// Window is the measurement window the shares are computed over.
	Window metav1.Duration `json:"window"`
	// ObservedTime is the end of the window.
	ObservedTime metav1.Time `json:"observedTime"`
	// BootID identifies this run of the agent; cumulative counters restart
	// from zero with a new BootID.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=64
	BootID string `json:"bootID"`
	// BootTime is when this run of the agent started counting: its
	// counters hold CPU used since then. The controller bills a boot it
	// has not seen before for at most the node's CPUs × (ObservedTime −
	// BootTime); without it, for at most CPUs × Window.
	// +optional
	BootTime *metav1.Time `json:"bootTime,omitempty"`
	// Node holds the node's own cumulative counters since BootTime, for
	// the billing ledger's reconciliation.
	// +optional
	Node *NodeCPU `json:"node,omitempty"`
	// FairnessErrorPoints is the largest |achieved − entitled| over the
	// backlogged tenants, in percentage points.
	// +optional
	FairnessErrorPoints float64 `json:"fairnessErrorPoints"`
	// JainIndex is Jain's fairness index over achieved/entitled (1 = fair).
	// +optional
	JainIndex float64 `json:"jainIndex"`
	// DriftCorrections counts values the agent found changed by someone
	// else and put back, since BootID started.
	// +optional
	DriftCorrections int64 `json:"driftCorrections,omitempty"`
	// NiceRoundingErrorPoints is, with the nice backend, the largest error
	// in percentage points between a pod's processes' shares that rounding
	// their threads' weights to nice levels caused in the agent's last
	// period (0 with exact weights: the syscall backend).
	// +optional
	NiceRoundingErrorPoints float64 `json:"niceRoundingErrorPoints,omitempty"`
	// Tenants are the per-tenant figures, sorted by name then UID.
	// +listType=map
	// +listMapKey=uid
	// +kubebuilder:validation:MaxItems=10000
	// +optional
	Tenants []TenantShare `json:"tenants,omitempty"`
	// Unmeasured are the tenants with running pods on the node whose
	// cgroups the agent could not find, sorted by tenant.
	// +listType=map
	// +listMapKey=tenant
	// +kubebuilder:validation:MaxItems=10000
	// +optional
	Unmeasured []UnmeasuredPods `json:"unmeasured,omitempty"`
	// Conditions: PodCgroupsFound.
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=16
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// NodeShareReportList is a list of NodeShareReports.
// +kubebuilder:object:root=true
type NodeShareReportList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []NodeShareReport `json:"items"`
}

func init() {
	SchemeBuilder.Register(func(s *runtime.Scheme) error {
		s.AddKnownTypes(GroupVersion, &NodeShareReport{}, &NodeShareReportList{})
		return nil
	})
}

// WeightBound is a limit of kubefair's own that a tenant's weight hit.
// +kubebuilder:validation:Enum=WeightRange;Correction
type WeightBound string

const (
	// BoundWeightRange: the weights the tenant's pods needed fall outside
	// the cgroup weight range (cpu.shares 2–262144, cpu.weight 1–10000).
	BoundWeightRange WeightBound = "WeightRange"
	// BoundCorrection: the closed loop's multiplier is at the end of its
	// range (1/8–8) and the tenant is still off its entitlement.
	BoundCorrection WeightBound = "Correction"
)
