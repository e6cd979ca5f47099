package controllers

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	kubefairv1 "github.com/kubefair/kubefair/api/v1alpha1"
	"github.com/kubefair/kubefair/controllers/billing"
)

// TestUnmeasuredPods: a node whose agent cannot find some of a tenant's
// pods makes the tenant Degraded (and not Enforced when no node enforces
// it); so does a node where its CPU limits keep it below its entitlement,
// and one where its weight hit one of kubefair's bounds.
func TestUnmeasuredPods(t *testing.T) {
	now := time.Now()
	notFound := metav1.Condition{Type: kubefairv1.ConditionPodCgroupsFound, Status: metav1.ConditionFalse, Reason: kubefairv1.ReasonLayoutNotFound,
		Message: "no kubelet pod cgroups: none of /sys/fs/cgroup/kubepods.slice exists"}
	measured := kubefairv1.NodeShareReport{ObjectMeta: metav1.ObjectMeta{Name: "good"}, CPUs: 2, BootID: "b1", ObservedTime: metav1.NewTime(now),
		Tenants: []kubefairv1.TenantShare{{Name: "shop", UID: "uid-shop", EntitledShare: 0.5, AchievedShare: 0.5, CPUNanoseconds: 10}}}
	blind := kubefairv1.NodeShareReport{ObjectMeta: metav1.ObjectMeta{Name: "blind"}, CPUs: 2, BootID: "b2", ObservedTime: metav1.NewTime(now),
		Unmeasured: []kubefairv1.UnmeasuredPods{{Tenant: "shop", Pods: 3}}, Conditions: []metav1.Condition{notFound}}
	limited := kubefairv1.NodeShareReport{ObjectMeta: metav1.ObjectMeta{Name: "capped"}, CPUs: 2, BootID: "b3", ObservedTime: metav1.NewTime(now),
		Tenants: []kubefairv1.TenantShare{{Name: "shop", UID: "uid-shop", EntitledShare: 0.2, AchievedShare: 0.2, LimitedShare: 0.2, CPUNanoseconds: 10}}}
	bounded := kubefairv1.NodeShareReport{ObjectMeta: metav1.ObjectMeta{Name: "coarse"}, CPUs: 2, BootID: "b4", ObservedTime: metav1.NewTime(now),
		Tenants: []kubefairv1.TenantShare{{Name: "shop", UID: "uid-shop", EntitledShare: 0.0001, AchievedShare: 0.09, Backlogged: true, Bound: kubefairv1.BoundWeightRange, CPUNanoseconds: 10}}}
	for _, tc := range []struct {
		name            string
		reports         []kubefairv1.NodeShareReport
		enforced        metav1.ConditionStatus
		enforcedReason  string
		degradedReason  string
		messageContains string
	}{
		{name: "all measured", reports: []kubefairv1.NodeShareReport{measured}, enforced: metav1.ConditionTrue, enforcedReason: kubefairv1.ReasonReported,
			degradedReason: kubefairv1.ReasonAsExpected},
		{name: "one node blind", reports: []kubefairv1.NodeShareReport{measured, blind}, enforced: metav1.ConditionTrue, enforcedReason: kubefairv1.ReasonReported,
			degradedReason: kubefairv1.ReasonPodsUnmeasured, messageContains: "node blind runs 3 pod(s)"},
		{name: "only a blind node", reports: []kubefairv1.NodeShareReport{blind}, enforced: metav1.ConditionFalse, enforcedReason: kubefairv1.ReasonPodsUnmeasured,
			degradedReason: kubefairv1.ReasonPodsUnmeasured, messageContains: "LayoutNotFound: no kubelet pod cgroups"},
		{name: "CPU limits keep it below its entitlement", reports: []kubefairv1.NodeShareReport{measured, limited}, enforced: metav1.ConditionTrue,
			enforcedReason: kubefairv1.ReasonReported, degradedReason: kubefairv1.ReasonCPULimited, messageContains: "on node capped the CPU limits of its pods let it use at most 20.0% of the node"},
		{name: "a weight beyond the cgroup weight range", reports: []kubefairv1.NodeShareReport{measured, bounded}, enforced: metav1.ConditionTrue,
			enforcedReason: kubefairv1.ReasonReported, degradedReason: kubefairv1.ReasonWeightBound,
			messageContains: "on node coarse the weights its pods need fall outside the cgroup weight range (kubelet's requests leave too few weight units for this ratio of weights): it achieved 9.0% of the node where it is entitled to 0.0%"},
		{name: "CPU limits before a bound", reports: []kubefairv1.NodeShareReport{bounded, limited}, enforced: metav1.ConditionTrue,
			enforcedReason: kubefairv1.ReasonReported, degradedReason: kubefairv1.ReasonCPULimited, messageContains: "on node capped"},
		{name: "unmeasured pods come first", reports: []kubefairv1.NodeShareReport{limited, blind}, enforced: metav1.ConditionTrue,
			enforcedReason: kubefairv1.ReasonReported, degradedReason: kubefairv1.ReasonPodsUnmeasured, messageContains: "node blind"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tenant := &kubefairv1.Tenant{ObjectMeta: metav1.ObjectMeta{Name: "shop", UID: "uid-shop", Generation: 1}}
			usage := aggregateReports(tenant, tc.reports, now)
			st := &kubefairv1.TenantStatus{}
			tier := resolveTier(tenant, nil)
			tier.condition.Status = metav1.ConditionTrue
			setConditions(st, 1, tier, namespaceResult{owned: []string{"shop"}}, usage, billingResult{}, nil, metav1.NewTime(now))
			enforced := meta.FindStatusCondition(st.Conditions, kubefairv1.ConditionEnforced)
			degraded := meta.FindStatusCondition(st.Conditions, kubefairv1.ConditionDegraded)
			if enforced.Status != tc.enforced || enforced.Reason != tc.enforcedReason {
				t.Errorf("Enforced = %s/%s, want %s/%s", enforced.Status, enforced.Reason, tc.enforced, tc.enforcedReason)
			}
			if degraded.Reason != tc.degradedReason || !strings.Contains(degraded.Message, tc.messageContains) {
				t.Errorf("Degraded = %s: %q, want %s containing %q", degraded.Reason, degraded.Message, tc.degradedReason, tc.messageContains)
			}
		})
	}
}

