package v1alpha1

// Condition types set on a Tenant.
const (
	// ConditionReady is True when the tenant's weight and at least one
	// namespace are resolved: there is something to enforce. What cannot
	// be honoured beside that is Degraded's.
	ConditionReady = "Ready"
	// ConditionTierResolved is True when spec.tier names an existing tier,
	// or when spec.weight is used.
	ConditionTierResolved = "TierResolved"
	// ConditionEnforced is True when at least one node agent reports
	// enforcing the tenant.
	ConditionEnforced = "Enforced"
	// ConditionDegraded is True when part of the tenant cannot be honoured.
	ConditionDegraded = "Degraded"
	// ConditionBilled is True while every node's last report of the tenant
	// was billed; False when one was refused, when the price is unknown,
	// or while a deleted tenant waits for its last CPU to be recorded.
	ConditionBilled = "Billed"
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
	// ReasonAccruing: the nodes' reports are billed.
	ReasonAccruing = "Accruing"
	// ReasonReportRefused: a node's last report was refused for this
	// tenant (the message says which node and why).
	ReasonReportRefused = "ReportRefused"
	// ReasonPriceUnknown: the tier is missing; CPU is held and billed when
	// it is back.
	ReasonPriceUnknown = "PriceUnknown"
	// ReasonAwaitingFinalUsage: the tenant is being deleted and waits for
	// its nodes' final counters.
	ReasonAwaitingFinalUsage = "AwaitingFinalUsage"
	// ReasonTooManyNamespaces: the tenant owns more namespaces than
	// status.namespaces holds; only the first, by name, are enforced.
	ReasonTooManyNamespaces = "TooManyNamespaces"
	// ReasonWorkloadsOverlap: one workload's podSelector selects every pod
	// another's does, so a pod both select counts only for the first
	// listed (the message names both).
	ReasonWorkloadsOverlap = "WorkloadsOverlap"
	// ReasonCPULimited: on some node the CPU limits of the tenant's pods
	// keep it below what its weight entitles it to (the message says
	// where and how far); the rest of its share goes to other tenants.
	ReasonCPULimited = "CPULimited"
	// ReasonWeightBound: on some node the tenant's weight could not be
	// realised within kubefair's bounds (the cgroup weight range, the
	// closed loop's range) and it is more than a point off its
	// entitlement (the message says where, which bound and how far).
	ReasonWeightBound = "WeightBound"
	// ReasonExclusiveCPUs: on some node kubelet's static CPU manager gives
	// the tenant's pods CPUs of their own, outside the shared pool that
	// kubefair divides by weight (the message says where and how many).
	ReasonExclusiveCPUs = "ExclusiveCPUs"
	// ReasonLatencyClassNotApplied: some node does not give the tenant's
	// threads its latency class's slice (its report's LatencyClasses
	// condition says why).
	ReasonLatencyClassNotApplied = "LatencyClassNotApplied"
	// ReasonRequestElevationNotApplied: some node does not apply the
	// tenant's request-based elevation (its report's RequestElevation
	// condition says why).
	ReasonRequestElevationNotApplied = "RequestElevationNotApplied"
)

// FinalizerFinalBill keeps a deleted Tenant until its last CPU is in the
// ledger, so that its final bill is complete.
const FinalizerFinalBill = "kubefair.io/final-bill"

// FinalizerLedgerCursor keeps a node's open UsageRecord, which holds the
// node's cursor, until the next period's record has taken the cursor over:
// deleting it cannot make a node's counters count again.
const FinalizerLedgerCursor = "kubefair.io/ledger-cursor"

// Condition types set on a UsageRecord.
const (
	// ConditionReportAccepted is True when the node's last report was
	// billed in full.
	ConditionReportAccepted = "ReportAccepted"
)

