// Package podcgroups lays out real cgroup v1 pod cgroups exactly as
// kubelet's cgroupfs driver does (<root>/kubepods/burstable/pod<uid>/<id>),
// under a test-owned directory of the host's cpu and cpuacct hierarchies
// (and cpuset, for pods pinned to CPUs), and runs real CPU burners in them. Tests point the agent's --cgroup-root
// at Root, a directory whose cpu and cpuacct entries link to the test's
// own subtrees, so nothing else on the host is touched.
package podcgroups

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// HostCgroupRoot is where the host mounts its v1 controllers.
const HostCgroupRoot = "/sys/fs/cgroup"

// KubeletShares is what kubelet writes for a burstable pod requesting 100m.
const KubeletShares = 102

// Tree is one test's kubelet-like tree.
type Tree struct {
	// Root is the cgroup root to give the agent.
	Root string
	// KubeletRoot is the same tree as kubelet's --cgroup-root would name it
	// (the cgroup holding kubepods, "/kubefair-test-<pid>"): the agent can
	// equally be given the host's HostCgroupRoot below KubeletRoot, and
	// runtimes put containers at KubeletRoot + "/kubepods/…".
	KubeletRoot string
	name        string
	// burstable are the cpu.shares of the Burstable pods AddPodOf made,
	// which kubelet sums into the Burstable QoS cgroup.
	burstable []int
	// dirs are the host cgroup directories created, for removal.
	dirs  []string
	procs []*exec.Cmd
}

// New creates the test's subtrees in the host's cpu and cpuacct hierarchies.
func New(tmp string) (*Tree, error) {
	if os.Geteuid() != 0 {
		return nil, fmt.Errorf("podcgroups: creating cgroups needs root (CI runs as root)")
	}
	name := fmt.Sprintf("kubefair-test-%d", os.Getpid())
	t := &Tree{Root: filepath.Join(tmp, "cgroup-root"), KubeletRoot: "/" + name, name: name}
	if err := os.MkdirAll(t.Root, 0o755); err != nil {
		return nil, err
	}
	for _, ctl := range []string{"cpu", "cpuacct"} {
		host := filepath.Join(HostCgroupRoot, ctl, name)
		if _, err := os.Stat(filepath.Join(HostCgroupRoot, ctl)); err != nil {
			return nil, fmt.Errorf("podcgroups: no cgroup v1 %s controller at %s: %w", ctl, HostCgroupRoot, err)
		}
		if err := t.mkdir(host); err != nil {
			return nil, err
		}
		if err := os.Symlink(host, filepath.Join(t.Root, ctl)); err != nil {
			return nil, err
		}
	}
	for _, qos := range []string{"kubepods", "kubepods/burstable", "kubepods/besteffort"} {
		for _, ctl := range []string{"cpu", "cpuacct"} {
			if err := t.mkdir(filepath.Join(HostCgroupRoot, ctl, name, qos)); err != nil {
				return nil, err
			}
		}
	}
	return t, nil
}

func (t *Tree) mkdir(dir string) error {
	if err := os.Mkdir(dir, 0o755); err != nil && !os.IsExist(err) {
		return err
	}
	t.dirs = append(t.dirs, dir)
	return nil
}

// PodCgroup is a pod's path below the controller root.
func PodCgroup(uid string) string { return "/kubepods/burstable/pod" + uid }

// ContainerCgroup is the single container cgroup AddPod gives a pod.
func ContainerCgroup(uid string) string { return PodCgroup(uid) + "/ctr-" + uid[:8] }

// BuildBurner compiles test/harness/cmd/burner into dir and returns its path.
func BuildBurner(repoRoot, dir string) (string, error) {
	out := filepath.Join(dir, "burner")
	cmd := exec.Command("go", "build", "-o", out, "./test/harness/cmd/burner")
	cmd.Dir = repoRoot
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("building the burner: %v\n%s", err, b)
	}
	return out, nil
}

// AddPodCgroup does kubelet's part for a pod: pod<uid> with kubelet's
// shares. A runtime (runc) creates the containers' cgroups below it.
func (t *Tree) AddPodCgroup(uid string) error {
	return t.makeCgroup(PodCgroup(uid), KubeletShares)
}