// TestSilentNodesStopCounting: a node whose last report is older than
// three report windows no longer counts towards the shares or Enforced,
// and a report names a tenant by UID, not by name.
func TestSilentNodesStopCounting(t *testing.T) {
	now := time.Now()
	report := func(name string, age time.Duration, uid string, achieved float64) kubefairv1.NodeShareReport {
		return kubefairv1.NodeShareReport{ObjectMeta: metav1.ObjectMeta{Name: name}, CPUs: 2, Window: metav1.Duration{Duration: 10 * time.Second},
			ObservedTime: metav1.NewTime(now.Add(-age)), Tenants: []kubefairv1.TenantShare{{Name: "shop", UID: uid, EntitledShare: 0.5, AchievedShare: achieved}}}
	}
	tenant := &kubefairv1.Tenant{ObjectMeta: metav1.ObjectMeta{Name: "shop", UID: "new"}}
	usage := aggregateReports(tenant, []kubefairv1.NodeShareReport{
		report("live", 5*time.Second, "new", 0.4),
		report("silent", 31*time.Second, "new", 0.9),
		report("other", 5*time.Second, "old", 0.1), // the tenant's predecessor of the same name
	}, now)
	if usage.reportingNodes != 1 || usage.achieved != "40.0%" || len(usage.silent) != 1 || usage.silent[0] != "silent" {
		t.Fatalf("usage %+v: want only the live node counted, silent named", usage)
	}
	if want := now.Add(25 * time.Second); !usage.recheck.Equal(want) {
		t.Errorf("recheck at %s, want %s (when the live report goes stale)", usage.recheck, want)
	}
	usage = aggregateReports(tenant, []kubefairv1.NodeShareReport{report("silent", time.Minute, "new", 0.9)}, now)
	st := &kubefairv1.TenantStatus{}
	setConditions(st, 1, tierResult{condition: metav1.Condition{Type: kubefairv1.ConditionTierResolved, Status: metav1.ConditionTrue, Reason: "x"}},
		namespaceResult{owned: []string{"shop"}}, usage, billingResult{}, nil, metav1.NewTime(now))
	if c := meta.FindStatusCondition(st.Conditions, kubefairv1.ConditionEnforced); c.Status != metav1.ConditionFalse || !strings.Contains(c.Message, "stopped reporting (silent)") {
		t.Errorf("Enforced = %+v with only a silent node", c)
	}
}

