package cgroup

import (
	"math"
	"os"
	"path"
	"path/filepath"
	"slices"
	"testing"

	"github.com/kubefair/kubefair/node-agent/cgroupfs/cgroupfstest"
	"github.com/kubefair/kubefair/node-agent/enforce"
	"github.com/kubefair/kubefair/node-agent/fairness"
)

// TestBackend: writes scaled with their siblings, drift, restore and
// vanished pods, on every node shape.
func TestBackend(t *testing.T) {
	cgroupfstest.ForEach(t, func(t *testing.T, s cgroupfstest.Setup) {
		root, h := cgroupfstest.Tree(t, s)
		l, _ := h.Layout()
		a, b, c, d := s.Cgroup(cgroupfstest.PodA), s.Cgroup(cgroupfstest.PodB), s.Cgroup(cgroupfstest.PodC), s.Cgroup(cgroupfstest.PodD)
		kubelet := cgroupfstest.Weight(t, h, a) // 102 or 4
		other := path.Dir(a) + "/" + path.Base(s.Cgroup(cgroupfstest.Pod{UID: "e-5", QoS: "burstable"}))
		cgroupfstest.AddPod(t, root, s, other) // a pod of no tenant beside a and b
		burstable, besteffort := cgroupfstest.Weight(t, h, l.Burstable), cgroupfstest.Weight(t, h, l.BestEffort)

		backend, err := NewBackend(h, t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		// Tenants' pods in every QoS class: a and b split 4:1 what d (a
		// Guaranteed pod) and c (a BestEffort pod) get each.
		plan := enforce.Plan{Rescale: true, Pods: []enforce.Pod{
			{Cgroup: a, Weight: 1.6, Limit: 1}, {Cgroup: b, Weight: 0.4, Limit: 1},
			{Cgroup: d, Weight: 1, Limit: 1}, {Cgroup: c, Weight: 1, Limit: 1},
		}, Others: []string{other}}
		res, err := backend.Apply(plan)
		if err != nil {
			t.Fatal(err)
		}
		// What each pod gets from the files, all backlogged: the tenants'
		// pods by their parts whatever their class, the pod of no tenant
		// at least its stock share.
		share := func() map[string]float64 {
			tree := fairness.QoSTree{Classes: []float64{float64(cgroupfstest.Weight(t, h, l.Burstable)), float64(cgroupfstest.Weight(t, h, l.BestEffort))}}
			cgs := []string{d, a, b, other, c}
			for i, cg := range cgs {
				tree.Pods = append(tree.Pods, fairness.QoSPod{Class: []int{-1, 0, 0, 0, 1}[i], Kubelet: float64(cgroupfstest.Weight(t, h, cg)), Part: 1, Limit: 1})
			}
			out := map[string]float64{}
			for i, v := range fairness.StockShares(tree) {
				out[cgs[i]] = v
			}
			return out
		}
		got := share()
		left := got[a] + got[b] + got[c] + got[d]
		for cg, part := range map[string]float64{a: 1.6 / 4, b: 0.4 / 4, c: 1.0 / 4, d: 1.0 / 4} {
			if math.Abs(got[cg]-part*left) > 0.01 {
				t.Errorf("%s gets %.3f of the node, want %.3f (its part of the tenants' %.3f)", cg, got[cg], part*left, left)
			}
		}
		// In stock kubelet weighs Burstable the sum of its pods' requests,
		// BestEffort the minimum; Burstable's three pods weigh alike.
		bu, be := float64(h.Native(3*h.Shares(kubelet))), float64(h.Native(fairness.MinShares))
		stock := bu / (bu + be + float64(kubelet)) / 3
		if got[other] < stock-0.01 {
			t.Errorf("the pod of no tenant gets %.3f, below its stock %.3f", got[other], stock)
		}
		for _, cg := range []string{a, b, c} {
			if v := cgroupfstest.Weight(t, h, cg); v < resolution {
				t.Errorf("%s holds %d, below resolution %d", cg, v, resolution)
			}
		}
		if res.Drift != 0 || res.Vanished != 0 || res.Writes < 6 {
			t.Fatalf("first apply = %+v, want the four pods and both QoS cgroups written", res)
		}
		if res, _ := backend.Apply(plan); res.Writes != 0 {
			t.Fatalf("an unchanged plan wrote %d values", res.Writes)
		}
		// The closed loop's nudges of 1 % or less are not written; more are.
		nudge := func(f float64) enforce.Plan {
			p := slices.Clone(plan.Pods)
			p[0].Weight *= f
			return enforce.Plan{Pods: p, Others: plan.Others, Rescale: true}
		}
		wa := cgroupfstest.Weight(t, h, a)
		if res, _ := backend.Apply(nudge(1.005)); res.Writes != 0 || res.Drift != 0 || cgroupfstest.Weight(t, h, a) != wa {
			t.Fatalf("a 0.5 %% nudge: %+v, file %d", res, cgroupfstest.Weight(t, h, a))
		}
		if res, _ := backend.Apply(nudge(1.05)); res.Writes == 0 || res.Drift != 0 {
			t.Fatalf("a 5 %% change: %+v, want writes", res)
		}
		if _, err := backend.Apply(plan); err != nil {
			t.Fatal(err)
		}
		if got, err := backend.KubeletWeight(b); err != nil || got != kubelet {
			t.Fatalf("KubeletWeight(b) = %d, %v; want kubelet's %d", got, err, kubelet)
		}
		wa, wo := cgroupfstest.Weight(t, h, a), cgroupfstest.Weight(t, h, other)

		// Someone else (kubelet on a resize or its QoS update, systemd on a
		// daemon-reload) rewrites values: counted and undone, and their
		// value is the one to restore later.
		cgroupfstest.SetWeight(t, h, a, 7)
		cgroupfstest.SetWeight(t, h, l.BestEffort, besteffort)
		res, _ = backend.Apply(plan)
		if res.Drift != 2 || cgroupfstest.Weight(t, h, a) != wa || cgroupfstest.Weight(t, h, other) != wo || cgroupfstest.Weight(t, h, l.BestEffort) == besteffort {
			t.Fatalf("drift apply = %+v, a holds %d (want %d)", res, cgroupfstest.Weight(t, h, a), wa)
		}
		if got, err := backend.KubeletWeight(a); err != nil || got != 7 {
			t.Fatalf("KubeletWeight(a) after kubelet's rewrite = %d, %v; want 7", got, err)
		}
		// Every pod back at kubelet's value at once (systemd's
		// daemon-reload): in their level, the pod of no tenant — which
		// may be the agent's own — is raised before the tenants' pods are,
		// so it never waits starved between two writes.
		var order []string
		backend.wrote = func(cg string) { order = append(order, cg) }
		for cg, v := range map[string]uint64{a: 7, b: kubelet, other: kubelet} {
			cgroupfstest.SetWeight(t, h, cg, v)
		}
		if _, err := backend.Apply(plan); err != nil {
			t.Fatal(err)
		}
		backend.wrote = nil
		if i := slices.Index(order, other); i < 0 || slices.Index(order, a) < i || slices.Index(order, b) < i {
			t.Errorf("written in the order %q: the pod of no tenant after a tenant's", order)
		}

		// A restarted agent still knows kubelet's values and restores them,
		// the pod of no tenant's and the QoS cgroups' included.
		again, err := NewBackend(h, string(backend.stateDir))
		if err != nil {
			t.Fatal(err)
		}
		if n := len(again.Managed()); n != 7 {
			t.Fatalf("restarted backend manages %d cgroups, want 7", n)
		}
		if err := again.Restore(again.Managed()); err != nil {
			t.Fatal(err)
		}
		for cg, want := range map[string]uint64{a: 7, b: kubelet, other: kubelet, d: kubelet, l.Burstable: burstable, l.BestEffort: besteffort} {
			if got := cgroupfstest.Weight(t, h, cg); got != want {
				t.Errorf("%s restored to %d, want kubelet's %d", cg, got, want)
			}
		}
		cgroupfstest.SetWeight(t, h, a, kubelet)

		// Where kubelet reports pod weights as requests, nothing is
		// scaled: each level's pods weigh together what kubelet gave them.
		unscaled := plan
		unscaled.Rescale = false
		if _, err := again.Apply(unscaled); err != nil {
			t.Fatal(err)
		}
		if len(again.Scales()) != 0 {
			t.Errorf("scales in use without Rescale: %v", again.Scales())
		}
		if sum := cgroupfstest.Weight(t, h, a) + cgroupfstest.Weight(t, h, b) + cgroupfstest.Weight(t, h, other); sum > 3*kubelet+2 || sum+2 < 3*kubelet {
			t.Errorf("unscaled, Burstable's pods weigh %d together, want kubelet's %d", sum, 3*kubelet)
		}

		// With no tenant's pod left, every value is kubelet's again.
		if _, err := again.Apply(enforce.Plan{Rescale: true}); err != nil {
			t.Fatal(err)
		}
		if n := len(again.Managed()); n != 0 {
			t.Errorf("an empty plan left %d cgroups managed", n)
		}
		for cg, want := range map[string]uint64{a: kubelet, other: kubelet, l.BestEffort: besteffort} {
			if got := cgroupfstest.Weight(t, h, cg); got != want {
				t.Errorf("%s holds %d after an empty plan, want kubelet's %d", cg, got, want)
			}
		}

		// A pod that vanished is not an error. (cgroupfs answers ENODEV on
		// a removed cgroup's kept-open files; the fake tree's files stay
		// readable, so the hierarchy's kept files are closed first.)
		two := enforce.Plan{Pods: []enforce.Pod{{Cgroup: d, Weight: 1, Limit: 1}, {Cgroup: a, Weight: 3, Limit: 1}}}
		if _, err := again.Apply(two); err != nil {
			t.Fatal(err)
		}
		if !slices.ContainsFunc(again.Managed(), func(p enforce.Pod) bool { return p.Cgroup == d }) {
			t.Fatalf("%s is not managed after a plan weighed it", d)
		}
		if err := os.RemoveAll(filepath.Dir(cgroupfstest.WeightFile(h, d))); err != nil {
			t.Fatal(err)
		}
		h.Sweep()
		h.Sweep()
		res, err = again.Apply(two)
		if err != nil || res.Vanished != 1 {
			t.Fatalf("vanished pod: %+v, %v", res, err)
		}
		// Its state entry is pruned: nothing of a pod gone from the node
		// is kept, or restored later.
		if slices.ContainsFunc(again.Managed(), func(p enforce.Pod) bool { return p.Cgroup == d }) {
			t.Errorf("the vanished pod %s is still in the state", d)
		}
	})
}

// TestBackendReportsClampedWeights: a pod whose weight falls outside the
// cgroup weight range is named in the result (its tenant is not realised
// exactly there); pods within the range are not.
func TestBackendReportsClampedWeights(t *testing.T) {
	cgroupfstest.ForEach(t, func(t *testing.T, s cgroupfstest.Setup) {
		_, h := cgroupfstest.Tree(t, s)
		a, b := s.Cgroup(cgroupfstest.PodA), s.Cgroup(cgroupfstest.PodB)
		backend, err := NewBackend(h, t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		plan := func(parts ...float64) enforce.Plan {
			return enforce.Plan{Pods: []enforce.Pod{{Cgroup: a, Weight: parts[0], Limit: 1}, {Cgroup: b, Weight: parts[1], Limit: 1}}}
		}
		if res, err := backend.Apply(plan(1, 2)); err != nil || len(res.Clamped) != 0 {
			t.Fatalf("1:2 clamped %v (%v)", res.Clamped, err)
		}
		// 1:10000 within what kubelet gave two pods (no rescaling): the
		// small pod's weight is below the range's minimum.
		if res, err := backend.Apply(plan(1, 10000)); err != nil || !slices.Equal(res.Clamped, []string{a}) {
			t.Fatalf("1:10000 clamped %v (%v), want %s", res.Clamped, err, a)
		}
	})
}

// TestRepairBurstable: kubelet's start-up weight of the Burstable QoS
// cgroup is replaced by the sum of its pods' weights, once; kubelet's own
// sum (which may differ by rounding) and other QoS classes are left alone.
func TestRepairBurstable(t *testing.T) {
	cgroupfstest.ForEach(t, func(t *testing.T, s cgroupfstest.Setup) {
		_, h := cgroupfstest.Tree(t, s)
		l, _ := h.Layout()
		b, err := NewBackend(h, "")
		if err != nil {
			t.Fatal(err)
		}
		pods := []string{s.Cgroup(cgroupfstest.PodA), s.Cgroup(cgroupfstest.PodB), s.Cgroup(cgroupfstest.PodC), s.Cgroup(cgroupfstest.PodD)}
		perPod, _ := b.KubeletWeight(pods[0])
		sum := h.Native(2 * h.Shares(perPod)) // a and b only

		cgroupfstest.SetWeight(t, h, l.Burstable, h.Native(fairness.MinShares)) // kubelet just started
		if ok, err := b.repairBurstable(slices.Values(pods)); !ok || err != nil {
			t.Fatalf("repair = %v, %v; want a write", ok, err)
		}
		if got := cgroupfstest.Weight(t, h, l.Burstable); got != sum {
			t.Fatalf("Burstable holds %d, want the pods' sum %d", got, sum)
		}
		if ok, _ := b.repairBurstable(slices.Values(pods)); ok {
			t.Fatal("a repaired QoS weight was written again")
		}
		cgroupfstest.SetWeight(t, h, l.Burstable, sum-1) // kubelet's own update, rounded differently
		if ok, _ := b.repairBurstable(slices.Values(pods)); ok {
			t.Fatal("kubelet's own sum was overwritten")
		}

		// A pod without a CPU request (minimum weight) counts 0, as in kubelet.
		cgroupfstest.SetWeight(t, h, pods[1], h.Native(fairness.MinShares))
		cgroupfstest.SetWeight(t, h, l.Burstable, h.Native(fairness.MinShares))
		if ok, err := b.repairBurstable(slices.Values(pods)); !ok || err != nil {
			t.Fatalf("repair = %v, %v; want a write", ok, err)
		}
		if got := cgroupfstest.Weight(t, h, l.Burstable); got != perPod {
			t.Fatalf("Burstable holds %d, want a's %d alone", got, perPod)
		}
		// No Burstable pod with a request: nothing to repair.
		if ok, err := b.repairBurstable(slices.Values(pods[2:])); ok || err != nil {
			t.Fatalf("repair with no Burstable pods = %v, %v", ok, err)
		}
	})
}

// TestRestoreAllLeavesOwnPodLast: the agent's own pod, and then the QoS
// cgroup that holds it, are restored after every other cgroup (restored
// earlier, the agent would weigh kubelet's value against siblings still
// scaled up many times).
func TestRestoreAllLeavesOwnPodLast(t *testing.T) {
	cgroupfstest.ForEach(t, func(t *testing.T, s cgroupfstest.Setup) {
		root, h := cgroupfstest.Tree(t, s)
		a, b, c, d := s.Cgroup(cgroupfstest.PodA), s.Cgroup(cgroupfstest.PodB), s.Cgroup(cgroupfstest.PodC), s.Cgroup(cgroupfstest.PodD)
		own := path.Dir(a) + "/" + path.Base(s.Cgroup(cgroupfstest.Pod{UID: "f-6", QoS: "burstable"}))
		cgroupfstest.AddPod(t, root, s, own)
		backend, err := NewBackend(h, t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		if _, err := backend.Apply(enforce.Plan{Rescale: true, Pods: []enforce.Pod{
			{Cgroup: a, Weight: 1.6, Limit: 1}, {Cgroup: b, Weight: 0.4, Limit: 1},
			{Cgroup: c, Weight: 1, Limit: 1}, {Cgroup: d, Weight: 1, Limit: 1}}, Others: []string{own}}); err != nil {
			t.Fatal(err)
		}
		if _, held := backend.Held()[own]; !held {
			t.Fatalf("the agent's pod was not weighed (held: %v): nothing to test", backend.Held())
		}
		backend.SetOwn(own)
		var order []string
		backend.wrote = func(cg string) { order = append(order, cg) }
		if err := backend.RestoreAll(); err != nil {
			t.Fatal(err)
		}
		n := len(order)
		if n < 4 || order[n-1] != own || order[n-2] != path.Dir(own) {
			t.Errorf("restored in the order %v, want the agent's pod %s last and its QoS cgroup before it", order, own)
		}
		if held := backend.Held(); len(held) != 0 {
			t.Errorf("after RestoreAll kubefair still holds %v", held)
		}
	})
}
