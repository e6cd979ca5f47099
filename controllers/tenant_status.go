package controllers

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"time"
	"unicode/utf8"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	kubefairv1 "github.com/kubefair/kubefair/api/v1alpha1"
	"github.com/kubefair/kubefair/controllers/billing"
	"github.com/kubefair/kubefair/controllers/cost"
)

// The phases of a Tenant's status, in the order of docs/controller.md:
// weight from the tier, namespaces (and conflicts between tenants), the
// nodes' reports, cost, and the conditions that sum it up. Each phase is a
// pure function of what the reconciler read, so the status is a function of
// the cluster's state.

// tierResult is what resolving spec.tier / spec.weight gave.
type tierResult struct {
	weight      int32
	priceMicros int64 // -1 when the price is unknown (tier missing)
	currency    string
	latency     kubefairv1.LatencyClass
	condition   metav1.Condition
}

// resolveTier finds the weight and price in force. tier is nil when
// spec.tier names a tier that does not exist; the last effective weight is
// kept then, with its latency class, so agents go on enforcing what they
// knew.
func resolveTier(t *kubefairv1.Tenant, tier *kubefairv1.PricingTier) tierResult {
	if t.Spec.Weight != nil {
		return tierResult{weight: *t.Spec.Weight, priceMicros: 0, condition: metav1.Condition{
			Type: kubefairv1.ConditionTierResolved, Status: metav1.ConditionTrue, Reason: kubefairv1.ReasonDirectWeight,
			Message: fmt.Sprintf("spec.weight %d is used; the tenant is not priced", *t.Spec.Weight)}}
	}
	if tier == nil {
		return tierResult{weight: t.Status.EffectiveWeight, priceMicros: -1, currency: t.Status.Currency, latency: t.Status.LatencyClass, condition: metav1.Condition{
			Type: kubefairv1.ConditionTierResolved, Status: metav1.ConditionFalse, Reason: kubefairv1.ReasonTierNotFound,
			Message: fmt.Sprintf("PricingTier %q does not exist; keeping the last weight (%d); its CPU is held, and billed at the tier's price when it exists again", t.Spec.Tier, t.Status.EffectiveWeight)}}
	}
	price, err := cost.ParsePrice(tier.Spec.PricePerCPUHour)
	if err != nil { // the CRD refuses such prices; this guards older objects
		return tierResult{weight: tier.Spec.Weight, priceMicros: -1, currency: tier.Spec.Currency, latency: tier.Spec.LatencyClass, condition: metav1.Condition{
			Type: kubefairv1.ConditionTierResolved, Status: metav1.ConditionFalse, Reason: kubefairv1.ReasonTierNotFound,
			Message: fmt.Sprintf("PricingTier %q has an unusable price: %v", tier.Name, err)}}
	}
	msg := fmt.Sprintf("PricingTier %q: weight %d at %s %s per CPU-hour", tier.Name, tier.Spec.Weight, tier.Spec.PricePerCPUHour, tier.Spec.Currency)
	if c := tier.Spec.LatencyClass; c != "" {
		msg += fmt.Sprintf(", latency class %s", c)
	}
	return tierResult{weight: tier.Spec.Weight, priceMicros: price, currency: tier.Spec.Currency, latency: tier.Spec.LatencyClass, condition: metav1.Condition{
		Type: kubefairv1.ConditionTierResolved, Status: metav1.ConditionTrue, Reason: kubefairv1.ReasonTierFound, Message: msg}}
}

