package agent

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kubefairv1 "github.com/kubefair/kubefair/api/v1alpha1"
	"github.com/kubefair/kubefair/test/harness/podcgroups"
)

// noTenant is the namespace of the pod that belongs to no tenant.
const noTenant = "system"

// TestQoSClasses: tenants whose pods are Burstable, BestEffort, or a
// Guaranteed and a BestEffort one, beside a Burstable pod of no tenant, on
// real cgroups laid out and weighted as kubelet does, every pod one
// spinning thread. Stock Kubernetes weighs the classes, not the tenants:
// the Guaranteed pod takes its whole limit, BestEffort pods starve. With
// the agent the tenants share equally what the pod of no tenant leaves
// them, and that pod keeps at least its stock share.
func TestQoSClasses(t *testing.T) {
	w := newWorld(t)
	add := w.addClassPods
	add("burst", true, classPod{podcgroups.Burstable, 100, 1, ""}, classPod{podcgroups.Burstable, 100, 1, ""})
	add("besteffort", true, classPod{podcgroups.BestEffort, 0, 1, ""}, classPod{podcgroups.BestEffort, 0, 1, ""})
	add("mixed", true, classPod{podcgroups.Guaranteed, 1000, 1, ""}, classPod{podcgroups.BestEffort, 0, 1, ""})
	add(noTenant, false, classPod{podcgroups.Burstable, 100, 1, ""})
	tenants := []string{"besteffort", "burst", "mixed"}

	// Entitled: the tenants share equally what the pod of no tenant leaves
	// them.
	entitledGiven := func(system float64) map[string]float64 {
		e := map[string]float64{noTenant: system}
		for _, n := range tenants {
			e[n] = (1 - system) / float64(len(tenants))
		}
		return e
	}
	tenantsOnly := func(e map[string]float64) map[string]float64 {
		out := map[string]float64{}
		for _, n := range tenants {
			out[n] = e[n]
		}
		return out
	}
	// A window's error: the tenants' against what the model makes of that
	// window's own share of the pod of no tenant.
	tenantErr := func(s map[string]float64) float64 { return maxErrorPoints(tenantsOnly(entitledGiven(s[noTenant])), s) }
	stock, stockErr := w.medianBy(repeats, window, tenantErr)

	// kubefair: the tenants' entitlements are of the CPU left to them (as
	// the agent's model has them), each window's own.
	// Three tenants share two QoS cgroups and the node level with a pod
	// whose open-loop weight moves what they are entitled to: the split
	// swings more with the threads' placement than in the sibling
	// scenarios, and the closed loop takes longer to pull it back (CI runs
	// had 3 of 5 windows of 8 s 2.2 points off, then the median of 9 at
	// 2.0; others 0.5–1.5). More and longer windows for the figure; the
	// bound stays 2 points.
	const kfWindows, kfWindow = 2*repeats - 1, 3 * window / 2
	w.startAgent(time.Second)
	w.settleBy(tenantErr)
	kf, kfErr := w.medianBy(kfWindows, kfWindow, tenantErr)
	fmt.Print(w.table(fmt.Sprintf("QoS classes, weights 1:1:1, one pod of no tenant, entitled of what it left with kubefair (stock: %s; kubefair: median of %d of %v)",
		medianOf(), kfWindows, kfWindow), entitledGiven(kf[noTenant]), stock, kf))

	if kfErr > 2 {
		t.Errorf("kubefair's largest tenant error is %.1f points, want ≤ 2", kfErr)
	}
	// The pod of no tenant keeps at least its stock share, within the
	// suite's 2 points. (Nothing holds it there in a closed loop yet: on 2
	// CPUs its open-loop weight lands a few points off, mostly above.)
	if kf[noTenant] < stock[noTenant]-0.02 {
		t.Errorf("the pod of no tenant got %.1f %% with kubefair, %.1f %% in stock", 100*kf[noTenant], 100*stock[noTenant])
	}
	if stock["besteffort"] > 0.05 || stockErr < 10 {
		t.Errorf("stock gave the BestEffort tenant %.1f %% (error %.1f points): the test does not contend as intended", 100*stock["besteffort"], stockErr)
	}
}

// classPod is a pod of a QoS class requesting milli CPU (a Guaranteed
// pod's limit too), burning threads; pinned to cpus (a cpuset, as
// kubelet's static CPU manager does) when set.
type classPod struct {
	class   podcgroups.Class
	milli   int
	threads int
	cpus    string
}

