package agent

import (
	"context"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	kubefairv1 "github.com/kubefair/kubefair/api/v1alpha1"
	"github.com/kubefair/kubefair/node-agent/agent"
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
	planned := func(cgroup string) int {
		for _, p := range last.Plan.Pods {
			if p.Cgroup == cgroup {
				return int(p.Shares)
			}
		}
		return -1
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
	// put back in the same step.
	if err := w.tree.WriteShares(fb, 500); err != nil {
		t.Fatal(err)
	}
	if _, drift, writes := step(); drift != 1 || writes < 1 {
		t.Fatalf("drift %d, writes %d after kubelet rewrote a weight; want 1 and ≥ 1", drift, writes)
	}
	if s, _ := w.tree.Shares(fb); s != planned(fb) || s == 500 {
		t.Fatalf("fb's weight is %d after the step, want the plan's %d back", s, planned(fb))
	}

	// fa gives up its namespace: its pod leaves the tenant and gets kubelet's
	// value back.
	var fa kubefairv1.Tenant
	if err := w.k8s.Get(context.Background(), client.ObjectKey{Name: "fa"}, &fa); err != nil {
		t.Fatal(err)
	}
	fa.Spec.Namespaces = []string{"fa-elsewhere"}
	if err := w.k8s.Update(context.Background(), &fa); err != nil {
		t.Fatal(err)
	}
	left := w.pods["fa"][0]
	waitFor(t, "the pod that left its tenant back at kubelet's value", func() bool {
		step()
		s, _ := w.tree.Shares(left)
		return s == podcgroups.KubeletShares
	})

	// The agent restarts: the new one knows kubelet's originals from the
	// state directory, so --restore-on-exit (RestoreAll) puts fb's back too.
	restarted, _, _, _ := w.newAgent(time.Second)
	if err := restarted.RestoreAll(); err != nil {
		t.Fatal(err)
	}
	if s, _ := w.tree.Shares(fb); s != podcgroups.KubeletShares {
		t.Fatalf("after restore fb's pod has %d shares, want kubelet's %d", s, podcgroups.KubeletShares)
	}
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		if cond() {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("timed out waiting for %s", what)
}
