// Package cgroupfstest lays out kubelet-like cgroup trees in a temporary
// directory, one per node shape, for the unit tests of the cgroup file
// access (cgroupfs) and of the cgroup backend (enforce/cgroup).
package cgroupfstest

import (
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/kubefair/kubefair/node-agent/cgroupfs"
)

// Setup is one node shape: cgroup version, kubelet's driver and its cgroup
// root.
type Setup struct {
	Mode   cgroupfs.Mode
	Driver cgroupfs.Driver
	Root   string
}

func (s Setup) String() string { return fmt.Sprintf("v%d-%s%s", s.Mode, s.Driver, s.Root) }

// Setups are every node shape kubefair supports.
var Setups = []Setup{
	{cgroupfs.V1, cgroupfs.Cgroupfs, "/"}, {cgroupfs.V1, cgroupfs.Cgroupfs, "/kubelet"}, {cgroupfs.V1, cgroupfs.Systemd, "/"},
	{cgroupfs.V2, cgroupfs.Cgroupfs, "/"}, {cgroupfs.V2, cgroupfs.Cgroupfs, "/kubelet"}, {cgroupfs.V2, cgroupfs.Systemd, "/"}, {cgroupfs.V2, cgroupfs.Systemd, "/kubelet.slice"},
}

// ForEach runs a test on every node shape.
func ForEach(t *testing.T, test func(t *testing.T, s Setup)) {
	for _, s := range Setups {
		t.Run(s.String(), func(t *testing.T) { test(t, s) })
	}
}

// Pod names a fake tree's pod: its UID and QoS class ("" Guaranteed).
type Pod struct{ UID, QoS string }

// The fake tree's pods: A and B Burstable, C BestEffort, D Guaranteed,
// with UIDs that have dashes (systemd spells them with _).
var (
	PodA = Pod{"a-1", "burstable"}
	PodB = Pod{"b-2", "burstable"}
	PodC = Pod{"c-3", "besteffort"}
	PodD = Pod{"d-4", ""}
)

// Cgroup is a pod's cgroup path below kubelet's root, as kubelet names it
// with the setup's driver.
func (s Setup) Cgroup(p Pod) string {
	l := cgroupfs.KubeletLayout(s.Driver, s.Root)
	parent := map[string]string{"burstable": l.Burstable, "besteffort": l.BestEffort, "": l.Kubepods}[p.QoS]
	if s.Driver == cgroupfs.Systemd {
		return parent + "/" + strings.TrimSuffix(path.Base(parent), ".slice") + "-pod" + strings.ReplaceAll(p.UID, "-", "_") + ".slice"
	}
	return parent + "/pod" + p.UID
}

// Container is the name of a pod's one container cgroup.
func (s Setup) Container() string {
	if s.Driver == cgroupfs.Systemd {
		return "cri-containerd-c1.scope"
	}
	return "c1"
}

// Tree lays out a kubelet-like tree in a temp dir with every file
// pre-created (the agent never creates a cgroup file, so a test must see
// the files it expects change) and
// returns its root and the hierarchy the agent sees there. Pods weigh 102
// shares (v1) or 4 (v2, kubelet's conversion of 102).
func Tree(t *testing.T, s Setup) (root string, h *cgroupfs.Hierarchy) {
	t.Helper()
	root = t.TempDir()
	l := cgroupfs.KubeletLayout(s.Driver, s.Root)
	if s.Mode == cgroupfs.V2 {
		WriteFile(t, filepath.Join(root, "cgroup.controllers"), "cpuset cpu io memory pids\n")
		WriteFile(t, filepath.Join(root, s.Root, l.Burstable, "cpu.weight"), "40\n")
		WriteFile(t, filepath.Join(root, s.Root, l.BestEffort, "cpu.weight"), "1\n")
	} else {
		WriteFile(t, filepath.Join(root, "cpu", "cpu.shares"), "1024\n")
		WriteFile(t, filepath.Join(root, "cpu", s.Root, l.Burstable, "cpu.shares"), "1024\n")
		WriteFile(t, filepath.Join(root, "cpu", s.Root, l.BestEffort, "cpu.shares"), "2\n")
		WriteFile(t, filepath.Join(root, "cpuacct", "cpuacct.usage"), "0\n")
	}
	for _, p := range []Pod{PodA, PodB, PodC, PodD} {
		AddPod(t, root, s, s.Cgroup(p))
	}
	h, err := cgroupfs.Detect(root)
	if err == nil {
		h, err = h.ForKubelet(s.Driver, s.Root)
	}
	if err != nil {
		t.Fatal(err)
	}
	if h.Mode != s.Mode {
		t.Fatalf("detected v%d, want v%d", h.Mode, s.Mode)
	}
	return root, h
}

// AddPod creates a pod cgroup (and its container's) at kubelet's weight.
func AddPod(t *testing.T, root string, s Setup, cg string) {
	t.Helper()
	dir := filepath.Join(root, s.Root, cg)
	ctr := filepath.Join(dir, s.Container())
	if s.Mode == cgroupfs.V2 {
		WriteFile(t, filepath.Join(dir, "cpu.weight"), "4\n")
		WriteFile(t, filepath.Join(dir, "cpu.stat"), "usage_usec 1500\nuser_usec 1000\nsystem_usec 500\n")
		WriteFile(t, filepath.Join(dir, "cpu.pressure"), "some avg10=1.00 avg60=0.50 avg300=0.10 total=2500\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=700\n")
		WriteFile(t, filepath.Join(ctr, "cgroup.procs"), "11\n12\n")
		WriteFile(t, filepath.Join(dir, "cgroup.procs"), "")
		return
	}
	WriteFile(t, filepath.Join(root, "cpu", s.Root, cg, "cpu.shares"), "102\n")
	WriteFile(t, filepath.Join(root, "cpuacct", s.Root, cg, "cpuacct.usage"), "1500000\n")
	WriteFile(t, filepath.Join(root, "cpu", s.Root, cg, s.Container(), "cgroup.procs"), "11\n12\n")
	WriteFile(t, filepath.Join(root, "cpu", s.Root, cg, "cgroup.procs"), "")
}

// WriteFile writes a file, creating its directories.
func WriteFile(t *testing.T, p, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// WeightFile is a cgroup's weight file: cpu.weight or cpu.shares.
func WeightFile(h *cgroupfs.Hierarchy, cgroup string) string {
	if h.Mode == cgroupfs.V2 {
		return filepath.Join(h.Where(cgroup), "cpu.weight")
	}
	return filepath.Join(h.Where(cgroup), "cpu.shares")
}

// Weight reads a cgroup's weight file (native units).
func Weight(t *testing.T, h *cgroupfs.Hierarchy, cgroup string) uint64 {
	t.Helper()
	data, err := os.ReadFile(WeightFile(h, cgroup))
	if err != nil {
		t.Fatal(err)
	}
	v, err := strconv.ParseUint(strings.TrimSpace(string(data)), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// SetWeight writes a cgroup's weight as kubelet or systemd would, behind
// the agent's back.
func SetWeight(t *testing.T, h *cgroupfs.Hierarchy, cgroup string, native uint64) {
	t.Helper()
	WriteFile(t, WeightFile(h, cgroup), fmt.Sprintf("%d\n", native))
}