// makeCgroup creates a cgroup in the cpu and cpuacct hierarchies with
// shares.
func (t *Tree) makeCgroup(cgroup string, shares int) error {
	for _, ctl := range []string{"cpu", "cpuacct"} {
		if err := t.mkdir(filepath.Join(HostCgroupRoot, ctl, t.name, cgroup)); err != nil {
			return err
		}
	}
	return t.WriteShares(cgroup, shares)
}

// AddPod creates pod<uid> with a container cgroup and kubelet's shares, and
// starts a burner with threads spinning threads in it (more burner flags
// in args). It returns the PID.
func (t *Tree) AddPod(uid, burner string, threads int, args ...string) (int, error) {
	if err := t.AddPodCgroup(uid); err != nil {
		return 0, err
	}
	ctr := ContainerCgroup(uid)
	if err := t.makeCgroup(ctr, KubeletShares); err != nil {
		return 0, err
	}
	if err := t.start(ctr, burner, threads, args...); err != nil {
		return 0, err
	}
	return t.procs[len(t.procs)-1].Process.Pid, nil
}

// start runs a burner with threads spinning threads in a container cgroup.
func (t *Tree) start(ctr, burner string, threads int, args ...string) error {
	cmd := exec.Command(burner, append([]string{"-threads", strconv.Itoa(threads)}, args...)...)
	if err := cmd.Start(); err != nil {
		return err
	}
	t.procs = append(t.procs, cmd)
	return t.move(ctr, cmd.Process.Pid)
}

// AdoptPod does kubelet's part for a pod, as AddPod, and moves processes
// the caller started (and stops) into its container cgroup. It returns the
// pod's cgroup.
func (t *Tree) AdoptPod(uid string, pids ...int) (string, error) {
	if err := t.AddPodCgroup(uid); err != nil {
		return "", err
	}
	ctr := ContainerCgroup(uid)
	if err := t.makeCgroup(ctr, KubeletShares); err != nil {
		return "", err
	}
	return PodCgroup(uid), t.move(ctr, pids...)
}

// move puts processes into a container cgroup of both hierarchies.
func (t *Tree) move(ctr string, pids ...int) error {
	for _, pid := range pids {
		for _, ctl := range []string{"cpu", "cpuacct"} {
			procs := filepath.Join(HostCgroupRoot, ctl, t.name, ctr, "cgroup.procs")
			if err := os.WriteFile(procs, []byte(strconv.Itoa(pid)), 0o644); err != nil {
				return fmt.Errorf("moving %d into %s: %w", pid, procs, err)
			}
		}
	}
	return nil
}

// Class is a pod's QoS class, which decides where kubelet puts its cgroup.
type Class string

const (
	Guaranteed Class = "guaranteed"
	Burstable  Class = "burstable"
	BestEffort Class = "besteffort"
)

// CgroupOf is a pod's cgroup below the controller root for its class:
// Guaranteed pods directly in kubepods, the others in their class's.
func CgroupOf(class Class, uid string) string {
	switch class {
	case Guaranteed:
		return "/kubepods/pod" + uid
	case BestEffort:
		return "/kubepods/besteffort/pod" + uid
	}
	return PodCgroup(uid)
}

// AddPodOf does kubelet's part for a pod of a QoS class requesting
// milliCPU (Guaranteed: also its limit; BestEffort: none) and starts a
// burner with threads spinning threads in its one container, as AddPod.
// Like kubelet it first updates the QoS cgroups — Burstable to the sum of
// its pods' shares, BestEffort to 2 —, then gives the pod its shares
// (milliCPU × 1024 / 1000, at least 2) and a Guaranteed pod a CFS quota
// of its limit. It returns the pod's cgroup.
func (t *Tree) AddPodOf(uid string, class Class, milliCPU int, burner string, threads int) (string, error) {
	shares := max(milliCPU*1024/1000, 2)
	if class == BestEffort {
		shares = 2
	}
	if class == Burstable {
		t.burstable = append(t.burstable, shares)
	}
	sum := 0
	for _, s := range t.burstable {
		sum += s
	}
	if err := t.WriteShares("/kubepods/burstable", max(sum, 2)); err != nil {
		return "", err
	}
	if err := t.WriteShares("/kubepods/besteffort", 2); err != nil {
		return "", err
	}
	pod := CgroupOf(class, uid)
	ctr := pod + "/ctr-" + uid[:8]
	for _, cg := range []string{pod, ctr} {
		if err := t.makeCgroup(cg, shares); err != nil {
			return "", err
		}
	}
	if class == Guaranteed { // kubelet's CFS quota for the CPU limit, 100 ms periods
		quota := filepath.Join(HostCgroupRoot, "cpu", t.name, pod, "cpu.cfs_quota_us")
		if err := os.WriteFile(quota, []byte(strconv.Itoa(milliCPU*100)), 0o644); err != nil {
			return "", err
		}
	}
	return pod, t.start(ctr, burner, threads)
}

