package controller

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kubefairv1 "github.com/kubefair/kubefair/api/v1alpha1"
)

// TestOversizedObjectsAreRefused: objects past the bounds of every
// user-written CRD — too many items, too long a string, a body past the
// API server's request limit — are refused, each with a message that names
// what is too big; nothing of them is stored. (Malformed values, one field
// at a time, are TestAPIServerRefusesBadObjects'; reports with absurd
// figures — more CPU than the node has, counters going back, from the
// future — TestExactlyOnceThroughFaults'; another node's report, the
// tenancy labels and the metrics are the chart suite's.)
func TestOversizedObjectsAreRefused(t *testing.T) {
	tenant := func(mut func(*kubefairv1.TenantSpec)) client.Object {
		s := kubefairv1.TenantSpec{Weight: ptr.To[int32](100), Namespaces: []string{"team-a"}}
		mut(&s)
		return &kubefairv1.Tenant{ObjectMeta: metav1.ObjectMeta{Name: "huge-tenant"}, Spec: s}
	}
	report := func(mut func(*kubefairv1.NodeShareReport)) client.Object {
		r := &kubefairv1.NodeShareReport{ObjectMeta: metav1.ObjectMeta{Name: "huge-node"},
			Backend: kubefairv1.BackendCgroup, CPUs: 2, BootID: "b", ObservedTime: metav1.Now()}
		mut(r)
		return r
	}
	shares := func(n, nameLen int) []kubefairv1.TenantShare {
		out := make([]kubefairv1.TenantShare, n)
		for i := range out {
			name := fmt.Sprintf("t%d-", i)
			name += strings.Repeat("x", nameLen-len(name))
			out[i] = kubefairv1.TenantShare{Name: name, UID: fmt.Sprintf("uid-%d", i), CPUNanoseconds: 1}
		}
		return out
	}
	labels := map[string]kubefairv1.LabelValue{}
	for i := range 33 {
		labels[fmt.Sprintf("k%d", i)] = "v"
	}
	workloads := make([]kubefairv1.Workload, 65)
	for i := range workloads {
		workloads[i] = kubefairv1.Workload{Name: fmt.Sprintf("w%d", i), Weight: 1,
			PodSelector: kubefairv1.LabelSelector{MatchLabels: map[string]kubefairv1.LabelValue{"app": kubefairv1.LabelValue(fmt.Sprintf("w%d", i))}}}
	}

	for _, tc := range []struct {
		name string
		obj  client.Object
		want string // part of the API server's message
	}{
		{"tenant naming 257 namespaces", tenant(func(s *kubefairv1.TenantSpec) {
			s.Namespaces = nil
			for i := range 257 {
				s.Namespaces = append(s.Namespaces, fmt.Sprintf("ns-%d", i))
			}
		}), "spec.namespaces: Too many: 257: must have at most 256 items"},
		{"tenant with 65 workloads", tenant(func(s *kubefairv1.TenantSpec) { s.Workloads = workloads }), "spec.workloads: Too many: 65: must have at most 64 items"},
		{"tenant selector with 33 match labels", tenant(func(s *kubefairv1.TenantSpec) {
			s.NamespaceSelector = &kubefairv1.LabelSelector{MatchLabels: labels}
		}), "spec.namespaceSelector.matchLabels: Too many: 33: must have at most 32 items"},
		{"tenant selector In with 65 values", tenant(func(s *kubefairv1.TenantSpec) {
			values := make([]kubefairv1.LabelValue, 65)
			for i := range values {
				values[i] = kubefairv1.LabelValue(fmt.Sprintf("v%d", i))
			}
			s.NamespaceSelector = &kubefairv1.LabelSelector{MatchExpressions: []kubefairv1.LabelSelectorRequirement{{Key: "team", Operator: metav1.LabelSelectorOpIn, Values: values}}}
		}), "values: Too many: 65: must have at most 64 items"},
		{"tenant with a 254-character tier name", &kubefairv1.Tenant{ObjectMeta: metav1.ObjectMeta{Name: "huge-tenant"},
			Spec: kubefairv1.TenantSpec{Tier: strings.Repeat("t", 254), Namespaces: []string{"team-a"}}}, "spec.tier: Too long: may not be more than 253"},
		{"tier with a 12-character latency class", &kubefairv1.PricingTier{ObjectMeta: metav1.ObjectMeta{Name: "huge-tier"},
			Spec: kubefairv1.PricingTierSpec{Weight: 1, PricePerCPUHour: "1", Currency: "EUR", LatencyClass: "interactives"}}, "spec.latencyClass"},
		{"tier with a 14-character price", &kubefairv1.PricingTier{ObjectMeta: metav1.ObjectMeta{Name: "huge-tier"},
			Spec: kubefairv1.PricingTierSpec{Weight: 1, PricePerCPUHour: "1.000000000000", Currency: "EUR"}}, "pricePerCPUHour"},
		{"report with a 65-character boot ID", report(func(r *kubefairv1.NodeShareReport) { r.BootID = strings.Repeat("b", 65) }), "bootID: Too long: may not be more than 64"},
		{"report naming 10001 tenants", report(func(r *kubefairv1.NodeShareReport) { r.Tenants = shares(10001, 8) }), "tenants: Too many: 10001: must have at most 10000 items"},
		{"report with a 254-character tenant name", report(func(r *kubefairv1.NodeShareReport) { r.Tenants = shares(1, 254) }), "name: Too long: may not be more than 253"},
		{"report of 10000 tenants with 253-character names (past the API server's request limit)", report(func(r *kubefairv1.NodeShareReport) {
			r.Tenants = shares(10000, 253)
		}), "too large"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := k8s.Create(ctx(), tc.obj)
			if err == nil {
				_ = k8s.Delete(ctx(), tc.obj)
				t.Fatalf("the API server accepted it")
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("refused with %q\nwant a message containing %q", err, tc.want)
			}
			t.Logf("refused: %v", err)
			got := tc.obj.DeepCopyObject().(client.Object)
			if err := k8s.Get(ctx(), client.ObjectKeyFromObject(tc.obj), got); !apierrors.IsNotFound(err) {
				t.Fatalf("after the refusal: %v, want not found", err)
			}
		})
	}
}

