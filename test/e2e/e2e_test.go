// Package e2e is kubefair's end-to-end suite: a real single-node cluster
// (test/harness/cluster), the chart installed with helm, the scenario's
// tenants (test/harness/scenario) running real CPU burners in real pods,
// stock Kubernetes first and kubefair after, then faults. It needs root;
// `make test` builds everything it uses.
package e2e

import (
	"context"
	"fmt"
	"math"
	"os"
	"os/exec"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kubefairv1 "github.com/kubefair/kubefair/api/v1alpha1"
	"github.com/kubefair/kubefair/node-agent/fairness"
	"github.com/kubefair/kubefair/test/harness/cluster"
	"github.com/kubefair/kubefair/test/harness/scenario"
	"github.com/kubefair/kubefair/test/harness/scrape"
)

const (
	namespace = scenario.Namespace
	// boundPoints is the bound on |achieved − entitled|.
	boundPoints = 2.0
	// Shares are medians of windows of this length. On 2 CPUs the kernel's
	// load balancer moves the tenants' 32 threads between placements that
	// favour one tenant or another for seconds at a time: an 8-s window of
	// the 1-pod tenant scatters by ±3 points around its mean, a 12-s one by
	// ±2 (single windows up to ±5). The median of nine such windows missed
	// the bound once in CI (46.5 % against 44.4 after the restarts), seven
	// by 0.06 points: thirteen.
	window  = 12 * time.Second
	windows = 13
	// stockWindows: stock is measured for its check against kubelet's
	// weights (checkStock): five windows are enough for that.
	stockWindows = 5
	// stockPoints bounds |stock − kubelet's weights|. On the host the
	// tenants met it within 0.4 points. On the guest, render's pod of 59
	// threads took 1.7–2.9 points more than its weight gives in each of five
	// runs, and batch lost as much (3.2 once). That pod is the only
	// divisible load among single-thread pods, and more windows do not move
	// it. Leftover kubefair weights would move stock by tens of points.
	stockPoints = 4.0
	// settle is the time a fault is given before shares are measured again.
	settle = 5 * time.Second
	// The components' metrics ports in ci/local-cluster-values.yaml (host
	// network).
	agentMetricsPort, controllerMetricsPort = 19090, 18080
)