// Reasons a report, or a tenant's counter in it, is refused (the
// ReportAccepted condition, UsageRecord refusals, ReportRefused events,
// kubefair_reports_refused_total). Nothing refused is ever billed.
const (
	// ReasonBilled: the report was billed in full.
	ReasonBilled = "Billed"
	// ReasonStaleReport: observed at or before what was already counted,
	// or from an agent run that a later one replaced.
	ReasonStaleReport = "StaleReport"
	// ReasonFutureReport: observed later than the controller's clock
	// allows (more than the clock skew tolerated).
	ReasonFutureReport = "ReportFromTheFuture"
	// ReasonUnknownNode: no Node of the report's name exists.
	ReasonUnknownNode = "UnknownNode"
	// ReasonCPUsAboveCapacity: the report claims more CPUs than the Node has.
	ReasonCPUsAboveCapacity = "CPUsAboveCapacity"
	// ReasonExceedsCapacity: more CPU than the node's CPUs could run in the
	// time since it was last counted (plus slack).
	ReasonExceedsCapacity = "ExceedsCapacity"
	// ReasonInconsistentCounters: the node's own counters contradict the
	// tenants' (pods used less than the tenants, or the node than its pods).
	ReasonInconsistentCounters = "InconsistentCounters"
	// ReasonUnknownTenant: no Tenant has the UID the report names.
	ReasonUnknownTenant = "UnknownTenant"
	// ReasonNoPodsOnNode: the tenant had no pod on the node in the window.
	ReasonNoPodsOnNode = "NoPodsOnNode"
	// ReasonCounterDecreased: a cumulative counter went down within a boot.
	ReasonCounterDecreased = "CounterDecreased"
	// ReasonTotalOutOfRange: a period's total would not fit in 64 bits of
	// nanoseconds (beyond the CRDs' bounds: 100000 CPUs a node, one day a
	// record).
	ReasonTotalOutOfRange = "TotalOutOfRange"
)

// Condition types set on a NodeShareReport.
const (
	// ConditionPodCgroupsFound is True when the agent finds kubelet's pod
	// cgroups and a cgroup for every running pod of the node.
	ConditionPodCgroupsFound = "PodCgroupsFound"
	// ConditionLatencyClasses is set while a tenant on the node has a
	// latency class: True when its threads get the class's slice.
	ConditionLatencyClasses = "LatencyClasses"
	// ConditionRequestElevation is set while a tenant on the node asks for
	// request-based elevation: True when the agent counts its processes'
	// requests.
	ConditionRequestElevation = "RequestElevation"
)

// Reasons of a NodeShareReport's RequestElevation condition.
const (
	// ReasonCountingRequests: the agent counts the requests the tenants'
	// processes receive and elevates their workloads.
	ReasonCountingRequests = "CountingRequests"
	// ReasonRequestElevationOff: the agent runs with
	// --request-elevation=false (the chart's agent.requestElevation.enabled).
	ReasonRequestElevationOff = "RequestElevationOff"
	// ReasonNoRequestCounter: the agent could not load or attach its eBPF
	// request counter, or watch every process (the message says why).
	ReasonNoRequestCounter = "NoRequestCounter"
)

// Reasons of a NodeShareReport's LatencyClasses condition.
const (
	// ReasonSlicesApplied: the tenants' threads run with their classes'
	// slices.
	ReasonSlicesApplied = "SlicesApplied"
	// ReasonLatencyClassesOff: the agent runs with --latency-classes=false
	// (the chart's agent.latencyClasses.enabled).
	ReasonLatencyClassesOff = "LatencyClassesOff"
	// ReasonNoCustomSlices: the node's kernel keeps no slice per task
	// (before Linux 6.12), or seccomp refuses sched_getattr.
	ReasonNoCustomSlices = "NoCustomSlices"
	// ReasonSlicesRefused: the kernel refused some threads their slice
	// (another user's threads, and the agent lacks CAP_SYS_NICE).
	ReasonSlicesRefused = "SlicesRefused"
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
	// EventReportRefused: a report (or a tenant's counter in it) was not
	// billed; on the NodeShareReport and on the tenant.
	EventReportRefused = "ReportRefused"
	// EventFinalBill: a deleted tenant's last CPU is recorded.
	EventFinalBill = "FinalBill"
	// EventWorkloadsOverlap: two of a tenant's workloads select the same
	// pods.
	EventWorkloadsOverlap = "WorkloadsOverlap"
	// EventCPULimited: the tenant's CPU limits keep it below its
	// entitlement on some node.
	EventCPULimited = "CPULimited"
	// EventWeightBound: the tenant's weight hit one of kubefair's bounds
	// on some node.
	EventWeightBound = "WeightBound"
	// EventExclusiveCPUs: some of the tenant's pods run on exclusive CPUs,
	// outside kubefair's weights.
	EventExclusiveCPUs = "ExclusiveCPUs"
)
