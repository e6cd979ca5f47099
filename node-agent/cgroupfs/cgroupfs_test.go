package cgroupfs

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/kubefair/kubefair/node-agent/enforce"
	"github.com/kubefair/kubefair/node-agent/fairness"
)

// fakeTree lays out a kubelet-like tree in a temp dir with every file
// pre-created: writing a missing file silently "succeeds" in
// containerd/cgroups, so a test must see the files it expects change.
// The pods lie below kubeletRoot (kubelet's --cgroup-root).
func fakeTree(t *testing.T, mode Mode, kubeletRoot string) (root string, h *Hierarchy) {
	t.Helper()
	root = t.TempDir()
	var pods []string
	for _, p := range []string{"/kubepods/burstable/poda", "/kubepods/burstable/podb", "/kubepods/besteffort/podc", "/kubepods/podd"} {
		pods = append(pods, filepath.Join(kubeletRoot, p))
	}
	write := func(p, content string) {
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if mode == V2 {
		write(filepath.Join(root, "cgroup.controllers"), "cpuset cpu io memory pids\n")
		write(filepath.Join(root, kubeletRoot, BurstableDir, "cpu.weight"), "40\n")
		for _, p := range pods {
			write(filepath.Join(root, p, "cpu.weight"), "4\n")
			write(filepath.Join(root, p, "cpu.stat"), "usage_usec 1500\nuser_usec 1000\nsystem_usec 500\n")
			write(filepath.Join(root, p, "ctr1", "cgroup.procs"), "11\n12\n")
			write(filepath.Join(root, p, "cgroup.procs"), "")
		}
	} else {
		for _, p := range pods {
			write(filepath.Join(root, "cpu", p, "cpu.shares"), "102\n")
			write(filepath.Join(root, "cpuacct", p, "cpuacct.usage"), "1500000\n")
			write(filepath.Join(root, "cpu", p, "ctr1", "cgroup.procs"), "11\n12\n")
			write(filepath.Join(root, "cpu", p, "cgroup.procs"), "")
		}
		write(filepath.Join(root, "cpu", "cpu.shares"), "1024\n")
		write(filepath.Join(root, "cpu", kubeletRoot, BurstableDir, "cpu.shares"), "1024\n")
		write(filepath.Join(root, "cpuacct", "cpuacct.usage"), "0\n")
	}
	h, err := Detect(root)
	if err == nil {
		h, err = h.Below(kubeletRoot)
	}
	if err != nil {
		t.Fatal(err)
	}
	if h.Mode != mode {
		t.Fatalf("detected v%d, want v%d", h.Mode, mode)
	}
	return root, h
}

func fileValue(t *testing.T, root string, h *Hierarchy, cgroup string) string {
	t.Helper()
	p := filepath.Join(root, "cpu", h.kubeletRoot, cgroup, "cpu.shares")
	if h.Mode == V2 {
		p = filepath.Join(root, h.kubeletRoot, cgroup, "cpu.weight")
	}
	data, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(data))
}

// forEachLayout runs a test over v1 and v2 trees, with kubepods at the
// root and below a kubelet --cgroup-root: the two versions share every test.
func forEachLayout(t *testing.T, test func(t *testing.T, mode Mode, kubeletRoot string)) {
	for _, mode := range []Mode{V1, V2} {
		for _, kubeletRoot := range []string{"/", "/kubelet"} {
			t.Run(fmt.Sprintf("v%d%s", mode, kubeletRoot), func(t *testing.T) { test(t, mode, kubeletRoot) })
		}
	}
}