func TestEndToEnd(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c := upCluster(ctx, t)
	w := &world{t: t, c: c, k8s: newClient(t, c), ctx: ctx, tools: scenario.Tools{Cluster: c, Helm: os.Getenv("HELM")},
		sc: scenario.Full, node: c.NodeName(), cpu: scenario.HostUsage, window: window, windows: windows, scraper: new(string), goneCPU: map[string]int64{}}

	// Stock first: the chart without the agent.
	if err := w.tools.InstallKubefair(ctx, false); err != nil {
		t.Fatal(err)
	}
	w.waitReady(time.Minute, 1, "the controller", client.InNamespace(namespace))
	if err := w.sc.Create(ctx, w.k8s, 2*time.Minute); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * time.Second)
	stock := w.measureN(stockWindows)
	for _, tn := range w.sc.Tenants {
		for _, p := range w.pods(client.InNamespace(tn.Namespace)) {
			if got := w.shares(p); got != scenario.KubeletShares(p) {
				t.Fatalf("stock: pod %s/%s has cpu.shares %d, want kubelet's %d for %s", p.Namespace, p.Name, got, scenario.KubeletShares(p), scenario.CPURequest)
			}
		}
	}

	// kubefair: the same release with the agent on.
	if err := w.tools.InstallKubefair(ctx, true); err != nil {
		t.Fatal(err)
	}
	w.waitReady(time.Minute, 2, "the controller and the agent", client.InNamespace(namespace))
	checkAgentMounts(t, hostAgentProc(t, "mountinfo"), "cpu/kubepods")
	checkAgentCaps(t, "the host", hostAgentProc(t, "status"), 0)
	firstBoot := w.waitReport(time.Time{}, "")
	time.Sleep(10 * time.Second) // the closed loop settles
	// The reports and `kubectl get tenants` are read over the same
	// windows as the host's counters.
	measured := w.measuring(w.windows)
	w.checkStatus()
	kf := measured()
	w.printComparison(stock, kf)
	w.checkShares("kubefair", kf)
	w.checkVMs("kubefair", kf)
	w.checkStock(stock, false)
	w.checkCost()

	t.Run("metrics only to a granted identity", func(t *testing.T) {
		w := w.with(t)
		stranger, err := scrape.Identity(ctx, w.k8s, "default", "kubefair-e2e-stranger", false)
		if err != nil {
			t.Fatal(err)
		}
		for port, want := range map[int]string{agentMetricsPort: "kubefair_agent_", controllerMetricsPort: "kubefair_"} {
			if err := scrape.Guarded(ctx, fmt.Sprintf("https://127.0.0.1:%d/metrics", port), w.scraperToken(), stranger, want); err != nil {
				t.Error(err)
			}
		}
	})

	t.Run("nice backend", w.checkNiceBackend)

	// The agent pod deleted, then the node's two daemons restarted one
	// after the other, with one measurement after all three (each alone
	// asserted the same things; the node suite restarts the agent alone).
	t.Run("agent, kubelet and containerd restarted", func(t *testing.T) {
		w := w.with(t)
		pods := w.allScenarioPods()
		old := w.pods(client.InNamespace(namespace), client.MatchingLabels{"app.kubernetes.io/component": "agent"})
		if len(old) != 1 {
			t.Fatalf("%d agent pods", len(old))
		}
		if err := w.k8s.Delete(w.ctx, &old[0]); err != nil {
			t.Fatal(err)
		}
		w.eventually(90*time.Second, "a new agent pod Ready", func() (bool, string) {
			pods := w.pods(client.InNamespace(namespace), client.MatchingLabels{"app.kubernetes.io/component": "agent"})
			return len(pods) == 1 && pods[0].UID != old[0].UID && ready(pods[0]), fmt.Sprintf("%d agent pods", len(pods))
		})
		w.waitReport(time.Now(), firstBoot) // reporting resumes, from a new boot

		driftBefore := w.agentMetric(agentMetricsPort, "kubefair_agent_drift_total")
		if err := c.Restart(ctx, cluster.Kubelet); err != nil {
			t.Fatal(err)
		}
		if err := c.WaitNodeReady(ctx, time.Minute); err != nil {
			t.Fatal(err)
		}
		// A starting kubelet sets the Burstable QoS cgroup to 2 shares, at
		// once or at its first QoS update (within a minute). The agent
		// puts the pods' sum back within a period (a repair); where
		// kubefair weighs the QoS cgroups itself (a BestEffort tenant on
		// the node), kubelet's write is drift, undone as quickly.
		var sawTwo time.Time // when the test first read kubelet's 2
		w.eventually(70*time.Second, "kubelet's write to the Burstable QoS cgroup, undone by the agent", func() (bool, string) {
			raw, _ := os.ReadFile("/sys/fs/cgroup/cpu/kubepods/burstable/cpu.shares")
			shares := strings.TrimSpace(string(raw))
			if shares == "2" && sawTwo.IsZero() {
				sawTwo = time.Now()
			}
			repairs, drift := w.agentMetric(agentMetricsPort, "kubefair_agent_burstable_repairs_total"), w.agentMetric(agentMetricsPort, "kubefair_agent_drift_total")
			return (repairs >= 1 || drift > driftBefore) && shares != "2",
				fmt.Sprintf("Burstable at %s shares, %v repairs, %v drift corrections (%v before)", shares, repairs, drift, driftBefore)
		})
		if !sawTwo.IsZero() && time.Since(sawTwo) > 3*time.Second { // a 1-s period, plus the polling
			t.Errorf("the agent undid kubelet's 2 shares on the Burstable QoS cgroup %s after the test saw it, want within a period", time.Since(sawTwo).Round(100*time.Millisecond))
		}
		if err := c.Restart(ctx, cluster.Containerd); err != nil {
			t.Fatal(err)
		}
		time.Sleep(settle)
		w.checkShares("after the agent, kubelet and containerd restarted", w.measure())
		w.checkCost()
		if err := c.WaitNodeReady(ctx, time.Minute); err != nil {
			t.Fatal(err)
		}
		w.checkSamePods(pods)
		w.waitReport(time.Now(), "")
	})

	t.Run("in-place resize", func(t *testing.T) {
		w := w.with(t)
		p := w.pods(client.InNamespace("batch"))[0]
		kubefairShares := w.shares(p)
		drift := w.report().DriftCorrections
		patch := []byte(`{"spec":{"containers":[{"name":"burner","resources":{"requests":{"cpu":"100m"}}}]}}`)
		if err := w.k8s.SubResource("resize").Patch(w.ctx, &p, client.RawPatch("application/strategic-merge-patch+json", patch)); err != nil {
			t.Fatalf("resizing %s: %v", p.Name, err)
		}
		// kubelet writes 102 (100m) to the pod cgroup; the agent puts its
		// weight back within a period and counts the drift.
		w.eventually(30*time.Second, "kubelet's resize to show in the pod status", func() (bool, string) {
			var cur corev1.Pod
			_ = w.k8s.Get(w.ctx, client.ObjectKeyFromObject(&p), &cur)
			for _, cs := range cur.Status.ContainerStatuses {
				if cs.Resources != nil && cs.Resources.Requests.Cpu().Cmp(resource.MustParse("100m")) == 0 {
					return true, ""
				}
			}
			return false, "status not resized yet"
		})
		// Within a period (plus the test's polling), the pod is back at the
		// weight kubefair gives every batch pod alike.
		w.eventually(1500*time.Millisecond, "the agent to restore its weight", func() (bool, string) {
			got, peer := w.shares(p), w.shares(w.pods(client.InNamespace("batch"))[1])
			return got != 102 && math.Abs(float64(got-peer)) <= 1, fmt.Sprintf("cpu.shares %d, another batch pod %d (before the resize %d)", got, peer, kubefairShares)
		})
		w.eventually(20*time.Second, "the drift in the node's report", func() (bool, string) {
			d := w.report().DriftCorrections
			return d > drift, fmt.Sprintf("driftCorrections %d, was %d", d, drift)
		})
	})

	t.Run("billing faults", func(t *testing.T) {
		w.checkBillingFaults(t)
		w.checkCost()
	})

	t.Run("helm uninstall", func(t *testing.T) {
		w := w.with(t)
		if _, err := w.tools.HelmRun(w.ctx, "uninstall", scenario.Release, "--namespace", namespace, "--wait", "--timeout", "2m"); err != nil {
			t.Fatal(err)
		}
		// helm waits for the DaemonSet object; its pod stops after it, and
		// restores kubelet's weights as it does.
		w.eventually(time.Minute, "the agent pod to be gone", func() (bool, string) {
			var list corev1.PodList
			if err := w.k8s.List(w.ctx, &list, client.InNamespace(namespace)); err != nil {
				return false, err.Error()
			}
			return len(list.Items) == 0, fmt.Sprintf("%d kubefair pods left", len(list.Items))
		})
		for _, tn := range w.sc.Tenants {
			for _, p := range w.pods(client.InNamespace(tn.Namespace)) {
				if got, want := w.shares(p), scenario.KubeletShares(p); got != want {
					t.Errorf("after uninstall pod %s/%s has cpu.shares %d, want kubelet's %d", p.Namespace, p.Name, got, want)
				}
			}
		}
		if got := readInt(t, "/sys/fs/cgroup/cpu/kubepods/besteffort/cpu.shares"); got != 2 {
			t.Errorf("after uninstall the BestEffort QoS cgroup has cpu.shares %d, want kubelet's 2", got)
		}
		var tenants kubefairv1.TenantList
		if err := w.k8s.List(w.ctx, &tenants); err != nil || len(tenants.Items) != len(w.sc.Tenants) {
			t.Errorf("tenants after uninstall: %d, %v (the CRDs and tenants are kept)", len(tenants.Items), err)
		}
	})
}

