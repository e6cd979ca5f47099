package cluster

import (
	"errors"
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

// hardCodedPaths are host paths kubelet, containerd and the CNI plugins
// use whatever they are configured with (/run/mount: util-linux's mount,
// which kubelet runs for its tmpfs volumes, keeps its utab there). Down
// removes those Up found absent.
var hardCodedPaths = []string{
	"/var/log/containers", "/var/log/pods", "/var/lib/kubelet", "/var/lib/cni",
	"/run/containerd", "/run/mount", "/etc/cni", "/opt/cni",
}

const ipForward = "/proc/sys/net/ipv4/ip_forward"

// hostFootprint is the host as Up found it.
type hostFootprint struct {
	AbsentPaths []string `json:"absentPaths"`
	IPForward   string   `json:"ipForward"`
	HadBridge   bool     `json:"hadBridge"`
	// CgroupMounts are the mount points whose kubepods Down removes (those
	// without one before Up).
	CgroupMounts []string `json:"cgroupMounts"`
}

func recordHost(cfg Config) hostFootprint {
	var h hostFootprint
	for _, p := range hardCodedPaths {
		if _, err := os.Lstat(p); os.IsNotExist(err) {
			h.AbsentPaths = append(h.AbsentPaths, p)
		}
	}
	if b, err := os.ReadFile(ipForward); err == nil {
		h.IPForward = strings.TrimSpace(string(b))
	}
	h.HadBridge = exec.Command("ip", "link", "show", cfg.Bridge).Run() == nil
	for _, m := range cgroupMounts() {
		if _, err := os.Stat(filepath.Join(m, "kubepods")); os.IsNotExist(err) {
			h.CgroupMounts = append(h.CgroupMounts, m)
		}
	}
	return h
}

// cgroupMounts are this machine's cgroup v1 hierarchies and the v2 one.
func cgroupMounts() []string {
	data, err := os.ReadFile("/proc/self/mounts")
	if err != nil {
		return nil
	}
	var out []string
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Fields(line)
		if len(f) >= 3 && (f[2] == "cgroup" || f[2] == "cgroup2") {
			out = append(out, f[1])
		}
	}
	return out
}

// restore undoes Up's footprint. Processes are already stopped.
func (h hostFootprint) restore(cfg Config) error {
	var errs []error
	unmountBelow(cfg.Dir)
	for _, m := range h.CgroupMounts {
		errs = append(errs, removeCgroupTree(filepath.Join(m, "kubepods")))
	}
	if !h.HadBridge && exec.Command("ip", "link", "show", cfg.Bridge).Run() == nil {
		if out, err := exec.Command("ip", "link", "delete", cfg.Bridge).CombinedOutput(); err != nil {
			errs = append(errs, fmt.Errorf("deleting the bridge %s: %w: %s", cfg.Bridge, err, out))
		}
	}
	if out, _ := exec.Command("ip", "-o", "address", "show", "dev", "lo", "to", cfg.NodeIP).Output(); len(out) > 0 {
		if out, err := exec.Command("ip", "address", "delete", cfg.NodeIP+"/32", "dev", "lo").CombinedOutput(); err != nil {
			errs = append(errs, fmt.Errorf("removing the node address %s: %w: %s", cfg.NodeIP, err, out))
		}
	}
	if h.IPForward != "" {
		errs = append(errs, os.WriteFile(ipForward, []byte(h.IPForward), 0o644))
	}
	for _, p := range h.AbsentPaths {
		unmountBelow(p)
		errs = append(errs, os.RemoveAll(p))
	}
	return errors.Join(errs...)
}

// unmountBelow detaches every mount below dir, deepest first.
func unmountBelow(dir string) {
	data, err := os.ReadFile("/proc/self/mounts")
	if err != nil {
		return
	}
	var targets []string
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Fields(line)
		if len(f) >= 2 && strings.HasPrefix(f[1], dir+"/") {
			targets = append(targets, f[1])
		}
	}
	sort.Slice(targets, func(i, j int) bool { return len(targets[i]) > len(targets[j]) })
	for _, t := range targets {
		_ = syscall.Unmount(t, syscall.MNT_DETACH)
	}
}

// removeCgroupTree kills what still runs in a cgroup tree (pod processes
// of this cluster whose containers outlived containerd) and removes the
// cgroups, deepest first.
func removeCgroupTree(root string) error {
	if _, err := os.Stat(root); os.IsNotExist(err) {
		return nil
	}
	var dirs []string
	_ = filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			dirs = append(dirs, p)
		}
		return nil
	})
	for _, d := range dirs {
		if b, err := os.ReadFile(filepath.Join(d, "cgroup.procs")); err == nil {
			for _, f := range strings.Fields(string(b)) {
				if pid, err := strconv.Atoi(f); err == nil {
					_ = syscall.Kill(pid, syscall.SIGKILL)
				}
			}
		}
	}
	sort.Slice(dirs, func(i, j int) bool { return len(dirs[i]) > len(dirs[j]) })
	var last error
	for attempt := 0; attempt < 50; attempt++ {
		last = nil
		for _, d := range dirs {
			if err := syscall.Rmdir(d); err != nil && !os.IsNotExist(err) {
				last = fmt.Errorf("removing cgroup %s: %w", d, err)
			}
		}
		if last == nil {
			return nil
		}
		time.Sleep(100 * time.Millisecond) // killed processes take a moment to leave
	}
	return last
}
