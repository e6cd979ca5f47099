package controllers

import (
	"errors"
	"math"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	kubefairv1 "github.com/kubefair/kubefair/api/v1alpha1"
)

// Table-driven tests of the Tenant status phases (tenant_status.go), plus
// the small pure helpers of tenant_controller.go and metrics.go. The
// scenarios tenant_status_test.go already covers are not repeated here.

// tableNow is a fixed instant, midday UTC, far from a period's ends.
var tableNow = time.Date(2026, 3, 4, 12, 0, 0, 0, time.UTC)

// tenantAt is a tenant created at created that names namespaces.
func tenantAt(name string, created time.Time, namespaces ...string) kubefairv1.Tenant {
	return kubefairv1.Tenant{
		ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID("uid-" + name), CreationTimestamp: metav1.NewTime(created)},
		Spec:       kubefairv1.TenantSpec{Namespaces: namespaces},
	}
}

// selecting is t with a namespace selector.
func selecting(t kubefairv1.Tenant, s *kubefairv1.LabelSelector) kubefairv1.Tenant {
	t.Spec.NamespaceSelector = s
	return t
}

// deleting is t being deleted.
func deleting(t kubefairv1.Tenant) kubefairv1.Tenant {
	t.DeletionTimestamp = &metav1.Time{Time: tableNow}
	return t
}

// matchLabels is a selector of key/value pairs.
func matchLabels(kv ...string) *kubefairv1.LabelSelector {
	s := &kubefairv1.LabelSelector{MatchLabels: map[string]kubefairv1.LabelValue{}}
	for i := 0; i+1 < len(kv); i += 2 {
		s.MatchLabels[kv[i]] = kubefairv1.LabelValue(kv[i+1])
	}
	return s
}

// matchExpression is a selector of one requirement.
func matchExpression(key string, op metav1.LabelSelectorOperator, values ...kubefairv1.LabelValue) *kubefairv1.LabelSelector {
	return &kubefairv1.LabelSelector{MatchExpressions: []kubefairv1.LabelSelectorRequirement{{Key: key, Operator: op, Values: values}}}
}

// namespaceWith is a namespace with key/value labels.
func namespaceWith(name string, kv ...string) corev1.Namespace {
	l := map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		l[kv[i]] = kv[i+1]
	}
	return corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: l}}
}

// nodeReport is a node's report observed age before tableNow, with a 10 s
// window (so it goes stale 30 s after it was observed).
func nodeReport(name string, cpus int32, age time.Duration, shares ...kubefairv1.TenantShare) kubefairv1.NodeShareReport {
	return kubefairv1.NodeShareReport{ObjectMeta: metav1.ObjectMeta{Name: name}, CPUs: cpus, Window: metav1.Duration{Duration: 10 * time.Second},
		ObservedTime: metav1.NewTime(tableNow.Add(-age)), Tenants: shares}
}

// shopShare is the "shop" tenant's (UID uid-shop) entry in a report.
func shopShare(entitled, achieved float64) kubefairv1.TenantShare {
	return kubefairv1.TenantShare{Name: "shop", UID: "uid-shop", EntitledShare: entitled, AchievedShare: achieved}
}

