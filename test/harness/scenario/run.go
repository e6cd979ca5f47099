package scenario

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kubefairv1 "github.com/kubefair/kubefair/api/v1alpha1"
	"github.com/kubefair/kubefair/test/harness/cluster"
	"github.com/kubefair/kubefair/test/harness/kubeapi"
)

// Release and Namespace of kubefair's chart on the local cluster.
const (
	Release   = "kubefair"
	Namespace = "kubefair-system"
)

// Tools runs helm and kubectl against a local cluster.
type Tools struct {
	Cluster *cluster.Cluster
	// Helm is the helm binary ($HELM, which the Makefile builds).
	Helm string
}

func (t Tools) run(ctx context.Context, name string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, name, args...)
	dir := t.Cluster.Dir()
	cmd.Env = append(os.Environ(), "KUBECONFIG="+t.Cluster.Kubeconfig(),
		"HELM_CACHE_HOME="+filepath.Join(dir, "helm", "cache"),
		"HELM_CONFIG_HOME="+filepath.Join(dir, "helm", "config"),
		"HELM_DATA_HOME="+filepath.Join(dir, "helm", "data"))
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return out.String(), fmt.Errorf("%s %s: %w\n%s", filepath.Base(name), strings.Join(args, " "), err, out.String())
	}
	return out.String(), nil
}

// Kubectl runs the pinned kubectl.
func (t Tools) Kubectl(ctx context.Context, args ...string) (string, error) {
	return t.run(ctx, filepath.Join(kubeapi.Assets(), "kubectl"), args...)
}

// HelmRun runs helm.
func (t Tools) HelmRun(ctx context.Context, args ...string) (string, error) {
	if t.Helm == "" {
		return "", fmt.Errorf("no helm: set $HELM (`make helm` builds it into the tools cache)")
	}
	return t.run(ctx, t.Helm, args...)
}

// InstallKubefair installs (or upgrades to) the chart from this tree with
// the local cluster's values, the agent on or off, and more helm flags
// (--set …), and waits for it.
func (t Tools) InstallKubefair(ctx context.Context, agent bool, flags ...string) error {
	args := append([]string{"upgrade", "--install", Release, filepath.Join(kubeapi.RepoRoot(), "charts", "kubefair"),
		"--namespace", Namespace, "--create-namespace", "--wait", "--timeout", "5m",
		"--set", "agent.enabled=" + strconv.FormatBool(agent)}, ChartValues(t.Cluster)...)
	_, err := t.HelmRun(ctx, append(args, flags...)...)
	return err
}

// ChartValues: the local cluster's values file (no kube-proxy, images
// imported by hand) and this cluster's API port and a state directory
// inside the cluster's directory. The agent discovers pods as the chart's
// default has it, from the cgroup tree (no containerd socket).
func ChartValues(c *cluster.Cluster) []string {
	return []string{
		"-f", filepath.Join(kubeapi.RepoRoot(), "charts", "kubefair", "ci", "local-cluster-values.yaml"),
		"--set", "apiServerOverride.port=" + strconv.Itoa(c.APIPort()),
		"--set", "agent.stateDir=" + AgentStateDir(c),
	}
}

// AgentStateDir is the agents' state directory on each node of the cluster.
func AgentStateDir(c *cluster.Cluster) string { return filepath.Join(c.Dir(), "kubefair-agent") }

// Usage reads pods' cumulative CPU time, in nanoseconds, on the node
// they run on.
type Usage func(ctx context.Context, pods []corev1.Pod) (map[types.UID]int64, error)

// HostUsage reads it from this host's cgroup v1 (the local cluster's host
// node: cgroupfs driver, Burstable pods).
func HostUsage(_ context.Context, pods []corev1.Pod) (map[types.UID]int64, error) {
	out := map[types.UID]int64{}
	for _, p := range pods {
		u, err := CPUUsage(p)
		if err != nil {
			return nil, err
		}
		out[p.UID] = u
	}
	return out, nil
}

// HostProcessUsage is ProcessUsage for a pod on this host's node.
func HostProcessUsage(p corev1.Pod) (map[int]int64, error) {
	out, err := exec.Command("sh", "-c", processUsageScript(PodCgroup("cpu", p))).Output()
	if err != nil {
		return nil, fmt.Errorf("pod %s/%s's processes: %w", p.Namespace, p.Name, err)
	}
	return processUsage(p, string(out))
}

