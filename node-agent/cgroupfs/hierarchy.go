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
	"sync"
	"syscall"

	"github.com/containerd/cgroups/v3/cgroup1"
	"github.com/containerd/cgroups/v3/cgroup2"
	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/kubefair/kubefair/node-agent/fairness"
	"github.com/kubefair/kubefair/node-agent/internal/statfile"
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
	// files keeps the usage and weight files read every period open;
	// handles keeps the cgroups written every period loaded.
	files   *statfile.Files
	handles *handles
}

// Detect finds the cgroup version and controller directories below root
// (e.g. /sys/fs/cgroup): a unified hierarchy with the cpu controller is v2,
// otherwise root/cpu and root/cpuacct are the v1 controllers.
func Detect(root string) (*Hierarchy, error) {
	if data, err := os.ReadFile(filepath.Join(root, "cgroup.controllers")); err == nil {
		if !strings.Contains(" "+strings.TrimSpace(string(data))+" ", " cpu ") {
			return nil, fmt.Errorf("cgroup v2 at %s has no cpu controller enabled", root)
		}
		return &Hierarchy{Mode: V2, cpu: root, cpuacct: root, kubeletRoot: "/", files: &statfile.Files{}, handles: &handles{}}, nil
	}
	// v1: root/cpu is the cpu controller (a directory, or the usual symlink
	// to a co-mounted cpu,cpuacct); containerd/cgroups expects that name.
	h := &Hierarchy{Mode: V1, kubeletRoot: "/", files: &statfile.Files{}, handles: &handles{}}
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
	b.files, b.handles = &statfile.Files{}, &handles{} // keyed by paths below the new root
	return &b, nil
}

// cpuDir and acctDir are a pod's cgroup directories in the cpu and cpuacct
// controllers; hostPath is its path from the controllers' root. (cgroup is
// clean and absolute, as checkPath requires: plain concatenation is enough,
// and these run several hundred times a period.)
func (h *Hierarchy) cpuDir(cgroup string) string  { return h.cpu + h.hostPath(cgroup) }
func (h *Hierarchy) acctDir(cgroup string) string { return h.cpuacct + h.hostPath(cgroup) }
func (h *Hierarchy) hostPath(cgroup string) string {
	if h.kubeletRoot == "/" {
		return cgroup
	}
	return h.kubeletRoot + cgroup
}

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
	if checkPath(p) != nil {
		return "", false
	}
	return p, true
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

// Shares converts a native value (cpu.shares or cpu.weight) to cpu.shares
// units, the inverse of Native.
func (h *Hierarchy) Shares(native uint64) uint64 {
	if h.Mode == V2 {
		return fairness.CgroupSharesFromV2Weight(native)
	}
	return clampShares(native)
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
	return h.readUint(filepath.Join(h.cpuDir(cgroup), file))
}

// WriteWeight sets a cgroup's CPU weight, given in native units.
func (h *Hierarchy) WriteWeight(cgroup string, native uint64) error {
	if err := checkPath(cgroup); err != nil {
		return err
	}
	// Update creates a missing cgroup: make sure kubelet has not removed it.
	if !isDir(h.cpuDir(cgroup)) {
		return fmt.Errorf("cgroup %s: %w", cgroup, os.ErrNotExist)
	}
	update, err := h.updater(cgroup)
	if err != nil {
		if errors.Is(err, cgroup1.ErrCgroupDeleted) {
			return fmt.Errorf("cgroup %s: %w", cgroup, os.ErrNotExist)
		}
		return fmt.Errorf("loading %s: %w", cgroup, err)
	}
	return update(native)
}

// updater is the containerd/cgroups handle that writes a cgroup's weight,
// loaded once and kept while the cgroup is written (Sweep drops the rest):
// loading costs more than the write itself.
func (h *Hierarchy) updater(cgroup string) (func(native uint64) error, error) {
	h.handles.mu.Lock()
	defer h.handles.mu.Unlock()
	if u := h.handles.of[cgroup]; u != nil {
		u.used = true
		return u.update, nil
	}
	var update func(uint64) error
	if h.Mode == V2 {
		m, err := cgroup2.Load(h.hostPath(cgroup), cgroup2.WithMountpoint(h.cpu))
		if err != nil {
			return nil, err
		}
		update = func(native uint64) error {
			w := min(max(native, fairness.MinWeight), fairness.MaxWeight)
			return m.Update(&cgroup2.Resources{CPU: &cgroup2.CPU{Weight: &w}})
		}
	} else {
		root := filepath.Dir(h.cpu) // NewCpu appends "cpu"
		cg, err := cgroup1.Load(cgroup1.StaticPath(h.hostPath(cgroup)), cgroup1.WithHierarchy(func() ([]cgroup1.Subsystem, error) {
			return []cgroup1.Subsystem{cgroup1.NewCpu(root)}, nil
		}))
		if err != nil {
			return nil, err
		}
		update = func(native uint64) error {
			s := clampShares(native)
			return cg.Update(&specs.LinuxResources{CPU: &specs.LinuxCPU{Shares: &s}})
		}
	}
	if h.handles.of == nil {
		h.handles.of = map[string]*handle{}
	}
	h.handles.of[cgroup] = &handle{update: update, used: true}
	return update, nil
}

