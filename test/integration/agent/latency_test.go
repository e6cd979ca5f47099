package agent

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kubefairv1 "github.com/kubefair/kubefair/api/v1alpha1"
	"github.com/kubefair/kubefair/node-agent/enforce/slices"
)

// TestLatencyClasses, on the real kernel with the real loop and controller:
// with the classes off the node's report and the tenant's Degraded
// condition say so and every thread keeps the kernel's slice; on, the
// interactive tier's class reaches every thread of its tenant's pods as the
// class's slice (spinning and idle threads, and a pod started later), the
// batch tier's asks for the kernel's, and the report says so per tenant;
// when the agent stops and when a tier drops its class, the kernel's slice
// comes back. What the slices do to CPU shares and latency is
// TestLatencyOnAServer's to measure.
func TestLatencyClasses(t *testing.T) {
	w := newWorld(t)
	ctx := context.Background()
	w.addClassTiers(t, "fast", 2, "bulk", 1)
	w.addTenantSpec("shop", kubefairv1.TenantSpec{Tier: "fast"}, 2, 3)
	w.addTenantSpec("etl", kubefairv1.TenantSpec{Tier: "bulk"}, 2, 3)
	w.addTenant("plain", 1, 2, 2)
	for _, n := range []string{"shop", "etl", "plain"} {
		t.Cleanup(func() { w.deleteTenant(n) })
	}
	kernel := w.slicesOf(t, "plain")[0]
	interactive := 500 * time.Microsecond
	w.slices = map[kubefairv1.LatencyClass]time.Duration{kubefairv1.LatencyClassInteractive: interactive, kubefairv1.LatencyClassBatch: 0}

	// Off (the chart's default): said, and nothing sliced.
	w.startAgent(time.Second)
	w.report(t, func(r *kubefairv1.NodeShareReport) bool {
		c := meta.FindStatusCondition(r.Conditions, kubefairv1.ConditionLatencyClasses)
		return c != nil && c.Status == metav1.ConditionFalse && c.Reason == kubefairv1.ReasonLatencyClassesOff &&
			shareOf(r, "shop").LatencyClassOff && !shareOf(r, "etl").LatencyClassOff
	})
	w.waitForDegraded(t, "shop", kubefairv1.ReasonLatencyClassNotApplied, "--latency-classes=false")
	w.waitForSlices(t, map[string]time.Duration{"shop": kernel, "etl": kernel})
	w.stopAgent()

	// On.
	w.latencyClasses = true
	w.startAgent(time.Second)
	w.waitForSlices(t, map[string]time.Duration{"shop": interactive, "etl": kernel, "plain": kernel})

	w.addPods("shop", 1) // started after the class: sliced within a period or two of its start
	w.waitForSlices(t, map[string]time.Duration{"shop": interactive})
	// The report counts the threads the agent gave the slice: at most the
	// pods' threads now (the Go runtime of a new pod still starts threads;
	// those a sliced thread makes inherit the slice before they are listed).
	var last string
	r := w.reportWithin(t, 60*time.Second, func(r *kubefairv1.NodeShareReport) bool {
		c := meta.FindStatusCondition(r.Conditions, kubefairv1.ConditionLatencyClasses)
		s := shareOf(r, "shop")
		threads := len(w.slicesOf(t, "shop"))
		last = fmt.Sprintf("condition %+v, shop's entry %+v (%d threads in its pods)", c, s, threads)
		return c != nil && c.Status == metav1.ConditionTrue && s.SlicedThreads > 0 && s.SlicedThreads <= int32(threads) && !s.LatencyClassOff
	}, func() string { return last })
	t.Logf("LatencyClasses: %s", meta.FindStatusCondition(r.Conditions, kubefairv1.ConditionLatencyClasses).Message)
	for _, n := range []string{"etl", "plain"} {
		if s := shareOf(r, n); s.SlicedThreads != 0 {
			t.Errorf("tenant %s, whose class asks for the kernel's slice or none, has %d sliced threads in the report", n, s.SlicedThreads)
		}
	}
	var tn kubefairv1.Tenant
	if err := w.k8s.Get(ctx, client.ObjectKey{Name: "shop"}, &tn); err != nil || tn.Status.LatencyClass != kubefairv1.LatencyClassInteractive {
		t.Errorf("tenant shop's status.latencyClass is %q (%v), want interactive", tn.Status.LatencyClass, err)
	}

	// The agent stops (an uninstall): the kernel's slice back.
	w.stopAgent()
	if err := w.agent.RestoreAll(); err != nil {
		t.Fatal(err)
	}
	w.waitForSlices(t, map[string]time.Duration{"shop": kernel})

	// Again, then the tier drops its class: the kernel's slice back.
	w.startAgent(time.Second)
	w.waitForSlices(t, map[string]time.Duration{"shop": interactive})
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		var tier kubefairv1.PricingTier
		if err := w.k8s.Get(ctx, client.ObjectKey{Name: "fast"}, &tier); err != nil {
			return err
		}
		tier.Spec.LatencyClass = ""
		return w.k8s.Update(ctx, &tier)
	})
	if err != nil {
		t.Fatal(err)
	}
	w.waitForSlices(t, map[string]time.Duration{"shop": kernel})
}

// waitForDegraded waits until the tenant is Degraded for this reason, with
// a message that says why.
func (w *world) waitForDegraded(t *testing.T, tenant, reason, why string) {
	t.Helper()
	waitFor(t, fmt.Sprintf("tenant %s Degraded with %s", tenant, reason), func() bool {
		var tn kubefairv1.Tenant
		if w.k8s.Get(context.Background(), client.ObjectKey{Name: tenant}, &tn) != nil {
			return false
		}
		c := meta.FindStatusCondition(tn.Status.Conditions, kubefairv1.ConditionDegraded)
		return c != nil && c.Reason == reason && strings.Contains(c.Message, why)
	})
}

// addClassTiers creates an interactive and a batch PricingTier of these
// names and weights, deleted when the test ends.
func (w *world) addClassTiers(t *testing.T, interactive string, interactiveWeight int32, batch string, batchWeight int32) {
	for name, spec := range map[string]kubefairv1.PricingTierSpec{
		interactive: {Weight: interactiveWeight, PricePerCPUHour: "0.02", LatencyClass: kubefairv1.LatencyClassInteractive},
		batch:       {Weight: batchWeight, PricePerCPUHour: "0.01", LatencyClass: kubefairv1.LatencyClassBatch},
	} {
		tier := &kubefairv1.PricingTier{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: spec}
		if err := w.k8s.Create(context.Background(), tier); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = w.k8s.Delete(context.Background(), tier) })
	}
}

// slicesOf are the slices of every thread of a tenant's pods.
func (w *world) slicesOf(t *testing.T, tenant string) []time.Duration {
	t.Helper()
	var out []time.Duration
	for _, cg := range w.pods[tenant] {
		tids, err := w.tree.Threads(cg)
		if err != nil {
			t.Fatal(err)
		}
		for _, tid := range tids {
			if s, err := slices.Of(tid); err == nil {
				out = append(out, s)
			}
		}
	}
	return out
}

// waitForSlices waits until every thread of each tenant's pods has the
// tenant's slice.
func (w *world) waitForSlices(t *testing.T, want map[string]time.Duration) {
	t.Helper()
	last := ""
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		last = ""
		for tenant, s := range want {
			got := w.slicesOf(t, tenant)
			for _, g := range got {
				if g != s {
					last = fmt.Sprintf("tenant %s's threads have slices %v, want %v", tenant, got, s)
				}
			}
		}
		if last == "" {
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Fatal(last)
}
