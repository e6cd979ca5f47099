// Package cgroupfs is the only code in kubefair that touches the cgroup
// filesystem. It finds kubelet's pod cgroups, reads their CPU weight and
// usage, and writes their weight through github.com/containerd/cgroups/v3,
// for cgroup v1 (cpu.shares) and v2 (cpu.weight) alike. Every path it
// accepts lies below <root>/…/kubepods; anything else is refused.
package cgroupfs

import (
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/containerd/cgroups/v3/cgroup1"
	"github.com/containerd/cgroups/v3/cgroup2"
	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/kubefair/kubefair/node-agent/fairness"
)

// Mode is the cgroup version of the hierarchy.
type Mode int

const (
	V1 Mode = 1
	V2 Mode = 2
)

// KubepodsDir is kubelet's top cgroup (cgroupfs driver). The agent never
// writes above or beside it.
const KubepodsDir = "/kubepods"

// Hierarchy is one node's cgroup tree, rooted at --cgroup-root.
type Hierarchy struct {
	Mode Mode
	// cpu and cpuacct are the mounts of the cpu and cpuacct controllers
	// (v1; the same directory when co-mounted), or the unified root (v2).
	cpu, cpuacct string
	// kubeletRoot is kubelet's --cgroup-root, the cgroup that holds
	// kubepods, as runtimes spell cgroup paths ("/" by default).
	kubeletRoot string
}

// Detect finds the cgroup version and controller directories below root
// (e.g. /sys/fs/cgroup): a unified hierarchy with the cpu controller is v2,
// otherwise root/cpu and root/cpuacct are the v1 controllers.
func Detect(root string) (*Hierarchy, error) {
	if data, err := os.ReadFile(filepath.Join(root, "cgroup.controllers")); err == nil {
		if !strings.Contains(" "+strings.TrimSpace(string(data))+" ", " cpu ") {
			return nil, fmt.Errorf("cgroup v2 at %s has no cpu controller enabled", root)
		}
		return &Hierarchy{Mode: V2, cpu: root, cpuacct: root, kubeletRoot: "/"}, nil
	}
	// v1: root/cpu is the cpu controller (a directory, or the usual symlink
	// to a co-mounted cpu,cpuacct); containerd/cgroups expects that name.
	h := &Hierarchy{Mode: V1, kubeletRoot: "/"}
	if isFile(filepath.Join(root, "cpu", "cpu.shares")) {
		h.cpu = filepath.Join(root, "cpu")
	}
	for _, dir := range []string{"cpuacct", "cpu,cpuacct", "cpu"} {
		if isFile(filepath.Join(root, dir, "cpuacct.usage")) {
			h.cpuacct = filepath.Join(root, dir)
			break
		}
	}
	if h.cpu == "" || h.cpuacct == "" {
		return nil, fmt.Errorf("no cgroup v1 cpu and cpuacct controllers under %s, and no cgroup v2 there either", root)
	}
	return h, nil
}

// Below is the hierarchy as kubelet sees it when it runs with
// --cgroup-root=kubeletRoot: kubepods lies below that cgroup, and runtimes
// spell container cgroups from the controller's root ("<kubeletRoot>/kubepods/…").
func (h *Hierarchy) Below(kubeletRoot string) (*Hierarchy, error) {
	if kubeletRoot == "" {
		kubeletRoot = "/"
	}
	if !path.IsAbs(kubeletRoot) || path.Clean(kubeletRoot) != kubeletRoot {
		return nil, fmt.Errorf("kubelet cgroup root %q: want an absolute, clean cgroup path such as / or /kubelet", kubeletRoot)
	}
	if h.kubeletRoot != "/" {
		return nil, fmt.Errorf("hierarchy already below %s", h.kubeletRoot)
	}
	b := *h
	b.kubeletRoot = kubeletRoot
	return &b, nil
}

// cpuDir and acctDir are a pod's cgroup directories in the cpu and cpuacct
// controllers; hostPath is its path from the controllers' root.
func (h *Hierarchy) cpuDir(cgroup string) string { return filepath.Join(h.cpu, h.hostPath(cgroup)) }
func (h *Hierarchy) acctDir(cgroup string) string {
	return filepath.Join(h.cpuacct, h.hostPath(cgroup))
}
func (h *Hierarchy) hostPath(cgroup string) string { return path.Join(h.kubeletRoot, cgroup) }

// FromRuntime maps a container's cgroup as its runtime spells it (the OCI
// spec's linux.cgroupsPath; kubelet's cgroupfs driver gives
// "<kubelet root>/kubepods/burstable/pod<uid>/<id>") to a path in this
// hierarchy. It is false for a path outside kubelet's root or in the
// systemd driver's "slice:prefix:name" form (not supported yet).
func (h *Hierarchy) FromRuntime(cgroupsPath string) (string, bool) {
	if cgroupsPath == "" || strings.Count(cgroupsPath, ":") == 2 {
		return "", false
	}
	p := path.Clean("/" + cgroupsPath)
	if h.kubeletRoot != "/" {
		rest, ok := strings.CutPrefix(p, h.kubeletRoot+"/")
		if !ok {
			return "", false
		}
		p = "/" + rest
	}
	return p, checkPath(p) == nil
}

func isDir(p string) bool  { st, err := os.Stat(p); return err == nil && st.IsDir() }
func isFile(p string) bool { st, err := os.Stat(p); return err == nil && !st.IsDir() }

// checkPath refuses anything that is not below kubepods.
func checkPath(cgroup string) error {
	clean := path.Clean("/" + cgroup)
	if clean != cgroup || !strings.HasPrefix(clean, KubepodsDir+"/") {
		return fmt.Errorf("cgroup %q is outside %s; kubefair only touches pod cgroups", cgroup, KubepodsDir)
	}
	return nil
}