func namesOf(nss map[string]bool) []string {
	var out []string
	for n := range nss {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// TestResolveTierTable: spec.weight wins, unpriced and with no latency
// class; a found tier gives its weight, price, currency and latency class;
// a missing tier keeps the last weight, currency and class with the price
// unknown; an unreadable price is unknown too.
func TestResolveTierTable(t *testing.T) {
	gold := &kubefairv1.PricingTier{ObjectMeta: metav1.ObjectMeta{Name: "gold"},
		Spec: kubefairv1.PricingTierSpec{Weight: 3, PricePerCPUHour: "0.045", Currency: "EUR", LatencyClass: kubefairv1.LatencyClassInteractive}}
	broken := gold.DeepCopy()
	broken.Spec.PricePerCPUHour = "4.5e-2"
	onTier := func(weight int32, currency string) *kubefairv1.Tenant {
		return &kubefairv1.Tenant{ObjectMeta: metav1.ObjectMeta{Name: "shop"}, Spec: kubefairv1.TenantSpec{Tier: "gold"},
			Status: kubefairv1.TenantStatus{EffectiveWeight: weight, Currency: currency, LatencyClass: kubefairv1.LatencyClassBatch}}
	}
	for _, tc := range []struct {
		name         string
		tenant       *kubefairv1.Tenant
		tier         *kubefairv1.PricingTier
		weight       int32
		priceMicros  int64
		currency     string
		latency      kubefairv1.LatencyClass
		status       metav1.ConditionStatus
		reason       string
		messageStart string
	}{
		{name: "spec.weight is used and unpriced, whatever the tier", tenant: &kubefairv1.Tenant{Spec: kubefairv1.TenantSpec{Weight: ptr.To[int32](7)}},
			tier: gold, weight: 7, priceMicros: 0, currency: "", latency: "", status: metav1.ConditionTrue, reason: kubefairv1.ReasonDirectWeight,
			messageStart: "spec.weight 7 is used; the tenant is not priced"},
		{name: "the tier's weight, price and currency", tenant: onTier(9, "USD"), tier: gold,
			weight: 3, priceMicros: 45000, currency: "EUR", latency: "interactive", status: metav1.ConditionTrue, reason: kubefairv1.ReasonTierFound,
			messageStart: `PricingTier "gold": weight 3 at 0.045 EUR per CPU-hour, latency class interactive`},
		{name: "a missing tier keeps the last weight and currency", tenant: onTier(5, "EUR"), tier: nil,
			weight: 5, priceMicros: -1, currency: "EUR", latency: "batch", status: metav1.ConditionFalse, reason: kubefairv1.ReasonTierNotFound,
			messageStart: `PricingTier "gold" does not exist; keeping the last weight (5)`},
		{name: "a tier missing from the start leaves weight 0 (agents skip it)", tenant: onTier(0, ""), tier: nil,
			weight: 0, priceMicros: -1, currency: "", latency: "batch", status: metav1.ConditionFalse, reason: kubefairv1.ReasonTierNotFound,
			messageStart: `PricingTier "gold" does not exist; keeping the last weight (0)`},
		{name: "an unreadable price is unknown, the tier's weight holds", tenant: onTier(5, "USD"), tier: broken,
			weight: 3, priceMicros: -1, currency: "EUR", latency: "interactive", status: metav1.ConditionFalse, reason: kubefairv1.ReasonTierNotFound,
			messageStart: `PricingTier "gold" has an unusable price`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := resolveTier(tc.tenant, tc.tier)
			if got.weight != tc.weight || got.priceMicros != tc.priceMicros || got.currency != tc.currency || got.latency != tc.latency {
				t.Errorf("weight %d, price %d, currency %q, latency class %q; want %d, %d, %q, %q", got.weight, got.priceMicros, got.currency, got.latency, tc.weight, tc.priceMicros, tc.currency, tc.latency)
			}
			c := got.condition
			if c.Type != kubefairv1.ConditionTierResolved || c.Status != tc.status || c.Reason != tc.reason || !strings.HasPrefix(c.Message, tc.messageStart) {
				t.Errorf("condition %s=%s/%s %q; want TierResolved=%s/%s starting %q", c.Type, c.Status, c.Reason, c.Message, tc.status, tc.reason, tc.messageStart)
			}
		})
	}
}

// TestClaimedNamespacesTable: a tenant claims the existing namespaces it
// names plus those its selector matches; a selector that cannot be used is
// an error.
func TestClaimedNamespacesTable(t *testing.T) {
	nss := []corev1.Namespace{
		namespaceWith("kube-system"),
		namespaceWith("shop", "team", "shop"),
		namespaceWith("shop-dev", "team", "shop", "env", "dev"),
		namespaceWith("web", "team", "web"),
	}
	for _, tc := range []struct {
		name     string
		names    []string
		selector *kubefairv1.LabelSelector
		want     []string
		wantErr  bool
	}{
		{name: "nothing named or selected", want: nil},
		{name: "names of existing namespaces only", names: []string{"shop", "gone"}, want: []string{"shop"}},
		{name: "matchLabels", selector: matchLabels("team", "shop"), want: []string{"shop", "shop-dev"}},
		{name: "matchLabels are ANDed", selector: matchLabels("team", "shop", "env", "dev"), want: []string{"shop-dev"}},
		{name: "names and selector add up", names: []string{"web"}, selector: matchLabels("env", "dev"), want: []string{"shop-dev", "web"}},
		{name: "Exists", selector: matchExpression("team", metav1.LabelSelectorOpExists), want: []string{"shop", "shop-dev", "web"}},
		{name: "NotIn also matches namespaces without the label", selector: matchExpression("team", metav1.LabelSelectorOpNotIn, "shop"),
			want: []string{"kube-system", "web"}},
		{name: "an empty selector selects every namespace", selector: &kubefairv1.LabelSelector{},
			want: []string{"kube-system", "shop", "shop-dev", "web"}},
		{name: "In without values is an error", names: []string{"shop"}, selector: matchExpression("team", metav1.LabelSelectorOpIn), wantErr: true},
		{name: "an invalid key is an error", selector: matchLabels("not a key", "x"), wantErr: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tn := selecting(tenantAt("shop", tableNow, tc.names...), tc.selector)
			got, err := claimedNamespaces(&tn, nss)
			if tc.wantErr {
				if err == nil || got != nil {
					t.Fatalf("claimed %v, err %v; want an error and nothing claimed", got, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if names := namesOf(got); !reflect.DeepEqual(names, tc.want) {
				t.Errorf("claimed %v, want %v", names, tc.want)
			}
		})
	}
}

// TestClaimsBeforeTable: the older tenant goes first, the name breaks a
// tie, and the order is strict (a tenant does not go before itself).
func TestClaimsBeforeTable(t *testing.T) {
	t0 := tableNow
	for _, tc := range []struct {
		name     string
		a, b     kubefairv1.Tenant
		before   bool // claimsBefore(a, b)
		afterToo bool // claimsBefore(b, a)
	}{
		{name: "older first, whatever the names", a: tenantAt("zeta", t0), b: tenantAt("alpha", t0.Add(time.Second)), before: true},
		{name: "younger second", a: tenantAt("alpha", t0.Add(time.Second)), b: tenantAt("zeta", t0), before: false, afterToo: true},
		{name: "same second: by name", a: tenantAt("alpha", t0), b: tenantAt("beta", t0), before: true},
		{name: "same second: by name, reversed", a: tenantAt("beta", t0), b: tenantAt("alpha", t0), before: false, afterToo: true},
		{name: "itself: neither goes first", a: tenantAt("alpha", t0), b: tenantAt("alpha", t0), before: false, afterToo: false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := claimsBefore(&tc.a, &tc.b); got != tc.before {
				t.Errorf("claimsBefore(%s, %s) = %t, want %t", tc.a.Name, tc.b.Name, got, tc.before)
			}
			if got := claimsBefore(&tc.b, &tc.a); got != tc.afterToo {
				t.Errorf("claimsBefore(%s, %s) = %t, want %t", tc.b.Name, tc.a.Name, got, tc.afterToo)
			}
		})
	}
}

// TestResolveNamespacesTable: a namespace two tenants claim goes to the
// older (then by name); both report the conflict, sorted by namespace and
// rival; tenants being deleted and rivals with unusable selectors claim
// nothing; an unusable selector of its own is an error.
func TestResolveNamespacesTable(t *testing.T) {
	t0, t1, t2 := tableNow, tableNow.Add(time.Minute), tableNow.Add(2*time.Minute)
	nss := []corev1.Namespace{namespaceWith("shop"), namespaceWith("shared"), namespaceWith("web"), namespaceWith("lab", "team", "lab")}
	bad := matchExpression("team", metav1.LabelSelectorOpIn)
	for _, tc := range []struct {
		name      string
		me        kubefairv1.Tenant
		others    []kubefairv1.Tenant
		owned     []string
		conflicts []conflict
		wantErr   bool
	}{
		{name: "no rivals, sorted", me: tenantAt("me", t1, "shop", "shared", "gone"), owned: []string{"shared", "shop"}},
		{name: "older keeps the shared namespace", me: tenantAt("me", t0, "shop", "shared"), others: []kubefairv1.Tenant{tenantAt("young", t1, "shared", "web")},
			owned: []string{"shared", "shop"}, conflicts: []conflict{{namespace: "shared", other: "young", won: true}}},
		{name: "younger loses it and keeps the rest", me: tenantAt("me", t1, "shop", "shared"), others: []kubefairv1.Tenant{tenantAt("old", t0, "shared", "web")},
			owned: []string{"shop"}, conflicts: []conflict{{namespace: "shared", other: "old", won: false}}},
		{name: "same creation time: the name decides", me: tenantAt("beta", t0, "shared"), others: []kubefairv1.Tenant{tenantAt("alpha", t0, "shared")},
			owned: nil, conflicts: []conflict{{namespace: "shared", other: "alpha", won: false}}},
		{name: "a selector's claim counts as much as a name", me: tenantAt("me", t1, "lab"), others: []kubefairv1.Tenant{selecting(tenantAt("labs", t0), matchLabels("team", "lab"))},
			owned: nil, conflicts: []conflict{{namespace: "lab", other: "labs", won: false}}},
		{name: "a tenant being deleted claims nothing", me: tenantAt("me", t1, "shared"), others: []kubefairv1.Tenant{deleting(tenantAt("old", t0, "shared"))},
			owned: []string{"shared"}},
		{name: "a rival with an unusable selector claims nothing", me: tenantAt("me", t1, "shared"), others: []kubefairv1.Tenant{selecting(tenantAt("old", t0, "shared"), bad)},
			owned: []string{"shared"}},
		{name: "won against one, lost to another", me: tenantAt("me", t1, "shared"),
			others: []kubefairv1.Tenant{tenantAt("young", t2, "shared"), tenantAt("old", t0, "shared")},
			owned:  nil, conflicts: []conflict{{namespace: "shared", other: "old", won: false}, {namespace: "shared", other: "young", won: true}}},
		{name: "conflicts sorted by namespace, then rival", me: tenantAt("me", t2, "shop", "shared", "web"),
			others: []kubefairv1.Tenant{tenantAt("y", t1, "shared"), tenantAt("x", t0, "shop", "shared")},
			owned:  []string{"web"}, conflicts: []conflict{{"shared", "x", false}, {"shared", "y", false}, {"shop", "x", false}}},
		{name: "its own unusable selector is an error", me: selecting(tenantAt("me", t0, "shop"), bad), wantErr: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			all := append([]kubefairv1.Tenant{tc.me}, tc.others...) // the list holds the tenant itself too
			got := resolveNamespaces(&tc.me, all, nss)
			if tc.wantErr {
				if got.err == nil || got.owned != nil || got.conflicts != nil {
					t.Fatalf("%+v: want only an error", got)
				}
				return
			}
			if got.err != nil || got.claimed != 0 {
				t.Fatalf("err %v, claimed %d", got.err, got.claimed)
			}
			if !reflect.DeepEqual(got.owned, tc.owned) {
				t.Errorf("owned %v, want %v", got.owned, tc.owned)
			}
			if !reflect.DeepEqual(got.conflicts, tc.conflicts) {
				t.Errorf("conflicts %+v, want %+v", got.conflicts, tc.conflicts)
			}
		})
	}
}

// TestAggregateReportsTable: the shares are the fresh reports' weighted by
// their nodes' CPUs; a report counts for three windows (at least 30 s);
// a stale report naming the tenant makes its node silent; a node that does
// not run the tenant neither counts nor dilutes; a final share is not
// counted; recheck is when the first counted report goes stale.
func TestAggregateReportsTable(t *testing.T) {
	tenant := &kubefairv1.Tenant{ObjectMeta: metav1.ObjectMeta{Name: "shop", UID: "uid-shop"}}
	windowed := func(r kubefairv1.NodeShareReport, w time.Duration) kubefairv1.NodeShareReport {
		r.Window.Duration = w
		return r
	}
	final := shopShare(0.5, 0.5)
	final.Final, final.LimitedShare = true, 0.2
	limited := shopShare(0.5, 0.3)
	limited.LimitedShare = 0.3
	bounded := shopShare(0.5, 0.2)
	bounded.Bound = kubefairv1.BoundCorrection
	exclusive := shopShare(0, 0)
	exclusive.ExclusiveCPUs = 2
	off := shopShare(0.5, 0.5)
	off.LatencyClassOff = true
	classless := nodeReport("old-kernel", 2, 5*time.Second, off)
	classless.Conditions = []metav1.Condition{{Type: kubefairv1.ConditionLatencyClasses, Status: metav1.ConditionFalse,
		Reason: kubefairv1.ReasonNoCustomSlices, Message: "shop (interactive): no custom slices"}}
	notMine := nodeReport("old-kernel", 2, 5*time.Second, shopShare(0.5, 0.5))
	notMine.Conditions = classless.Conditions
	classed := tenant.DeepCopy()
	classed.Status.LatencyClass = kubefairv1.LatencyClassInteractive
	unmeasured := nodeReport("blind", 4, time.Second)
	unmeasured.Unmeasured = []kubefairv1.UnmeasuredPods{{Tenant: "other", Pods: 1}, {Tenant: "shop", Pods: 2}}
	staleBlind := nodeReport("blind", 4, time.Minute)
	staleBlind.Unmeasured = []kubefairv1.UnmeasuredPods{{Tenant: "shop", Pods: 2}}
	type want struct {
		entitled, achieved          string
		nodes                       int32
		silent                      []string
		limited, bounded, blind     int
		exclusive                   string        // the message's part, "" for none
		unsliced                    string        // the message's part, "" for none
		recheckIn                   time.Duration // after tableNow
		noRecheck                   bool
		unmeasuredMessageContaining string
	}
	for _, tc := range []struct {
		name    string
		tenant  *kubefairv1.Tenant // tenant when nil
		reports []kubefairv1.NodeShareReport
		want    want
	}{
		{name: "no reports", want: want{noRecheck: true}},
		{name: "weighted by CPUs over two nodes", reports: []kubefairv1.NodeShareReport{
			nodeReport("n1", 2, 5*time.Second, shopShare(0.5, 0.4)), nodeReport("n2", 6, 2*time.Second, shopShare(0.1, 0.2))},
			want: want{entitled: "20.0%", achieved: "25.0%", nodes: 2, recheckIn: 25 * time.Second}},
		{name: "a node without the tenant does not dilute its shares", reports: []kubefairv1.NodeShareReport{
			nodeReport("n1", 2, 5*time.Second, shopShare(0.5, 0.4)), nodeReport("idle", 14, time.Second)},
			want: want{entitled: "50.0%", achieved: "40.0%", nodes: 1, recheckIn: 25 * time.Second}},
		{name: "a fresh report without the tenant asks for no recheck", reports: []kubefairv1.NodeShareReport{nodeReport("idle", 14, time.Second)},
			want: want{noRecheck: true}},
		{name: "a stale report is silent and not counted", reports: []kubefairv1.NodeShareReport{
			nodeReport("n1", 2, 5*time.Second, shopShare(0.5, 0.4)), nodeReport("n2", 6, 31*time.Second, shopShare(0.9, 0.9))},
			want: want{entitled: "50.0%", achieved: "40.0%", nodes: 1, silent: []string{"n2"}, recheckIn: 25 * time.Second}},
		{name: "a report exactly three windows old still counts", reports: []kubefairv1.NodeShareReport{
			nodeReport("n1", 2, 30*time.Second, shopShare(0.5, 0.4))},
			want: want{entitled: "50.0%", achieved: "40.0%", nodes: 1, recheckIn: 0}},
		{name: "a long window: three windows, not 30 s", reports: []kubefairv1.NodeShareReport{
			windowed(nodeReport("n1", 2, 45*time.Second, shopShare(0.5, 0.4)), 20*time.Second)},
			want: want{entitled: "50.0%", achieved: "40.0%", nodes: 1, recheckIn: 15 * time.Second}},
		{name: "a short window: at least 30 s", reports: []kubefairv1.NodeShareReport{
			windowed(nodeReport("n1", 2, 20*time.Second, shopShare(0.5, 0.4)), time.Second)},
			want: want{entitled: "50.0%", achieved: "40.0%", nodes: 1, recheckIn: 10 * time.Second}},
		{name: "every node silent, sorted, no shares", reports: []kubefairv1.NodeShareReport{
			nodeReport("n2", 2, time.Minute, shopShare(0.5, 0.4)), nodeReport("n1", 2, time.Hour, shopShare(0.5, 0.4))},
			want: want{silent: []string{"n1", "n2"}, noRecheck: true}},
		{name: "a stale report without the tenant is not silent", reports: []kubefairv1.NodeShareReport{
			nodeReport("n1", 2, 5*time.Second, shopShare(0.5, 0.4)), nodeReport("n2", 2, time.Minute)},
			want: want{entitled: "50.0%", achieved: "40.0%", nodes: 1, recheckIn: 25 * time.Second}},
		{name: "a final share neither counts nor is limited", reports: []kubefairv1.NodeShareReport{nodeReport("n1", 2, 5*time.Second, final)},
			want: want{recheckIn: 25 * time.Second}},
		{name: "limited and bounded per node", reports: []kubefairv1.NodeShareReport{
			nodeReport("n1", 2, 5*time.Second, limited), nodeReport("n2", 2, 5*time.Second, bounded)},
			want: want{entitled: "50.0%", achieved: "25.0%", nodes: 2, limited: 1, bounded: 1, recheckIn: 25 * time.Second}},
		{name: "exclusive CPUs on one node, shares from the other", reports: []kubefairv1.NodeShareReport{
			nodeReport("n1", 2, 5*time.Second, shopShare(0.5, 0.4)), nodeReport("pinned", 2, 5*time.Second, exclusive)},
			want: want{entitled: "25.0%", achieved: "20.0%", nodes: 2, recheckIn: 25 * time.Second,
				exclusive: "on node pinned kubelet's static CPU manager gives its pods 2 CPU(s) of their own"}},
		{name: "unmeasured pods without a node condition", reports: []kubefairv1.NodeShareReport{unmeasured},
			want: want{blind: 1, recheckIn: 29 * time.Second,
				unmeasuredMessageContaining: "node blind runs 2 pod(s) of this tenant that are neither enforced nor measured (its agent cannot find their cgroups)"}},
		{name: "a stale report's unmeasured pods are forgotten", reports: []kubefairv1.NodeShareReport{staleBlind}, want: want{noRecheck: true}},
		{name: "a latency class a node does not apply", tenant: classed, reports: []kubefairv1.NodeShareReport{classless},
			want: want{entitled: "50.0%", achieved: "50.0%", nodes: 1, recheckIn: 25 * time.Second,
				unsliced: "on node old-kernel its latency class interactive is not applied (NoCustomSlices: shop (interactive): no custom slices)"}},
		{name: "a tenant the node does not mark is not concerned", tenant: classed, reports: []kubefairv1.NodeShareReport{notMine},
			want: want{entitled: "50.0%", achieved: "50.0%", nodes: 1, recheckIn: 25 * time.Second}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tn := tenant
			if tc.tenant != nil {
				tn = tc.tenant
			}
			got := aggregateReports(tn, tc.reports, tableNow)
			w := tc.want
			if got.entitled != w.entitled || got.achieved != w.achieved || got.reportingNodes != w.nodes {
				t.Errorf("entitled %q, achieved %q over %d node(s); want %q, %q over %d", got.entitled, got.achieved, got.reportingNodes, w.entitled, w.achieved, w.nodes)
			}
			if !reflect.DeepEqual(got.silent, w.silent) {
				t.Errorf("silent %v, want %v", got.silent, w.silent)
			}
			if len(got.limited) != w.limited || len(got.bounded) != w.bounded || len(got.unmeasured) != w.blind {
				t.Errorf("limited %q, bounded %q, unmeasured %q; want %d, %d, %d", got.limited, got.bounded, got.unmeasured, w.limited, w.bounded, w.blind)
			}
			if (w.exclusive == "") != (len(got.exclusive) == 0) || (w.exclusive != "" && !strings.Contains(got.exclusive[0], w.exclusive)) {
				t.Errorf("exclusive %q, want %q", got.exclusive, w.exclusive)
			}
			if (w.unsliced == "") != (len(got.unsliced) == 0) || (w.unsliced != "" && got.unsliced[0] != w.unsliced) {
				t.Errorf("unsliced %q, want %q", got.unsliced, w.unsliced)
			}
			if w.unmeasuredMessageContaining != "" && (len(got.unmeasured) == 0 || !strings.Contains(got.unmeasured[0], w.unmeasuredMessageContaining)) {
				t.Errorf("unmeasured %q, want one containing %q", got.unmeasured, w.unmeasuredMessageContaining)
			}
			switch {
			case w.noRecheck && !got.recheck.IsZero():
				t.Errorf("recheck at %s, want none", got.recheck)
			case !w.noRecheck && !got.recheck.Equal(tableNow.Add(w.recheckIn)):
				t.Errorf("recheck at %s, want %s", got.recheck, tableNow.Add(w.recheckIn))
			}
		})
	}
}

