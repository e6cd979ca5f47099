package agent

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/kubefair/kubefair/controllers"
	"github.com/kubefair/kubefair/test/harness/containerd"
	"github.com/kubefair/kubefair/test/harness/images"
	"github.com/kubefair/kubefair/test/harness/podcgroups"
)

// BenchmarkAgent prints what the agent costs on a node with 10, 100 and
// 250 pods (up to about 5000 threads), and the greedy scenario's
// steady-state error and convergence, stock and kubefair side by side from
// the same run (root; `make envtest` first; runs once, takes about fifteen
// minutes):
//
//	go test -run '^$' -bench Agent ./test/integration/agent/
func BenchmarkAgent(b *testing.B) {
	var rows []costRow
	for _, size := range costSizes {
		b.Run(fmt.Sprintf("cost/pods=%d/spinners=%d", size.pods, size.spinners), func(b *testing.B) { rows = append(rows, benchCost(b, size)) })
	}
	printCost(rows)
	b.Run("fairness", func(b *testing.B) {
		g := runGreedy(newWorld(b))
		fmt.Print(g.report)
		b.ReportMetric(g.stockErr, "stock-err-pp")
		b.ReportMetric(g.kfErr, "kubefair-err-pp")
		b.ReportMetric(g.convWeight.time.Seconds(), "converge-s")
	})
}

// Cost scenario: 10 tenants sharing the pods evenly; each pod a burner
// whose spinner threads wake once a second, each at its own random phase,
// to spin 0.2 ms (with the Go runtime's own threads about 10 OS threads a
// pod at 4 spinners, 20 at 14, every one of them running every period),
// registered in a private containerd as kubelet's CRI plugin would (a
// sandbox and a container per pod).
const (
	costTenants            = 10
	costWarmup, costWindow = 10 * time.Second, 60 * time.Second
)

// costSize is a node size measured: pods, and spinner threads a pod.
type costSize struct{ pods, spinners int }

// costSizes: 250 pods twice, with about 2500 and 5000 threads.
var costSizes = []costSize{{10, 4}, {100, 4}, {250, 4}, {250, 14}}

// costTargets are the agent's budgets per node size (issue: production
// scale): CPU per 1-s period in % of one CPU, and RSS in MiB.
var costTargets = map[int]struct{ cpuPercent, rssMiB float64 }{
	100: {0.5, 48},
	250: {1, 64},
}

// costRow is one node size's figures.
type costRow struct {
	pods, spinners, threads, containers int
	cpuPercent, rss, peak               float64
}

// printCost prints the scaling curve, a row per node size, with the
// targets beside the figures.
func printCost(rows []costRow) {
	fmt.Printf("\nagent cost at its default 1-s period, measured over %.0f s after %.0f s of warm-up; SPINNERS lightly busy threads a pod\n"+
		"(each spinning 0.2 ms a second at a random phase), a sandbox and a container a pod in containerd;\n"+
		"discovery as the chart runs it, from the cgroup tree\n"+
		"%6s %9s %8s %11s %22s %16s %15s\n", costWindow.Seconds(), costWarmup.Seconds(),
		"PODS", "SPINNERS", "THREADS", "CONTAINERS", "CPU (% OF ONE CPU)", "RSS (MiB)", "PEAK RSS (MiB)")
	for _, r := range rows {
		cpu, rss := fmt.Sprintf("%.2f", r.cpuPercent), fmt.Sprintf("%.1f", r.rss)
		if t, ok := costTargets[r.pods]; ok {
			cpu += fmt.Sprintf(" (≤ %g)", t.cpuPercent)
			rss += fmt.Sprintf(" (≤ %g)", t.rssMiB)
		}
		fmt.Printf("%6d %9d %8d %11d %22s %16s %15.1f\n", r.pods, r.spinners, r.threads, r.containers, cpu, rss, r.peak)
	}
}