// TestBothVersions: discovery, usage, writes, drift, restore and vanished
// pods on both versions.
func TestBothVersions(t *testing.T) {
	forEachLayout(t, func(t *testing.T, mode Mode, kubeletRoot string) {
		root, h := fakeTree(t, mode, kubeletRoot)
		orig := map[Mode]string{V1: "102", V2: "4"}[mode]

		pods, err := h.Pods()
		if err != nil || len(pods) != 4 {
			t.Fatalf("Pods() = %v, %v; want 4 pods", pods, err)
		}
		if usage, err := h.UsageNanoseconds("/kubepods/burstable/poda"); err != nil || usage != 1_500_000 {
			t.Fatalf("usage = %d, %v; want 1.5 ms", usage, err)
		}
		if procs, err := h.Procs("/kubepods/burstable/poda"); err != nil || len(procs) != 2 {
			t.Fatalf("procs = %v, %v", procs, err)
		}
		if procs, err := h.AppendProcs([]int{7}, "/kubepods/burstable/poda/ctr1"); err != nil || !slices.Equal(procs, []int{7, 11, 12}) {
			t.Fatalf("AppendProcs(ctr1) = %v, %v; want [7 11 12]", procs, err)
		}
		if procs, err := h.AppendProcs(nil, "/kubepods/burstable/poda"); err != nil || len(procs) != 0 {
			t.Fatalf("AppendProcs(pod) = %v, %v; want none (they are in ctr1)", procs, err)
		}

		b, err := NewBackend(h, t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		plan := enforce.Plan{Pods: []enforce.Pod{{Cgroup: "/kubepods/burstable/poda", Shares: 2048}, {Cgroup: "/kubepods/burstable/podb", Shares: 512}}}
		want := map[Mode][2]string{V1: {"2048", "512"}, V2: {"79", "20"}}[mode] // kubelet's shares→weight on v2
		res, err := b.Apply(plan)
		if err != nil || res.Writes != 2 || res.Drift != 0 {
			t.Fatalf("first apply = %+v, %v; want 2 writes", res, err)
		}
		if a, bb := fileValue(t, root, h, "/kubepods/burstable/poda"), fileValue(t, root, h, "/kubepods/burstable/podb"); a != want[0] || bb != want[1] {
			t.Fatalf("files hold %s, %s; want %s, %s", a, bb, want[0], want[1])
		}
		if res, _ := b.Apply(plan); res.Writes != 0 {
			t.Fatalf("an unchanged plan wrote %d values", res.Writes)
		}
		// The closed loop's nudges of 1 % or less are not written; more are.
		nudge := func(shares uint64) enforce.Plan {
			return enforce.Plan{Pods: []enforce.Pod{{Cgroup: "/kubepods/burstable/poda", Shares: shares}, plan.Pods[1]}}
		}
		if res, _ := b.Apply(nudge(2060)); res.Writes != 0 || res.Drift != 0 || fileValue(t, root, h, "/kubepods/burstable/poda") != want[0] {
			t.Fatalf("a 0.6 %% nudge: %+v, file %s", res, fileValue(t, root, h, "/kubepods/burstable/poda"))
		}
		if res, _ := b.Apply(nudge(2100)); res.Writes != 1 || res.Drift != 0 {
			t.Fatalf("a 2.5 %% change: %+v, want one write", res)
		}
		if _, err := b.Apply(plan); err != nil {
			t.Fatal(err)
		}

		if got, err := b.KubeletShares("/kubepods/burstable/podb"); err != nil || h.Native(got) != mustUint(t, orig) {
			t.Fatalf("KubeletShares(podb) = %d, %v; want kubelet's %s", got, err, orig)
		}

		// Someone else (kubelet on a resize) rewrites a value: counted and
		// undone, and kubelet's new value is the one to restore later.
		if err := h.WriteWeight("/kubepods/burstable/poda", 7); err != nil {
			t.Fatal(err)
		}
		if res, _ := b.Apply(plan); res.Drift != 1 || res.Writes != 1 || fileValue(t, root, h, "/kubepods/burstable/poda") != want[0] {
			t.Fatalf("drift apply = %+v, file %s", res, fileValue(t, root, h, "/kubepods/burstable/poda"))
		}
		if got, err := b.KubeletShares("/kubepods/burstable/poda"); err != nil || got != h.Shares(7) {
			t.Fatalf("KubeletShares(poda) after kubelet's rewrite = %d, %v; want %d", got, err, h.Shares(7))
		}

		// A restarted agent still knows kubelet's values and restores them.
		again, err := NewBackend(h, b.stateDir)
		if err != nil {
			t.Fatal(err)
		}
		if len(again.Managed()) != 2 {
			t.Fatalf("restarted backend manages %d pods, want 2", len(again.Managed()))
		}
		if err := again.Restore(again.Managed()); err != nil {
			t.Fatal(err)
		}
		for cg, kubelet := range map[string]string{"/kubepods/burstable/poda": "7", "/kubepods/burstable/podb": orig} {
			if got := fileValue(t, root, h, cg); got != kubelet {
				t.Fatalf("%s restored to %s, want kubelet's %s", cg, got, kubelet)
			}
		}

		// A pod that vanished is not an error.
		if err := os.RemoveAll(filepath.Join(root, map[Mode]string{V1: "cpu", V2: ""}[mode], kubeletRoot, "/kubepods/podd")); err != nil {
			t.Fatal(err)
		}
		res, err = b.Apply(enforce.Plan{Pods: []enforce.Pod{{Cgroup: "/kubepods/podd", Shares: 100}}})
		if err != nil || res.Vanished != 1 {
			t.Fatalf("vanished pod: %+v, %v", res, err)
		}
	})
}

func TestRefusesPathsOutsideKubepods(t *testing.T) {
	forEachLayout(t, func(t *testing.T, mode Mode, kubeletRoot string) {
		_, h := fakeTree(t, mode, kubeletRoot)
		for _, p := range []string{"/", "/system.slice", "/kubepods", "/kubepods/../etc", "kubepods/burstable/poda", "/kubepodsx/a"} {
			if err := h.WriteWeight(p, 100); err == nil {
				t.Errorf("WriteWeight(%q) was allowed", p)
			}
			if _, err := h.ReadWeight(p); err == nil {
				t.Errorf("ReadWeight(%q) was allowed", p)
			}
		}
	})
}

// TestFromRuntime: a container's cgroupsPath, as the runtime spells it from
// the host's root, maps into the hierarchy only below kubelet's root and
// inside kubepods.
func TestFromRuntime(t *testing.T) {
	forEachLayout(t, func(t *testing.T, mode Mode, kubeletRoot string) {
		_, h := fakeTree(t, mode, kubeletRoot)
		prefix := strings.TrimSuffix(kubeletRoot, "/")
		for in, want := range map[string]string{
			prefix + "/kubepods/burstable/poda/c1":       "/kubepods/burstable/poda/c1",
			prefix + "/kubepods/podd/c2":                 "/kubepods/podd/c2",
			"/other/kubepods/burstable/poda/c1":          "",
			prefix + "/system.slice/c1":                  "",
			"kubepods-burstable.slice:cri-containerd:c1": "",
			"": "",
		} {
			got, ok := h.FromRuntime(in)
			if got != want && !(want == "" && !ok) || ok != (want != "") {
				t.Errorf("FromRuntime(%q) = %q, %v; want %q", in, got, ok, want)
			}
		}
	})
	if _, err := (&Hierarchy{kubeletRoot: "/"}).Below("relative/root"); err == nil {
		t.Error("a relative kubelet cgroup root was accepted")
	}
}

func mustUint(t *testing.T, s string) uint64 {
	t.Helper()
	v, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// TestRepairBurstable: kubelet's start-up weight of the Burstable QoS
// cgroup is replaced by the sum of its pods' weights, once; kubelet's own
// sum (which may differ by rounding) and other QoS classes are left alone.
func TestRepairBurstable(t *testing.T) {
	forEachLayout(t, func(t *testing.T, mode Mode, kubeletRoot string) {
		root, h := fakeTree(t, mode, kubeletRoot)
		setQoS := func(native uint64) {
			p := filepath.Join(root, "cpu", kubeletRoot, BurstableDir, "cpu.shares")
			if mode == V2 {
				p = filepath.Join(root, kubeletRoot, BurstableDir, "cpu.weight")
			}
			if err := os.WriteFile(p, []byte(fmt.Sprintf("%d\n", native)), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		b, err := NewBackend(h, "")
		if err != nil {
			t.Fatal(err)
		}
		pods := []string{"/kubepods/burstable/poda", "/kubepods/burstable/podb", "/kubepods/besteffort/podc", "/kubepods/podd"}
		perPod, _ := b.KubeletShares(pods[0])
		sum := h.Native(2 * perPod) // poda and podb only

		setQoS(h.Native(fairness.MinShares)) // kubelet just started
		if ok, err := b.RepairBurstable(slices.Values(pods)); !ok || err != nil {
			t.Fatalf("repair = %v, %v; want a write", ok, err)
		}
		if got := fileValue(t, root, h, BurstableDir); got != fmt.Sprint(sum) {
			t.Fatalf("Burstable holds %s, want the pods' sum %d", got, sum)
		}
		if ok, _ := b.RepairBurstable(slices.Values(pods)); ok {
			t.Fatal("a repaired QoS weight was written again")
		}
		setQoS(sum - 1) // kubelet's own update, rounded differently
		if ok, _ := b.RepairBurstable(slices.Values(pods)); ok {
			t.Fatal("kubelet's own sum was overwritten")
		}

		// A pod without a CPU request (minimum weight) counts 0, as in kubelet.
		if err := h.WriteWeight(pods[1], h.Native(fairness.MinShares)); err != nil {
			t.Fatal(err)
		}
		setQoS(h.Native(fairness.MinShares))
		if ok, err := b.RepairBurstable(slices.Values(pods)); !ok || err != nil {
			t.Fatalf("repair = %v, %v; want a write", ok, err)
		}
		if got := fileValue(t, root, h, BurstableDir); got != fmt.Sprint(h.Native(perPod)) {
			t.Fatalf("Burstable holds %s, want poda's %d alone", got, h.Native(perPod))
		}
		// No Burstable pod with a request: nothing to repair.
		if ok, err := b.RepairBurstable(slices.Values(pods[2:])); ok || err != nil {
			t.Fatalf("repair with no Burstable pods = %v, %v", ok, err)
		}
	})
}
