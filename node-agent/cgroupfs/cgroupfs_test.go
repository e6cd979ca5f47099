package cgroupfs

import (
	"errors"
	"fmt"
	"math"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/kubefair/kubefair/node-agent/enforce"
	"github.com/kubefair/kubefair/node-agent/fairness"
)

// kubeletSetup is one node shape: cgroup version, kubelet's driver and
// its cgroup root.
type kubeletSetup struct {
	mode   Mode
	driver Driver
	root   string
}

func (s kubeletSetup) String() string { return fmt.Sprintf("v%d-%s%s", s.mode, s.driver, s.root) }

// setups are every node shape the package supports.
var setups = []kubeletSetup{
	{V1, Cgroupfs, "/"}, {V1, Cgroupfs, "/kubelet"}, {V1, Systemd, "/"},
	{V2, Cgroupfs, "/"}, {V2, Cgroupfs, "/kubelet"}, {V2, Systemd, "/"}, {V2, Systemd, "/kubelet.slice"},
}

// pod names the fake tree's pods: a and b Burstable, c BestEffort, d
// Guaranteed, with UIDs that have dashes (systemd spells them with _).
type pod struct{ uid, qos string }

var (
	podA = pod{"a-1", "burstable"}
	podB = pod{"b-2", "burstable"}
	podC = pod{"c-3", "besteffort"}
	podD = pod{"d-4", ""}
)

// cgroup is a pod's cgroup path below kubelet's root, as kubelet names it
// with the setup's driver.
func (s kubeletSetup) cgroup(p pod) string {
	l := layoutFor(s.driver, s.root)
	parent := map[string]string{"burstable": l.Burstable, "besteffort": l.BestEffort, "": l.Kubepods}[p.qos]
	if s.driver == Systemd {
		return parent + "/" + strings.TrimSuffix(path.Base(parent), ".slice") + "-pod" + strings.ReplaceAll(p.uid, "-", "_") + ".slice"
	}
	return parent + "/pod" + p.uid
}

// container is the name of a pod's one container cgroup.
func (s kubeletSetup) container() string {
	if s.driver == Systemd {
		return "cri-containerd-c1.scope"
	}
	return "c1"
}

// fakeTree lays out a kubelet-like tree in a temp dir with every file
// pre-created: writing a missing file silently "succeeds" in
// containerd/cgroups, so a test must see the files it expects change.
// Pods weigh 102 shares (v1) or 4 (v2, kubelet's conversion of 102).
func fakeTree(t *testing.T, s kubeletSetup) (root string, h *Hierarchy) {
	t.Helper()
	root = t.TempDir()
	l := layoutFor(s.driver, s.root)
	if s.mode == V2 {
		writeFile(t, filepath.Join(root, "cgroup.controllers"), "cpuset cpu io memory pids\n")
		writeFile(t, filepath.Join(root, s.root, l.Burstable, "cpu.weight"), "40\n")
		writeFile(t, filepath.Join(root, s.root, l.BestEffort, "cpu.weight"), "1\n")
	} else {
		writeFile(t, filepath.Join(root, "cpu", "cpu.shares"), "1024\n")
		writeFile(t, filepath.Join(root, "cpu", s.root, l.Burstable, "cpu.shares"), "1024\n")
		writeFile(t, filepath.Join(root, "cpu", s.root, l.BestEffort, "cpu.shares"), "2\n")
		writeFile(t, filepath.Join(root, "cpuacct", "cpuacct.usage"), "0\n")
	}
	for _, p := range []pod{podA, podB, podC, podD} {
		addPod(t, root, s, s.cgroup(p))
	}
	h, err := Detect(root)
	if err == nil {
		h, err = h.ForKubelet(s.driver, s.root)
	}
	if err != nil {
		t.Fatal(err)
	}
	if h.Mode != s.mode {
		t.Fatalf("detected v%d, want v%d", h.Mode, s.mode)
	}
	return root, h
}