// Native converts a weight in cgroup v1 shares units into the value this
// hierarchy stores: shares on v1, kubelet's shares→weight mapping on v2.
func (h *Hierarchy) Native(shares uint64) uint64 {
	if h.Mode == V2 {
		return fairness.CgroupV2WeightFromShares(shares)
	}
	return clampShares(shares)
}

func clampShares(s uint64) uint64 { return min(max(s, fairness.MinShares), fairness.MaxShares) }

// ReadWeight reads a cgroup's CPU weight in native units (cpu.shares or
// cpu.weight). os.ErrNotExist means the cgroup is gone.
func (h *Hierarchy) ReadWeight(cgroup string) (uint64, error) {
	if err := checkPath(cgroup); err != nil {
		return 0, err
	}
	file := "cpu.shares"
	if h.Mode == V2 {
		file = "cpu.weight"
	}
	return readUint(filepath.Join(h.cpuDir(cgroup), file))
}

// WriteWeight sets a cgroup's CPU weight, given in native units.
func (h *Hierarchy) WriteWeight(cgroup string, native uint64) error {
	if err := checkPath(cgroup); err != nil {
		return err
	}
	if !isDir(h.cpuDir(cgroup)) {
		return fmt.Errorf("cgroup %s: %w", cgroup, os.ErrNotExist)
	}
	if h.Mode == V2 {
		w := min(max(native, fairness.MinWeight), fairness.MaxWeight)
		m, err := cgroup2.Load(h.hostPath(cgroup), cgroup2.WithMountpoint(h.cpu))
		if err != nil {
			return fmt.Errorf("loading %s: %w", cgroup, err)
		}
		return m.Update(&cgroup2.Resources{CPU: &cgroup2.CPU{Weight: &w}})
	}
	s := clampShares(native)
	root := filepath.Dir(h.cpu) // NewCpu appends "cpu"
	cg, err := cgroup1.Load(cgroup1.StaticPath(h.hostPath(cgroup)), cgroup1.WithHierarchy(func() ([]cgroup1.Subsystem, error) {
		return []cgroup1.Subsystem{cgroup1.NewCpu(root)}, nil
	}))
	if err != nil {
		if errors.Is(err, cgroup1.ErrCgroupDeleted) {
			return fmt.Errorf("cgroup %s: %w", cgroup, os.ErrNotExist)
		}
		return fmt.Errorf("loading %s: %w", cgroup, err)
	}
	return cg.Update(&specs.LinuxResources{CPU: &specs.LinuxCPU{Shares: &s}})
}

// UsageNanoseconds is the CPU time all tasks in the cgroup and below have
// used since it was created.
func (h *Hierarchy) UsageNanoseconds(cgroup string) (uint64, error) {
	if err := checkPath(cgroup); err != nil {
		return 0, err
	}
	if h.Mode == V1 {
		return readUint(filepath.Join(h.acctDir(cgroup), "cpuacct.usage"))
	}
	data, err := os.ReadFile(filepath.Join(h.cpuDir(cgroup), "cpu.stat"))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "usage_usec "); ok {
			us, err := strconv.ParseUint(strings.TrimSpace(v), 10, 64)
			return us * 1000, err
		}
	}
	return 0, fmt.Errorf("%s/cpu.stat has no usage_usec", cgroup)
}

// Procs lists the processes in the cgroup and every cgroup below it.
func (h *Hierarchy) Procs(cgroup string) ([]int, error) {
	if err := checkPath(cgroup); err != nil {
		return nil, err
	}
	var pids []int
	err := filepath.WalkDir(h.cpuDir(cgroup), func(p string, d os.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, os.ErrNotExist) {
				return nil // removed while we walk
			}
			return err
		}
		if !d.IsDir() {
			return nil
		}
		data, err := os.ReadFile(filepath.Join(p, "cgroup.procs"))
		if err != nil {
			return nil
		}
		for _, f := range strings.Fields(string(data)) {
			if pid, err := strconv.Atoi(f); err == nil {
				pids = append(pids, pid)
			}
		}
		return nil
	})
	return pids, err
}

// PodCgroup is one pod's cgroup as kubelet's cgroupfs driver lays it out.
type PodCgroup struct {
	UID string
	// Path is relative to the controller root, e.g. /kubepods/burstable/pod<uid>.
	Path string
	// Containers are the container cgroups' directory names (container ids).
	Containers []string
}

// Pods lists kubelet's pod cgroups: kubepods/pod<uid> (Guaranteed) and
// kubepods/{burstable,besteffort}/pod<uid>.
func (h *Hierarchy) Pods() ([]PodCgroup, error) {
	var pods []PodCgroup
	for _, parent := range []string{KubepodsDir, KubepodsDir + "/burstable", KubepodsDir + "/besteffort"} {
		entries, err := os.ReadDir(h.cpuDir(parent))
		if err != nil {
			if errors.Is(err, os.ErrNotExist) {
				continue
			}
			return nil, err
		}
		for _, e := range entries {
			uid, ok := strings.CutPrefix(e.Name(), "pod")
			if !e.IsDir() || !ok || uid == "" {
				continue
			}
			pod := PodCgroup{UID: uid, Path: parent + "/" + e.Name()}
			children, _ := os.ReadDir(h.cpuDir(pod.Path))
			for _, c := range children {
				if c.IsDir() {
					pod.Containers = append(pod.Containers, c.Name())
				}
			}
			pods = append(pods, pod)
		}
	}
	return pods, nil
}

func readUint(file string) (uint64, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return 0, err
	}
	return strconv.ParseUint(strings.TrimSpace(string(data)), 10, 64)
}