// handles are the loaded containerd/cgroups handles, by cgroup.
type handles struct {
	mu sync.Mutex
	of map[string]*handle
}

type handle struct {
	update func(native uint64) error
	used   bool
}

// UsageNanoseconds is the CPU time all tasks in the cgroup and below have
// used since it was created.
func (h *Hierarchy) UsageNanoseconds(cgroup string) (uint64, error) {
	if err := checkPath(cgroup); err != nil {
		return 0, err
	}
	return h.usage(cgroup)
}

// NodeUsageNanoseconds is the CPU time of everything in the hierarchy,
// from kubelet's cgroup root: on a node, all of the node's tasks (kubelet
// runs with its root at "/"). Read only; the root is never written.
func (h *Hierarchy) NodeUsageNanoseconds() (uint64, error) { return h.usage("/") }

func (h *Hierarchy) usage(cgroup string) (uint64, error) {
	if h.Mode == V1 {
		return h.readUint(filepath.Join(h.acctDir(cgroup), "cpuacct.usage"))
	}
	var usage uint64
	err := h.files.Read(filepath.Join(h.cpuDir(cgroup), "cpu.stat"), func(data []byte) error {
		for _, line := range strings.Split(string(data), "\n") {
			if v, ok := strings.CutPrefix(line, "usage_usec "); ok {
				us, err := strconv.ParseUint(strings.TrimSpace(v), 10, 64)
				usage = us * 1000
				return err
			}
		}
		return fmt.Errorf("%s/cpu.stat has no usage_usec", cgroup)
	})
	return usage, err
}

// Sweep closes the statistics files of cgroups not read since the last
// Sweep (pods that went away or left their tenant); the agent calls it
// once a period.
func (h *Hierarchy) Sweep() {
	h.files.Sweep()
	h.handles.mu.Lock()
	defer h.handles.mu.Unlock()
	for cg, u := range h.handles.of {
		if !u.used {
			delete(h.handles.of, cg)
			continue
		}
		u.used = false
	}
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
		pids, _ = appendProcs(pids, p)
		return nil
	})
	return pids, err
}

// AppendProcs adds the processes in the cgroup itself, not below it, to
// pids: cheaper than Procs for a container's cgroup, which has no
// children. os.ErrNotExist means the cgroup is gone.
func (h *Hierarchy) AppendProcs(pids []int, cgroup string) ([]int, error) {
	if err := checkPath(cgroup); err != nil {
		return pids, err
	}
	return appendProcs(pids, h.cpuDir(cgroup))
}

// appendProcs adds the PIDs in dir's cgroup.procs to pids. The file is
// opened afresh each time (a kept-open one may be served v1's cached pid
// list), with plain system calls: the agent reads one per container each
// period, and os.ReadFile's fstat and poller registration cost more than
// the read.
func appendProcs(pids []int, dir string) ([]int, error) {
	file := dir + "/cgroup.procs"
	fd, err := syscall.Open(file, syscall.O_RDONLY|syscall.O_CLOEXEC, 0)
	if err != nil {
		return pids, &os.PathError{Op: "open", Path: file, Err: err}
	}
	defer syscall.Close(fd)
	var buf [4096]byte
	pid := -1
	for {
		n, err := syscall.Read(fd, buf[:])
		if err != nil {
			return pids, &os.PathError{Op: "read", Path: file, Err: err}
		}
		if n <= 0 {
			break
		}
		pids, pid = parsePIDs(pids, pid, buf[:n])
	}
	if pid >= 0 {
		pids = append(pids, pid)
	}
	return pids, nil
}

// parsePIDs adds the whitespace-separated numbers in data to pids; pid
// carries a number cut at the end of data (-1: none).
func parsePIDs(pids []int, pid int, data []byte) ([]int, int) {
	for _, c := range data {
		switch {
		case c >= '0' && c <= '9':
			pid = max(pid, 0)*10 + int(c-'0')
		case pid >= 0:
			pids, pid = append(pids, pid), -1
		}
	}
	return pids, pid
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

// readUint reads a one-number file, kept open between periods.
func (h *Hierarchy) readUint(file string) (uint64, error) {
	var v uint64
	err := h.files.Read(file, func(data []byte) (err error) {
		v, err = strconv.ParseUint(strings.TrimSpace(string(data)), 10, 64)
		return err
	})
	return v, err
}