// TestFindShareAndUnmeasuredTable: a report's share is found by the
// tenant's UID, its unmeasured pods by the tenant's name.
func TestFindShareAndUnmeasuredTable(t *testing.T) {
	r := nodeReport("n1", 2, 0,
		kubefairv1.TenantShare{Name: "shop", UID: "uid-old", EntitledShare: 0.1},
		kubefairv1.TenantShare{Name: "web", UID: "uid-web", EntitledShare: 0.2},
		kubefairv1.TenantShare{Name: "shop", UID: "uid-shop", EntitledShare: 0.3})
	r.Unmeasured = []kubefairv1.UnmeasuredPods{{Tenant: "web", Pods: 4}, {Tenant: "shop", Pods: 2}}
	for _, tc := range []struct {
		name       string
		tenant     string
		uid        types.UID
		shareIndex int // into r.Tenants; -1 for none
		unmeasured int32
	}{
		{name: "by UID, not the predecessor of the same name", tenant: "shop", uid: "uid-shop", shareIndex: 2, unmeasured: 2},
		{name: "another tenant", tenant: "web", uid: "uid-web", shareIndex: 1, unmeasured: 4},
		{name: "a UID the report does not name", tenant: "shop", uid: "uid-newest", shareIndex: -1, unmeasured: 2},
		{name: "a tenant the report does not name at all", tenant: "db", uid: "uid-db", shareIndex: -1, unmeasured: 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tn := &kubefairv1.Tenant{ObjectMeta: metav1.ObjectMeta{Name: tc.tenant, UID: tc.uid}}
			got := findShare(&r, tn)
			switch {
			case tc.shareIndex < 0 && got != nil:
				t.Errorf("share %+v, want none", *got)
			case tc.shareIndex >= 0 && got != &r.Tenants[tc.shareIndex]:
				t.Errorf("share %+v, want the report's entry %d", got, tc.shareIndex)
			}
			if n := findUnmeasured(&r, tc.tenant); n != tc.unmeasured {
				t.Errorf("unmeasured %d, want %d", n, tc.unmeasured)
			}
		})
	}
}

