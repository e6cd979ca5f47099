package agent

import (
	"context"
	"path"
	"slices"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kubefairv1 "github.com/kubefair/kubefair/api/v1alpha1"
	"github.com/kubefair/kubefair/node-agent/agent"
	"github.com/kubefair/kubefair/node-agent/enforce"
	"github.com/kubefair/kubefair/test/harness/podcgroups"
)

// TestFaults steps the real agent through what goes wrong on a node: a pod
// vanishing mid-run, kubelet rewriting a weight (resize), a pod leaving its
// tenant, and an agent restart followed by --restore-on-exit.
func TestFaults(t *testing.T) {
	w := newWorld(t)
	w.addTenant("fa", 3, 2, 1)
	w.addTenant("fb", 1, 1, 1)
	a, _, ctx, _ := w.newAgent(time.Second)
	waitFor(t, "both tenants resolved", func() bool {
		s, _ := a.Step(ctx, time.Now())
		return len(s.Plan.Pods) == 3
	})
	var last agent.Step
	step := func() (int, int, int) {
		t.Helper()
		time.Sleep(200 * time.Millisecond)
		s, err := a.Step(ctx, time.Now())
		if err != nil {
			t.Fatalf("step failed: %v", err)
		}
		last = s
		return len(s.Plan.Pods), s.Result.Drift, s.Result.Writes
	}
	// scale is the factor the backend gives a pod's QoS cgroup (1 unless
	// its weights are too small to split finely).
	scale := func(cgroup string) int { return int(max(w.backend.Scales()[path.Dir(cgroup)], 1)) }
	planned := func(cgroup string) int {
		if v, ok := w.backend.Held()[cgroup]; ok {
			return int(v)
		}
		return -1
	}
	inPlan := func(cgroup string) bool {
		return slices.ContainsFunc(last.Plan.Pods, func(p enforce.Pod) bool { return p.Cgroup == cgroup })
	}
	step()
	fb := w.pods["fb"][0]
	weighted, err := w.tree.Shares(fb)
	if err != nil || weighted == podcgroups.KubeletShares {
		t.Fatalf("fb's pod still has kubelet's %d shares (%v)", weighted, err)
	}

	// A pod of fa vanishes between two steps: its process dies and kubelet
	// removes the cgroup. The agent carries on with the rest.
	gone := w.pods["fa"][1]
	if err := w.tree.RemovePod(gone); err != nil {
		t.Fatal(err)
	}
	if pods, _, _ := step(); pods != 2 {
		t.Fatalf("after a pod vanished the plan has %d pods, want 2", pods)
	}

	// kubelet rewrites fb's weight (an in-place resize): counted as drift and
	// put back in the same step; 500 is now kubelet's value for the pod.
	if err := w.tree.WriteShares(fb, 500); err != nil {
		t.Fatal(err)
	}
	if _, drift, writes := step(); drift != 1 || writes < 1 {
		t.Fatalf("drift %d, writes %d after kubelet rewrote a weight; want 1 and ≥ 1", drift, writes)
	}
	if s, _ := w.tree.Shares(fb); s != planned(fb) || s == 500 {
		t.Fatalf("fb's weight is %d after the step, want the plan's %d back", s, planned(fb))
	}

	// fa gives up its namespace: its pod leaves the tenant and becomes a
	// pod of no tenant, which keeps at least its stock share: kubelet's
	// value (scaled as the rest of its QoS cgroup) or more.
	var fa kubefairv1.Tenant
	if err := w.k8s.Get(context.Background(), client.ObjectKey{Name: "fa"}, &fa); err != nil {
		t.Fatal(err)
	}
	fa.Spec.Namespaces = []string{"fa-elsewhere"}
	if err := w.k8s.Update(context.Background(), &fa); err != nil {
		t.Fatal(err)
	}
	left := w.pods["fa"][0]
	waitFor(t, "the pod that left its tenant out of the plan, at kubelet's value or more", func() bool {
		step()
		s, _ := w.tree.Shares(left)
		return !inPlan(left) && s*100 >= 99*podcgroups.KubeletShares*scale(left)
	})

	// The agent restarts: the new one knows kubelet's originals from the
	// state directory, so --restore-on-exit (RestoreAll) puts fb's back too.
	restarted, _, _, _ := w.newAgent(time.Second)
	if err := restarted.RestoreAll(); err != nil {
		t.Fatal(err)
	}
	if s, _ := w.tree.Shares(fb); s != 500 {
		t.Fatalf("after restore fb's pod has %d shares, want kubelet's latest, 500", s)
	}
}

func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	// Generous: after an API server outage, informers retry with a backoff
	// of up to 30 s.
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		if cond() {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("timed out waiting for %s", what)
}