// HostThreadNices are the nice levels of the threads of each burner
// process of a pod on this host's node, by the threads it spins (its
// -threads): what the nice backend sets.
func HostThreadNices(p corev1.Pod) (map[int][]int, error) {
	// The nice level is field 19 of a thread's stat (a burner's name has
	// no space in it).
	script := "cd " + PodCgroup("cpu", p) + ` && for p in $(cat */cgroup.procs); do for t in /proc/$p/task/*; do echo "$(cut -d' ' -f19 $t/stat 2>/dev/null) $(tr '\0' ' ' < /proc/$p/cmdline)"; done; done`
	out, err := exec.Command("sh", "-c", script).Output()
	if err != nil {
		return nil, fmt.Errorf("pod %s/%s's threads: %w", p.Namespace, p.Name, err)
	}
	return byBurner(p, string(out), func(f []string) ([]int, error) {
		switch len(f) {
		case 0:
			return nil, nil // a thread gone between the two reads
		case 1:
		default:
			return nil, fmt.Errorf("%d figures, want a nice level", len(f))
		}
		nice, err := strconv.Atoi(f[0])
		return []int{nice}, err
	}, func(all *[]int, v []int) { *all = append(*all, v...) })
}

// PodCgroup is a pod's cgroup below one controller's mount (the cgroupfs
// driver's layout on cgroup v1): Guaranteed pods in kubepods, the others
// in their QoS class's cgroup.
func PodCgroup(controller string, p corev1.Pod) string {
	dir := filepath.Join("/sys/fs/cgroup", controller, "kubepods")
	switch p.Status.QOSClass {
	case corev1.PodQOSBestEffort:
		dir = filepath.Join(dir, "besteffort")
	case corev1.PodQOSBurstable:
		dir = filepath.Join(dir, "burstable")
	}
	return filepath.Join(dir, "pod"+string(p.UID))
}

// KubeletShares is the cpu.shares kubelet gives a pod: its CPU requests
// (as allocated, after any resize) × 1024 / 1000, at least 2 (a
// BestEffort pod's).
func KubeletShares(p corev1.Pod) int64 {
	var milli int64
	for i, c := range p.Spec.Containers {
		req := c.Resources.Requests.Cpu()
		if i < len(p.Status.ContainerStatuses) && p.Status.ContainerStatuses[i].Resources != nil {
			req = p.Status.ContainerStatuses[i].Resources.Requests.Cpu()
		}
		milli += req.MilliValue()
	}
	return max(milli*1024/1000, 2)
}

// CPUUsage is a pod's cumulative CPU time (cpuacct) on this host, in
// nanoseconds.
func CPUUsage(p corev1.Pod) (int64, error) {
	b, err := os.ReadFile(filepath.Join(PodCgroup("cpuacct", p), "cpuacct.usage"))
	if err != nil {
		return 0, err
	}
	return strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
}

// Groups are the scenario's running pods by what is measured: each
// tenant, and each VM ("vm-large", "vm-small").
func (s Scenario) Groups(ctx context.Context, k client.Client) (map[string][]corev1.Pod, error) {
	out := map[string][]corev1.Pod{}
	for _, tn := range s.Tenants {
		var list corev1.PodList
		if err := k.List(ctx, &list, client.InNamespace(tn.Namespace)); err != nil {
			return nil, err
		}
		for _, p := range list.Items {
			if p.DeletionTimestamp != nil || p.Status.Phase != corev1.PodRunning {
				continue
			}
			out[tn.Name] = append(out[tn.Name], p)
			if d := p.Labels["kubevirt.io/domain"]; d != "" {
				out["vm-"+d] = append(out["vm-"+d], p)
			}
		}
	}
	return out, nil
}

// Shares is one measurement: each tenant's share of the CPU the scenario's
// pods used (so the control plane's and any other load cancel out), and
// the large VM's share of the two VMs'.
type Shares struct {
	Tenant  map[string]float64
	VMLarge float64
}