// with is the same world for a subtest.
func (w *world) with(t *testing.T) *world { c := *w; c.t = t; return &c }

func (w *world) groups() map[string][]corev1.Pod {
	w.t.Helper()
	g, err := w.sc.Groups(w.ctx, w.k8s)
	if err != nil {
		w.t.Fatal(err)
	}
	return g
}

func (w *world) allScenarioPods() map[string]corev1.Pod {
	out := map[string]corev1.Pod{}
	for _, tn := range w.sc.Tenants {
		for _, p := range w.pods(client.InNamespace(tn.Namespace)) {
			out[string(p.UID)] = p
		}
	}
	return out
}

// checkSamePods: the same pods run, none restarted.
func (w *world) checkSamePods(before map[string]corev1.Pod) {
	w.t.Helper()
	now := w.allScenarioPods()
	for uid, p := range before {
		cur, ok := now[uid]
		if !ok {
			w.t.Errorf("pod %s/%s is gone", p.Namespace, p.Name)
			continue
		}
		for _, cs := range cur.Status.ContainerStatuses {
			if cs.RestartCount > 0 {
				w.t.Errorf("pod %s/%s restarted its container %d times", p.Namespace, p.Name, cs.RestartCount)
			}
		}
	}
}

func (w *world) measure() scenario.Shares { return w.measureN(w.windows) }