// TestSetConditionsTable: which reason each condition takes for each state
// of the phases, and which wins when several apply. Every condition carries
// the generation and, set for the first time, the time of the reconcile.
func TestSetConditionsTable(t *testing.T) {
	gold := &kubefairv1.PricingTier{ObjectMeta: metav1.ObjectMeta{Name: "gold"},
		Spec: kubefairv1.PricingTierSpec{Weight: 3, PricePerCPUHour: "1", Currency: "EUR"}}
	onGold := &kubefairv1.Tenant{ObjectMeta: metav1.ObjectMeta{Name: "shop"}, Spec: kubefairv1.TenantSpec{Tier: "gold"},
		Status: kubefairv1.TenantStatus{EffectiveWeight: 3, Currency: "EUR"}}
	broken := gold.DeepCopy()
	broken.Spec.PricePerCPUHour = "cheap"
	tierFound := resolveTier(onGold, gold)
	tierMissing := resolveTier(onGold, nil)
	tierUnusable := resolveTier(onGold, broken)
	direct := resolveTier(&kubefairv1.Tenant{Spec: kubefairv1.TenantSpec{Weight: ptr.To[int32](2)}}, nil)

	owned := namespaceResult{owned: []string{"shop", "shop-dev"}}
	lostOne := namespaceResult{owned: []string{"shop"}, conflicts: []conflict{{namespace: "shared", other: "old", won: false}}}
	lostAll := namespaceResult{conflicts: []conflict{{namespace: "shared", other: "old", won: false}}}
	badSelector := namespaceResult{err: errors.New("bad operator")}
	tooMany := namespaceResult{owned: []string{"shop"}, claimed: maxTenantNamespaces + 1}

	reporting := usageResult{reportingNodes: 2}
	overlap := []workloadOverlap{{first: "a", second: "b", wider: "a", identical: true}}
	deadline := tableNow.Add(finalUsageTimeout)

	// want: "Status/Reason" of each condition type.
	type want map[string]string
	all := func(ready, tierResolved, enforced, degraded, billed string) want {
		return want{kubefairv1.ConditionReady: ready, kubefairv1.ConditionTierResolved: tierResolved, kubefairv1.ConditionEnforced: enforced,
			kubefairv1.ConditionDegraded: degraded, kubefairv1.ConditionBilled: billed}
	}
	for _, tc := range []struct {
		name     string
		tier     tierResult
		ns       namespaceResult
		usage    usageResult
		bill     billingResult
		overlaps []workloadOverlap
		want     want
		messages map[string]string // condition type: part of its message
	}{
		{name: "all good", tier: tierFound, ns: owned, usage: reporting,
			want:     all("True/Resolved", "True/TierFound", "True/Reported", "False/AsExpected", "True/Accruing"),
			messages: map[string]string{kubefairv1.ConditionReady: "weight 3 over 2 namespace(s)", kubefairv1.ConditionEnforced: "2 node(s) report enforcing this tenant"}},
		{name: "spec.weight: billed at price 0", tier: direct, ns: owned, usage: reporting,
			want: all("True/Resolved", "True/DirectWeight", "True/Reported", "False/AsExpected", "True/Accruing")},
		{name: "tier missing", tier: tierMissing, ns: owned, usage: reporting,
			want:     all("False/TierNotFound", "False/TierNotFound", "True/Reported", "True/TierNotFound", "False/PriceUnknown"),
			messages: map[string]string{kubefairv1.ConditionBilled: `the price is unknown: PricingTier "gold" does not exist`}},
		{name: "tier price unusable", tier: tierUnusable, ns: owned, usage: reporting,
			want: all("False/TierNotFound", "False/TierNotFound", "True/Reported", "True/TierNotFound", "False/PriceUnknown")},
		{name: "lost one namespace, kept another: still ready", tier: tierFound, ns: lostOne, usage: reporting,
			want:     all("True/Resolved", "True/TierFound", "True/Reported", "True/NamespaceConflict", "True/Accruing"),
			messages: map[string]string{kubefairv1.ConditionDegraded: `namespace "shared" is also claimed by tenant "old"; tenant "old" keeps it (created first)`}},
		{name: "lost its only namespace", tier: tierFound, ns: lostAll,
			want: all("False/NamespaceConflict", "True/TierFound", "False/AwaitingReports", "True/NamespaceConflict", "True/Accruing")},
		{name: "no namespaces", tier: tierFound, ns: namespaceResult{},
			want: all("False/NoNamespaces", "True/TierFound", "False/AwaitingReports", "True/NoNamespaces", "True/Accruing")},
		{name: "an unusable selector", tier: tierFound, ns: badSelector,
			want:     all("False/InvalidSelector", "True/TierFound", "False/AwaitingReports", "True/InvalidSelector", "True/Accruing"),
			messages: map[string]string{kubefairv1.ConditionReady: "spec.namespaceSelector cannot be used: bad operator"}},
		{name: "a missing tier, and a conflict it lost: Ready names the tier", tier: tierMissing, ns: lostOne, usage: reporting,
			want:     all("False/TierNotFound", "False/TierNotFound", "True/Reported", "True/NamespaceConflict", "False/PriceUnknown"),
			messages: map[string]string{kubefairv1.ConditionReady: `PricingTier "gold" does not exist`}},
		{name: "an unusable selector before a missing tier", tier: tierMissing, ns: badSelector,
			want: all("False/InvalidSelector", "False/TierNotFound", "False/AwaitingReports", "True/InvalidSelector", "False/PriceUnknown")},
		{name: "a missing tier before no namespaces", tier: tierMissing, ns: namespaceResult{},
			want: all("False/TierNotFound", "False/TierNotFound", "False/AwaitingReports", "True/TierNotFound", "False/PriceUnknown")},
		{name: "too many namespaces: still ready", tier: tierFound, ns: tooMany, usage: reporting, overlaps: overlap,
			want: all("True/Resolved", "True/TierFound", "True/Reported", "True/TooManyNamespaces", "True/Accruing")},
		{name: "no report yet", tier: tierFound, ns: owned,
			want:     all("True/Resolved", "True/TierFound", "False/AwaitingReports", "False/AsExpected", "True/Accruing"),
			messages: map[string]string{kubefairv1.ConditionEnforced: "no node agent reports this tenant yet"}},
		{name: "reporting nodes beside silent ones", tier: tierFound, ns: owned, usage: usageResult{reportingNodes: 1, silent: []string{"n2", "n3"}},
			want:     all("True/Resolved", "True/TierFound", "True/Reported", "False/AsExpected", "True/Accruing"),
			messages: map[string]string{kubefairv1.ConditionEnforced: "1 node(s) report enforcing this tenant; 2 stopped reporting (n2, n3)"}},
		{name: "unmeasured pods behind a namespace conflict", tier: tierFound, ns: lostOne, usage: usageResult{unmeasured: []string{"node n1 runs 1 pod(s)"}},
			want: all("True/Resolved", "True/TierFound", "False/PodsUnmeasured", "True/NamespaceConflict", "True/Accruing")},
		{name: "several nodes unmeasured", tier: tierFound, ns: owned, usage: usageResult{reportingNodes: 1, unmeasured: []string{"node a", "node b", "node c"}},
			want:     all("True/Resolved", "True/TierFound", "True/Reported", "True/PodsUnmeasured", "True/Accruing"),
			messages: map[string]string{kubefairv1.ConditionDegraded: "node a; and 2 more node(s)"}},
		{name: "exclusive CPUs before a weight bound", tier: tierFound, ns: owned, usage: usageResult{reportingNodes: 1, exclusive: []string{"on node n1 …"}, bounded: []string{"on node n1 …"}},
			want: all("True/Resolved", "True/TierFound", "True/Reported", "True/ExclusiveCPUs", "True/Accruing")},
		{name: "weight bound before a workload overlap", tier: tierFound, ns: owned, usage: usageResult{reportingNodes: 1, bounded: []string{"on node n1 …"}},
			overlaps: overlap,
			want:     all("True/Resolved", "True/TierFound", "True/Reported", "True/WeightBound", "True/Accruing")},
		{name: "a weight bound before a latency class not applied", tier: tierFound, ns: owned, usage: usageResult{reportingNodes: 1, bounded: []string{"on node n1 …"}, unsliced: []string{"on node n1 …"}},
			want: all("True/Resolved", "True/TierFound", "True/Reported", "True/WeightBound", "True/Accruing")},
		{name: "a latency class not applied before a workload overlap", tier: tierFound, ns: owned, usage: usageResult{reportingNodes: 1, unsliced: []string{"on node n1 its latency class interactive is not applied"}},
			overlaps: overlap,
			want:     all("True/Resolved", "True/TierFound", "True/Reported", "True/LatencyClassNotApplied", "True/Accruing"),
			messages: map[string]string{kubefairv1.ConditionDegraded: "its latency class interactive is not applied"}},
		{name: "a latency class not applied before a request elevation not applied", tier: tierFound, ns: owned, usage: usageResult{reportingNodes: 1, unsliced: []string{"on node n1 …"}, unelevated: []string{"on node n1 …"}},
			want: all("True/Resolved", "True/TierFound", "True/Reported", "True/LatencyClassNotApplied", "True/Accruing")},
		{name: "a request elevation not applied before a workload overlap", tier: tierFound, ns: owned, usage: usageResult{reportingNodes: 1, unelevated: []string{"on node n1 its request-based elevation is not applied (RequestElevationOff: …)"}},
			overlaps: overlap,
			want:     all("True/Resolved", "True/TierFound", "True/Reported", "True/RequestElevationNotApplied", "True/Accruing"),
			messages: map[string]string{kubefairv1.ConditionDegraded: "its request-based elevation is not applied"}},
		{name: "a refused report: billing only", tier: tierFound, ns: owned, usage: reporting,
			bill:     billingResult{refused: []string{"node n1's last report was refused for this tenant: NoPodsOnNode: none"}},
			want:     all("True/Resolved", "True/TierFound", "True/Reported", "False/AsExpected", "False/ReportRefused"),
			messages: map[string]string{kubefairv1.ConditionBilled: "node n1's last report was refused"}},
		{name: "an unknown price before a refusal", tier: tierMissing, ns: owned, usage: reporting, bill: billingResult{refused: []string{"node n1"}},
			want: all("False/TierNotFound", "False/TierNotFound", "True/Reported", "True/TierNotFound", "False/PriceUnknown")},
		{name: "awaiting final usage before an unknown price", tier: tierMissing, ns: namespaceResult{},
			bill:     billingResult{awaiting: []string{"n1", "n2"}, finalDeadline: deadline},
			want:     all("False/TierNotFound", "False/TierNotFound", "False/AwaitingReports", "True/TierNotFound", "False/AwaitingFinalUsage"),
			messages: map[string]string{kubefairv1.ConditionBilled: "deleted; waiting until 2026-03-04T12:10:00Z for the final counters of node(s) n1, n2 to be recorded and billed"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := &kubefairv1.TenantStatus{}
			setConditions(st, 7, tc.tier, tc.ns, tc.usage, tc.bill, tc.overlaps, metav1.NewTime(tableNow))
			if len(st.Conditions) != len(tc.want) {
				t.Errorf("%d conditions, want %d", len(st.Conditions), len(tc.want))
			}
			for typ, w := range tc.want {
				c := meta.FindStatusCondition(st.Conditions, typ)
				if c == nil {
					t.Errorf("no %s condition", typ)
					continue
				}
				if got := string(c.Status) + "/" + c.Reason; got != w {
					t.Errorf("%s = %s (%q), want %s", typ, got, c.Message, w)
				}
				if c.ObservedGeneration != 7 || !c.LastTransitionTime.Time.Equal(tableNow) {
					t.Errorf("%s: observedGeneration %d, lastTransitionTime %s; want 7, %s", typ, c.ObservedGeneration, c.LastTransitionTime, tableNow)
				}
				if part := tc.messages[typ]; !strings.Contains(c.Message, part) {
					t.Errorf("%s message %q, want it to contain %q", typ, c.Message, part)
				}
			}
		})
	}
}

