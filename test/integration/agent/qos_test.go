package agent

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

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
// the agent the tenants share equally what the pod of no tenant leaves,
// and that pod keeps at least its stock share.
func TestQoSClasses(t *testing.T) {
	w := newWorld(t)
	type podSpec struct {
		class podcgroups.Class
		milli int
	}
	add := func(ns string, tenant bool, pods ...podSpec) {
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
				Spec:       corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "burner", Image: "kubefair/burner:test"}}},
			}
			if err := w.k8s.Create(ctx, pod); err != nil {
				t.Fatal(err)
			}
			cg, err := w.tree.AddPodOf(string(pod.UID), p.class, p.milli, burner, 1)
			if err != nil {
				t.Fatal(err)
			}
			w.pods[ns] = append(w.pods[ns], cg)
		}
	}
	add("burst", true, podSpec{podcgroups.Burstable, 100}, podSpec{podcgroups.Burstable, 100})
	add("besteffort", true, podSpec{podcgroups.BestEffort, 0}, podSpec{podcgroups.BestEffort, 0})
	add("mixed", true, podSpec{podcgroups.Guaranteed, 1000}, podSpec{podcgroups.BestEffort, 0})
	add(noTenant, false, podSpec{podcgroups.Burstable, 100})
	tenants := []string{"besteffort", "burst", "mixed"}

	// Entitled: the tenants share equally what the pod of no tenant keeps
	// of its stock share, measured in the same run.
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
	// Stock: the median window by the tenants' error against what the
	// model makes of that window's own share of the pod of no tenant.
	var stock map[string]float64
	var stockErr float64
	{
		type sample struct {
			s   map[string]float64
			err float64
		}
		var samples []sample
		for i := 0; i < repeats; i++ {
			s := w.shares(window)
			samples = append(samples, sample{s, maxErrorPoints(tenantsOnly(entitledGiven(s[noTenant])), s)})
		}
		m := samples[len(samples)/2]
		stock, stockErr = m.s, m.err
	}
	entitled := entitledGiven(stock[noTenant])

	w.startAgent(time.Second)
	w.settle(tenantsOnly(entitled))
	kf, kfErr := w.medianWindows(repeats, tenantsOnly(entitled))
	fmt.Print(w.table("QoS classes, weights 1:1:1, one pod of no tenant ("+medianOf()+")", entitled, stock, kf))

	if kfErr > 2 {
		t.Errorf("kubefair's largest tenant error is %.1f points, want ≤ 2", kfErr)
	}
	// The pod of no tenant keeps its stock share, within the suite's
	// 2 points. (Nothing corrects it in a closed loop yet: on 2 CPUs its
	// open-loop weight falls short by about a point.)
	if kf[noTenant] < stock[noTenant]-0.02 {
		t.Errorf("the pod of no tenant got %.1f %% with kubefair, %.1f %% in stock", 100*kf[noTenant], 100*stock[noTenant])
	}
	if stock["besteffort"] > 0.05 || stockErr < 10 {
		t.Errorf("stock gave the BestEffort tenant %.1f %% (error %.1f points): the test does not contend as intended", 100*stock["besteffort"], stockErr)
	}
}
