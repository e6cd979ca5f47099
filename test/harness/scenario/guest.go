package scenario

import (
	"context"
	"errors"
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
	out, err := g.Run(ctx, processUsageScript(SystemdPodSlice(p)))
	if err != nil {
		return nil, err
	}
	return processUsage(p, out)
}

func processUsage(p corev1.Pod, out string) (map[int]int64, error) {
	return byBurner(p, out, func(f []string) (int64, error) {
		if len(f) != 2 {
			return 0, fmt.Errorf("%d figures, want utime and stime", len(f))
		}
		utime, err1 := strconv.ParseInt(f[0], 10, 64)
		stime, err2 := strconv.ParseInt(f[1], 10, 64)
		return utime + stime, errors.Join(err1, err2)
	}, func(sum *int64, v int64) { *sum += v })
}

// processUsageScript prints each process of a pod cgroup's containers:
// its utime and stime (/proc/<pid>/stat fields 14 and 15, which count
// every thread of the process), then its command line, which tells which
// burner it is.
func processUsageScript(podDir string) string {
	return "cd " + podDir + ` && for p in $(cat */cgroup.procs); do echo "$(cut -d' ' -f14,15 /proc/$p/stat) $(tr '\0' ' ' < /proc/$p/cmdline)"; done`
}

// byBurner folds the lines of a script's output — figures, then a
// process's command line — into one value per burner process, keyed by
// its -threads; lines of other processes are skipped.
func byBurner[V any](p corev1.Pod, out string, parse func(figures []string) (V, error), fold func(*V, V)) (map[int]V, error) {
	byThreads := map[int]V{}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		f := strings.Fields(line)
		i := slices.Index(f, "-threads")
		if i < 2 || i+1 >= len(f) {
			continue // not a burner (the pause process has its own cgroup)
		}
		v, err := parse(f[:i-1])
		threads, err2 := strconv.Atoi(f[i+1])
		if err != nil || err2 != nil {
			return nil, fmt.Errorf("pod %s/%s's process: %q", p.Namespace, p.Name, line)
		}
		sum := byThreads[threads]
		fold(&sum, v)
		byThreads[threads] = sum
	}
	if len(byThreads) == 0 {
		return nil, fmt.Errorf("no burner process in pod %s/%s: %q", p.Namespace, p.Name, out)
	}
	return byThreads, nil
}