// TestAPIServerAway: with the real loop and the real controller running,
// the API server stops. The agent keeps enforcing the last configuration it
// knew — weights stay, a rewrite by someone else is undone, measured shares
// stay within 2 points — and once the API server is back its reports resume
// with the same boot id and counters that carry the outage, and the
// controller accrues CPU and cost exactly once.
func TestAPIServerAway(t *testing.T) {
	w := newWorld(t)
	ctx := context.Background()
	// 3.6 per CPU-hour is one micro-unit per CPU-millisecond: cost can be
	// checked exactly against CPU time.
	if err := w.k8s.Create(ctx, &kubefairv1.PricingTier{ObjectMeta: metav1.ObjectMeta{Name: "away-tier"},
		Spec: kubefairv1.PricingTierSpec{Weight: 2, PricePerCPUHour: "3.6"}}); err != nil {
		t.Fatal(err)
	}
	w.addTenantSpec("aw", kubefairv1.TenantSpec{Tier: "away-tier"}, 1, 2)
	w.addTenant("bw", 1, 6, 1)
	entitled := w.entitled(map[string]int32{"aw": 2, "bw": 1})
	w.startAgent(time.Second)
	w.settle(entitled)
	before := w.report(t, func(r *kubefairv1.NodeShareReport) bool { return counter(r, "aw") > 0 && counter(r, "bw") > 0 })

	awPod := w.pods["aw"][0]
	usage0 := w.usage(t, "aw")
	if err := api.StopAPIServer(); err != nil {
		t.Fatal(err)
	}
	stopped := true
	t.Cleanup(func() {
		if stopped {
			_ = api.StartAPIServer() // for the suites that follow
		}
	})
	if err := w.k8s.Get(ctx, client.ObjectKey{Name: node}, &kubefairv1.NodeShareReport{}); err == nil {
		t.Fatal("the API server still answers after it was stopped")
	}

	// Enforcement goes on: kubelet's value written over aw's weight is undone,
	// and the shares stay where the last known configuration puts them.
	if err := w.tree.WriteShares(awPod, podcgroups.KubeletShares); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the agent to undo a rewrite with the API server away", func() bool {
		s, _ := w.tree.Shares(awPod)
		return s != podcgroups.KubeletShares
	})
	// aw is one 2-thread pod against six 1-thread ones: on 2 CPUs its share
	// swings with the threads' placement more than the others', and the
	// rewrite just undone disturbed the closed loop. More windows, after the
	// loop has settled again, and longer ones (nine of 8 s were 2.5 points
	// off in a CI run); the bound stays 2 points.
	w.settle(entitled)
	away, awayErr := w.medianBy(2*repeats-1, 3*window/2, func(s map[string]float64) float64 { return maxErrorPoints(entitled, s) })
	t.Logf("API server away: shares %v, largest error %.1f points", away, awayErr)
	if awayErr > 2 {
		t.Errorf("with the API server away the shares are %.1f points off, want ≤ 2", awayErr)
	}
	usage1 := w.usage(t, "aw")

	if err := api.StartAPIServer(); err != nil {
		t.Fatal(err)
	}
	stopped = false
	back := time.Now()

	// Reporting resumes: a later report from the same boot, whose counters
	// grew by at least what aw's pod used while the API server was away.
	after := w.report(t, func(r *kubefairv1.NodeShareReport) bool { return r.ObservedTime.After(back) })
	if after.BootID != before.BootID {
		t.Fatalf("boot id changed from %s to %s: the agent restarted", before.BootID, after.BootID)
	}
	if grew, used := counter(after, "aw")-counter(before, "aw"), int64(usage1-usage0); grew < used {
		t.Errorf("aw's counter grew by %d ns across the outage, but its pod used %d ns while the API server was away", grew, used)
	}

	// The controller accrues the counter exactly once: its total is a
	// counter the agent reported, and cost is that CPU at the tier's price.
	var tn kubefairv1.Tenant
	var last kubefairv1.NodeShareReport
	var billedNS, billedMicros int64
	accrued := func() bool {
		if w.k8s.Get(ctx, client.ObjectKey{Name: node}, &last) != nil || w.k8s.Get(ctx, client.ObjectKey{Name: "aw"}, &tn) != nil {
			return false
		}
		billedNS, billedMicros = billed(t, w.k8s, &tn, "USD")
		return billedNS == counter(&last, "aw") && billedNS >= counter(after, "aw") &&
			billedMicros == billedNS/1_000_000
	}
	// The controller's informers come back after their backoff: up to 30 s,
	// doubled by jitter, after an outage of over a minute.
	for deadline := time.Now().Add(2 * time.Minute); !accrued(); time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the controller accrued %d ns (cost %d micro-units) for aw; the latest report says %d ns, the first after the outage %d ns",
				billedNS, billedMicros, counter(&last, "aw"), counter(after, "aw"))
		}
	}
	t.Logf("after the outage: aw accrued %s CPU-seconds, cost %s %s", tn.Status.CPUSeconds, tn.Status.Cost, tn.Status.Currency)
}

// report waits for this node's NodeShareReport to satisfy cond.
func (w *world) report(t *testing.T, cond func(*kubefairv1.NodeShareReport) bool) *kubefairv1.NodeShareReport {
	t.Helper()
	var r kubefairv1.NodeShareReport
	waitFor(t, "a NodeShareReport", func() bool {
		return w.k8s.Get(context.Background(), client.ObjectKey{Name: node}, &r) == nil && cond(&r)
	})
	return &r
}

// reportWithin waits up to d for this node's NodeShareReport to satisfy
// cond, and fails with what last says of the last one it read.
func (w *world) reportWithin(t *testing.T, d time.Duration, cond func(*kubefairv1.NodeShareReport) bool, last func() string) *kubefairv1.NodeShareReport {
	t.Helper()
	var r kubefairv1.NodeShareReport
	for deadline := time.Now().Add(d); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if w.k8s.Get(context.Background(), client.ObjectKey{Name: node}, &r) == nil && cond(&r) {
			return &r
		}
	}
	t.Fatalf("no NodeShareReport as wanted within %v; the last: %s", d, last())
	return nil
}

// counter is a tenant's cumulative CPU counter in a report.
func counter(r *kubefairv1.NodeShareReport, tenant string) int64 {
	for _, s := range r.Tenants {
		if s.Name == tenant {
			return s.CPUNanoseconds
		}
	}
	return 0
}

// usage is the CPU time a tenant's pod cgroups have used.
func (w *world) usage(t *testing.T, tenant string) time.Duration {
	var total time.Duration
	for _, cg := range w.pods[tenant] {
		u, err := w.tree.Usage(cg)
		if err != nil {
			t.Fatal(err)
		}
		total += u
	}
	return total
}
