package cgroupfs_test

import (
	"errors"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/kubefair/kubefair/node-agent/cgroupfs"
	"github.com/kubefair/kubefair/node-agent/cgroupfs/cgroupfstest"
)

// TestDiscovery: kubelet's pod cgroups, their UIDs and containers, usage,
// waiting and processes, on every node shape.
func TestDiscovery(t *testing.T) {
	cgroupfstest.ForEach(t, func(t *testing.T, s cgroupfstest.Setup) {
		_, h := cgroupfstest.Tree(t, s)
		l, err := h.Layout()
		if err != nil || l.Driver != s.Driver {
			t.Fatalf("Layout() = %+v, %v; want the %s driver", l, err, s.Driver)
		}
		pods, err := h.Pods()
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]string{}
		for _, p := range pods {
			got[p.UID] = p.Path
			if !slices.Equal(p.Containers, []string{s.Container()}) {
				t.Errorf("pod %s has containers %v, want [%s]", p.UID, p.Containers, s.Container())
			}
		}
		for _, p := range []cgroupfstest.Pod{cgroupfstest.PodA, cgroupfstest.PodB, cgroupfstest.PodC, cgroupfstest.PodD} {
			if got[p.UID] != s.Cgroup(p) {
				t.Errorf("pod %s found at %q, want %q (all: %v)", p.UID, got[p.UID], s.Cgroup(p), got)
			}
		}
		if len(pods) != 4 {
			t.Errorf("%d pods, want 4: %v", len(pods), got)
		}
		a := s.Cgroup(cgroupfstest.PodA)
		if usage, err := h.UsageNanoseconds(a); err != nil || usage != 1_500_000 {
			t.Fatalf("usage = %d, %v; want 1.5 ms", usage, err)
		}
		wait, ok, err := h.WaitNanoseconds(a)
		if s.Mode == cgroupfs.V2 && (wait != 2_500_000 || !ok || err != nil) {
			t.Errorf("v2 waiting = %d, %v, %v; want cpu.pressure's some total, 2.5 ms", wait, ok, err)
		}
		if s.Mode == cgroupfs.V1 && (ok || err != nil) {
			t.Errorf("v1 waiting = %d, %v, %v; want none (schedstat instead)", wait, ok, err)
		}
		if procs, err := h.Procs(a); err != nil || len(procs) != 2 {
			t.Fatalf("procs = %v, %v", procs, err)
		}
		if procs, err := h.AppendProcs([]int{7}, a+"/"+s.Container()); err != nil || !slices.Equal(procs, []int{7, 11, 12}) {
			t.Fatalf("AppendProcs(container) = %v, %v; want [7 11 12]", procs, err)
		}
		if procs, err := h.AppendProcs(nil, a); err != nil || len(procs) != 0 {
			t.Fatalf("AppendProcs(pod) = %v, %v; want none (they are in the container)", procs, err)
		}
	})
}

// TestCPUSet: a container's cpuset is read from the cpuset controller
// (v1) or cpuset.cpus.effective (v2); a v1 node without the controller
// says so.
func TestCPUSet(t *testing.T) {
	cgroupfstest.ForEach(t, func(t *testing.T, s cgroupfstest.Setup) {
		root, h := cgroupfstest.Tree(t, s)
		ctr := s.Cgroup(cgroupfstest.PodA) + "/" + s.Container()
		if s.Mode == cgroupfs.V1 {
			if _, err := h.CPUSet(ctr); !errors.Is(err, os.ErrNotExist) {
				t.Fatalf("no cpuset controller: %v, want ErrNotExist", err)
			}
			cgroupfstest.WriteFile(t, filepath.Join(root, "cpuset", "cpuset.cpus"), "0-3\n")
			cgroupfstest.WriteFile(t, filepath.Join(root, "cpuset", s.Root, ctr, "cpuset.cpus"), "1,3\n")
			var err error
			if h, err = cgroupfs.Detect(root); err == nil {
				h, err = h.ForKubelet(s.Driver, s.Root)
			}
			if err != nil {
				t.Fatal(err)
			}
		} else {
			cgroupfstest.WriteFile(t, filepath.Join(root, s.Root, ctr, "cpuset.cpus.effective"), "1,3\n")
		}
		if got, err := h.CPUSet(ctr); err != nil || got.String() != "1,3" {
			t.Fatalf("CPUSet = %s, %v; want 1,3", got, err)
		}
		if _, err := h.CPUSet(s.Cgroup(cgroupfstest.PodB) + "/gone"); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("a gone cgroup: %v, want ErrNotExist", err)
		}
	})
}

// TestWithoutPressure: a cgroup v2 kernel without PSI has no cpu.pressure;
// waiting then comes from schedstat, and the file is not looked for again.
func TestWithoutPressure(t *testing.T) {
	s := cgroupfstest.Setup{Mode: cgroupfs.V2, Driver: cgroupfs.Systemd, Root: "/"}
	root, h := cgroupfstest.Tree(t, s)
	if err := os.Remove(filepath.Join(root, s.Cgroup(cgroupfstest.PodA), "cpu.pressure")); err != nil {
		t.Fatal(err)
	}
	if _, ok, err := h.WaitNanoseconds(s.Cgroup(cgroupfstest.PodA)); ok || err != nil {
		t.Fatalf("without cpu.pressure: %v, %v; want none and no error", ok, err)
	}
	if _, ok, _ := h.WaitNanoseconds(s.Cgroup(cgroupfstest.PodB)); ok {
		t.Fatal("cpu.pressure read again after the kernel had none")
	}
}

