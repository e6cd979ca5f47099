// Package cgroupfs is the only code in kubefair that touches the cgroup
// filesystem. It finds kubelet's pod cgroups — cgroupfs or systemd
// driver, below kubelet's cgroup root —, reads their CPU weight, usage and
// waiting, and writes their weight, for cgroup v1 (cpu.shares) and v2
// (cpu.weight) alike. Every path it
// accepts lies below kubelet's kubepods cgroup; anything else is refused.
package cgroupfs

import (
	"errors"
	"fmt"
	"math"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"k8s.io/utils/cpuset"

	"github.com/kubefair/kubefair/node-agent/fairness"
	"github.com/kubefair/kubefair/node-agent/internal/statfile"
)

// Mode is the cgroup version of the hierarchy.
type Mode int

const (
	V1 Mode = 1
	V2 Mode = 2
)

// Hierarchy is one node's cgroup tree, rooted at --cgroup-root.
type Hierarchy struct {
	Mode Mode
	// cpu and cpuacct are the mounts of the cpu and cpuacct controllers
	// (v1; the same directory when co-mounted), or the unified root (v2).
	cpu, cpuacct string
	// cpuset is the cpuset controller's mount (v1; "" when the node has
	// none), or the unified root (v2).
	cpuset string
	// kubeletRoot is kubelet's cgroupRoot, the cgroup that holds kubepods,
	// as runtimes spell cgroup paths ("/" by default). Every cgroup path
	// the package takes or gives is relative to it.
	kubeletRoot string
	// driver is kubelet's cgroup driver as configured (AutoDriver: find
	// it); layout is kubelet's layout once found (zero until then).
	driver Driver
	layout Layout
	// noPressure is set once a cgroup had no readable cpu.pressure (cgroup
	// v1, or a kernel without PSI): waiting then comes from schedstat.
	noPressure bool
	// files keeps the statistics files read every period open, weights
	// the weight files, read back and written every period.
	files, weights *statfile.Files
}

// Detect finds the cgroup version and controller directories below root
// (e.g. /sys/fs/cgroup): a unified hierarchy with the cpu controller is v2,
// otherwise root/cpu and root/cpuacct are the v1 controllers.
func Detect(root string) (*Hierarchy, error) {
	if data, err := os.ReadFile(filepath.Join(root, "cgroup.controllers")); err == nil {
		if !strings.Contains(" "+strings.TrimSpace(string(data))+" ", " cpu ") {
			return nil, fmt.Errorf("cgroup v2 at %s has no cpu controller enabled", root)
		}
		return &Hierarchy{Mode: V2, cpu: root, cpuacct: root, cpuset: root, kubeletRoot: "/", driver: AutoDriver, files: &statfile.Files{}, weights: weightFiles(root)}, nil
	}
	// v1: root/cpu is the cpu controller (a directory, or the usual symlink
	// to a co-mounted cpu,cpuacct).
	h := &Hierarchy{Mode: V1, kubeletRoot: "/", driver: AutoDriver, files: &statfile.Files{}}
	if isFile(filepath.Join(root, "cpu", "cpu.shares")) {
		h.cpu = filepath.Join(root, "cpu")
	}
	for _, dir := range []string{"cpuacct", "cpu,cpuacct", "cpu"} {
		if isFile(filepath.Join(root, dir, "cpuacct.usage")) {
			h.cpuacct = filepath.Join(root, dir)
			break
		}
	}
	if isFile(filepath.Join(root, "cpuset", "cpuset.cpus")) {
		h.cpuset = filepath.Join(root, "cpuset")
	}
	if h.cpu == "" || h.cpuacct == "" {
		return nil, fmt.Errorf("no cgroup v1 cpu and cpuacct controllers under %s, and no cgroup v2 there either", root)
	}
	h.weights = weightFiles(h.cpu)
	return h, nil
}

// weightFiles keeps the weight files of the cpu controller mounted at dir
// open for reading and writing. A tree that is not a cgroup filesystem
// (the unit tests' fakes) holds regular files, which a write must also
// truncate.
func weightFiles(dir string) *statfile.Files {
	var fs syscall.Statfs_t
	cgroupfs := syscall.Statfs(dir, &fs) == nil && (fs.Type == cgroupSuperMagic || fs.Type == cgroup2SuperMagic)
	return &statfile.Files{Writable: true, Truncate: !cgroupfs}
}