// TestSetConditionsKeepsTransitionTimes: a second reconcile moves every
// condition to the new generation, but only a condition whose status
// changed gets the new transition time.
func TestSetConditionsKeepsTransitionTimes(t *testing.T) {
	t0, t1 := metav1.NewTime(tableNow), metav1.NewTime(tableNow.Add(time.Minute))
	gold := &kubefairv1.PricingTier{ObjectMeta: metav1.ObjectMeta{Name: "gold"}, Spec: kubefairv1.PricingTierSpec{Weight: 3, PricePerCPUHour: "1", Currency: "EUR"}}
	onGold := &kubefairv1.Tenant{ObjectMeta: metav1.ObjectMeta{Name: "shop"}, Spec: kubefairv1.TenantSpec{Tier: "gold"}}
	owned := namespaceResult{owned: []string{"shop"}}
	reporting := usageResult{reportingNodes: 1}
	for _, tc := range []struct {
		name    string
		tier    *kubefairv1.PricingTier // on the second reconcile
		usage   usageResult             // on the second reconcile
		changed []string                // condition types whose transition time is t1
	}{
		{name: "nothing changed", tier: gold, usage: reporting},
		{name: "the tier went missing", tier: nil, usage: reporting,
			changed: []string{kubefairv1.ConditionReady, kubefairv1.ConditionTierResolved, kubefairv1.ConditionDegraded, kubefairv1.ConditionBilled}},
		{name: "the nodes stopped reporting", tier: gold, usage: usageResult{silent: []string{"n1"}}, changed: []string{kubefairv1.ConditionEnforced}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := &kubefairv1.TenantStatus{}
			setConditions(st, 1, resolveTier(onGold, gold), owned, reporting, billingResult{}, nil, t0)
			setConditions(st, 2, resolveTier(onGold, tc.tier), owned, tc.usage, billingResult{}, nil, t1)
			if len(st.Conditions) != 5 {
				t.Fatalf("%d conditions, want 5", len(st.Conditions))
			}
			for _, c := range st.Conditions {
				want := t0
				for _, typ := range tc.changed {
					if c.Type == typ {
						want = t1
					}
				}
				if !c.LastTransitionTime.Equal(&want) || c.ObservedGeneration != 2 {
					t.Errorf("%s=%s/%s: transition %s, generation %d; want %s, 2", c.Type, c.Status, c.Reason, c.LastTransitionTime, c.ObservedGeneration, want)
				}
			}
		})
	}
}