// TestLayoutNotFound: with no kubepods where the agent looks, discovery
// says where it looked; once kubelet creates it, the layout is found.
func TestLayoutNotFound(t *testing.T) {
	for _, s := range []cgroupfstest.Setup{{Mode: cgroupfs.V2, Driver: cgroupfs.AutoDriver, Root: "/"}, {Mode: cgroupfs.V2, Driver: cgroupfs.Systemd, Root: "/kubelet.slice"}, {Mode: cgroupfs.V1, Driver: cgroupfs.Cgroupfs, Root: "/kubelet"}} {
		t.Run(s.String(), func(t *testing.T) {
			root := t.TempDir()
			if s.Mode == cgroupfs.V2 {
				cgroupfstest.WriteFile(t, filepath.Join(root, "cgroup.controllers"), "cpu memory\n")
			} else {
				cgroupfstest.WriteFile(t, filepath.Join(root, "cpu", "cpu.shares"), "1024\n")
				cgroupfstest.WriteFile(t, filepath.Join(root, "cpuacct", "cpuacct.usage"), "0\n")
			}
			h, err := cgroupfs.Detect(root)
			if err == nil {
				h, err = h.ForKubelet(s.Driver, s.Root)
			}
			if err != nil {
				t.Fatal(err)
			}
			_, err = h.Pods()
			var nf *cgroupfs.LayoutNotFoundError
			if !errors.As(err, &nf) {
				t.Fatalf("Pods() on an empty tree: %v; want a LayoutNotFoundError", err)
			}
			want := map[cgroupfs.Driver]int{cgroupfs.AutoDriver: 2}[s.Driver]
			if want == 0 {
				want = 1
			}
			if len(nf.Looked) != want || !strings.Contains(err.Error(), nf.Looked[0]) || !strings.HasPrefix(nf.Looked[0], root) {
				t.Fatalf("looked at %v (%v); want %d directories below %s, named in the message", nf.Looked, err, want, root)
			}
			if _, ok := h.FromRuntime("/kubepods/burstable/poda/c1"); ok {
				t.Fatal("a runtime path was accepted without a layout")
			}
			d := s.Driver
			if d == cgroupfs.AutoDriver {
				d = cgroupfs.Systemd
			}
			created := cgroupfstest.Setup{Mode: s.Mode, Driver: d, Root: s.Root}
			cgroupfstest.AddPod(t, root, created, created.Cgroup(cgroupfstest.PodA))
			if pods, err := h.Pods(); err != nil || len(pods) != 1 || pods[0].UID != cgroupfstest.PodA.UID {
				t.Fatalf("after kubelet started: %+v, %v; want pod %s", pods, err, cgroupfstest.PodA.UID)
			}
		})
	}
}

func TestRefusesPathsOutsideKubepods(t *testing.T) {
	cgroupfstest.ForEach(t, func(t *testing.T, s cgroupfstest.Setup) {
		_, h := cgroupfstest.Tree(t, s)
		l, _ := h.Layout()
		for _, p := range []string{"/", "/system.slice", l.Kubepods, l.Kubepods + "/../etc", strings.TrimPrefix(s.Cgroup(cgroupfstest.PodA), "/"), l.Kubepods + "x/a", "/kubepods.slicex/a", l.Kubepods + "/", s.Cgroup(cgroupfstest.PodA) + "/"} {
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
	cgroupfstest.ForEach(t, func(t *testing.T, s cgroupfstest.Setup) {
		_, h := cgroupfstest.Tree(t, s)
		prefix := strings.TrimSuffix(s.Root, "/")
		a := s.Cgroup(cgroupfstest.PodA)
		cases := map[string]string{
			"":                            "",
			"/other/kubepods/burstable/c": "",
			prefix + "/system.slice/c1":   "",
			"a:b":                         "",
		}
		if s.Driver == cgroupfs.Systemd {
			slice := path.Base(a)
			cases[slice+":cri-containerd:c1"] = a + "/cri-containerd-c1.scope"
			cases[path.Base(s.Cgroup(cgroupfstest.PodD))+":cri-containerd:c2"] = s.Cgroup(cgroupfstest.PodD) + "/cri-containerd-c2.scope"
			cases["system.slice:cri-containerd:c1"] = ""
			cases["kubepods--x.slice:cri-containerd:c1"] = ""
			cases[slice+":cri-containerd:"] = ""
		} else {
			cases[prefix+a+"/c1"] = a + "/c1"
			cases[prefix+s.Cgroup(cgroupfstest.PodD)+"/c2"] = s.Cgroup(cgroupfstest.PodD) + "/c2"
			cases["kubepods-burstable.slice:cri-containerd:c1"] = ""
		}
		for in, want := range cases {
			got, ok := h.FromRuntime(in)
			if got != want || ok != (want != "") {
				t.Errorf("FromRuntime(%q) = %q, %v; want %q", in, got, ok, want)
			}
		}
		if _, err := h.ForKubelet(cgroupfs.Cgroupfs, "relative/root"); err == nil {
			t.Error("a relative kubelet cgroup root was accepted")
		}
		if _, err := h.ForKubelet(cgroupfs.Systemd, "/kubelet"); err == nil {
			t.Error("a systemd cgroup root that is not a slice was accepted")
		}
	})
}