// The cgroup filesystems' magic numbers (linux/magic.h).
const cgroupSuperMagic, cgroup2SuperMagic = 0x27e0eb, 0x63677270

// ForKubelet is the hierarchy as kubelet uses it with the given
// cgroupDriver and cgroupRoot: kubepods lies below that cgroup, named as
// the driver names it, and runtimes spell container cgroups from the
// controllers' root ("<kubeletRoot>/kubepods/…", or systemd's
// "slice:prefix:name").
func (h *Hierarchy) ForKubelet(driver Driver, kubeletRoot string) (*Hierarchy, error) {
	if kubeletRoot == "" {
		kubeletRoot = "/"
	}
	if !path.IsAbs(kubeletRoot) || path.Clean(kubeletRoot) != kubeletRoot {
		return nil, fmt.Errorf("kubelet cgroup root %q: want an absolute, clean cgroup path such as / or /kubelet.slice", kubeletRoot)
	}
	if driver == "" {
		driver = AutoDriver
	}
	if driver == Systemd && kubeletRoot != "/" && !strings.HasSuffix(kubeletRoot, ".slice") {
		return nil, fmt.Errorf("kubelet cgroup root %q: with the systemd driver it is a slice, such as /kubelet.slice", kubeletRoot)
	}
	if h.kubeletRoot != "/" {
		return nil, fmt.Errorf("hierarchy already below %s", h.kubeletRoot)
	}
	b := *h
	b.kubeletRoot, b.driver, b.layout = kubeletRoot, driver, Layout{}
	b.files, b.weights = &statfile.Files{}, weightFiles(h.cpu) // keyed by paths below the new root
	return &b, nil
}

// LayoutNotFoundError says that kubelet's pod cgroups are not where the
// agent looked: kubelet is not running yet, or it uses another cgroup
// root or driver than the agent was told.
type LayoutNotFoundError struct {
	// Looked are the directories the agent looked for.
	Looked []string
}

func (e *LayoutNotFoundError) Error() string {
	return fmt.Sprintf("no kubelet pod cgroups: none of %s exists (check --cgroup-driver and --kubelet-cgroup-root against kubelet's cgroupDriver and cgroupRoot)", strings.Join(e.Looked, ", "))
}

// Layout is kubelet's layout on this node: the configured driver's, or
// with AutoDriver whichever of systemd's and cgroupfs's exists (systemd's
// first). Once found it is kept; until then every call looks again, so an
// agent that starts before kubelet finds it later.
func (h *Hierarchy) Layout() (Layout, error) {
	if h.layout.Kubepods != "" {
		return h.layout, nil
	}
	drivers := []Driver{h.driver}
	if h.driver == AutoDriver {
		drivers = []Driver{Systemd, Cgroupfs}
	}
	var looked []string
	for _, d := range drivers {
		l := KubeletLayout(d, h.kubeletRoot)
		dir := h.cpuDir(l.Kubepods)
		if isDir(dir) {
			h.layout = l
			return l, nil
		}
		looked = append(looked, dir)
	}
	return Layout{}, &LayoutNotFoundError{Looked: looked}
}

// cpuDir and acctDir are a pod's cgroup directories in the cpu and cpuacct
// controllers; hostPath is its path from the controllers' root. (cgroup is
// clean and absolute, as checkPath requires: plain concatenation is enough,
// and these run several hundred times a period.)
func (h *Hierarchy) cpuDir(cgroup string) string  { return h.cpu + h.hostPath(cgroup) }
func (h *Hierarchy) acctDir(cgroup string) string { return h.cpuacct + h.hostPath(cgroup) }

// Where is the directory of a cgroup (a path below kubelet's root) in the
// cpu controller, for messages that tell a user where to look.
func (h *Hierarchy) Where(cgroup string) string { return h.cpuDir(cgroup) }

func (h *Hierarchy) hostPath(cgroup string) string {
	if h.kubeletRoot == "/" {
		return cgroup
	}
	return h.kubeletRoot + cgroup
}

// FromRuntime maps a container's cgroup as its runtime spells it (the OCI
// spec's linux.cgroupsPath: cgroupfs's "<kubelet root>/kubepods/burstable/
// pod<uid>/<id>", or systemd's "kubepods-burstable-pod<uid>.slice:
// cri-containerd:<id>") to a path in this hierarchy. It is false for a
// cgroup outside kubelet's kubepods.
func (h *Hierarchy) FromRuntime(cgroupsPath string) (string, bool) {
	p, ok := runtimePath(cgroupsPath)
	if !ok {
		return "", false
	}
	if h.kubeletRoot != "/" {
		rest, ok := strings.CutPrefix(p, h.kubeletRoot+"/")
		if !ok {
			return "", false
		}
		p = "/" + rest
	}
	if h.checkPath(p) != nil {
		return "", false
	}
	return p, true
}

