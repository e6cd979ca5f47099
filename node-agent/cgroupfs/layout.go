package cgroupfs

import (
	"fmt"
	"path"
	"strings"
)

// Driver is how kubelet names its cgroups: its cgroupDriver setting.
type Driver string

const (
	// Cgroupfs: kubepods/burstable/pod<uid>/<container id>.
	Cgroupfs Driver = "cgroupfs"
	// Systemd: kubepods.slice/kubepods-burstable.slice/
	// kubepods-burstable-pod<uid with _>.slice/cri-containerd-<id>.scope.
	Systemd Driver = "systemd"
	// AutoDriver finds whichever of the two layouts exists on the node.
	AutoDriver Driver = "auto"
)

// ParseDriver checks a --cgroup-driver value.
func ParseDriver(s string) (Driver, error) {
	switch d := Driver(s); d {
	case Cgroupfs, Systemd, AutoDriver:
		return d, nil
	case "":
		return AutoDriver, nil
	}
	return "", fmt.Errorf("cgroup driver %q: want auto, cgroupfs or systemd (kubelet's cgroupDriver)", s)
}

// Layout is where kubelet keeps its pod cgroups on this node: the kubepods
// cgroup and its QoS children, as paths below kubelet's cgroup root (the
// form every cgroup path in this package takes). Guaranteed pods lie
// directly in Kubepods, the others in Burstable and BestEffort.
type Layout struct {
	Driver                          Driver
	Kubepods, Burstable, BestEffort string
}

// KubeletLayout is kubelet's layout for a driver and its cgroup root (as
// kubelet is given it: "/" by default; with the systemd driver a slice
// such as "/kubelet.slice", whose name prefixes the slices below it).
func KubeletLayout(d Driver, kubeletRoot string) Layout {
	if d == Systemd {
		// kubelet names a systemd cgroup by its path components joined with
		// "-": below /kubelet.slice, kubepods is kubelet-kubepods.slice.
		prefix := ""
		if base := path.Base(kubeletRoot); base != "/" && base != "-.slice" {
			prefix = strings.TrimSuffix(base, ".slice") + "-"
		}
		kubepods := "/" + prefix + "kubepods.slice"
		return Layout{Driver: Systemd, Kubepods: kubepods,
			Burstable:  kubepods + "/" + prefix + "kubepods-burstable.slice",
			BestEffort: kubepods + "/" + prefix + "kubepods-besteffort.slice"}
	}
	return Layout{Driver: Cgroupfs, Kubepods: "/kubepods", Burstable: "/kubepods/burstable", BestEffort: "/kubepods/besteffort"}
}

// PodParents are the cgroups that hold pod cgroups: Guaranteed pods sit in
// kubepods itself, the others in their QoS class's cgroup.
func (l Layout) PodParents() []string { return []string{l.Kubepods, l.Burstable, l.BestEffort} }

// Contains tells whether cgroup lies strictly below kubepods, the only
// place kubefair writes.
func (l Layout) Contains(cgroup string) bool {
	// Checked several hundred times a period: no concatenation (path.Clean
	// of a clean path allocates nothing).
	n := len(l.Kubepods)
	return n > 0 && len(cgroup) > n+1 && cgroup[n] == '/' && strings.HasPrefix(cgroup, l.Kubepods) &&
		cgroup[0] == '/' && path.Clean(cgroup) == cgroup
}

// podUID is the pod UID a child cgroup of a pod parent is named for, or
// false when the child is not a pod cgroup (a QoS cgroup, or anything
// else). cgroupfs names it pod<uid>; systemd
// <parent's name>-pod<uid with "-" as "_">.slice.
func (l Layout) podUID(parent, name string) (string, bool) {
	if l.Driver != Systemd {
		uid, ok := strings.CutPrefix(name, "pod")
		return uid, ok && uid != ""
	}
	rest, ok := strings.CutPrefix(name, strings.TrimSuffix(path.Base(parent), ".slice")+"-pod")
	if !ok {
		return "", false
	}
	uid, ok := strings.CutSuffix(rest, ".slice")
	return strings.ReplaceAll(uid, "_", "-"), ok && uid != ""
}

// expandSlice is the path of a systemd slice unit in the cgroup tree:
// each "-" of its name opens a level, so a-b-c.slice lives at
// /a.slice/a-b.slice/a-b-c.slice; -.slice is the root.
func expandSlice(slice string) (string, bool) {
	name, ok := strings.CutSuffix(slice, ".slice")
	if !ok || strings.Contains(name, "/") {
		return "", false
	}
	if name == "-" {
		return "/", true
	}
	if name == "" || strings.HasPrefix(name, "-") || strings.HasSuffix(name, "-") || strings.Contains(name, "--") {
		return "", false
	}
	var b strings.Builder
	for i := range len(name) {
		if name[i] == '-' {
			b.WriteString("/" + name[:i] + ".slice")
		}
	}
	b.WriteString("/" + slice)
	return b.String(), true
}

// runtimePath is a container's cgroup as its runtime names it in the OCI
// spec's linux.cgroupsPath, as a path from the controllers' root: the
// cgroupfs form is a path already; the systemd form is
// "slice:prefix:name", the scope prefix-name.scope in that slice (or the
// slice name itself when name is a slice).
func runtimePath(cgroupsPath string) (string, bool) {
	if cgroupsPath == "" {
		return "", false
	}
	parts := strings.Split(cgroupsPath, ":")
	switch len(parts) {
	case 1:
		return path.Clean("/" + cgroupsPath), true
	case 3:
		slice, prefix, name := parts[0], parts[1], parts[2]
		dir, ok := expandSlice(slice)
		if !ok || name == "" || strings.Contains(name, "/") {
			return "", false
		}
		unit := prefix + "-" + name + ".scope"
		if strings.HasSuffix(name, ".slice") {
			unit = name
		} else if prefix == "" {
			unit = name + ".scope"
		}
		return path.Join(dir, unit), true
	}
	return "", false
}
