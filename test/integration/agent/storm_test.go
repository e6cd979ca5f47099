package agent

import (
	"context"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kubefairv1 "github.com/kubefair/kubefair/api/v1alpha1"
	"github.com/kubefair/kubefair/node-agent/agent"
	"github.com/kubefair/kubefair/test/harness/podcgroups"
)

// TestPodLabelStorm: whoever may edit a tenant's pods rewrites their labels
// in a loop, moving them between the tenant's workloads and out of all of
// them, hundreds of times a second, while the real agent runs. Every
// relabeling wakes the agent; it must keep to a bounded pace (a step per
// change is a busy loop on the node), end with the split the last labels
// ask for, within 2 points, and count the tenant's CPU once.
func TestPodLabelStorm(t *testing.T) {
	w := newWorld(t)
	selects := func(app string) kubefairv1.LabelSelector {
		return kubefairv1.LabelSelector{MatchLabels: map[string]kubefairv1.LabelValue{"app": kubefairv1.LabelValue(app)}}
	}
	w.addTenantSpec("storm", kubefairv1.TenantSpec{Weight: ptr.To[int32](1), Workloads: []kubefairv1.Workload{
		{Name: "web", Weight: 3, PodSelector: selects("web")},
		{Name: "batch", Weight: 1, PodSelector: selects("batch")},
	}}, 4, 1)
	w.addTenant("calm", 1, 2, 1)
	ctx := context.Background()
	var pods corev1.PodList
	if err := w.k8s.List(ctx, &pods, client.InNamespace("storm")); err != nil || len(pods.Items) != 4 {
		t.Fatalf("the storm tenant's pods: %d, %v", len(pods.Items), err)
	}
	label := func(pod *corev1.Pod, app string) error {
		value := "null" // out of every workload
		if app != "" {
			value = fmt.Sprintf("%q", app)
		}
		patch := []byte(`{"metadata":{"labels":{"app":` + value + `}}}`)
		return w.k8s.Patch(ctx, pod, client.RawPatch(types.MergePatchType, patch))
	}
	usedBefore := w.usage(t, "storm")
	w.startAgent(time.Second)
	w.report(t, func(r *kubefairv1.NodeShareReport) bool { return counter(r, "storm") > 0 })

	// The storm: 4 writers for 8 s, each pod in turn to web, batch or none.
	const storm = 8 * time.Second
	steps0, start := w.steps(), time.Now()
	var relabels atomic.Int64
	var wg sync.WaitGroup
	for writer := range 4 {
		wg.Go(func() {
			for i := writer; time.Since(start) < storm; i++ {
				pod := pods.Items[i%len(pods.Items)].DeepCopy()
				if err := label(pod, []string{"web", "batch", ""}[(i/len(pods.Items))%3]); err != nil {
					t.Errorf("relabeling %s: %v", pod.Name, err)
					return
				}
				relabels.Add(1)
			}
		})
	}
	wg.Wait()
	took, steps := time.Since(start), w.steps()-steps0
	// At most KicksPerPeriod kicked steps between two periodic ones.
	allowed := uint64(math.Ceil(took.Seconds())) * (agent.KicksPerPeriod + 1)
	t.Logf("%d relabelings in %v, %d steps of the agent (at most %d allowed)", relabels.Load(), took.Round(time.Millisecond), steps, allowed)
	if relabels.Load() < 100*int64(storm/time.Second) {
		t.Fatalf("only %d relabelings in %v: not the storm the test needs", relabels.Load(), took)
	}
	if steps > allowed {
		t.Errorf("the agent took %d steps in a storm of %v, want at most %d", steps, took, allowed)
	}

	// The last labels: one pod serves web, three batch. The tenants split
	// the test's CPU equally, storm's half 3:1 between its workloads.
	w.measured = map[string][]string{"calm": w.pods["calm"]}
	for i := range pods.Items {
		app := "batch"
		if i == 0 {
			app = "web"
		}
		if err := label(&pods.Items[i], app); err != nil {
			t.Fatal(err)
		}
		w.measured[app] = append(w.measured[app], podcgroups.PodCgroup(string(pods.Items[i].UID)))
	}
	entitled := map[string]float64{"calm": 0.5, "web": 0.375, "batch": 0.125}
	w.settle(entitled)
	kf, kfErr := w.medianWindows(repeats, entitled)
	fmt.Printf("\nafter a pod-label storm, workloads web 3 : batch 1 inside tenant storm, beside tenant calm (%s)\n", medianOf())
	for _, n := range []string{"web", "batch", "calm"} {
		fmt.Printf("%-6s entitled %5.1f%% kubefair %5.1f%% (%+.1fpp)\n", n, 100*entitled[n], 100*kf[n], 100*(kf[n]-entitled[n]))
	}
	if kfErr > 2 {
		t.Errorf("after the storm the split is %.1f points off the last labels', want ≤ 2", kfErr)
	}

	// Counted once: the agent's counter for the tenant is no more than its
	// pods used since before the agent started, and the controller bills
	// exactly the last report's counter.
	w.stopAgent()
	last := w.report(t, func(*kubefairv1.NodeShareReport) bool { return true })
	counted, used := counter(last, "storm"), int64(w.usage(t, "storm")-usedBefore)
	if counted <= 0 || counted > used {
		t.Errorf("the report counts %d ns for the storm tenant, its pods used %d ns since before the agent started", counted, used)
	}
	var tn kubefairv1.Tenant
	waitFor(t, "the storm tenant billed its last report's counter", func() bool {
		ns := int64(-1)
		if w.k8s.Get(ctx, client.ObjectKey{Name: "storm"}, &tn) == nil {
			ns, _ = billed(t, w.k8s, &tn, "")
		}
		return ns == counted
	})
}
