package agent

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	kubefairv1 "github.com/kubefair/kubefair/api/v1alpha1"
	"github.com/kubefair/kubefair/node-agent/cgroupfs"
)

// TestPodsFound: the PodCgroupsFound condition and the per-tenant count of
// unmeasured pods, period by period, as a node goes from no kubepods (a
// wrong root) to pods whose cgroups are missing to every pod found.
func TestPodsFound(t *testing.T) {
	root := t.TempDir()
	if err := os.WriteFile(filepath.Join(root, "cgroup.controllers"), []byte("cpu memory\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	h, err := cgroupfs.Detect(root)
	if err != nil {
		t.Fatal(err)
	}
	running := map[string]*corev1.Pod{}
	for _, p := range []struct{ uid, ns string }{{"u1", "shop"}, {"u2", "shop"}, {"u3", "kube-system"}} {
		running[p.uid] = &corev1.Pod{ObjectMeta: metav1.ObjectMeta{UID: types.UID(p.uid), Namespace: p.ns, Name: "pod-" + p.uid}}
	}
	tenantOf := func(p *corev1.Pod) (string, bool) { return "shop", p.Namespace == "shop" }
	var f podsFound
	now := time.Now()
	step := func(discovered map[string]bool) (metav1.Condition, bool) {
		now = now.Add(time.Second)
		return f.update(h, running, discovered, tenantOf, now)
	}

	// No kubepods where the agent looks: False at once, naming the paths.
	c, news := step(nil)
	if c.Status != metav1.ConditionFalse || c.Reason != kubefairv1.ReasonLayoutNotFound || !news || !strings.Contains(c.Message, filepath.Join(root, "kubepods.slice")) {
		t.Fatalf("no kubepods: %+v (news %v); want LayoutNotFound naming %s", c, news, root)
	}
	if len(f.unmeasuredList()) != 0 {
		t.Fatalf("pods counted unmeasured at once: %v; a pod may just be starting", f.unmeasuredList())
	}
	step(nil)
	if _, news := step(nil); news {
		t.Fatal("the same condition was news again")
	}
	if got := f.unmeasuredList(); len(got) != 1 || got[0].Tenant != "shop" || got[0].Pods != 2 || f.count != 3 {
		t.Fatalf("after %d periods: %+v, %d in all; want shop's 2 pods and 3 in all", missingPeriods, got, f.count)
	}

	// kubelet's layout appears, with one of shop's pods found.
	if err := os.MkdirAll(filepath.Join(root, "kubepods.slice"), 0o755); err != nil {
		t.Fatal(err)
	}
	c, news = step(map[string]bool{"u1": true, "u3": true})
	if c.Reason != kubefairv1.ReasonPodCgroupsMissing || !news || !strings.Contains(c.Message, "shop/pod-u2") || !strings.Contains(c.Message, "systemd driver") {
		t.Fatalf("one pod missing: %+v (news %v)", c, news)
	}
	if got := f.unmeasuredList(); len(got) != 1 || got[0].Pods != 1 {
		t.Fatalf("unmeasured %+v, want shop's one pod", got)
	}

	// Every pod found.
	c, news = step(map[string]bool{"u1": true, "u2": true, "u3": true})
	if c.Status != metav1.ConditionTrue || c.Reason != kubefairv1.ReasonLayoutFound || !news || len(f.unmeasuredList()) != 0 {
		t.Fatalf("all found: %+v (news %v), unmeasured %v", c, news, f.unmeasuredList())
	}
	if len(f.conditions) != 1 {
		t.Fatalf("conditions %+v, want PodCgroupsFound alone", f.conditions)
	}
	// A pod that ends is forgotten.
	delete(running, "u2")
	if c, _ := step(map[string]bool{"u1": true, "u3": true}); c.Status != metav1.ConditionTrue || len(f.missing) != 0 {
		t.Fatalf("after a pod ended: %+v, missing %v", c, f.missing)
	}
}