// Pin does for a pod's one container what kubelet's static CPU manager
// and runc do: the container's cgroup in the cpuset hierarchy (its parents
// with the whole machine's CPUs) may run on cpus alone, and its processes
// move there. Shared-pool pods are pinned to the pool, a Guaranteed pod
// requesting whole CPUs to CPUs of its own.
func (t *Tree) Pin(podCgroup, cpus string) error {
	root := filepath.Join(HostCgroupRoot, "cpuset")
	all, err := os.ReadFile(filepath.Join(root, "cpuset.cpus"))
	if err != nil {
		return fmt.Errorf("podcgroups: no cgroup v1 cpuset controller at %s: %w", root, err)
	}
	mems, err := os.ReadFile(filepath.Join(root, "cpuset.mems"))
	if err != nil {
		return err
	}
	uid := strings.TrimPrefix(filepath.Base(podCgroup), "pod")
	ctr := podCgroup + "/ctr-" + uid[:8]
	dir := filepath.Join(root, t.name)
	for i, part := range append([]string{""}, strings.Split(strings.TrimPrefix(ctr, "/"), "/")...) {
		dir = filepath.Join(dir, part)
		if err := t.mkdir(dir); err != nil {
			return err
		}
		set := all
		if i == strings.Count(ctr, "/") {
			set = []byte(cpus)
		}
		// A v1 cpuset cgroup starts with no CPUs and no memory nodes.
		if err := os.WriteFile(filepath.Join(dir, "cpuset.mems"), mems, 0o644); err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dir, "cpuset.cpus"), set, 0o644); err != nil {
			return fmt.Errorf("pinning %s to %s: %w", dir, set, err)
		}
	}
	procs, err := os.ReadFile(filepath.Join(HostCgroupRoot, "cpu", t.name, ctr, "cgroup.procs"))
	if err != nil {
		return err
	}
	for _, pid := range strings.Fields(string(procs)) {
		if err := os.WriteFile(filepath.Join(dir, "cgroup.procs"), []byte(pid), 0o644); err != nil {
			return fmt.Errorf("moving %s into %s: %w", pid, dir, err)
		}
	}
	return nil
}

// Shares reads a cgroup's cpu.shares.
func (t *Tree) Shares(cgroup string) (int, error) {
	data, err := os.ReadFile(filepath.Join(HostCgroupRoot, "cpu", t.name, cgroup, "cpu.shares"))
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(strings.TrimSpace(string(data)))
}

// WriteShares sets a cgroup's cpu.shares, as kubelet does.
func (t *Tree) WriteShares(cgroup string, shares int) error {
	return os.WriteFile(filepath.Join(HostCgroupRoot, "cpu", t.name, cgroup, "cpu.shares"), []byte(strconv.Itoa(shares)), 0o644)
}

// Threads lists the thread ids in a cgroup and below it (the cpu
// hierarchy's tasks files).
func (t *Tree) Threads(cgroup string) ([]int, error) {
	var tids []int
	err := filepath.WalkDir(filepath.Join(HostCgroupRoot, "cpu", t.name, cgroup), func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || d.Name() != "tasks" {
			return err
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		for _, f := range strings.Fields(string(data)) {
			tid, err := strconv.Atoi(f)
			if err != nil {
				return fmt.Errorf("%s: %w", p, err)
			}
			tids = append(tids, tid)
		}
		return nil
	})
	return tids, err
}