// addPod creates a pod cgroup (and its container's) at kubelet's weight.
func addPod(t *testing.T, root string, s kubeletSetup, cg string) {
	dir := filepath.Join(root, s.root, cg)
	ctr := filepath.Join(dir, s.container())
	if s.mode == V2 {
		writeFile(t, filepath.Join(dir, "cpu.weight"), "4\n")
		writeFile(t, filepath.Join(dir, "cpu.stat"), "usage_usec 1500\nuser_usec 1000\nsystem_usec 500\n")
		writeFile(t, filepath.Join(dir, "cpu.pressure"), "some avg10=1.00 avg60=0.50 avg300=0.10 total=2500\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=700\n")
		writeFile(t, filepath.Join(ctr, "cgroup.procs"), "11\n12\n")
		writeFile(t, filepath.Join(dir, "cgroup.procs"), "")
		return
	}
	writeFile(t, filepath.Join(root, "cpu", s.root, cg, "cpu.shares"), "102\n")
	writeFile(t, filepath.Join(root, "cpuacct", s.root, cg, "cpuacct.usage"), "1500000\n")
	writeFile(t, filepath.Join(root, "cpu", s.root, cg, s.container(), "cgroup.procs"), "11\n12\n")
	writeFile(t, filepath.Join(root, "cpu", s.root, cg, "cgroup.procs"), "")
}