// TestBillingOfTable: the status's period is the UTC day; CPU-seconds and
// name come from the day's bill, the cost in the tier's currency (none when
// the bill has no cost in it); refusals of this tenant's UID in the nodes'
// last reports are collected, sorted; a tenant not being deleted waits for
// nothing.
func TestBillingOfTable(t *testing.T) {
	shop := &kubefairv1.Tenant{ObjectMeta: metav1.ObjectMeta{Name: "shop", UID: "uid-shop"}}
	bill := &kubefairv1.TenantBill{ObjectMeta: metav1.ObjectMeta{Name: "shop.2026-03-04.uid-shop"}, CPUSeconds: "12.500000000",
		Costs: []kubefairv1.Amount{{Currency: "EUR", Amount: "0.012500"}, {Currency: "USD", Amount: "0.025000"}}}
	refusedOn := func(node string, refused ...kubefairv1.RefusedTenant) kubefairv1.UsageRecord {
		return kubefairv1.UsageRecord{Node: node, LastReport: &kubefairv1.ReportOutcome{Refused: refused},
			Cursor: kubefairv1.LedgerCursor{Through: &metav1.Time{Time: tableNow}, Tenants: []kubefairv1.TenantCounter{{UID: "uid-shop"}}}}
	}
	noPods := kubefairv1.RefusedTenant{UID: "uid-shop", Tenant: "shop", Reason: kubefairv1.ReasonNoPodsOnNode, Message: "no pod in the window"}
	stale := kubefairv1.RefusedTenant{UID: "uid-shop", Tenant: "shop", Reason: kubefairv1.ReasonStaleReport, Message: "already counted"}
	other := kubefairv1.RefusedTenant{UID: "uid-other", Tenant: "shop", Reason: kubefairv1.ReasonUnknownTenant, Message: "a predecessor"}
	for _, tc := range []struct {
		name                            string
		now                             time.Time
		currency                        string
		bill                            *kubefairv1.TenantBill
		open                            []kubefairv1.UsageRecord
		period, billName, seconds, cost string
		refused                         []string
	}{
		{name: "no bill yet", now: tableNow, currency: "EUR",
			period: "2026-03-04", seconds: "0.000000000", cost: "0.000000"},
		{name: "the bill's cost in the tier's currency", now: tableNow, currency: "USD", bill: bill,
			period: "2026-03-04", billName: "shop.2026-03-04.uid-shop", seconds: "12.500000000", cost: "0.025000"},
		{name: "a bill without the tier's currency costs nothing shown", now: tableNow, currency: "GBP", bill: bill,
			period: "2026-03-04", billName: "shop.2026-03-04.uid-shop", seconds: "12.500000000", cost: "0.000000"},
		{name: "unpriced (spec.weight): no currency", now: tableNow, currency: "", bill: bill,
			period: "2026-03-04", billName: "shop.2026-03-04.uid-shop", seconds: "12.500000000", cost: "0.000000"},
		{name: "the period is the UTC day", now: time.Date(2026, 3, 5, 1, 0, 0, 0, time.FixedZone("EET", 2*3600)), currency: "EUR",
			period: "2026-03-04", seconds: "0.000000000", cost: "0.000000"},
		{name: "this tenant's refusals, sorted by node", now: tableNow, currency: "EUR", open: []kubefairv1.UsageRecord{
			refusedOn("n2", noPods), refusedOn("n3", other), {Node: "n4"}, refusedOn("n1", other, stale)},
			period: "2026-03-04", seconds: "0.000000000", cost: "0.000000", refused: []string{
				"node n1's last report was refused for this tenant: StaleReport: already counted",
				"node n2's last report was refused for this tenant: NoPodsOnNode: no pod in the window"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := billingOf(shop, tc.currency, tc.bill, tc.open, tc.now)
			if got.period != tc.period || got.bill != tc.billName || got.cpuSeconds != tc.seconds || got.cost != tc.cost {
				t.Errorf("period %q, bill %q, %s CPU-seconds, cost %s; want %q, %q, %s, %s", got.period, got.bill, got.cpuSeconds, got.cost,
					tc.period, tc.billName, tc.seconds, tc.cost)
			}
			if !reflect.DeepEqual(got.refused, tc.refused) {
				t.Errorf("refused %q, want %q", got.refused, tc.refused)
			}
			if got.awaiting != nil || !got.finalDeadline.IsZero() {
				t.Errorf("awaiting %v until %s: a tenant not being deleted waits for nothing", got.awaiting, got.finalDeadline)
			}
		})
	}
}