// TestFinalUsage: a tenant being deleted waits for the nodes that still
// report it without a final counter, hold CPU for a price, or whose
// counted CPU its bill does not hold yet.
func TestFinalUsage(t *testing.T) {
	now := time.Now()
	deleting := &kubefairv1.Tenant{ObjectMeta: metav1.ObjectMeta{Name: "shop", UID: "u1", DeletionTimestamp: &metav1.Time{Time: now}}}
	open := func(node string, age time.Duration, c kubefairv1.TenantCounter) kubefairv1.UsageRecord {
		return kubefairv1.UsageRecord{Node: node, Cursor: kubefairv1.LedgerCursor{Through: &metav1.Time{Time: now.Add(-age)}, Tenants: []kubefairv1.TenantCounter{c}}}
	}
	counted := func(u kubefairv1.UsageRecord, sequence int64, tenantUID string) kubefairv1.UsageRecord {
		u.Period, u.Cursor.Sequence = billing.Period(now), sequence
		u.Lines = []kubefairv1.ChargeLine{{TenantUID: tenantUID, CPUNanoseconds: 1}}
		return u
	}
	// billed-before's bill source is a report older than its record, with
	// other lines; same-lines' too, with the record's lines of the tenant
	// (the record moved on with other tenants only).
	bill := &kubefairv1.TenantBill{Period: billing.Period(now), Sources: []kubefairv1.BillSource{{Node: "billed", Sequence: 7}, {Node: "billed-before", Sequence: 6},
		{Node: "same-lines", Sequence: 6, Lines: []kubefairv1.BillLine{{CPUSeconds: "0.000000001"}}}}}
	res := billingOf(deleting, "", bill, []kubefairv1.UsageRecord{
		open("counting", 5*time.Second, kubefairv1.TenantCounter{UID: "u1"}),
		open("done", 5*time.Second, kubefairv1.TenantCounter{UID: "u1", Final: true}),
		open("gone-quiet", time.Hour, kubefairv1.TenantCounter{UID: "u1"}),
		open("holding", time.Hour, kubefairv1.TenantCounter{UID: "u1", Final: true, HeldNanoseconds: 5}),
		open("other", 5*time.Second, kubefairv1.TenantCounter{UID: "u2"}),
		counted(open("billed", 5*time.Second, kubefairv1.TenantCounter{UID: "u1", Final: true}), 7, "u1"),
		counted(open("billed-before", 5*time.Second, kubefairv1.TenantCounter{UID: "u1", Final: true}), 7, "u1"),
		counted(open("same-lines", 5*time.Second, kubefairv1.TenantCounter{UID: "u1", Final: true}), 9, "u1"),
		counted(open("not-on-bill", 5*time.Second, kubefairv1.TenantCounter{UID: "u1", Final: true}), 3, "u1"),
		counted(open("others-lines", 5*time.Second, kubefairv1.TenantCounter{UID: "u1", Final: true}), 3, "u2"),
	}, now)
	if strings.Join(res.awaiting, ",") != "billed-before,counting,holding,not-on-bill" || !res.finalDeadline.Equal(now.Add(finalUsageTimeout)) {
		t.Fatalf("awaiting %v until %s", res.awaiting, res.finalDeadline)
	}
}

