package controllers

import (
	"fmt"
	"sort"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	kubefairv1 "github.com/kubefair/kubefair/api/v1alpha1"
	"github.com/kubefair/kubefair/controllers/cost"
)

// The phases of a Tenant's status, in the order of DESIGN.md: weight from the
// tier, namespaces (and conflicts between tenants), the nodes' reports, cost,
// and the conditions that sum it up. Each phase is a pure function of what
// the reconciler read, so the status is a function of the cluster's state.

// tierResult is what resolving spec.tier / spec.weight gave.
type tierResult struct {
	weight      int32
	priceMicros int64 // -1 when the price is unknown (tier missing)
	currency    string
	condition   metav1.Condition
}

// resolveTier finds the weight and price in force. tier is nil when
// spec.tier names a tier that does not exist; the last effective weight is
// kept then, so agents go on enforcing what they knew.
func resolveTier(t *kubefairv1.Tenant, tier *kubefairv1.PricingTier) tierResult {
	if t.Spec.Weight != nil {
		return tierResult{weight: *t.Spec.Weight, priceMicros: 0, condition: metav1.Condition{
			Type: kubefairv1.ConditionTierResolved, Status: metav1.ConditionTrue, Reason: kubefairv1.ReasonDirectWeight,
			Message: fmt.Sprintf("spec.weight %d is used; the tenant is not priced", *t.Spec.Weight)}}
	}
	if tier == nil {
		return tierResult{weight: t.Status.EffectiveWeight, priceMicros: -1, currency: t.Status.Currency, condition: metav1.Condition{
			Type: kubefairv1.ConditionTierResolved, Status: metav1.ConditionFalse, Reason: kubefairv1.ReasonTierNotFound,
			Message: fmt.Sprintf("PricingTier %q does not exist; keeping the last weight (%d) and holding cost accrual until it does", t.Spec.Tier, t.Status.EffectiveWeight)}}
	}
	price, err := cost.ParsePrice(tier.Spec.PricePerCPUHour)
	if err != nil { // the CRD refuses such prices; this guards older objects
		return tierResult{weight: tier.Spec.Weight, priceMicros: -1, currency: tier.Spec.Currency, condition: metav1.Condition{
			Type: kubefairv1.ConditionTierResolved, Status: metav1.ConditionFalse, Reason: kubefairv1.ReasonTierNotFound,
			Message: fmt.Sprintf("PricingTier %q has an unusable price: %v", tier.Name, err)}}
	}
	return tierResult{weight: tier.Spec.Weight, priceMicros: price, currency: tier.Spec.Currency, condition: metav1.Condition{
		Type: kubefairv1.ConditionTierResolved, Status: metav1.ConditionTrue, Reason: kubefairv1.ReasonTierFound,
		Message: fmt.Sprintf("PricingTier %q: weight %d at %s %s per CPU-hour", tier.Name, tier.Spec.Weight, tier.Spec.PricePerCPUHour, tier.Spec.Currency)}}
}

// claimedNamespaces is every existing namespace a tenant names or selects.
func claimedNamespaces(t *kubefairv1.Tenant, namespaces []corev1.Namespace) (map[string]bool, error) {
	var selector labels.Selector
	if t.Spec.NamespaceSelector != nil {
		s, err := metav1.LabelSelectorAsSelector(t.Spec.NamespaceSelector)
		if err != nil {
			return nil, err
		}
		selector = s
	}
	named := map[string]bool{}
	for _, n := range t.Spec.Namespaces {
		named[n] = true
	}
	claimed := map[string]bool{}
	for i := range namespaces {
		ns := &namespaces[i]
		if named[ns.Name] || (selector != nil && selector.Matches(labels.Set(ns.Labels))) {
			claimed[ns.Name] = true
		}
	}
	return claimed, nil
}

// claimsBefore orders tenants for a contested namespace: the older tenant
// keeps it, and the name breaks ties, so every reconcile picks the same one.
func claimsBefore(a, b *kubefairv1.Tenant) bool {
	if !a.CreationTimestamp.Equal(&b.CreationTimestamp) {
		return a.CreationTimestamp.Before(&b.CreationTimestamp)
	}
	return a.Name < b.Name
}

// conflict is one namespace that another tenant claims as well.
type conflict struct {
	namespace string
	other     string
	won       bool
}

// namespaceResult is the tenant's resolved namespaces and its conflicts.
type namespaceResult struct {
	owned     []string
	conflicts []conflict
	err       error // an unusable selector
}

