package scenario

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kubefair/kubefair/test/harness/cluster"
)

// SystemdPodSlice is a pod's cgroup on a cgroup v2 node whose kubelet uses
// the systemd driver (the guest node): Guaranteed pods in kubepods.slice,
// the others in their QoS class's slice.
func SystemdPodSlice(p corev1.Pod) string {
	uid := strings.ReplaceAll(string(p.UID), "-", "_")
	switch p.Status.QOSClass {
	case corev1.PodQOSBestEffort:
		return "/sys/fs/cgroup/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod" + uid + ".slice"
	case corev1.PodQOSGuaranteed:
		return "/sys/fs/cgroup/kubepods.slice/kubepods-pod" + uid + ".slice"
	}
	return "/sys/fs/cgroup/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" + uid + ".slice"
}

// GuestUsage reads the pods' CPU time from their slices' cpu.stat in a
// guest node, in one ssh round trip.
func GuestUsage(g *cluster.GuestNode) Usage {
	return func(ctx context.Context, pods []corev1.Pod) (map[types.UID]int64, error) {
		// One process for all pods: under TCG, with the guest's CPUs
		// saturated, every fork costs a good part of a second.
		byDir := map[string]types.UID{}
		var files []string
		for _, p := range pods {
			d := SystemdPodSlice(p)
			byDir[d] = p.UID
			files = append(files, d+"/cpu.stat")
		}
		out, err := g.Run(ctx, "grep -H '^usage_usec ' "+strings.Join(files, " "))
		if err != nil {
			return nil, err
		}
		usage := map[types.UID]int64{}
		for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
			file, us, ok := strings.Cut(line, ":usage_usec ")
			v, err := strconv.ParseInt(us, 10, 64)
			if !ok || err != nil {
				return nil, fmt.Errorf("guest cpu.stat: %q", line)
			}
			usage[byDir[strings.TrimSuffix(file, "/cpu.stat")]] = v * 1000
		}
		return usage, nil
	}
}

// ProcessUsage is the CPU time, in clock ticks, of each burner process of
// one pod on a guest node, by the threads it spins (its -threads): what a
// thread policy divides between a pod's processes.
func ProcessUsage(ctx context.Context, g *cluster.GuestNode, p corev1.Pod) (map[int]int64, error) {
	// utime and stime (/proc/<pid>/stat fields 14 and 15) count every
	// thread of the process; the command line tells which burner it is.
	out, err := g.Run(ctx, "cd "+SystemdPodSlice(p)+` && for p in $(cat */cgroup.procs); do echo "$(cut -d' ' -f14,15 /proc/$p/stat) $(tr '\0' ' ' < /proc/$p/cmdline)"; done`)
	if err != nil {
		return nil, err
	}
	usage := map[int]int64{}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		f := strings.Fields(line)
		i := slices.Index(f, "-threads")
		if i < 2 || i+1 >= len(f) {
			continue // not a burner (the pause process has its own cgroup)
		}
		utime, err1 := strconv.ParseInt(f[0], 10, 64)
		stime, err2 := strconv.ParseInt(f[1], 10, 64)
		threads, err3 := strconv.Atoi(f[i+1])
		if err1 != nil || err2 != nil || err3 != nil {
			return nil, fmt.Errorf("pod %s/%s's process: %q", p.Namespace, p.Name, line)
		}
		usage[threads] += utime + stime
	}
	if len(usage) == 0 {
		return nil, fmt.Errorf("no burner process in pod %s/%s: %q", p.Namespace, p.Name, out)
	}
	return usage, nil
}