func writeFile(t *testing.T, p, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func weightFile(root string, h *Hierarchy, cgroup string) string {
	if h.Mode == V2 {
		return filepath.Join(root, h.kubeletRoot, cgroup, "cpu.weight")
	}
	return filepath.Join(root, "cpu", h.kubeletRoot, cgroup, "cpu.shares")
}

func fileValue(t *testing.T, root string, h *Hierarchy, cgroup string) uint64 {
	t.Helper()
	data, err := os.ReadFile(weightFile(root, h, cgroup))
	if err != nil {
		t.Fatal(err)
	}
	v, err := strconv.ParseUint(strings.TrimSpace(string(data)), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// setWeight writes a cgroup's weight as kubelet or systemd would, behind
// the backend's back.
func setWeight(t *testing.T, root string, h *Hierarchy, cgroup string, native uint64) {
	t.Helper()
	writeFile(t, weightFile(root, h, cgroup), fmt.Sprintf("%d\n", native))
}

// forEachSetup runs a test on every node shape.
func forEachSetup(t *testing.T, test func(t *testing.T, s kubeletSetup)) {
	for _, s := range setups {
		t.Run(s.String(), func(t *testing.T) { test(t, s) })
	}
}

// TestDiscovery: kubelet's pod cgroups, their UIDs and containers, usage,
// waiting and processes, on every node shape.
func TestDiscovery(t *testing.T) {
	forEachSetup(t, func(t *testing.T, s kubeletSetup) {
		_, h := fakeTree(t, s)
		l, err := h.Layout()
		if err != nil || l.Driver != s.driver {
			t.Fatalf("Layout() = %+v, %v; want the %s driver", l, err, s.driver)
		}
		pods, err := h.Pods()
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]string{}
		for _, p := range pods {
			got[p.UID] = p.Path
			if !slices.Equal(p.Containers, []string{s.container()}) {
				t.Errorf("pod %s has containers %v, want [%s]", p.UID, p.Containers, s.container())
			}
		}
		for _, p := range []pod{podA, podB, podC, podD} {
			if got[p.uid] != s.cgroup(p) {
				t.Errorf("pod %s found at %q, want %q (all: %v)", p.uid, got[p.uid], s.cgroup(p), got)
			}
		}
		if len(pods) != 4 {
			t.Errorf("%d pods, want 4: %v", len(pods), got)
		}
		a := s.cgroup(podA)
		if usage, err := h.UsageNanoseconds(a); err != nil || usage != 1_500_000 {
			t.Fatalf("usage = %d, %v; want 1.5 ms", usage, err)
		}
		wait, ok, err := h.WaitNanoseconds(a)
		if s.mode == V2 && (wait != 2_500_000 || !ok || err != nil) {
			t.Errorf("v2 waiting = %d, %v, %v; want cpu.pressure's some total, 2.5 ms", wait, ok, err)
		}
		if s.mode == V1 && (ok || err != nil) {
			t.Errorf("v1 waiting = %d, %v, %v; want none (schedstat instead)", wait, ok, err)
		}
		if procs, err := h.Procs(a); err != nil || len(procs) != 2 {
			t.Fatalf("procs = %v, %v", procs, err)
		}
		if procs, err := h.AppendProcs([]int{7}, a+"/"+s.container()); err != nil || !slices.Equal(procs, []int{7, 11, 12}) {
			t.Fatalf("AppendProcs(container) = %v, %v; want [7 11 12]", procs, err)
		}
		if procs, err := h.AppendProcs(nil, a); err != nil || len(procs) != 0 {
			t.Fatalf("AppendProcs(pod) = %v, %v; want none (they are in the container)", procs, err)
		}
	})
}

// TestWithoutPressure: a cgroup v2 kernel without PSI has no cpu.pressure;
// waiting then comes from schedstat, and the file is not looked for again.
func TestWithoutPressure(t *testing.T) {
	s := kubeletSetup{V2, Systemd, "/"}
	root, h := fakeTree(t, s)
	if err := os.Remove(filepath.Join(root, s.cgroup(podA), "cpu.pressure")); err != nil {
		t.Fatal(err)
	}
	if _, ok, err := h.WaitNanoseconds(s.cgroup(podA)); ok || err != nil {
		t.Fatalf("without cpu.pressure: %v, %v; want none and no error", ok, err)
	}
	if _, ok, _ := h.WaitNanoseconds(s.cgroup(podB)); ok {
		t.Fatal("cpu.pressure read again after the kernel had none")
	}
}

// TestLayoutNotFound: with no kubepods where the agent looks, discovery
// says where it looked; once kubelet creates it, the layout is found.
func TestLayoutNotFound(t *testing.T) {
	for _, s := range []kubeletSetup{{V2, AutoDriver, "/"}, {V2, Systemd, "/kubelet.slice"}, {V1, Cgroupfs, "/kubelet"}} {
		t.Run(s.String(), func(t *testing.T) {
			root := t.TempDir()
			if s.mode == V2 {
				writeFile(t, filepath.Join(root, "cgroup.controllers"), "cpu memory\n")
			} else {
				writeFile(t, filepath.Join(root, "cpu", "cpu.shares"), "1024\n")
				writeFile(t, filepath.Join(root, "cpuacct", "cpuacct.usage"), "0\n")
			}
			h, err := Detect(root)
			if err == nil {
				h, err = h.ForKubelet(s.driver, s.root)
			}
			if err != nil {
				t.Fatal(err)
			}
			_, err = h.Pods()
			var nf *LayoutNotFoundError
			if !errors.As(err, &nf) {
				t.Fatalf("Pods() on an empty tree: %v; want a LayoutNotFoundError", err)
			}
			want := map[Driver]int{AutoDriver: 2}[s.driver]
			if want == 0 {
				want = 1
			}
			if len(nf.Looked) != want || !strings.Contains(err.Error(), nf.Looked[0]) || !strings.HasPrefix(nf.Looked[0], root) {
				t.Fatalf("looked at %v (%v); want %d directories below %s, named in the message", nf.Looked, err, want, root)
			}
			if _, ok := h.FromRuntime("/kubepods/burstable/poda/c1"); ok {
				t.Fatal("a runtime path was accepted without a layout")
			}
			d := s.driver
			if d == AutoDriver {
				d = Systemd
			}
			created := kubeletSetup{s.mode, d, s.root}
			addPod(t, root, created, created.cgroup(podA))
			if pods, err := h.Pods(); err != nil || len(pods) != 1 || pods[0].UID != podA.uid {
				t.Fatalf("after kubelet started: %+v, %v; want pod %s", pods, err, podA.uid)
			}
		})
	}
}

func TestRefusesPathsOutsideKubepods(t *testing.T) {
	forEachSetup(t, func(t *testing.T, s kubeletSetup) {
		_, h := fakeTree(t, s)
		l, _ := h.Layout()
		for _, p := range []string{"/", "/system.slice", l.Kubepods, l.Kubepods + "/../etc", strings.TrimPrefix(s.cgroup(podA), "/"), l.Kubepods + "x/a", "/kubepods.slicex/a"} {
			if err := h.WriteWeight(p, 100); err == nil {
				t.Errorf("WriteWeight(%q) was allowed", p)
			}
			if _, err := h.ReadWeight(p); err == nil {
				t.Errorf("ReadWeight(%q) was allowed", p)
			}
		}
	})
}

// TestFromRuntime: a container's cgroupsPath, as the runtime spells it,
// maps into the hierarchy only below kubelet's root and inside kubepods —
// cgroupfs paths and systemd's slice:prefix:name alike.
func TestFromRuntime(t *testing.T) {
	forEachSetup(t, func(t *testing.T, s kubeletSetup) {
		_, h := fakeTree(t, s)
		prefix := strings.TrimSuffix(s.root, "/")
		a := s.cgroup(podA)
		cases := map[string]string{
			"":                            "",
			"/other/kubepods/burstable/c": "",
			prefix + "/system.slice/c1":   "",
			"a:b":                         "",
		}
		if s.driver == Systemd {
			slice := path.Base(a)
			cases[slice+":cri-containerd:c1"] = a + "/cri-containerd-c1.scope"
			cases[path.Base(s.cgroup(podD))+":cri-containerd:c2"] = s.cgroup(podD) + "/cri-containerd-c2.scope"
			cases["system.slice:cri-containerd:c1"] = ""
			cases["kubepods--x.slice:cri-containerd:c1"] = ""
			cases[slice+":cri-containerd:"] = ""
		} else {
			cases[prefix+a+"/c1"] = a + "/c1"
			cases[prefix+s.cgroup(podD)+"/c2"] = s.cgroup(podD) + "/c2"
			cases["kubepods-burstable.slice:cri-containerd:c1"] = ""
		}
		for in, want := range cases {
			got, ok := h.FromRuntime(in)
			if got != want || ok != (want != "") {
				t.Errorf("FromRuntime(%q) = %q, %v; want %q", in, got, ok, want)
			}
		}
	})
	if _, err := (&Hierarchy{kubeletRoot: "/"}).ForKubelet(Cgroupfs, "relative/root"); err == nil {
		t.Error("a relative kubelet cgroup root was accepted")
	}
	if _, err := (&Hierarchy{kubeletRoot: "/"}).ForKubelet(Systemd, "/kubelet"); err == nil {
		t.Error("a systemd cgroup root that is not a slice was accepted")
	}
}

func TestExpandSlice(t *testing.T) {
	for in, want := range map[string]string{
		"-.slice":                           "/",
		"kubepods.slice":                    "/kubepods.slice",
		"kubepods-burstable.slice":          "/kubepods.slice/kubepods-burstable.slice",
		"kubepods-burstable-pod1_2.slice":   "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod1_2.slice",
		"kubelet-kubepods-besteffort.slice": "/kubelet.slice/kubelet-kubepods.slice/kubelet-kubepods-besteffort.slice",
		"kubepods":                          "",
		"-kubepods.slice":                   "",
		"kubepods-.slice":                   "",
		"kube--pods.slice":                  "",
		"a/b.slice":                         "",
	} {
		got, ok := expandSlice(in)
		if got != want || ok != (want != "") {
			t.Errorf("expandSlice(%q) = %q, %v; want %q", in, got, ok, want)
		}
	}
}

// TestBackend: writes scaled with their siblings, drift, restore and
// vanished pods, on every node shape.
func TestBackend(t *testing.T) {
	forEachSetup(t, func(t *testing.T, s kubeletSetup) {
		root, h := fakeTree(t, s)
		l, _ := h.Layout()
		a, b, c, d := s.cgroup(podA), s.cgroup(podB), s.cgroup(podC), s.cgroup(podD)
		kubelet := fileValue(t, root, h, a) // 102 or 4
		other := path.Dir(a) + "/" + path.Base(s.cgroup(pod{"e-5", "burstable"}))
		addPod(t, root, s, other) // a pod of no tenant beside a and b
		burstable, besteffort := fileValue(t, root, h, l.Burstable), fileValue(t, root, h, l.BestEffort)

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
			tree := fairness.QoSTree{Classes: []float64{float64(fileValue(t, root, h, l.Burstable)), float64(fileValue(t, root, h, l.BestEffort))}}
			cgs := []string{d, a, b, other, c}
			for i, cg := range cgs {
				tree.Pods = append(tree.Pods, fairness.QoSPod{Class: []int{-1, 0, 0, 0, 1}[i], Kubelet: float64(fileValue(t, root, h, cg)), Part: 1, Limit: 1})
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
			if v := fileValue(t, root, h, cg); v < resolution {
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
		wa := fileValue(t, root, h, a)
		if res, _ := backend.Apply(nudge(1.005)); res.Writes != 0 || res.Drift != 0 || fileValue(t, root, h, a) != wa {
			t.Fatalf("a 0.5 %% nudge: %+v, file %d", res, fileValue(t, root, h, a))
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
		wa, wo := fileValue(t, root, h, a), fileValue(t, root, h, other)

		// Someone else (kubelet on a resize or its QoS update, systemd on a
		// daemon-reload) rewrites values: counted and undone, and their
		// value is the one to restore later.
		setWeight(t, root, h, a, 7)
		setWeight(t, root, h, l.BestEffort, besteffort)
		res, _ = backend.Apply(plan)
		if res.Drift != 2 || fileValue(t, root, h, a) != wa || fileValue(t, root, h, other) != wo || fileValue(t, root, h, l.BestEffort) == besteffort {
			t.Fatalf("drift apply = %+v, a holds %d (want %d)", res, fileValue(t, root, h, a), wa)
		}
		if got, err := backend.KubeletWeight(a); err != nil || got != 7 {
			t.Fatalf("KubeletWeight(a) after kubelet's rewrite = %d, %v; want 7", got, err)
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
			if got := fileValue(t, root, h, cg); got != want {
				t.Errorf("%s restored to %d, want kubelet's %d", cg, got, want)
			}
		}
		setWeight(t, root, h, a, kubelet)

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
		if sum := fileValue(t, root, h, a) + fileValue(t, root, h, b) + fileValue(t, root, h, other); sum > 3*kubelet+2 || sum+2 < 3*kubelet {
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
			if got := fileValue(t, root, h, cg); got != want {
				t.Errorf("%s holds %d after an empty plan, want kubelet's %d", cg, got, want)
			}
		}

		// A pod that vanished is not an error. (cgroupfs answers ENODEV on
		// a removed cgroup's kept-open files; the fake tree's files stay
		// readable, so the hierarchy's kept files are closed first.)
		if err := os.RemoveAll(filepath.Dir(weightFile(root, h, d))); err != nil {
			t.Fatal(err)
		}
		h.Sweep()
		h.Sweep()
		res, err = again.Apply(enforce.Plan{Pods: []enforce.Pod{{Cgroup: d, Weight: 1, Limit: 1}, {Cgroup: a, Weight: 1, Limit: 1}}})
		if err != nil || res.Vanished != 1 {
			t.Fatalf("vanished pod: %+v, %v", res, err)
		}
	})
}

// TestRepairBurstable: kubelet's start-up weight of the Burstable QoS
// cgroup is replaced by the sum of its pods' weights, once; kubelet's own
// TestBackendReportsClampedWeights: a pod whose weight falls outside the
// cgroup weight range is named in the result (its tenant is not realised
// exactly there); pods within the range are not.
func TestBackendReportsClampedWeights(t *testing.T) {
	forEachSetup(t, func(t *testing.T, s kubeletSetup) {
		_, h := fakeTree(t, s)
		a, b := s.cgroup(podA), s.cgroup(podB)
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

// sum (which may differ by rounding) and other QoS classes are left alone.
func TestRepairBurstable(t *testing.T) {
	forEachSetup(t, func(t *testing.T, s kubeletSetup) {
		root, h := fakeTree(t, s)
		l, _ := h.Layout()
		b, err := NewBackend(h, "")
		if err != nil {
			t.Fatal(err)
		}
		pods := []string{s.cgroup(podA), s.cgroup(podB), s.cgroup(podC), s.cgroup(podD)}
		perPod, _ := b.KubeletWeight(pods[0])
		sum := h.Native(2 * h.Shares(perPod)) // a and b only

		setWeight(t, root, h, l.Burstable, h.Native(fairness.MinShares)) // kubelet just started
		if ok, err := b.RepairBurstable(slices.Values(pods)); !ok || err != nil {
			t.Fatalf("repair = %v, %v; want a write", ok, err)
		}
		if got := fileValue(t, root, h, l.Burstable); got != sum {
			t.Fatalf("Burstable holds %d, want the pods' sum %d", got, sum)
		}
		if ok, _ := b.RepairBurstable(slices.Values(pods)); ok {
			t.Fatal("a repaired QoS weight was written again")
		}
		setWeight(t, root, h, l.Burstable, sum-1) // kubelet's own update, rounded differently
		if ok, _ := b.RepairBurstable(slices.Values(pods)); ok {
			t.Fatal("kubelet's own sum was overwritten")
		}

		// A pod without a CPU request (minimum weight) counts 0, as in kubelet.
		setWeight(t, root, h, pods[1], h.Native(fairness.MinShares))
		setWeight(t, root, h, l.Burstable, h.Native(fairness.MinShares))
		if ok, err := b.RepairBurstable(slices.Values(pods)); !ok || err != nil {
			t.Fatalf("repair = %v, %v; want a write", ok, err)
		}
		if got := fileValue(t, root, h, l.Burstable); got != perPod {
			t.Fatalf("Burstable holds %d, want a's %d alone", got, perPod)
		}
		// No Burstable pod with a request: nothing to repair.
		if ok, err := b.RepairBurstable(slices.Values(pods[2:])); ok || err != nil {
			t.Fatalf("repair with no Burstable pods = %v, %v", ok, err)
		}
	})
}