// resources are what a classPod's container asks of the API.
func (p classPod) resources() corev1.ResourceRequirements {
	cpu, mem := *resource.NewMilliQuantity(int64(p.milli), resource.DecimalSI), resource.MustParse("64Mi")
	switch p.class {
	case podcgroups.Guaranteed:
		l := corev1.ResourceList{corev1.ResourceCPU: cpu, corev1.ResourceMemory: mem}
		return corev1.ResourceRequirements{Requests: l, Limits: l}
	case podcgroups.Burstable:
		return corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: cpu}}
	}
	return corev1.ResourceRequirements{}
}

// addClassPods creates a namespace, a Tenant of weight 1 owning it when
// tenant is set, and pods in it laid out and weighted by their class as
// kubelet does, each a burner with one spinning thread unless said.
func (w *world) addClassPods(ns string, tenant bool, pods ...classPod) {
	t := w.t
	ctx := context.Background()
	if err := w.k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	if tenant {
		tn := &kubefairv1.Tenant{ObjectMeta: metav1.ObjectMeta{Name: ns}, Spec: kubefairv1.TenantSpec{Weight: ptr.To[int32](1), Namespaces: []string{ns}}}
		if err := w.k8s.Create(ctx, tn); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range pods {
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{GenerateName: "burner-", Namespace: ns},
			Spec:       corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "burner", Image: "kubefair/burner:test", Resources: p.resources()}}},
		}
		if err := w.k8s.Create(ctx, pod); err != nil {
			t.Fatal(err)
		}
		cg, err := w.tree.AddPodOf(string(pod.UID), p.class, p.milli, burner, max(p.threads, 1))
		if err == nil && p.cpus != "" {
			err = w.tree.Pin(cg, p.cpus)
		}
		if err != nil {
			t.Fatal(err)
		}
		w.pods[ns] = append(w.pods[ns], cg)
	}
}

// TestCPUsKubefairCannotWeigh: a 2-CPU node where kubelet's static CPU
// manager gave tenant pinned's Guaranteed pod (1 CPU, one spinning thread)
// CPU 1 alone, leaving CPU 0 as the shared pool (cpusets on the host's
// real cgroup v1 cpuset hierarchy). In the pool, a tenant whose one pod is
// Guaranteed with a 200m limit beside an equal tenant without limits, each
// two spinning threads. The pinned pod is left out of the allocation, and
// what it uses leaves the tenants' CPU; the limit caps its tenant at 10 %
// of the node, below the half of the pool its weight entitles it to, so the
// agent entitles it to its cap and the other tenant to the rest of the
// pool: both realised within 2 points of the pool. Each tenant that cannot
// be honoured says so in a Degraded condition with an event, and the
// pinned tenant's CPU is billed all the same.
func TestCPUsKubefairCannotWeigh(t *testing.T) {
	w := newWorld(t)
	w.addClassPods("pinned", true, classPod{podcgroups.Guaranteed, 1000, 1, "1"})
	w.addClassPods("capped", true, classPod{podcgroups.Guaranteed, 200, 2, "0"})
	w.addClassPods("free", true, classPod{podcgroups.Burstable, 100, 2, "0"})
	// The pool's split: each pool tenant's share of what the two used.
	pool := map[string]float64{"capped": 0.2, "free": 0.8}
	poolErr := func(s map[string]float64) float64 {
		used := s["capped"] + s["free"]
		return maxErrorPoints(pool, map[string]float64{"capped": s["capped"] / used, "free": s["free"] / used})
	}

	// Stock is not measured: the limit and the cpusets bind there too, and
	// the test is about kubefair's entitlements around them.
	w.startAgent(time.Second)
	w.settleBy(poolErr)
	kf, kfErr := w.medianBy(repeats, window, poolErr)
	fmt.Printf("\nCPUs kubefair cannot weigh (%s): pinned %.1f%% on its own CPU; in the pool capped %.1f%%, free %.1f%% of the test's CPU, %.1f points off the pool's 20/80 split\n",
		medianOf(), 100*kf["pinned"], 100*kf["capped"], 100*kf["free"], kfErr)
	if kfErr > 2 {
		t.Errorf("largest error %.1f points against the pool's capped entitlements, want ≤ 2", kfErr)
	}
	if kf["pinned"] < 0.45 {
		t.Errorf("the pinned tenant used %.1f %% of the test's CPU, want its own CPU (about half)", 100*kf["pinned"])
	}

	ctx := context.Background()
	var capped, pinned kubefairv1.TenantShare
	waitFor(t, "the report to carry the capped tenant's limit and the pinned tenant's CPU", func() bool {
		capped, pinned = w.reportShare("capped"), w.reportShare("pinned")
		return capped.LimitedShare > 0 && pinned.ExclusiveCPUs > 0
	})
	// A report's entitled share is of its window's backlog: the median of
	// several reports, as the shares.
	entitled := w.medianEntitled(t, 5, "capped", "free")
	if math.Abs(capped.LimitedShare-0.1) > 0.005 || math.Abs(entitled["capped"]-0.1) > 0.01 {
		t.Errorf("capped tenant's reports: limited %.4f, entitled %.4f (median); want both 0.1", capped.LimitedShare, entitled["capped"])
	}
	if pinned.ExclusiveCPUs != 1 || pinned.EntitledShare != 0 || pinned.AchievedShare != 0 || pinned.CPUNanoseconds <= 0 {
		t.Errorf("pinned tenant's report: %d exclusive CPUs, entitled %.4f, achieved %.4f, %d ns billed; want 1 CPU, out of the shares, billed",
			pinned.ExclusiveCPUs, pinned.EntitledShare, pinned.AchievedShare, pinned.CPUNanoseconds)
	}
	if free := w.reportShare("free"); free.ExclusiveCPUs != 0 || math.Abs(entitled["free"]-0.4) > 0.03 {
		t.Errorf("free tenant's reports: %d exclusive CPUs, entitled %.4f (median); want none, the pool less the cap (about 0.4)", free.ExclusiveCPUs, entitled["free"])
	}
	waitFor(t, "Degraded=CPULimited on the capped tenant, Degraded=ExclusiveCPUs on the pinned one, with events", func() bool {
		return w.degradedWithEvent("capped", kubefairv1.ReasonCPULimited, kubefairv1.EventCPULimited, "at most 10.0% of the node") &&
			w.degradedWithEvent("pinned", kubefairv1.ReasonExclusiveCPUs, kubefairv1.EventExclusiveCPUs, "1 CPU(s) of their own")
	})
	var free kubefairv1.Tenant
	if err := w.k8s.Get(ctx, client.ObjectKey{Name: "free"}, &free); err != nil {
		t.Fatal(err)
	}
	if c := meta.FindStatusCondition(free.Status.Conditions, kubefairv1.ConditionDegraded); c == nil || c.Status != metav1.ConditionFalse {
		t.Errorf("the tenant without limits is %+v, want not Degraded", c)
	}
}