// TestParsePercentTable: the status's percentages read back as shares,
// and anything else is not a share.
func TestParsePercentTable(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want float64
		ok   bool
	}{
		{"33.3%", 0.333, true},
		{"100.0%", 1, true},
		{"0.0%", 0, true},
		{"7%", 0.07, true},
		{"", 0, false},
		{"%", 0, false},
		{"33.3", 0, false},
		{"abc%", 0, false},
		{"40.0%%", 0, false},
		{" 40.0%", 0, false},
	} {
		t.Run(tc.in, func(t *testing.T) {
			got, ok := parsePercent(tc.in)
			if ok != tc.ok || math.Abs(got-tc.want) > 1e-12 {
				t.Errorf("parsePercent(%q) = %v, %t; want %v, %t", tc.in, got, ok, tc.want, tc.ok)
			}
		})
	}
	for _, share := range []float64{0, 0.25, 0.3126, 0.999, 1} { // what percent writes, to its 0.1 point
		if got, ok := parsePercent(percent(share)); !ok || math.Abs(got-share) > 0.0005+1e-12 {
			t.Errorf("parsePercent(percent(%v)) = %v, %t", share, got, ok)
		}
	}
}

// TestNextPeriodTable: a period is a UTC day; the next one starts at the
// next UTC midnight, whatever the location of now.
func TestNextPeriodTable(t *testing.T) {
	eet := time.FixedZone("EET", 2*3600)
	pst := time.FixedZone("PST", -8*3600)
	for _, tc := range []struct {
		name string
		now  time.Time
		want time.Time
	}{
		{"midday", tableNow, time.Date(2026, 3, 5, 0, 0, 0, 0, time.UTC)},
		{"midnight starts a period", time.Date(2026, 3, 4, 0, 0, 0, 0, time.UTC), time.Date(2026, 3, 5, 0, 0, 0, 0, time.UTC)},
		{"a nanosecond before midnight", time.Date(2026, 3, 4, 23, 59, 59, 999999999, time.UTC), time.Date(2026, 3, 5, 0, 0, 0, 0, time.UTC)},
		{"east of UTC, already tomorrow locally", time.Date(2026, 3, 5, 1, 0, 0, 0, eet), time.Date(2026, 3, 5, 0, 0, 0, 0, time.UTC)},
		{"west of UTC, still yesterday locally", time.Date(2026, 3, 3, 20, 0, 0, 0, pst), time.Date(2026, 3, 5, 0, 0, 0, 0, time.UTC)},
		{"end of February in a leap year", time.Date(2028, 2, 28, 12, 0, 0, 0, time.UTC), time.Date(2028, 2, 29, 0, 0, 0, 0, time.UTC)},
		{"end of the year", time.Date(2026, 12, 31, 18, 0, 0, 0, time.UTC), time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := nextPeriod(tc.now)
			if !got.Equal(tc.want) || got.Location() != time.UTC {
				t.Errorf("nextPeriod(%s) = %s, want %s", tc.now, got, tc.want)
			}
		})
	}
}