// measureN takes the median of n windows.
func (w *world) measureN(n int) scenario.Shares {
	w.t.Helper()
	return w.measuring(n)()
}

// measuring starts measuring n windows in the background and returns what
// waits for them and takes their medians: the test goroutine meanwhile
// observes the same steady state in other ways (checkStatus).
func (w *world) measuring(n int) func() scenario.Shares {
	var windows []scenario.Shares
	var err error
	done := make(chan struct{})
	go func() {
		defer close(done)
		windows, err = w.sc.MeasureWindows(w.ctx, w.k8s, w.window, n, w.cpu)
	}()
	return func() scenario.Shares {
		w.t.Helper()
		<-done
		if err != nil {
			w.t.Fatal(err)
		}
		return medians(windows)
	}
}

// medians is each tenant's, and the large VM's, median over the windows.
func medians(windows []scenario.Shares) scenario.Shares {
	samples := map[string][]float64{}
	var vm []float64
	for _, s := range windows {
		for name, v := range s.Tenant {
			samples[name] = append(samples[name], v)
		}
		vm = append(vm, s.VMLarge)
	}
	out := scenario.Shares{Tenant: map[string]float64{}, VMLarge: median(vm)}
	for name, v := range samples {
		out.Tenant[name] = median(v)
	}
	return out
}