// reportShare is the tenant's entry in this node's report (zero when
// there is none yet).
func (w *world) reportShare(tenant string) kubefairv1.TenantShare {
	var r kubefairv1.NodeShareReport
	if err := w.k8s.Get(context.Background(), client.ObjectKey{Name: node}, &r); err != nil {
		return kubefairv1.TenantShare{}
	}
	return shareOf(&r, tenant)
}

// shareOf is the tenant's entry in a report (zero when there is none).
func shareOf(r *kubefairv1.NodeShareReport, tenant string) kubefairv1.TenantShare {
	for _, s := range r.Tenants {
		if s.Name == tenant {
			return s
		}
	}
	return kubefairv1.TenantShare{}
}

// medianEntitled is each tenant's entitled share, the median over n
// consecutive reports.
func (w *world) medianEntitled(t *testing.T, n int, tenants ...string) map[string]float64 {
	t.Helper()
	seen := map[string][]float64{}
	var last metav1.Time
	for i := 0; i < n; {
		var r kubefairv1.NodeShareReport
		if err := w.k8s.Get(context.Background(), client.ObjectKey{Name: node}, &r); err != nil {
			t.Fatal(err)
		}
		if r.ObservedTime.Equal(&last) {
			time.Sleep(200 * time.Millisecond)
			continue
		}
		last, i = r.ObservedTime, i+1
		for _, s := range r.Tenants {
			if slices.Contains(tenants, s.Name) {
				seen[s.Name] = append(seen[s.Name], s.EntitledShare)
			}
		}
	}
	out := map[string]float64{}
	for name, v := range seen {
		slices.Sort(v)
		out[name] = v[len(v)/2]
	}
	return out
}

// degradedWithEvent tells whether the tenant is Degraded for reason, with
// a message containing what, and a warning event of that reason was
// recorded for it.
func (w *world) degradedWithEvent(tenant, reason, event, what string) bool {
	ctx := context.Background()
	var tn kubefairv1.Tenant
	if err := w.k8s.Get(ctx, client.ObjectKey{Name: tenant}, &tn); err != nil {
		return false
	}
	c := meta.FindStatusCondition(tn.Status.Conditions, kubefairv1.ConditionDegraded)
	if c == nil || c.Reason != reason || !strings.Contains(c.Message, what) {
		return false
	}
	var events corev1.EventList
	if err := w.k8s.List(ctx, &events); err != nil {
		return false
	}
	return slices.ContainsFunc(events.Items, func(e corev1.Event) bool {
		return e.Reason == event && e.InvolvedObject.Kind == "Tenant" && e.InvolvedObject.Name == tenant
	})
}