// claimedNamespaces is every existing namespace a tenant names or selects.
func claimedNamespaces(t *kubefairv1.Tenant, namespaces []corev1.Namespace) (map[string]bool, error) {
	var selector labels.Selector
	if t.Spec.NamespaceSelector != nil {
		s, err := t.Spec.NamespaceSelector.AsSelector()
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

// enforceableClaim is what a tenant can hold: the first
// maxTenantNamespaces of the namespaces it claims, by name, and how many it
// claims in all. Conflicts are decided over it, so a namespace past
// another tenant's cap is not lost to a tenant that cannot enforce it.
func enforceableClaim(t *kubefairv1.Tenant, namespaces []corev1.Namespace) (map[string]bool, int, error) {
	claimed, err := claimedNamespaces(t, namespaces)
	if err != nil || len(claimed) <= maxTenantNamespaces {
		return claimed, len(claimed), err
	}
	names := slices.Sorted(maps.Keys(claimed))
	for _, ns := range names[maxTenantNamespaces:] {
		delete(claimed, ns)
	}
	return claimed, len(names), nil
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
	// claimed is how many namespaces the tenant claims when that is more
	// than it can hold (maxTenantNamespaces), else 0.
	claimed int
}

// maxTenantNamespaces is how many namespaces status.namespaces holds (its
// maxItems in the CRD): the scalability envelope's namespaces per cluster.
const maxTenantNamespaces = 10000

// resolveNamespaces gives the tenant every namespace it can hold
// (enforceableClaim), minus those an earlier tenant holds too.
func resolveNamespaces(t *kubefairv1.Tenant, tenants []kubefairv1.Tenant, namespaces []corev1.Namespace) namespaceResult {
	mine, claimed, err := enforceableClaim(t, namespaces)
	if err != nil {
		return namespaceResult{err: err}
	}
	var res namespaceResult
	if claimed > maxTenantNamespaces {
		res.claimed = claimed
	}
	lost := map[string]bool{}
	for i := range tenants {
		other := &tenants[i]
		if other.Name == t.Name || other.DeletionTimestamp != nil { // a tenant being deleted claims nothing
			continue
		}
		theirs, _, err := enforceableClaim(other, namespaces)
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

// usageResult is what the nodes' current reports say of one tenant.
type usageResult struct {
	// unmeasured says, per node whose agent cannot find some of the
	// tenant's pods, how many and why.
	unmeasured []string
	// limited says, per node where its pods' CPU limits keep the tenant
	// below its entitlement, how far.
	limited []string
	// bounded says, per node where its weight hit one of kubefair's
	// bounds, which one and how far off it left the tenant.
	bounded []string
	// exclusive says, per node where kubelet's static CPU manager gives
	// its pods CPUs of their own, how many.
	exclusive []string
	// unsliced says, per node that does not give the tenant's threads its
	// latency class's slice, why (the report's LatencyClasses condition).
	unsliced []string
	// unelevated says, per node that does not apply the tenant's
	// request-based elevation, why.
	unelevated     []string
	entitled       string
	achieved       string
	reportingNodes int32
	// silent are the nodes that reported the tenant but stopped reporting.
	silent []string
	// recheck is when a report that still counts for the tenant goes
	// stale, zero if none.
	recheck time.Time
}

// boundMessage says what each bound a node may report means.
var boundMessage = map[kubefairv1.WeightBound]string{
	kubefairv1.BoundWeightRange: "the weights its pods need fall outside the cgroup weight range (kubelet's requests leave too few weight units for this ratio of weights)",
	kubefairv1.BoundCorrection:  "the closed loop's correction reached the end of its range (1/8–8)",
}

// staleAfter is how long a report counts: three report windows, at least
// 30 s. A node whose agent stopped reporting stops counting towards the
// shares and Enforced then.
func staleAfter(r *kubefairv1.NodeShareReport) time.Duration {
	return max(3*r.Window.Duration, 30*time.Second)
}

// aggregateReports folds the nodes' current reports into the tenant's
// shares, weighted by each node's CPUs. What the nodes billed is the
// ledger's business (UsageRecords), not the reports'.
func aggregateReports(t *kubefairv1.Tenant, reports []kubefairv1.NodeShareReport, now time.Time) usageResult {
	var res usageResult
	var entitledCPUs, achievedCPUs float64
	var cpus int32
	for i := range reports {
		r := &reports[i]
		share := findShare(r, t)
		stale := now.Sub(r.ObservedTime.Time) > staleAfter(r)
		if stale {
			if share != nil {
				res.silent = append(res.silent, r.Name)
			}
			continue
		}
		n := findUnmeasured(r, t.Name)
		if share == nil && n == 0 {
			continue // says nothing of this tenant: no reason to look again when it goes stale
		}
		if at := r.ObservedTime.Add(staleAfter(r)); res.recheck.IsZero() || at.Before(res.recheck) {
			res.recheck = at
		}
		if n > 0 {
			why := "its agent cannot find their cgroups"
			if c := meta.FindStatusCondition(r.Conditions, kubefairv1.ConditionPodCgroupsFound); c != nil && c.Status == metav1.ConditionFalse {
				why = c.Reason + ": " + c.Message
			}
			res.unmeasured = append(res.unmeasured, fmt.Sprintf("node %s runs %d pod(s) of this tenant that are neither enforced nor measured (%s)", r.Name, n, why))
		}
		if share == nil || share.Final {
			continue
		}
		res.reportingNodes++
		if share.LimitedShare > 0 {
			res.limited = append(res.limited, fmt.Sprintf("on node %s the CPU limits of its pods let it use at most %.1f%% of the node, less than its weight entitles it to; the rest goes to other tenants (raise or remove the limits to get it)", r.Name, 100*share.LimitedShare))
		}
		if share.ExclusiveCPUs > 0 {
			res.exclusive = append(res.exclusive, fmt.Sprintf("on node %s kubelet's static CPU manager gives its pods %d CPU(s) of their own: those pods run outside the shared pool kubefair divides by weight, and outside its entitled and achieved shares (their CPU time is billed)", r.Name, share.ExclusiveCPUs))
		}
		if share.LatencyClassOff {
			res.unsliced = append(res.unsliced, fmt.Sprintf("on node %s its latency class %s is not applied (%s)", r.Name, t.Status.LatencyClass, conditionWhy(r, kubefairv1.ConditionLatencyClasses)))
		}
		if share.RequestElevationOff {
			res.unelevated = append(res.unelevated, fmt.Sprintf("on node %s its request-based elevation is not applied (%s)", r.Name, conditionWhy(r, kubefairv1.ConditionRequestElevation)))
		}
		if share.Bound != "" {
			res.bounded = append(res.bounded, fmt.Sprintf("on node %s %s: it achieved %.1f%% of the node where it is entitled to %.1f%%", r.Name, boundMessage[share.Bound], 100*share.AchievedShare, 100*share.EntitledShare))
		}
		entitledCPUs += share.EntitledShare * float64(r.CPUs)
		achievedCPUs += share.AchievedShare * float64(r.CPUs)
		cpus += r.CPUs
	}
	sort.Strings(res.silent)
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

// findShare is the report's entry for this tenant: by UID, so a tenant
// created again under the same name is not shown its predecessor's.
func findShare(r *kubefairv1.NodeShareReport, t *kubefairv1.Tenant) *kubefairv1.TenantShare {
	for i := range r.Tenants {
		if r.Tenants[i].UID == string(t.UID) {
			return &r.Tenants[i]
		}
	}
	return nil
}

// percent renders a share of CPUs (0..1) the way the printer columns show it,
// clamped to 0..100% (a report's shares are measured, and may stray).
func percent(share float64) string {
	if !(share >= 0) { // and NaN
		share = 0
	}
	return fmt.Sprintf("%.1f%%", 100*min(share, 1))
}

// workloadOverlap is two workloads of a tenant where one's pod selector
// selects every pod the other's does. The agent gives a pod to the first
// workload (in spec order) that selects it.
type workloadOverlap struct {
	first, second string // in spec order
	wider         string // the one that selects every pod the other does; first or second
	identical     bool
}

func (o workloadOverlap) String() string {
	switch {
	case o.identical:
		return fmt.Sprintf("workloads %q and %q have the same pod selector: their pods count as %q, listed first, and %q gets none", o.first, o.second, o.first, o.second)
	case o.wider == o.first:
		return fmt.Sprintf("workload %q selects every pod workload %q selects and is listed first, so %q gets no pods", o.first, o.second, o.second)
	default:
		return fmt.Sprintf("workload %q selects every pod workload %q selects; the pods both select count as %q, listed first", o.second, o.first, o.first)
	}
}

// requirement is one label requirement in a canonical form: matchLabels
// k: v is k In (v), values are a sorted set.
type requirement struct{ key, operator, values string }

// requirements is a selector's requirements, nil when it is unusable (the
// agent ignores such a selector).
func requirements(s *kubefairv1.LabelSelector) map[requirement]bool {
	if _, err := s.AsSelector(); err != nil {
		return nil
	}
	out := map[requirement]bool{}
	for k, v := range s.MatchLabels {
		out[requirement{k, string(metav1.LabelSelectorOpIn), string(v)}] = true
	}
	for _, e := range s.MatchExpressions {
		values := make([]string, 0, len(e.Values))
		for _, v := range e.Values {
			values = append(values, string(v))
		}
		sort.Strings(values)
		out[requirement{e.Key, string(e.Operator), strings.Join(slices.Compact(values), "\x00")}] = true
	}
	return out
}

// subset: every requirement of a is one of b's, so every pod b selects, a
// selects too.
func subset(a, b map[requirement]bool) bool {
	for r := range a {
		if !b[r] {
			return false
		}
	}
	return true
}

// overlappingWorkloads finds the workloads whose selectors surely select
// the same pods: one's requirements are all among the other's (identical
// selectors; one's matchLabels a subset of the other's, with the same
// expressions or none). It decides conservatively: it does not reason about
// values (In (a) against In (a, b)), and two selectors on different labels
// can still both select a pod that carries both.
func overlappingWorkloads(ws []kubefairv1.Workload) []workloadOverlap {
	reqs := make([]map[requirement]bool, len(ws))
	for i := range ws {
		reqs[i] = requirements(&ws[i].PodSelector)
	}
	var out []workloadOverlap
	for i := range ws {
		for j := i + 1; j < len(ws); j++ {
			if reqs[i] == nil || reqs[j] == nil {
				continue
			}
			iWider, jWider := subset(reqs[i], reqs[j]), subset(reqs[j], reqs[i])
			if !iWider && !jWider {
				continue
			}
			o := workloadOverlap{first: ws[i].Name, second: ws[j].Name, wider: ws[i].Name, identical: iWider && jWider}
			if !iWider {
				o.wider = ws[j].Name
			}
			out = append(out, o)
		}
	}
	return out
}

// billingResult is what the ledger says of one tenant now.
type billingResult struct {
	period, bill, cpuSeconds, cost string
	// refused describes the nodes whose last report was not billed for
	// the tenant.
	refused []string
	// awaiting are the nodes whose final counter of a tenant being deleted
	// is not recorded yet, or not yet on its bill (bills follow the
	// records at most once per status period); finalDeadline is when the
	// tenant is let go anyway.
	awaiting      []string
	finalDeadline time.Time
}

// finalUsageTimeout is how long a deleted tenant waits for its nodes'
// final counters before it is let go anyway (with an event naming them).
const finalUsageTimeout = 10 * time.Minute

// billingOf reads the tenant's bill of the current period and the nodes'
// open UsageRecords: their last reports' refusals, and for a tenant being
// deleted, whether every node recorded its final counter (or stopped
// reporting).
func billingOf(t *kubefairv1.Tenant, tierCurrency string, bill *kubefairv1.TenantBill, open []kubefairv1.UsageRecord, now time.Time) billingResult {
	res := billingResult{period: billing.Period(now), cpuSeconds: "0.000000000", cost: "0.000000"}
	if bill != nil {
		res.bill, res.cpuSeconds = bill.Name, bill.CPUSeconds
		for _, c := range bill.Costs {
			if c.Currency == tierCurrency {
				res.cost = c.Amount
			}
		}
	}
	uid := string(t.UID)
	for i := range open {
		u := &open[i]
		if l := u.LastReport; l != nil {
			for _, rt := range l.Refused {
				if rt.UID == uid {
					res.refused = append(res.refused, fmt.Sprintf("node %s's last report was refused for this tenant: %s: %s", u.Node, rt.Reason, rt.Message))
				}
			}
		}
		if t.DeletionTimestamp == nil {
			continue
		}
		fresh := u.Cursor.Through != nil && now.Sub(u.Cursor.Through.Time) <= 3*time.Minute
		counting := false
		for _, c := range u.Cursor.Tenants {
			counting = counting || (c.UID == uid && ((!c.Final && fresh) || c.HeldNanoseconds > 0))
		}
		if counting || !onBill(bill, u, uid) {
			res.awaiting = append(res.awaiting, u.Node)
		}
	}
	sort.Strings(res.refused)
	sort.Strings(res.awaiting)
	if t.DeletionTimestamp != nil {
		res.finalDeadline = t.DeletionTimestamp.Add(finalUsageTimeout)
	}
	return res
}

// onBill says whether bill holds what record u counted for the tenant uid:
// the bill has the node's lines from that far or further, or from an
// earlier report with the same lines of the tenant (its counter final, the
// record moves on with the other tenants', and a bill recomputed at most
// once a status period may never catch up with the record of a node that
// reports as often); or the record bills the tenant nothing in the bill's
// period.
func onBill(bill *kubefairv1.TenantBill, u *kubefairv1.UsageRecord, uid string) bool {
	_, lines := billLines(u, uid)
	if len(lines) == 0 {
		return true
	}
	if bill == nil {
		return false
	}
	if u.Period != bill.Period {
		return true // another day's record: its own bill
	}
	i := slices.IndexFunc(bill.Sources, func(s kubefairv1.BillSource) bool { return s.Node == u.Node })
	return i >= 0 && (bill.Sources[i].Sequence >= u.Cursor.Sequence || slices.Equal(bill.Sources[i].Lines, lines))
}

// setConditions sums the phases up as Ready, TierResolved, Enforced and
// Degraded. meta.SetStatusCondition keeps a condition's transition time
// while its status stays the same, so an unchanged tenant yields an
// unchanged status.
func setConditions(st *kubefairv1.TenantStatus, generation int64, tier tierResult, ns namespaceResult, usage usageResult, bill billingResult, overlaps []workloadOverlap, now metav1.Time) {
	set := func(c metav1.Condition) {
		c.Message = clip(c.Message, maxConditionMessage)
		c.ObservedGeneration = generation
		c.LastTransitionTime = now
		meta.SetStatusCondition(&st.Conditions, c)
	}
	set(tier.condition)

	switch {
	case usage.reportingNodes > 0:
		msg := fmt.Sprintf("%d node(s) report enforcing this tenant", usage.reportingNodes)
		if len(usage.silent) > 0 {
			msg += fmt.Sprintf("; %d stopped reporting (%s)", len(usage.silent), strings.Join(usage.silent, ", "))
		}
		set(metav1.Condition{Type: kubefairv1.ConditionEnforced, Status: metav1.ConditionTrue, Reason: kubefairv1.ReasonReported, Message: msg})
	case len(usage.unmeasured) > 0:
		set(metav1.Condition{Type: kubefairv1.ConditionEnforced, Status: metav1.ConditionFalse, Reason: kubefairv1.ReasonPodsUnmeasured,
			Message: nodesMessage(usage.unmeasured)})
	case len(usage.silent) > 0:
		set(metav1.Condition{Type: kubefairv1.ConditionEnforced, Status: metav1.ConditionFalse, Reason: kubefairv1.ReasonAwaitingReports,
			Message: fmt.Sprintf("the nodes that ran this tenant stopped reporting (%s)", strings.Join(usage.silent, ", "))})
	default:
		set(metav1.Condition{Type: kubefairv1.ConditionEnforced, Status: metav1.ConditionFalse, Reason: kubefairv1.ReasonAwaitingReports,
			Message: "no node agent reports this tenant yet (no pods running, or no agent)"})
	}

	billed := metav1.Condition{Type: kubefairv1.ConditionBilled, Status: metav1.ConditionTrue, Reason: kubefairv1.ReasonAccruing,
		Message: "its nodes' reports are billed, per UTC day, in TenantBills (kubectl get tenantbills --field-selector tenant=<name>)"}
	switch {
	case len(bill.awaiting) > 0:
		billed = metav1.Condition{Type: kubefairv1.ConditionBilled, Status: metav1.ConditionFalse, Reason: kubefairv1.ReasonAwaitingFinalUsage,
			Message: fmt.Sprintf("deleted; waiting until %s for the final counters of node(s) %s to be recorded and billed", bill.finalDeadline.UTC().Format(time.RFC3339), strings.Join(bill.awaiting, ", "))}
	case tier.priceMicros < 0:
		billed = metav1.Condition{Type: kubefairv1.ConditionBilled, Status: metav1.ConditionFalse, Reason: kubefairv1.ReasonPriceUnknown,
			Message: "the price is unknown: " + tier.condition.Message}
	case len(bill.refused) > 0:
		billed = metav1.Condition{Type: kubefairv1.ConditionBilled, Status: metav1.ConditionFalse, Reason: kubefairv1.ReasonReportRefused,
			Message: nodesMessage(bill.refused)}
	}
	set(billed)

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
	case ns.claimed > 0:
		degraded = metav1.Condition{Type: kubefairv1.ConditionDegraded, Status: metav1.ConditionTrue, Reason: kubefairv1.ReasonTooManyNamespaces,
			Message: fmt.Sprintf("the tenant claims %d namespaces; only the first %d by name can be enforced: narrow spec.namespaceSelector", ns.claimed, maxTenantNamespaces)}
	case len(usage.unmeasured) > 0:
		degraded = metav1.Condition{Type: kubefairv1.ConditionDegraded, Status: metav1.ConditionTrue, Reason: kubefairv1.ReasonPodsUnmeasured,
			Message: nodesMessage(usage.unmeasured)}
	case len(usage.limited) > 0:
		degraded = metav1.Condition{Type: kubefairv1.ConditionDegraded, Status: metav1.ConditionTrue, Reason: kubefairv1.ReasonCPULimited,
			Message: nodesMessage(usage.limited)}
	case len(usage.exclusive) > 0:
		degraded = metav1.Condition{Type: kubefairv1.ConditionDegraded, Status: metav1.ConditionTrue, Reason: kubefairv1.ReasonExclusiveCPUs,
			Message: nodesMessage(usage.exclusive)}
	case len(usage.bounded) > 0:
		degraded = metav1.Condition{Type: kubefairv1.ConditionDegraded, Status: metav1.ConditionTrue, Reason: kubefairv1.ReasonWeightBound,
			Message: nodesMessage(usage.bounded)}
	case len(usage.unsliced) > 0:
		degraded = metav1.Condition{Type: kubefairv1.ConditionDegraded, Status: metav1.ConditionTrue, Reason: kubefairv1.ReasonLatencyClassNotApplied,
			Message: nodesMessage(usage.unsliced)}
	case len(usage.unelevated) > 0:
		degraded = metav1.Condition{Type: kubefairv1.ConditionDegraded, Status: metav1.ConditionTrue, Reason: kubefairv1.ReasonRequestElevationNotApplied,
			Message: nodesMessage(usage.unelevated)}
	case len(overlaps) > 0:
		msg := overlaps[0].String()
		if len(overlaps) > 1 {
			msg += fmt.Sprintf("; and %d more overlap(s)", len(overlaps)-1)
		}
		degraded = metav1.Condition{Type: kubefairv1.ConditionDegraded, Status: metav1.ConditionTrue, Reason: kubefairv1.ReasonWorkloadsOverlap, Message: msg}
	}
	set(degraded)

	ready := metav1.Condition{Type: kubefairv1.ConditionReady, Status: metav1.ConditionTrue, Reason: kubefairv1.ReasonResolved,
		Message: fmt.Sprintf("weight %d over %d namespace(s)", tier.weight, len(ns.owned))}
	// Ready is False for what leaves the tenant nothing to enforce, and
	// says which: a conflict it partly lost ranks first for Degraded, but
	// is no reason for Ready.
	switch {
	case ns.err != nil:
		ready = metav1.Condition{Type: kubefairv1.ConditionReady, Status: metav1.ConditionFalse, Reason: kubefairv1.ReasonInvalidSelector,
			Message: fmt.Sprintf("spec.namespaceSelector cannot be used: %v", ns.err)}
	case tier.condition.Status != metav1.ConditionTrue:
		ready = metav1.Condition{Type: kubefairv1.ConditionReady, Status: metav1.ConditionFalse, Reason: tier.condition.Reason, Message: tier.condition.Message}
	case len(ns.owned) == 0 && len(ns.conflicts) > 0:
		ready = metav1.Condition{Type: kubefairv1.ConditionReady, Status: metav1.ConditionFalse, Reason: kubefairv1.ReasonNamespaceConflict, Message: conflictMessage(ns.conflicts)}
	case len(ns.owned) == 0:
		ready = metav1.Condition{Type: kubefairv1.ConditionReady, Status: metav1.ConditionFalse, Reason: kubefairv1.ReasonNoNamespaces,
			Message: "no existing namespace matches spec.namespaces or spec.namespaceSelector"}
	}
	set(ready)
}

// maxConditionMessage is metav1.Condition's maxLength for messages: a
// tenant's condition can quote a node's condition message, which may be as
// long.
const maxConditionMessage = 32768

// clip cuts s to at most n bytes, on a UTF-8 boundary, marking the cut.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	const mark = "…"
	cut := n - len(mark)
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + mark
}

func nodesMessage(nodes []string) string {
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

// conditionWhy is a report's condition of this type as "reason: message",
// for a tenant's Degraded message.
func conditionWhy(r *kubefairv1.NodeShareReport, condition string) string {
	if c := meta.FindStatusCondition(r.Conditions, condition); c != nil {
		return c.Reason + ": " + c.Message
	}
	return "its report's " + condition + " condition says why"
}
