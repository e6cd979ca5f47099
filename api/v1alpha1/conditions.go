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
)

// Event reasons emitted on Tenants.
const (
	EventNamespaceConflict = "NamespaceConflict"
	EventTierMissing       = "TierMissing"
	EventCounterReset      = "AgentRestarted"
)