func isDir(p string) bool  { st, err := os.Stat(p); return err == nil && st.IsDir() }
func isFile(p string) bool { st, err := os.Stat(p); return err == nil && !st.IsDir() }

// checkPath refuses anything that is not below kubepods.
func (h *Hierarchy) checkPath(cgroup string) error {
	l, err := h.Layout()
	if err != nil {
		return err
	}
	if !l.Contains(cgroup) {
		return fmt.Errorf("cgroup %q is outside %s; kubefair only touches pod cgroups", cgroup, l.Kubepods)
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

// MaxNative is the largest weight the hierarchy stores.
func (h *Hierarchy) MaxNative() uint64 {
	if h.Mode == V2 {
		return fairness.MaxWeight
	}
	return fairness.MaxShares
}

// MinNative is the smallest weight the hierarchy stores.
func (h *Hierarchy) MinNative() uint64 {
	if h.Mode == V2 {
		return fairness.MinWeight
	}
	return fairness.MinShares
}

// ClampNative keeps a native weight in the hierarchy's range.
func (h *Hierarchy) ClampNative(w uint64) uint64 {
	return min(max(w, h.MinNative()), h.MaxNative())
}

// ReadWeight reads a cgroup's CPU weight in native units (cpu.shares or
// cpu.weight). os.ErrNotExist means the cgroup is gone.
func (h *Hierarchy) ReadWeight(cgroup string) (uint64, error) {
	if err := h.checkPath(cgroup); err != nil {
		return 0, err
	}
	return h.readUint(h.weights, h.cpu, cgroup, h.weightName())
}

// weightName is the file that holds a cgroup's CPU weight.
func (h *Hierarchy) weightName() string {
	if h.Mode == V2 {
		return "/cpu.weight"
	}
	return "/cpu.shares"
}

// WriteWeight sets a cgroup's CPU weight, given in native units. The file
// is never created: a cgroup kubelet removed stays removed
// (os.ErrNotExist). It is kept open with the one ReadWeight reads, as the
// agent writes a few hundred weights a period when loads move: one pwrite
// each.
func (h *Hierarchy) WriteWeight(cgroup string, native uint64) error {
	if err := h.checkPath(cgroup); err != nil {
		return err
	}
	var buf [20]byte
	err := h.weights.WriteJoined(strconv.AppendUint(buf[:0], h.ClampNative(native), 10), h.cpu, h.rootPrefix(), cgroup, h.weightName())
	if statfile.Gone(err) { // removed, before or while we wrote
		return fmt.Errorf("cgroup %s: %w", cgroup, os.ErrNotExist)
	}
	return err
}

// UsageNanoseconds is the CPU time all tasks in the cgroup and below have
// used since it was created.
func (h *Hierarchy) UsageNanoseconds(cgroup string) (uint64, error) {
	if err := h.checkPath(cgroup); err != nil {
		return 0, err
	}
	return h.usage(cgroup)
}

// NodeUsageNanoseconds is the CPU time of everything in the hierarchy,
// from kubelet's cgroup root: on a node, all of the node's tasks (kubelet
// runs with its root at "/"). Read only; the root is never written.
func (h *Hierarchy) NodeUsageNanoseconds() (uint64, error) { return h.usage("/") }

// PodsUsageNanoseconds is the CPU time of all pods: kubelet's kubepods
// cgroup. Read only.
func (h *Hierarchy) PodsUsageNanoseconds() (uint64, error) {
	l, err := h.Layout()
	if err != nil {
		return 0, err
	}
	return h.usage(l.Kubepods)
}

func (h *Hierarchy) usage(cgroup string) (uint64, error) {
	if h.Mode == V1 {
		return h.readUint(h.files, h.cpuacct, cgroup, "/cpuacct.usage")
	}
	var usage uint64
	err := h.read(h.files, h.cpu, cgroup, "/cpu.stat", func(data []byte) error {
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
	h.weights.Sweep()
}

// Procs lists the processes in the cgroup and every cgroup below it.
func (h *Hierarchy) Procs(cgroup string) ([]int, error) {
	if err := h.checkPath(cgroup); err != nil {
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
	if err := h.checkPath(cgroup); err != nil {
		return pids, err
	}
	return appendProcs(pids, h.cpuDir(cgroup))
}

// appendProcs adds the PIDs in dir's cgroup.procs to pids. The file is
// opened afresh each time (a kept-open one may be served v1's cached pid
// list), with plain system calls: the agent reads one per container each
// period, and os.ReadFile's fstat and poller registration cost more than
// the read. A read that ends well short of a page has reached the end, so
// no second read is needed to see it: cgroup.procs is a seq_file, which
// fills a read with records until it runs out of them or of its page-sized
// buffer (then it stops a record short of 4096 bytes at most).
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
		if n < len(buf)-64 {
			break
		}
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

// PodCgroup is one pod's cgroup as kubelet lays it out.
type PodCgroup struct {
	UID string
	// Path is below kubelet's cgroup root, e.g. /kubepods/burstable/pod<uid>
	// or /kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod<uid>.slice.
	Path string
	// Containers are the container cgroups' directory names (cgroupfs: the
	// container ids; systemd: cri-containerd-<id>.scope).
	Containers []string
}

// Pods lists kubelet's pod cgroups: Guaranteed pods in kubepods itself,
// the others in their QoS class's cgroup. A *LayoutNotFoundError means
// kubepods is not where the agent looks.
func (h *Hierarchy) Pods() ([]PodCgroup, error) {
	l, err := h.Layout()
	if err != nil {
		return nil, err
	}
	var pods []PodCgroup
	for _, parent := range l.PodParents() {
		children, err := h.PodsIn(parent)
		if err != nil {
			return nil, err
		}
		for _, pod := range children {
			entries, _ := os.ReadDir(h.cpuDir(pod.Path))
			for _, c := range entries {
				if c.IsDir() {
					pod.Containers = append(pod.Containers, c.Name())
				}
			}
			pods = append(pods, pod)
		}
	}
	return pods, nil
}

// PodsIn lists the pod cgroups directly in parent (one of the layout's
// PodParents), without their containers. A parent that does not exist
// (no pod of that QoS class yet) has none.
func (h *Hierarchy) PodsIn(parent string) ([]PodCgroup, error) {
	l, err := h.Layout()
	if err != nil {
		return nil, err
	}
	entries, err := os.ReadDir(h.cpuDir(parent))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var pods []PodCgroup
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		if uid, ok := l.podUID(parent, e.Name()); ok {
			pods = append(pods, PodCgroup{UID: uid, Path: parent + "/" + e.Name()})
		}
	}
	return pods, nil
}

// WaitNanoseconds is the time some task in the cgroup was runnable but
// waiting for a CPU since the cgroup was created, from its cpu.pressure
// ("some" line, pressure stall information). ok is false where there is
// none — cgroup v1, or a kernel without PSI (or booted with psi=0) —
// and stays false from then on: the agent then sums the threads' waits
// from /proc schedstat instead.
func (h *Hierarchy) WaitNanoseconds(cgroup string) (ns uint64, ok bool, err error) {
	if h.Mode != V2 || h.noPressure {
		return 0, false, nil
	}
	if err := h.checkPath(cgroup); err != nil {
		return 0, false, err
	}
	err = h.read(h.files, h.cpu, cgroup, "/cpu.pressure", func(data []byte) error {
		v, found := pressureTotal(data)
		if !found {
			return fmt.Errorf("%s/cpu.pressure has no total on its some line", cgroup)
		}
		ns = v * 1000
		return nil
	})
	switch {
	case err == nil:
		return ns, true, nil
	case errors.Is(err, syscall.EOPNOTSUPP) || (errors.Is(err, os.ErrNotExist) && isDir(h.cpuDir(cgroup))):
		h.noPressure = true // the kernel has no PSI for cgroups
		return 0, false, nil
	}
	return 0, false, err
}

// CPULimit is the CPUs a cgroup's CFS quota lets it use (kubelet sets a
// pod's from its containers' CPU limits when all have one), 0 when it has
// none: cpu.cfs_quota_us over cpu.cfs_period_us on v1, cpu.max on v2.
func (h *Hierarchy) CPULimit(cgroup string) (float64, error) {
	if err := h.checkPath(cgroup); err != nil {
		return 0, err
	}
	if h.Mode == V2 {
		var cpus float64
		err := h.read(h.files, h.cpu, cgroup, "/cpu.max", func(data []byte) error {
			f := strings.Fields(string(data))
			if len(f) != 2 {
				return fmt.Errorf("%s/cpu.max: %q", cgroup, data)
			}
			if f[0] == "max" {
				return nil
			}
			quota, err1 := strconv.ParseFloat(f[0], 64)
			period, err2 := strconv.ParseFloat(f[1], 64)
			if err := errors.Join(err1, err2); err != nil || period <= 0 {
				return fmt.Errorf("%s/cpu.max: %q", cgroup, data)
			}
			cpus = quota / period
			return nil
		})
		return cpus, err
	}
	var quota int64
	err := h.read(h.files, h.cpu, cgroup, "/cpu.cfs_quota_us", func(data []byte) (err error) {
		quota, err = strconv.ParseInt(strings.TrimSpace(string(data)), 10, 64)
		return err
	})
	if err != nil || quota <= 0 {
		return 0, err
	}
	period, err := h.readUint(h.files, h.cpu, cgroup, "/cpu.cfs_period_us")
	if err != nil || period == 0 {
		return 0, err
	}
	return float64(quota) / float64(period), nil
}

// CPUSet is the CPUs a cgroup's tasks may run on: cpuset.cpus on v1 (set
// by kubelet and runc on every container), cpuset.cpus.effective on v2.
// os.ErrNotExist: the cgroup is gone, or the node has no cpuset controller
// there.
func (h *Hierarchy) CPUSet(cgroup string) (cpuset.CPUSet, error) {
	if err := h.checkPath(cgroup); err != nil {
		return cpuset.CPUSet{}, err
	}
	if h.cpuset == "" {
		return cpuset.CPUSet{}, fmt.Errorf("no cpuset controller below %s: %w", h.cpu, os.ErrNotExist)
	}
	file := h.cpuset + h.hostPath(cgroup) + "/cpuset.cpus"
	if h.Mode == V2 {
		file += ".effective"
	}
	data, err := os.ReadFile(file)
	if err != nil {
		return cpuset.CPUSet{}, err
	}
	return cpuset.Parse(strings.TrimSpace(string(data)))
}

// pressureTotal reads "some avg10=… avg60=… avg300=… total=<µs>".
func pressureTotal(data []byte) (uint64, bool) {
	line, _, _ := strings.Cut(string(data), "\n")
	rest, ok := strings.CutPrefix(line, "some ")
	if !ok {
		return 0, false
	}
	for _, f := range strings.Fields(rest) {
		if v, ok := strings.CutPrefix(f, "total="); ok {
			n, err := strconv.ParseUint(v, 10, 64)
			return n, err == nil
		}
	}
	return 0, false
}

// read reads a cgroup's file name ("/cpu.stat") in the controller
// mounted at dir, kept open in files between periods; the agent reads
// several hundred a period, so the path is spelt without allocating.
func (h *Hierarchy) read(files *statfile.Files, dir, cgroup, name string, parse func([]byte) error) error {
	if cgroup == "/" {
		cgroup = ""
	}
	return files.ReadJoined(parse, dir, h.rootPrefix(), cgroup, name)
}

// rootPrefix is kubelet's cgroup root as it prefixes cgroup paths in the
// controllers ("" for /).
func (h *Hierarchy) rootPrefix() string {
	if h.kubeletRoot == "/" {
		return ""
	}
	return h.kubeletRoot
}

// readUint reads a one-number file (see read).
func (h *Hierarchy) readUint(files *statfile.Files, dir, cgroup, name string) (uint64, error) {
	var v uint64
	err := h.read(files, dir, cgroup, name, func(data []byte) (err error) {
		v, err = parseUint(data)
		return err
	})
	return v, err
}

// parseUint parses a decimal number and the white space around it,
// without the copy a string conversion makes.
func parseUint(data []byte) (uint64, error) {
	var v uint64
	digits, end := 0, false
	for _, c := range data {
		switch {
		case c >= '0' && c <= '9' && !end:
			d := uint64(c - '0')
			if v > (math.MaxUint64-d)/10 {
				return 0, fmt.Errorf("%q: %w", data, strconv.ErrRange)
			}
			v, digits = v*10+d, digits+1
		case c == ' ' || c == '\n' || c == '\t':
			end = digits > 0
		default:
			return 0, fmt.Errorf("%q: %w", data, strconv.ErrSyntax)
		}
	}
	if digits == 0 {
		return 0, fmt.Errorf("%q: %w", data, strconv.ErrSyntax)
	}
	return v, nil
}
