package agent

import (
	"context"
	"fmt"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	kubefairv1 "github.com/kubefair/kubefair/api/v1alpha1"
	"github.com/kubefair/kubefair/test/harness/podcgroups"
)

const (
	window  = 4 * time.Second // one measurement window
	repeats = 3               // windows per figure; the median counts
)

// TestGreedyTenantsFollowWeights: tenants with 1, 8 and 50 single-thread
// pods on both CPUs. Stock Kubernetes gives each pod an equal share, so
// tenants get 1:8:50; with the agent they get their weights, 1:1:1 and then
// 1:2:4, within 2 points, and converge quickly after a weight change and
// after new pods appear.
func TestGreedyTenantsFollowWeights(t *testing.T) {
	w := newWorld(t)
	w.addTenant("one", 1, 1, 1)
	w.addTenant("eight", 1, 8, 1)
	w.addTenant("fifty", 1, 50, 1)

	equal := map[string]int32{"one": 1, "eight": 1, "fifty": 1}
	entitled := w.entitled(equal)
	stock, stockErr := w.medianWindows(repeats, window, entitled)

	w.startAgent(time.Second)
	if d, e := w.waitWithin(entitled, 15*time.Second); e > 2 {
		t.Fatalf("1:1:1 not within 2 points %v after the agent started (%.1f points)", d, e)
	}
	kf, kfErr := w.medianWindows(repeats, window, entitled)
	report := w.table("weights 1:1:1 (median of 3 windows of 4 s, 2 CPUs)", entitled, stock, kf)

	// 1:2:4 — stock still follows pod counts; measure it from the same run
	// with the agent paused, then resume.
	weighted := map[string]int32{"one": 1, "eight": 2, "fifty": 4}
	entitledW := w.entitled(weighted)
	w.stopAgent()
	if err := w.agent.RestoreAll(); err != nil {
		t.Fatal(err)
	}
	for _, cg := range w.pods["fifty"] {
		if s, err := w.tree.Shares(cg); err != nil || s != podcgroups.KubeletShares {
			t.Fatalf("after restore %s has %d shares (%v), want kubelet's %d", cg, s, err, podcgroups.KubeletShares)
		}
	}
	stockW, _ := w.medianWindows(repeats, window, entitledW)
	w.startAgent(time.Second)
	if _, e := w.waitWithin(entitled, 15*time.Second); e > 2 {
		t.Fatalf("1:1:1 not restored after the agent restarted (%.1f points)", e)
	}
	for n, wt := range weighted {
		w.setWeight(n, wt)
	}
	convWeight, convErr := w.waitWithin(entitledW, 15*time.Second)
	kfW, kfWErr := w.medianWindows(repeats, window, entitledW)
	for _, ts := range w.agent.Last.Tenants {
		t.Logf("agent view of %s: entitled %.3f achieved %.3f multiplier %.2f threads %d backlogged %v", ts.Name, ts.Entitled, ts.Achieved, ts.Multiplier, ts.Threads, ts.Backlogged)
	}
	report += w.table("weights 1:2:4", entitledW, stockW, kfW)

	// New pods: the one-pod tenant grows to nine pods.
	w.addPods("one", 8)
	entitledP := w.entitled(weighted)
	convPods, convPodsErr := w.waitWithin(entitledP, 15*time.Second)
	kfP, kfPErr := w.medianWindows(repeats, window, entitledP)
	report += fmt.Sprintf("\nconvergence (first 1-s window within 2 points, measured from the change): weight change %.1f s (%.1f points), 8 new pods %.1f s (%.1f points)\n",
		convWeight.Seconds(), convErr, convPods.Seconds(), convPodsErr)
	report += fmt.Sprintf("after 8 new pods in tenant one (1:2:4): largest error %.1f points %v\n", kfPErr, kfP)
	fmt.Print(report)

	// Convergence: the second one-second window after the change is within
	// 2 points (the first one still straddles the change).
	for name, c := range map[string]struct {
		took time.Duration
		err  float64
	}{"a weight change": {convWeight, convErr}, "new pods": {convPods, convPodsErr}} {
		if c.err > 2 || c.took > 2*time.Second+500*time.Millisecond {
			t.Errorf("after %s: within 2 points only after %.1f s (%.1f points), want ≤ 2 s", name, c.took.Seconds(), c.err)
		}
	}
	for name, e := range map[string]float64{"1:1:1": kfErr, "1:2:4": kfWErr, "1:2:4 after new pods": kfPErr} {
		if e > 2 {
			t.Errorf("%s: kubefair's largest error is %.1f points, want ≤ 2", name, e)
		}
	}
	if stockErr < 10 {
		t.Errorf("stock 1:1:1 error only %.1f points: the test does not contend as intended", stockErr)
	}

	// The node's report reached the API, and the controller folded it in.
	var r kubefairv1.NodeShareReport
	if err := w.k8s.Get(context.Background(), client.ObjectKey{Name: node}, &r); err != nil {
		t.Fatalf("no NodeShareReport for %s: %v", node, err)
	}
	if len(r.Tenants) != 3 || r.Backend != kubefairv1.BackendCgroup || r.CPUs != 2 || r.BootID == "" {
		t.Fatalf("report = %+v", r)
	}
	for _, s := range r.Tenants {
		if s.CPUNanoseconds <= 0 || s.Pods == 0 {
			t.Errorf("report for %s has no usage: %+v", s.Name, s)
		}
	}
	var tn kubefairv1.Tenant
	if err := w.k8s.Get(context.Background(), client.ObjectKey{Name: "fifty"}, &tn); err != nil {
		t.Fatal(err)
	}
	if tn.Status.AchievedShare == "" || tn.Status.CPUNanoseconds == 0 {
		t.Errorf("the controller did not aggregate the report: %+v", tn.Status)
	}
	t.Logf("tenant fifty: entitled %s achieved %s cpu %s s", tn.Status.EntitledShare, tn.Status.AchievedShare, tn.Status.CPUSeconds)
}