// benchCost runs the real kubefair-agent binary, at its default 1-s period
// and with its default discovery (the cgroup tree, no containerd socket),
// against the API server and the node's pods, and reads its
// CPU time and memory from /proc; it asserts the targets of the node's
// size and deletes its pods and tenants when done.
func benchCost(b *testing.B, size costSize) costRow {
	pods := size.pods
	// The controller as the chart runs it: the tenants' status (which the
	// agent watches) follows the reports at most every 10 s.
	w := newWorldWithStatusPeriod(b, controllers.DefaultStatusPeriod)
	w.burnerArgs = []string{"-duty", "0.0002", "-cycle", "1s"}
	prefix := fmt.Sprintf("cost%d-%d-", pods, size.spinners)
	for i := 0; i < costTenants; i++ {
		name := fmt.Sprintf("%s%d", prefix, i)
		w.addTenant(name, int32(i+1), pods/costTenants, size.spinners)
		b.Cleanup(func() { w.deleteTenant(name) })
	}
	d, _ := startContainerd(b)
	var list corev1.PodList
	if err := w.k8s.List(context.Background(), &list); err != nil {
		b.Fatal(err)
	}
	registered := 0
	for i := range list.Items {
		p := &list.Items[i]
		if !strings.HasPrefix(p.Namespace, prefix) {
			continue
		}
		uid := string(p.UID)
		sandbox, app := containerID(), containerID()
		for _, c := range []containerd.Container{
			{ID: sandbox, Image: images.Pause.Ref, Args: []string{images.Pause.Binary()}, Labels: criLabels(p, "sandbox", ""),
				CgroupsPath: w.tree.KubeletRoot + podcgroups.PodCgroup(uid) + "/" + sandbox, CPUShares: sandboxShares},
			{ID: app, Image: images.Burner.Ref, Args: []string{images.Burner.Binary()}, Labels: criLabels(p, "container", "burner"),
				CgroupsPath: w.tree.KubeletRoot + podcgroups.ContainerCgroup(uid), CPUShares: appShares},
		} {
			if err := d.Register(context.Background(), c); err != nil {
				b.Fatal(err)
			}
			registered++
		}
	}
	threads := 0
	h := w.hierarchy()
	for _, cgs := range w.pods {
		for _, cg := range cgs {
			pids, _ := h.Procs(cg)
			for _, pid := range pids {
				tasks, _ := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
				threads += len(tasks)
			}
		}
	}

	tmp := b.TempDir()
	bin := agentBinary(b)                   // static, as in the agent's image
	stateDir := filepath.Join(tmp, "state") // exists, as the chart's hostPath does: the agent's filter has no mkdir
	if err := os.Mkdir(stateDir, 0o700); err != nil {
		b.Fatal(err)
	}
	kubeconfig := filepath.Join(tmp, "kubeconfig")
	if err := api.WriteKubeconfig(kubeconfig); err != nil {
		b.Fatal(err)
	}
	logFile, err := os.Create(filepath.Join(tmp, "agent.log"))
	if err != nil {
		b.Fatal(err)
	}
	defer logFile.Close()
	agentCmd := exec.Command(bin, "--node-name", node, "--cgroup-root", podcgroups.HostCgroupRoot,
		"--kubelet-cgroup-root", w.tree.KubeletRoot, "--state-dir", stateDir,
		"--metrics-bind-address", "127.0.0.1:0", "--health-probe-bind-address", "127.0.0.1:0")
	agentCmd.Env = append(os.Environ(), "KUBECONFIG="+kubeconfig)
	agentCmd.Stdout, agentCmd.Stderr = logFile, logFile
	if err := agentCmd.Start(); err != nil {
		b.Fatal(err)
	}
	stopped := false
	stop := func() {
		if !stopped {
			stopped = true
			_ = agentCmd.Process.Signal(syscall.SIGTERM)
			_ = agentCmd.Wait()
		}
	}
	b.Cleanup(stop)
	pid := agentCmd.Process.Pid
	last := w.pods[fmt.Sprintf("%s%d", prefix, costTenants-1)][0]
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		if s, _ := w.tree.Shares(last); s != podcgroups.KubeletShares {
			break
		}
		if time.Now().After(deadline) {
			logs, _ := os.ReadFile(logFile.Name())
			b.Fatalf("the agent did not weigh the pods within 60 s; its log:\n%s", logs)
		}
	}

	time.Sleep(costWarmup)
	cpu0, t0 := processCPU(b, pid), time.Now()
	time.Sleep(costWindow)
	cpu1, t1 := processCPU(b, pid), time.Now()
	rss, peak := processMemory(b, pid, "VmRSS:"), processMemory(b, pid, "VmHWM:")
	stop()
	if logs, _ := os.ReadFile(logFile.Name()); strings.Contains(string(logs), `"level":"error"`) {
		b.Errorf("the agent logged errors:\n%s", logs)
	}

	periods := t1.Sub(t0).Seconds() // at the default 1-s period
	row := costRow{pods: pods, spinners: size.spinners, threads: threads, containers: registered, cpuPercent: 100 * (cpu1 - cpu0).Seconds() / periods, rss: rss, peak: peak}
	if t, ok := costTargets[pods]; ok && (row.cpuPercent > t.cpuPercent || row.rss > t.rssMiB) {
		b.Errorf("%d pods: the agent used %.2f %% of a CPU and %.1f MiB; the targets are %g %% and %g MiB", pods, row.cpuPercent, row.rss, t.cpuPercent, t.rssMiB)
	}
	b.ReportMetric(row.cpuPercent, "agent-cpu-%")
	b.ReportMetric(row.rss, "agent-rss-MiB")
	return row
}

// processCPU is the CPU time (user + system) a process has used, from
// /proc/<pid>/stat in USER_HZ ticks (100 a second on Linux).
func processCPU(b testing.TB, pid int) time.Duration {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		b.Fatal(err)
	}
	f := strings.Fields(string(data[strings.LastIndexByte(string(data), ')')+2:]))
	utime, _ := strconv.ParseInt(f[11], 10, 64) // fields 14 and 15 of stat
	stime, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(utime+stime) * 10 * time.Millisecond
}

// processMemory reads one "<field> <n> kB" line of /proc/<pid>/status, in MiB.
func processMemory(b *testing.B, pid int, field string) float64 {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		b.Fatal(err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if rest, ok := strings.CutPrefix(line, field); ok {
			kb, _ := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 64)
			return kb / 1024
		}
	}
	b.Fatalf("no %s in /proc/%d/status", field, pid)
	return 0
}