// resolveNamespaces gives the tenant every namespace it claims, minus those
// an earlier tenant claims too.
func resolveNamespaces(t *kubefairv1.Tenant, tenants []kubefairv1.Tenant, namespaces []corev1.Namespace) namespaceResult {
	mine, err := claimedNamespaces(t, namespaces)
	if err != nil {
		return namespaceResult{err: err}
	}
	var res namespaceResult
	lost := map[string]bool{}
	for i := range tenants {
		other := &tenants[i]
		if other.Name == t.Name {
			continue
		}
		theirs, err := claimedNamespaces(other, namespaces)
		if err != nil {
			continue // the other tenant reports its own bad selector
		}
		for ns := range mine {
			if theirs[ns] {
				won := claimsBefore(t, other)
				res.conflicts = append(res.conflicts, conflict{namespace: ns, other: other.Name, won: won})
				if !won {
					lost[ns] = true
				}
			}
		}
	}
	for ns := range mine {
		if !lost[ns] {
			res.owned = append(res.owned, ns)
		}
	}
	sort.Strings(res.owned)
	sort.Slice(res.conflicts, func(i, j int) bool {
		a, b := res.conflicts[i], res.conflicts[j]
		return a.namespace < b.namespace || (a.namespace == b.namespace && a.other < b.other)
	})
	return res
}

// usageResult is what the nodes' reports add up to for one tenant.
type usageResult struct {
	nodes []kubefairv1.TenantNodeStatus
	// unmeasured says, per node whose agent cannot find some of the
	// tenant's pods, how many and why.
	unmeasured     []string
	entitled       string
	achieved       string
	reportingNodes int
	addedNS        int64
	err            error
}

// aggregateReports folds every node's report into the tenant's per-node
// entries and totals, consuming each node's cumulative counter exactly once
// (DESIGN.md §Cost). When accrue is false (price unknown) counters are left
// unconsumed, to be accrued once the price is known again.
func aggregateReports(t *kubefairv1.Tenant, reports []kubefairv1.NodeShareReport, accrue bool) usageResult {
	previous := map[string]kubefairv1.TenantNodeStatus{}
	for _, n := range t.Status.Nodes {
		previous[n.Node] = n
	}
	var res usageResult
	var entitledCPUs, achievedCPUs float64
	var cpus int32
	for i := range reports {
		r := &reports[i]
		entry := kubefairv1.TenantNodeStatus{Node: r.Name}
		if prev, ok := previous[r.Name]; ok {
			entry.Counters = prev.Counters
			entry.CPUSeconds = prev.CPUSeconds
		}
		share := findShare(r, t.Name)
		if n := findUnmeasured(r, t.Name); n > 0 {
			entry.UnmeasuredPods = n
			why := "its agent cannot find their cgroups"
			if c := meta.FindStatusCondition(r.Conditions, kubefairv1.ConditionPodCgroupsFound); c != nil && c.Status == metav1.ConditionFalse {
				why = c.Reason + ": " + c.Message
			}
			res.unmeasured = append(res.unmeasured, fmt.Sprintf("node %s runs %d pod(s) of this tenant that are neither enforced nor measured (%s)", r.Name, n, why))
		}
		if share == nil {
			if len(entry.Counters) > 0 || entry.UnmeasuredPods > 0 { // keep what was consumed, in case the tenant comes back
				res.nodes = append(res.nodes, entry)
			}
			continue
		}
		res.reportingNodes++
		entry.EntitledShare = percent(share.EntitledShare)
		entry.AchievedShare = percent(share.AchievedShare)
		entitledCPUs += share.EntitledShare * float64(r.CPUs)
		achievedCPUs += share.AchievedShare * float64(r.CPUs)
		cpus += r.CPUs
		if accrue {
			delta, counters := cost.Consume(toCounters(entry.Counters), r.BootID, share.CPUNanoseconds)
			entry.Counters = fromCounters(counters)
			res.addedNS += delta
			entry.CPUSeconds = formatNodeSeconds(parseNodeSeconds(entry.CPUSeconds) + delta)
		}
		res.nodes = append(res.nodes, entry)
	}
	sort.Slice(res.nodes, func(i, j int) bool { return res.nodes[i].Node < res.nodes[j].Node })
	if cpus > 0 {
		res.entitled = percent(entitledCPUs / float64(cpus))
		res.achieved = percent(achievedCPUs / float64(cpus))
	}
	return res
}

func findUnmeasured(r *kubefairv1.NodeShareReport, tenant string) int32 {
	for _, u := range r.Unmeasured {
		if u.Tenant == tenant {
			return u.Pods
		}
	}
	return 0
}

func findShare(r *kubefairv1.NodeShareReport, tenant string) *kubefairv1.TenantShare {
	for i := range r.Tenants {
		if r.Tenants[i].Name == tenant {
			return &r.Tenants[i]
		}
	}
	return nil
}

// percent renders a share of CPUs (0..1) the way the printer columns show it.
func percent(share float64) string { return fmt.Sprintf("%.1f%%", 100*share) }

// formatNodeSeconds keeps a node's accrued CPU time to the nanosecond, so
// that reading it back and adding to it never loses anything.
func formatNodeSeconds(ns int64) string {
	return fmt.Sprintf("%d.%09d", ns/1_000_000_000, ns%1_000_000_000)
}

func parseNodeSeconds(s string) int64 {
	var sec, nano int64
	if _, err := fmt.Sscanf(s, "%d.%09d", &sec, &nano); err != nil {
		return 0
	}
	return sec*1_000_000_000 + nano
}