// Measure measures the scenario's shares over one window, reading the
// pods' CPU time with usage.
func (s Scenario) Measure(ctx context.Context, k client.Client, window time.Duration, usage Usage) (Shares, error) {
	windows, err := s.MeasureWindows(ctx, k, window, 1, usage)
	if err != nil {
		return Shares{}, err
	}
	return windows[0], nil
}

// MeasureWindows measures n consecutive windows, each read's counters
// ending one window and starting the next (reads through a guest's ssh
// take seconds).
func (s Scenario) MeasureWindows(ctx context.Context, k client.Client, window time.Duration, n int, usage Usage) ([]Shares, error) {
	groups, err := s.Groups(ctx, k)
	if err != nil {
		return nil, err
	}
	var pods []corev1.Pod
	for _, tn := range s.Tenants {
		pods = append(pods, groups[tn.Name]...)
	}
	read := func() (map[string]int64, error) {
		byPod, err := usage(ctx, pods)
		if err != nil {
			return nil, err
		}
		out := map[string]int64{}
		for g, ps := range groups {
			for _, p := range ps {
				u, ok := byPod[p.UID]
				if !ok {
					return nil, fmt.Errorf("no CPU usage read for pod %s/%s", p.Namespace, p.Name)
				}
				out[g] += u
			}
		}
		return out, nil
	}
	before, err := read()
	if err != nil {
		return nil, err
	}
	var windows []Shares
	for range n {
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(window):
		}
		after, err := read()
		if err != nil {
			return nil, err
		}
		windows = append(windows, s.shares(before, after))
		before = after
	}
	return windows, nil
}

// shares is what the scenario's groups used between two reads.
func (s Scenario) shares(before, after map[string]int64) Shares {
	out := Shares{Tenant: map[string]float64{}}
	var total float64
	for _, tn := range s.Tenants {
		total += float64(after[tn.Name] - before[tn.Name])
	}
	for _, tn := range s.Tenants {
		out.Tenant[tn.Name] = float64(after[tn.Name]-before[tn.Name]) / total
	}
	if s.HasVMs() {
		large, small := float64(after["vm-large"]-before["vm-large"]), float64(after["vm-small"]-before["vm-small"])
		out.VMLarge = large / (large + small)
	}
	return out
}

// Create creates the scenario's objects and waits until every burner pod
// runs. The BestEffort tenants' pods are started first: in stock
// Kubernetes a BestEffort container beside busy Burstable pods gets so
// little CPU that even its runtime's start-up inside its cgroup stalls.
func (s Scenario) Create(ctx context.Context, k client.Client, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	var bestEffort, rest []client.Object
	for _, obj := range s.Objects() {
		if d, ok := obj.(*appsv1.Deployment); ok && len(d.Spec.Template.Spec.Containers[0].Resources.Requests) > 0 {
			rest = append(rest, obj)
		} else {
			bestEffort = append(bestEffort, obj) // and everything that is not a Deployment
		}
	}
	want := 0
	for _, tn := range s.Tenants {
		if tn.BestEffort() {
			want += tn.Pods()
		}
	}
	for _, step := range []struct {
		objs []client.Object
		want int
	}{{bestEffort, want}, {rest, s.Pods()}} {
		for _, obj := range step.objs {
			err := k.Create(ctx, obj)
			if _, tier := obj.(*kubefairv1.PricingTier); tier && apierrors.IsAlreadyExists(err) {
				continue // every scenario's tiers: another scenario of the cluster made them
			}
			if err != nil {
				return fmt.Errorf("creating %T %s: %w", obj, obj.GetName(), err)
			}
		}
		if err := s.waitRunning(ctx, k, step.want, deadline); err != nil {
			return err
		}
	}
	return nil
}

// waitRunning waits until want of the scenario's pods run.
func (s Scenario) waitRunning(ctx context.Context, k client.Client, want int, deadline time.Time) error {
	for {
		groups, err := s.Groups(ctx, k)
		if err != nil {
			return err
		}
		running := 0
		for _, tn := range s.Tenants {
			running += len(groups[tn.Name])
		}
		if running == want {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d of %d burner pods running by %s", running, want, deadline.Format(time.TimeOnly))
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
}