// TestWorkloadsOverlap: two workloads whose selectors surely select the
// same pods make the tenant Degraded, naming both; selectors that may well
// select different pods do not.
func TestWorkloadsOverlap(t *testing.T) {
	labels := func(kv ...string) kubefairv1.LabelSelector {
		s := kubefairv1.LabelSelector{MatchLabels: map[string]kubefairv1.LabelValue{}}
		for i := 0; i < len(kv); i += 2 {
			s.MatchLabels[kv[i]] = kubefairv1.LabelValue(kv[i+1])
		}
		return s
	}
	expr := func(s kubefairv1.LabelSelector, key string, op metav1.LabelSelectorOperator, values ...kubefairv1.LabelValue) kubefairv1.LabelSelector {
		s.MatchExpressions = append(s.MatchExpressions, kubefairv1.LabelSelectorRequirement{Key: key, Operator: op, Values: values})
		return s
	}
	w := func(name string, sel kubefairv1.LabelSelector) kubefairv1.Workload {
		return kubefairv1.Workload{Name: name, Weight: 1, PodSelector: sel}
	}
	for _, tc := range []struct {
		name      string
		workloads []kubefairv1.Workload
		want      string // part of the Degraded message; "" for no overlap
	}{
		{"disjoint values", []kubefairv1.Workload{w("a", labels("app", "a")), w("b", labels("app", "b"))}, ""},
		{"different keys (a pod may carry both, but need not)", []kubefairv1.Workload{w("a", labels("app", "a")), w("b", labels("tier", "b"))}, ""},
		{"identical matchLabels", []kubefairv1.Workload{w("a", labels("app", "x")), w("b", labels("app", "x"))},
			`workloads "a" and "b" have the same pod selector: their pods count as "a", listed first, and "b" gets none`},
		{"wider listed first", []kubefairv1.Workload{w("all-web", labels("app", "web")), w("web-canary", labels("app", "web", "track", "canary"))},
			`workload "all-web" selects every pod workload "web-canary" selects and is listed first, so "web-canary" gets no pods`},
		{"narrower listed first", []kubefairv1.Workload{w("web-canary", labels("app", "web", "track", "canary")), w("all-web", labels("app", "web"))},
			`workload "all-web" selects every pod workload "web-canary" selects; the pods both select count as "web-canary", listed first`},
		{"an empty selector selects every pod", []kubefairv1.Workload{w("vm", labels("kubevirt.io/domain", "vm")), w("rest", kubefairv1.LabelSelector{})},
			`workload "rest" selects every pod workload "vm" selects`},
		{"matchLabels as an In expression", []kubefairv1.Workload{w("a", labels("app", "x")), w("b", expr(kubefairv1.LabelSelector{}, "app", metav1.LabelSelectorOpIn, "x"))},
			`workloads "a" and "b" have the same pod selector`},
		{"values compared as a set", []kubefairv1.Workload{
			w("a", expr(kubefairv1.LabelSelector{}, "app", metav1.LabelSelectorOpNotIn, "x", "y")),
			w("b", expr(labels("tier", "db"), "app", metav1.LabelSelectorOpNotIn, "y", "x", "x"))},
			`workload "a" selects every pod workload "b" selects`},
		{"an expression that may exclude the narrower's pods", []kubefairv1.Workload{
			w("a", expr(labels("app", "web"), "track", metav1.LabelSelectorOpDoesNotExist)),
			w("b", labels("app", "web", "track", "canary"))}, ""},
		{"not decided: In values that only include each other", []kubefairv1.Workload{
			w("a", expr(kubefairv1.LabelSelector{}, "app", metav1.LabelSelectorOpIn, "x", "y")),
			w("b", labels("app", "x"))}, ""},
		{"an unusable selector is ignored, as the agent does", []kubefairv1.Workload{
			w("a", expr(kubefairv1.LabelSelector{}, "app", metav1.LabelSelectorOpIn)), w("b", labels("app", "x"))}, ""},
		{"several overlaps", []kubefairv1.Workload{w("a", labels("app", "x")), w("b", labels("app", "x")), w("c", labels("app", "x", "v", "2"))},
			`workloads "a" and "b" have the same pod selector: their pods count as "a", listed first, and "b" gets none; and 2 more overlap(s)`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := &kubefairv1.TenantStatus{}
			tier := tierResult{condition: metav1.Condition{Type: kubefairv1.ConditionTierResolved, Status: metav1.ConditionTrue, Reason: kubefairv1.ReasonDirectWeight}}
			setConditions(st, 1, tier, namespaceResult{owned: []string{"shop"}}, usageResult{}, billingResult{}, overlappingWorkloads(tc.workloads), metav1.Now())
			degraded := meta.FindStatusCondition(st.Conditions, kubefairv1.ConditionDegraded)
			ready := meta.FindStatusCondition(st.Conditions, kubefairv1.ConditionReady)
			if ready.Status != metav1.ConditionTrue {
				t.Errorf("Ready = %s/%s: overlapping workloads do not make a tenant unready", ready.Status, ready.Reason)
			}
			if tc.want == "" {
				if degraded.Reason != kubefairv1.ReasonAsExpected {
					t.Errorf("Degraded = %s: %q, want no overlap", degraded.Reason, degraded.Message)
				}
				return
			}
			if degraded.Status != metav1.ConditionTrue || degraded.Reason != kubefairv1.ReasonWorkloadsOverlap || !strings.Contains(degraded.Message, tc.want) {
				t.Errorf("Degraded = %s/%s: %q, want WorkloadsOverlap containing %q", degraded.Status, degraded.Reason, degraded.Message, tc.want)
			}
		})
	}
}