func toCounters(in []kubefairv1.ConsumedCounter) []cost.Counter {
	out := make([]cost.Counter, len(in))
	for i, c := range in {
		out[i] = cost.Counter{BootID: c.BootID, CPUNanoseconds: c.CPUNanoseconds}
	}
	return out
}

func fromCounters(in []cost.Counter) []kubefairv1.ConsumedCounter {
	out := make([]kubefairv1.ConsumedCounter, len(in))
	for i, c := range in {
		out[i] = kubefairv1.ConsumedCounter{BootID: c.BootID, CPUNanoseconds: c.CPUNanoseconds}
	}
	return out
}

// setConditions sums the phases up as Ready, TierResolved, Enforced and
// Degraded. meta.SetStatusCondition keeps a condition's transition time
// while its status stays the same, so an unchanged tenant yields an
// unchanged status.
func setConditions(st *kubefairv1.TenantStatus, generation int64, tier tierResult, ns namespaceResult, usage usageResult, now metav1.Time) {
	set := func(c metav1.Condition) {
		c.ObservedGeneration = generation
		c.LastTransitionTime = now
		meta.SetStatusCondition(&st.Conditions, c)
	}
	set(tier.condition)

	switch {
	case usage.reportingNodes > 0:
		set(metav1.Condition{Type: kubefairv1.ConditionEnforced, Status: metav1.ConditionTrue, Reason: kubefairv1.ReasonReported,
			Message: fmt.Sprintf("%d node(s) report enforcing this tenant", usage.reportingNodes)})
	case len(usage.unmeasured) > 0:
		set(metav1.Condition{Type: kubefairv1.ConditionEnforced, Status: metav1.ConditionFalse, Reason: kubefairv1.ReasonPodsUnmeasured,
			Message: unmeasuredMessage(usage.unmeasured)})
	default:
		set(metav1.Condition{Type: kubefairv1.ConditionEnforced, Status: metav1.ConditionFalse, Reason: kubefairv1.ReasonAwaitingReports,
			Message: "no node agent reports this tenant yet (no pods running, or no agent)"})
	}

	degraded := metav1.Condition{Type: kubefairv1.ConditionDegraded, Status: metav1.ConditionFalse, Reason: kubefairv1.ReasonAsExpected, Message: "nothing prevents this tenant from being honoured"}
	switch {
	case ns.err != nil:
		degraded = metav1.Condition{Type: kubefairv1.ConditionDegraded, Status: metav1.ConditionTrue, Reason: kubefairv1.ReasonInvalidSelector,
			Message: fmt.Sprintf("spec.namespaceSelector cannot be used: %v", ns.err)}
	case len(ns.conflicts) > 0:
		degraded = metav1.Condition{Type: kubefairv1.ConditionDegraded, Status: metav1.ConditionTrue, Reason: kubefairv1.ReasonNamespaceConflict,
			Message: conflictMessage(ns.conflicts)}
	case tier.condition.Status != metav1.ConditionTrue:
		degraded = metav1.Condition{Type: kubefairv1.ConditionDegraded, Status: metav1.ConditionTrue, Reason: tier.condition.Reason, Message: tier.condition.Message}
	case len(ns.owned) == 0:
		degraded = metav1.Condition{Type: kubefairv1.ConditionDegraded, Status: metav1.ConditionTrue, Reason: kubefairv1.ReasonNoNamespaces,
			Message: "no existing namespace matches spec.namespaces or spec.namespaceSelector"}
	case len(usage.unmeasured) > 0:
		degraded = metav1.Condition{Type: kubefairv1.ConditionDegraded, Status: metav1.ConditionTrue, Reason: kubefairv1.ReasonPodsUnmeasured,
			Message: unmeasuredMessage(usage.unmeasured)}
	}
	set(degraded)

	ready := metav1.Condition{Type: kubefairv1.ConditionReady, Status: metav1.ConditionTrue, Reason: kubefairv1.ReasonResolved,
		Message: fmt.Sprintf("weight %d over %d namespace(s)", tier.weight, len(ns.owned))}
	if tier.condition.Status != metav1.ConditionTrue || ns.err != nil || len(ns.owned) == 0 {
		ready = metav1.Condition{Type: kubefairv1.ConditionReady, Status: metav1.ConditionFalse, Reason: degraded.Reason, Message: degraded.Message}
	}
	set(ready)
}

func unmeasuredMessage(nodes []string) string {
	msg := nodes[0]
	if len(nodes) > 1 {
		msg += fmt.Sprintf("; and %d more node(s)", len(nodes)-1)
	}
	return msg
}

func conflictMessage(cs []conflict) string {
	c := cs[0]
	msg := fmt.Sprintf("namespace %q is also claimed by tenant %q; ", c.namespace, c.other)
	if c.won {
		msg += "this tenant keeps it (created first)"
	} else {
		msg += fmt.Sprintf("tenant %q keeps it (created first)", c.other)
	}
	if len(cs) > 1 {
		msg += fmt.Sprintf(", and %d more conflict(s)", len(cs)-1)
	}
	return msg
}