// Usage reads a cgroup's cumulative CPU time.
func (t *Tree) Usage(cgroup string) (time.Duration, error) {
	data, err := os.ReadFile(filepath.Join(HostCgroupRoot, "cpuacct", t.name, cgroup, "cpuacct.usage"))
	if err != nil {
		return 0, err
	}
	ns, err := strconv.ParseInt(strings.TrimSpace(string(data)), 10, 64)
	return time.Duration(ns), err
}

// Close stops every burner it started (by PID) and removes every cgroup it
// created, deepest first, and what a runtime left below KubeletRoot in any
// hierarchy (runc creates a container's parents in every controller and
// removes only the container's own cgroup).
func (t *Tree) Close() error {
	for _, c := range t.procs {
		_ = c.Process.Signal(syscall.SIGKILL)
		_, _ = c.Process.Wait()
	}
	dirs := append([]string(nil), t.dirs...)
	hierarchies, _ := os.ReadDir(HostCgroupRoot)
	for _, hier := range hierarchies {
		_ = filepath.WalkDir(filepath.Join(HostCgroupRoot, hier.Name(), t.name), func(p string, d os.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				dirs = append(dirs, p)
			}
			return nil
		})
	}
	sort.Slice(dirs, func(i, j int) bool { return strings.Count(dirs[i], "/") > strings.Count(dirs[j], "/") })
	var firstErr error
	for _, d := range dirs {
		if err := rmdirWhenEmpty(d); err != nil && firstErr == nil {
			firstErr = err
		}
	}
	return firstErr
}

// rmdirWhenEmpty removes a cgroup directory, waiting briefly for killed
// tasks to leave it.
func rmdirWhenEmpty(dir string) error {
	var err error
	for i := 0; i < 50; i++ {
		if err = syscall.Rmdir(dir); err == nil || os.IsNotExist(err) {
			return nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	return fmt.Errorf("removing %s: %w", dir, err)
}

// RemovePod kills the pod's burner and removes its cgroups, as kubelet does
// when a pod goes away.
func (t *Tree) RemovePod(cgroup string) error {
	uid := strings.TrimPrefix(filepath.Base(cgroup), "pod")
	procs, _ := os.ReadFile(filepath.Join(HostCgroupRoot, "cpu", t.name, ContainerCgroup(uid), "cgroup.procs"))
	for _, f := range strings.Fields(string(procs)) {
		pid, _ := strconv.Atoi(f)
		for _, c := range t.procs {
			if c.Process.Pid == pid {
				_ = c.Process.Signal(syscall.SIGKILL)
				_, _ = c.Process.Wait()
			}
		}
	}
	for _, ctl := range []string{"cpu", "cpuacct"} {
		for _, d := range []string{ContainerCgroup(uid), PodCgroup(uid)} {
			if err := rmdirWhenEmpty(filepath.Join(HostCgroupRoot, ctl, t.name, d)); err != nil {
				return err
			}
		}
	}
	return nil
}

// MeasureShares returns each group's share of the CPU that all the groups'
// cgroups used over window: shares among the test's own processes, so load
// from elsewhere on the machine cancels out.
func (t *Tree) MeasureShares(groups map[string][]string, window time.Duration) (map[string]float64, error) {
	before, err := t.GroupUsage(groups)
	if err != nil {
		return nil, err
	}
	time.Sleep(window)
	after, err := t.GroupUsage(groups)
	if err != nil {
		return nil, err
	}
	return Shares(before, after), nil
}

// GroupUsage is the CPU time each group's cgroups have used so far.
func (t *Tree) GroupUsage(groups map[string][]string) (map[string]time.Duration, error) {
	out := map[string]time.Duration{}
	for g, cgs := range groups {
		for _, cg := range cgs {
			u, err := t.Usage(cg)
			if err != nil {
				return nil, err
			}
			out[g] += u
		}
	}
	return out, nil
}

// Shares is each group's share of the CPU all the groups used between two
// readings of cumulative CPU time (GroupUsage's, or a pod's processes'
// clock ticks): none when they used none.
func Shares[K comparable, V ~int64](before, after map[K]V) map[K]float64 {
	var total V
	for g := range after {
		total += after[g] - before[g]
	}
	shares := map[K]float64{}
	for g := range after {
		if total > 0 {
			shares[g] = float64(after[g]-before[g]) / float64(total)
		}
	}
	return shares
}
