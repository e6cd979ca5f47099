package v1alpha1

// Condition types set on a Tenant.
const (
	// ConditionReady is True when the tenant's weight and namespaces are
	// resolved and nothing degrades it.
	ConditionReady = "Ready"
	// ConditionTierResolved is True when spec.tier names an existing tier,
	// or when spec.weight is used.
	ConditionTierResolved = "TierResolved"
	// ConditionEnforced is True when at least one node agent reports
	// enforcing the tenant.
	ConditionEnforced = "Enforced"
	// ConditionDegraded is True when part of the tenant cannot be honoured.
	ConditionDegraded = "Degraded"
)

// Condition reasons, CamelCase as metav1.Condition requires.
const (
	ReasonTierFound         = "TierFound"
	ReasonTierNotFound      = "TierNotFound"
	ReasonDirectWeight      = "DirectWeight"
	ReasonNamespaceConflict = "NamespaceConflict"
	ReasonNoNamespaces      = "NoNamespaces"
	ReasonInvalidSelector   = "InvalidSelector"
	ReasonResolved          = "Resolved"
	ReasonAwaitingReports   = "AwaitingReports"
	ReasonReported          = "Reported"
	ReasonAsExpected        = "AsExpected"
	// ReasonPodsUnmeasured: a node runs pods of the tenant whose cgroups
	// its agent cannot find (see that node's PodCgroupsFound condition).
	ReasonPodsUnmeasured = "PodsUnmeasured"
)

// Condition types set on a NodeShareReport.
const (
	// ConditionPodCgroupsFound is True when the agent finds kubelet's pod
	// cgroups and a cgroup for every running pod of the node.
	ConditionPodCgroupsFound = "PodCgroupsFound"
)

// Reasons of a NodeShareReport's PodCgroupsFound condition.
const (
	// ReasonLayoutFound: kubepods is where the agent looks, and every
	// running pod has its cgroup there.
	ReasonLayoutFound = "LayoutFound"
	// ReasonLayoutNotFound: no kubepods cgroup where the agent looks (the
	// message names the directories): wrong --kubelet-cgroup-root or
	// --cgroup-driver, or kubelet not started.
	ReasonLayoutNotFound = "LayoutNotFound"
	// ReasonPodCgroupsMissing: kubepods is there, but running pods have no
	// cgroup the agent recognises in it (an unknown layout or runtime).
	ReasonPodCgroupsMissing = "PodCgroupsMissing"
)

// Event reasons emitted on Tenants.
const (
	EventNamespaceConflict = "NamespaceConflict"
	EventTierMissing       = "TierMissing"
	EventCounterReset      = "AgentRestarted"
	EventPodsUnmeasured    = "PodsUnmeasured"
)