// TestLabelStorm: namespace labels flipped between two tenants' selectors
// hundreds of times while a node reports both tenants: the controller
// keeps running, each tenant ends up owning exactly the namespaces the
// last labels give it, and its bills hold exactly the CPU the node counted
// for it — no window twice, none lost, every report accepted.
func TestLabelStorm(t *testing.T) {
	startManager(t)
	const storm = 16
	teams := []string{"a", "b", ""}
	var namespaces []client.Object
	for i := range storm {
		namespaces = append(namespaces, namespace(fmt.Sprintf("storm-%d", i), map[string]string{"storm-team": teams[i%2]}))
	}
	create(t, namespaces...)
	create(t, namespace("storm-home-a", nil), namespace("storm-home-b", nil), tier("storm-tier", 100, "3.6"))
	for _, team := range []string{"a", "b"} {
		create(t, &kubefairv1.Tenant{ObjectMeta: metav1.ObjectMeta{Name: "storm-" + team}, Spec: kubefairv1.TenantSpec{
			Tier: "storm-tier", Namespaces: []string{"storm-home-" + team},
			NamespaceSelector: &kubefairv1.LabelSelector{MatchLabels: map[string]kubefairv1.LabelValue{"storm-team": kubefairv1.LabelValue(team)}}}})
	}
	a, b := getTenant(t, "storm-a"), getTenant(t, "storm-b")
	base := yesterdayNoon()
	node := newNode(t, "storm-n1", 4, base.Add(-20*time.Second))
	podOn(t, "storm-home-a", "p", "storm-n1")
	podOn(t, "storm-home-b", "p", "storm-n1")

	// The storm: random namespaces relabeled to a, b or neither, as fast
	// as the API server takes it, for ten seconds.
	final := map[string]string{}
	for i := range storm {
		final[fmt.Sprintf("storm-%d", i)] = teams[i%2]
	}
	var mu sync.Mutex
	var flips atomic.Int64
	done := make(chan struct{})
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), 29))
			for {
				select {
				case <-done:
					return
				default:
				}
				name := fmt.Sprintf("storm-%d", rng.IntN(storm))
				team := teams[rng.IntN(len(teams))]
				mu.Lock() // one writer per namespace at a time, so final is what the API server holds
				var ns corev1.Namespace
				err := k8s.Get(ctx(), client.ObjectKey{Name: name}, &ns)
				if err == nil {
					if team == "" {
						delete(ns.Labels, "storm-team")
					} else {
						ns.Labels["storm-team"] = team
					}
					if err = k8s.Update(ctx(), &ns); err == nil {
						final[name] = team
						flips.Add(1)
					}
				}
				mu.Unlock()
				if err != nil && !apierrors.IsConflict(err) {
					t.Errorf("relabeling %s: %v", name, err)
					return
				}
			}
		}()
	}
	// Meanwhile the node reports both tenants every half second.
	var want int64
	start := time.Now()
	for i := 0; time.Since(start) < 10*time.Second; i++ {
		node.use(a, second)
		node.use(b, 2*second)
		want++
		node.write(base.Add(time.Duration(i) * 10 * time.Second))
		time.Sleep(500 * time.Millisecond)
	}
	close(done)
	wg.Wait()
	t.Logf("%d relabelings of %d namespaces while the node wrote %d reports", flips.Load(), storm, want)
	if flips.Load() < 100 {
		t.Fatalf("only %d relabelings: not a storm", flips.Load())
	}

	for _, team := range []string{"a", "b"} {
		expect := []string{"storm-home-" + team}
		for name, label := range final {
			if label == team {
				expect = append(expect, name)
			}
		}
		slices.Sort(expect)
		eventually(t, fmt.Sprintf("tenant storm-%s owning %v", team, expect), func() (bool, string) {
			tn := getTenant(t, "storm-"+team)
			return slices.Equal(tn.Status.Namespaces, expect) && condition(tn, kubefairv1.ConditionReady).Status == metav1.ConditionTrue, describe(tn)
		})
	}
	wantBilled(t, "tenant a's CPU, once", a, want*second, "EUR", want*1000)
	wantBilled(t, "tenant b's CPU, once", b, 2*want*second, "EUR", 2*want*1000)
	u := openRecord(t, "storm-n1")
	if len(u.Refusals) > 0 {
		t.Errorf("the ledger refused reports during the storm: %+v", u.Refusals)
	}
}