func median(v []float64) float64 {
	s := append([]float64(nil), v...)
	sort.Float64s(s)
	if len(s) == 0 {
		return math.NaN()
	}
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func (w *world) printComparison(stock, kf scenario.Shares) {
	entitled := w.sc.EntitledShares()
	var b strings.Builder
	fmt.Fprintf(&b, "stock vs kubefair, same run (share of the CPU the tenants' pods used; medians of %d (stock) and %d (kubefair) windows of %s):\n", stockWindows, w.windows, w.window)
	fmt.Fprintf(&b, "%-9s %-7s %4s %7s %8s %9s %9s %8s\n", "TENANT", "TIER", "PODS", "THREADS", "ENTITLED", "STOCK", "KUBEFAIR", "KF-ERR")
	for _, tn := range w.sc.Tenants {
		threads := 0
		for _, wl := range tn.Workloads {
			threads += wl.Pods * wl.PodThreads()
		}
		fmt.Fprintf(&b, "%-9s %-7s %4d %7d %7.1f%% %8.1f%% %8.1f%% %+6.1fpp\n", tn.Name, tn.Tier, tn.Pods(), threads,
			100*entitled[tn.Name], 100*stock.Tenant[tn.Name], 100*kf.Tenant[tn.Name], 100*(kf.Tenant[tn.Name]-entitled[tn.Name]))
	}
	if w.sc.HasVMs() {
		fmt.Fprintf(&b, "VMs weighted 3:1 inside hosting: vm-large gets %.1f%% of the tenant's CPU (stock %.1f%%), want 75%%\n", 100*kf.VMLarge, 100*stock.VMLarge)
	}
	w.t.Log("\n" + b.String())
	w.t.Log("\n$ kubectl get tenants\n" + w.kubectl("get", "tenants"))
}

// checkShares: every tenant within the bound of its entitlement.
func (w *world) checkShares(when string, got scenario.Shares) {
	w.t.Helper()
	for name, want := range w.sc.EntitledShares() {
		if d := 100 * math.Abs(got.Tenant[name]-want); d > boundPoints {
			w.t.Errorf("%s: tenant %s got %.1f%%, entitled %.1f%%: %.1f points off (bound %.0f)", when, name, 100*got.Tenant[name], 100*want, d, boundPoints)
		}
	}
}

// checkVMs: the VM weighted 3 gets 75 % of its tenant's CPU.
func (w *world) checkVMs(when string, got scenario.Shares) {
	w.t.Helper()
	if d := 100 * math.Abs(got.VMLarge-0.75); d > boundPoints {
		w.t.Errorf("%s: the 3:1 VM got %.1f%% of its tenant's CPU, want 75%% ± %.0f points", when, 100*got.VMLarge, boundPoints)
	}
}

// checkStock: without kubefair shares follow kubelet's weights: the
// Burstable pods alike (they request the same), the BestEffort pods
// alike in the BestEffort QoS cgroup, which weighs 2 shares against
// Burstable's sum of requests (cgroup v2: kubelet's conversion of both) —
// far from the tiers. Within stockPoints: the kernel spreads a pod of many
// threads over both CPUs and its single-thread siblings cannot be split, so
// the load balancer leaves the many-threaded pod on whichever CPU is
// lighter, above its weight's part.
func (w *world) checkStock(stock scenario.Shares, v2 bool) {
	w.t.Helper()
	var burstable, bestEffort int
	for _, tn := range w.sc.Tenants {
		if tn.BestEffort() {
			bestEffort += tn.Pods()
		} else {
			burstable += tn.Pods()
		}
	}
	request := resource.MustParse(scenario.CPURequest)
	perPod := uint64(request.MilliValue() * 1024 / 1000)
	bu, be := float64(perPod*uint64(burstable)), float64(fairness.MinShares)
	if v2 {
		bu, be = float64(fairness.CgroupV2WeightFromShares(perPod*uint64(burstable))), float64(fairness.CgroupV2WeightFromShares(fairness.MinShares))
	}
	beShare := 0.0
	if bestEffort > 0 {
		beShare = be / (be + bu)
	}
	for _, tn := range w.sc.Tenants {
		want := (1 - beShare) * float64(tn.Pods()) / float64(burstable)
		if tn.BestEffort() {
			want = beShare * float64(tn.Pods()) / float64(bestEffort)
		}
		if d := 100 * math.Abs(stock.Tenant[tn.Name]-want); d > stockPoints {
			w.t.Errorf("stock: tenant %s got %.1f%%, kubelet's weights say %.1f%% (bound %.0f points)", tn.Name, 100*stock.Tenant[tn.Name], 100*want, stockPoints)
		}
	}
}

// report is this node's NodeShareReport.
func (w *world) report() kubefairv1.NodeShareReport {
	w.t.Helper()
	var r kubefairv1.NodeShareReport
	if err := w.k8s.Get(w.ctx, client.ObjectKey{Name: w.node}, &r); err != nil {
		w.t.Fatalf("the node's report: %v", err)
	}
	return r
}

// waitReport waits for a report observed after since (and from a boot
// other than notBoot) and returns its boot id.
func (w *world) waitReport(since time.Time, notBoot string) string {
	w.t.Helper()
	var boot string
	w.eventually(60*time.Second, "a new NodeShareReport", func() (bool, string) {
		var r kubefairv1.NodeShareReport
		if err := w.k8s.Get(w.ctx, client.ObjectKey{Name: w.node}, &r); err != nil {
			return false, err.Error()
		}
		boot = r.BootID
		return r.ObservedTime.Time.After(since) && r.BootID != notBoot && len(r.Tenants) == len(w.sc.Tenants),
			fmt.Sprintf("observed %s boot %s tenants %d", r.ObservedTime, r.BootID, len(r.Tenants))
	})
	return boot
}

// checkStatus: over several report windows, what the node reports and
// what `kubectl get tenants` shows put each tenant's achieved share within
// the bound of its entitled share (median of the windows).
func (w *world) checkStatus() {
	w.t.Helper()
	// A 10-s report window of the 1-pod, 4-thread tenant lands up to 5
	// points off now and then, in both directions: the shares really move
	// so (the host's own counters over the same windows agree with the
	// reports within 0.4 points); one CI run had 4 of 7 windows beyond 2
	// points on one side. Eleven windows for the median; the bound stays.
	const reports = 11
	// Reports written from now on: the one in place may be up to a report
	// period old, and the controller may already show the next one.
	last := time.Now()
	achievedMinusEntitled := map[string][]float64{}
	statusErr := map[string][]float64{}
	for i := 0; i < reports; i++ {
		var r kubefairv1.NodeShareReport
		w.eventually(30*time.Second, "the next report", func() (bool, string) {
			r = w.report()
			return r.ObservedTime.Time.After(last), "no new report"
		})
		last = r.ObservedTime.Time
		for _, ts := range r.Tenants {
			achievedMinusEntitled[ts.Name] = append(achievedMinusEntitled[ts.Name], 100*(ts.AchievedShare-ts.EntitledShare))
		}
		time.Sleep(time.Second) // the controller folds the report into the tenants
		var tenants kubefairv1.TenantList
		if err := w.k8s.List(w.ctx, &tenants); err != nil {
			w.t.Fatal(err)
		}
		for _, tn := range tenants.Items {
			e, a := percent(tn.Status.EntitledShare), percent(tn.Status.AchievedShare)
			statusErr[tn.Name] = append(statusErr[tn.Name], a-e)
		}
	}
	for _, tn := range w.sc.Tenants {
		if d := median(achievedMinusEntitled[tn.Name]); math.Abs(d) > boundPoints {
			w.t.Errorf("the node's report: %s achieved − entitled = %+.1f points (median of %d reports): %v", tn.Name, d, reports, achievedMinusEntitled[tn.Name])
		}
		if d := median(statusErr[tn.Name]); math.Abs(d) > boundPoints {
			w.t.Errorf("kubectl get tenants: %s achieved − entitled = %+.1f points (median of %d): %v", tn.Name, d, reports, statusErr[tn.Name])
		}
	}
	w.t.Logf("report and status, achieved − entitled per window (points): %v / %v", achievedMinusEntitled, statusErr)
}

func percent(s string) float64 {
	v, err := strconv.ParseFloat(strings.TrimSuffix(s, "%"), 64)
	if err != nil {
		return math.NaN()
	}
	return v
}

// checkCost: each tenant's accrued CPU is never more than its pods really
// used (a report counted twice would be; the pods the suite deleted
// count with what they used), it is most of it, and its cost is exactly
// that CPU at the tier's price.
func (w *world) checkCost() {
	w.t.Helper()
	var tenants kubefairv1.TenantList
	if err := w.k8s.List(w.ctx, &tenants); err != nil {
		w.t.Fatal(err)
	}
	groups := w.groups()
	var all []corev1.Pod
	for _, pods := range groups {
		all = append(all, pods...)
	}
	usage, err := w.cpu(w.ctx, all)
	if err != nil {
		w.t.Fatal(err)
	}
	for _, tn := range tenants.Items {
		used := w.goneCPU[tn.Name]
		for _, p := range groups[tn.Name] {
			used += usage[p.UID]
		}
		accrued := w.billedNanoseconds(tn)
		if accrued > used {
			w.t.Errorf("tenant %s: accrued %.3f CPU-s but its pods used only %.3f (%.3f of it pods deleted since): counted twice", tn.Name, float64(accrued)/1e9, float64(used)/1e9, float64(w.goneCPU[tn.Name])/1e9)
		}
		if accrued <= 0 {
			w.t.Errorf("tenant %s accrued nothing", tn.Name)
		}
		var price float64
		for _, tier := range scenario.Tiers {
			if tier.Name == tn.Spec.Tier {
				price, _ = strconv.ParseFloat(tier.Price, 64)
			}
		}
		want := float64(accrued) / 1e9 / 3600 * price * 1e6 // micro-units
		if got := float64(w.billedMicros(tn)); math.Abs(got-want) > 1 {
			w.t.Errorf("tenant %s: cost %d µ%s for %.3f CPU-s at %.3f/h, want %.0f", tn.Name, w.billedMicros(tn), tn.Status.Currency, float64(accrued)/1e9, price, want)
		}
	}
}

// agentProc prints a file of /proc/<pid>/ for every kubefair agent process
// on a node (a shell command, for the host or a guest).
func agentProc(file string) string {
	return `for p in /proc/[0-9]*; do [ "$(cat $p/comm 2>/dev/null)" = kubefair-agent ] && cat $p/` + file + `; done; true`
}

// hostAgentProc is a file of /proc/<pid>/ of the host node's agent.
func hostAgentProc(t *testing.T, file string) string {
	out, err := exec.Command("sh", "-c", agentProc(file)).Output()
	if err != nil || len(out) == 0 {
		t.Fatalf("no kubefair agent's %s on the host: %v", file, err)
	}
	return string(out)
}

// checkAgentCaps: the agent's process holds exactly the capabilities its
// backend needs (permitted, effective and bounding sets; none for the
// cgroup backend, CAP_SYS_NICE for the thread backends) and cannot gain
// more (no_new_privs), as read from its /proc/<pid>/status on its node.
func checkAgentCaps(t *testing.T, node, status string, want uint64) {
	t.Helper()
	seen := 0
	for _, line := range strings.Split(status, "\n") {
		name, value, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		value = strings.TrimSpace(value)
		switch name {
		case "CapPrm", "CapEff", "CapBnd":
			seen++
			if got, err := strconv.ParseUint(value, 16, 64); err != nil || got != want {
				t.Errorf("the agent on %s has %s %s, want %016x", node, name, value, want)
			}
		case "NoNewPrivs":
			seen++
			if value != "1" {
				t.Errorf("the agent on %s has NoNewPrivs %s, want 1 (allowPrivilegeEscalation: false)", node, value)
			}
		}
	}
	if seen != 4 {
		t.Errorf("the agent's status on %s lacks its capability sets or NoNewPrivs:\n%s", node, status)
	}
}

// capSysNice is CAP_SYS_NICE's bit in /proc/<pid>/status.
const capSysNice = 1 << 23

// checkAgentMounts: in an agent's mount table the cgroup tree is read-only
// everywhere — every controller's hierarchy on cgroup v1 included — but in
// the directories it writes pod weights in, which are read-write.
func checkAgentMounts(t *testing.T, mountinfo string, writable ...string) {
	t.Helper()
	seen := map[string]bool{}
	for _, line := range strings.Split(strings.TrimSpace(mountinfo), "\n") {
		f := strings.Fields(line) // id parent dev root mount-point options ...
		if len(f) < 6 || f[4] != "/host/cgroup" && !strings.HasPrefix(f[4], "/host/cgroup/") {
			continue
		}
		want := "ro"
		for _, dir := range writable {
			if d := "/host/cgroup/" + dir; f[4] == d || strings.HasPrefix(f[4], d+"/") {
				want, seen[dir] = "rw", true
			}
		}
		if got := strings.Split(f[5], ",")[0]; got != want {
			t.Errorf("the agent's %s is mounted %s, want %s", f[4], f[5], want)
		}
	}
	for _, dir := range writable {
		if !seen[dir] {
			t.Errorf("the agent has no read-write mount of /host/cgroup/%s; its mounts:\n%s", dir, mountinfo)
		}
	}
}