// TestTooManyNamespaces: status.namespaces holds the first
// maxTenantNamespaces namespaces by name, and the tenant says so.
func TestTooManyNamespaces(t *testing.T) {
	var nss []corev1.Namespace
	for i := range maxTenantNamespaces + 5 {
		nss = append(nss, corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("ns-%05d", i), Labels: map[string]string{"team": "big"}}})
	}
	tn := &kubefairv1.Tenant{ObjectMeta: metav1.ObjectMeta{Name: "big"}, Spec: kubefairv1.TenantSpec{
		NamespaceSelector: &kubefairv1.LabelSelector{MatchLabels: map[string]kubefairv1.LabelValue{"team": "big"}}}}
	ns := resolveNamespaces(tn, []kubefairv1.Tenant{*tn}, nss)
	if len(ns.owned) != maxTenantNamespaces || ns.owned[0] != "ns-00000" || ns.claimed != maxTenantNamespaces+5 {
		t.Fatalf("owned %d (first %q), claimed %d", len(ns.owned), ns.owned[0], ns.claimed)
	}
	// A namespace past the older tenant's cap is not lost to it: a younger
	// tenant naming it holds it, with no conflict.
	late := &kubefairv1.Tenant{ObjectMeta: metav1.ObjectMeta{Name: "late", CreationTimestamp: metav1.NewTime(time.Now())},
		Spec: kubefairv1.TenantSpec{Namespaces: []string{nss[maxTenantNamespaces].Name}}}
	if got := resolveNamespaces(late, []kubefairv1.Tenant{*tn, *late}, nss); !slices.Equal(got.owned, []string{nss[maxTenantNamespaces].Name}) || len(got.conflicts) != 0 {
		t.Errorf("the younger tenant holds %v with conflicts %v; want %s alone", got.owned, got.conflicts, nss[maxTenantNamespaces].Name)
	}
	st := &kubefairv1.TenantStatus{}
	tier := tierResult{condition: metav1.Condition{Type: kubefairv1.ConditionTierResolved, Status: metav1.ConditionTrue, Reason: kubefairv1.ReasonDirectWeight}}
	setConditions(st, 1, tier, ns, usageResult{}, billingResult{}, nil, metav1.Now())
	if d := meta.FindStatusCondition(st.Conditions, kubefairv1.ConditionDegraded); d.Reason != kubefairv1.ReasonTooManyNamespaces ||
		!strings.Contains(d.Message, fmt.Sprintf("claims %d namespaces; only the first %d", maxTenantNamespaces+5, maxTenantNamespaces)) {
		t.Errorf("Degraded = %s: %q", d.Reason, d.Message)
	}
}

// TestPercentIsBounded: the shares shown fit status's maxLength whatever a
// report says.
func TestPercentIsBounded(t *testing.T) {
	for share, want := range map[float64]string{0: "0.0%", 0.4: "40.0%", 1: "100.0%", 1.02: "100.0%", 1e300: "100.0%", -0.5: "0.0%", math.NaN(): "0.0%"} {
		if got := percent(share); got != want {
			t.Errorf("percent(%v) = %q, want %q", share, got, want)
		}
	}
}

// TestConditionMessagesFit: a node's condition message quoted in the
// tenant's is cut to what metav1.Condition takes, on a rune boundary.
func TestConditionMessagesFit(t *testing.T) {
	now := time.Now()
	long := metav1.Condition{Type: kubefairv1.ConditionPodCgroupsFound, Status: metav1.ConditionFalse, Reason: kubefairv1.ReasonLayoutNotFound,
		Message: strings.Repeat("é", maxConditionMessage)}
	blind := kubefairv1.NodeShareReport{ObjectMeta: metav1.ObjectMeta{Name: "blind"}, CPUs: 2, ObservedTime: metav1.NewTime(now),
		Unmeasured: []kubefairv1.UnmeasuredPods{{Tenant: "shop", Pods: 1}}, Conditions: []metav1.Condition{long}}
	tenant := &kubefairv1.Tenant{ObjectMeta: metav1.ObjectMeta{Name: "shop", UID: "uid-shop"}}
	st := &kubefairv1.TenantStatus{}
	tier := tierResult{condition: metav1.Condition{Type: kubefairv1.ConditionTierResolved, Status: metav1.ConditionTrue, Reason: kubefairv1.ReasonDirectWeight}}
	setConditions(st, 1, tier, namespaceResult{owned: []string{"shop"}}, aggregateReports(tenant, []kubefairv1.NodeShareReport{blind}, now), billingResult{}, nil, metav1.NewTime(now))
	for _, c := range st.Conditions {
		if len(c.Message) > maxConditionMessage || !utf8.ValidString(c.Message) {
			t.Errorf("%s: a message of %d bytes (valid UTF-8: %t)", c.Type, len(c.Message), utf8.ValidString(c.Message))
		}
	}
	if d := meta.FindStatusCondition(st.Conditions, kubefairv1.ConditionDegraded); d.Reason != kubefairv1.ReasonPodsUnmeasured || !strings.HasSuffix(d.Message, "…") {
		t.Errorf("Degraded = %s: %.80q…", d.Reason, d.Message)
	}
}
