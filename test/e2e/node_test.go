package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kubefairv1 "github.com/kubefair/kubefair/api/v1alpha1"
	"github.com/kubefair/kubefair/node-agent/fairness"
	"github.com/kubefair/kubefair/node-agent/seccomp"
	"github.com/kubefair/kubefair/test/harness/cluster"
	"github.com/kubefair/kubefair/test/harness/scenario"
)

// guestWindow and guestWindows: the node suite's shares are medians of
// this many windows of this length, measured inside the guest.
const (
	guestWindow  = 10 * time.Second
	guestWindows = 7
)

// TestSystemdNode runs the greedy tenants (1, 4 and 12 pods weighted 4:2:1)
// on a real cgroup v2 node whose kubelet uses the systemd driver: a QEMU
// guest with systemd as PID 1, containerd 2 and kubelet 1.37, booted with
// kubefair's kernel (its agent uses the syscall backend), joined to the
// local cluster. Stock first, then kubefair, from the same run; then
// systemd's daemon-reload, an agent restart, an in-place resize, an agent
// that cannot find the pods, uninstall, and the guest drained and deleted.
func TestSystemdNode(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c := upCluster(ctx, t)
	start := time.Now()
	// The guest runs kubefair's kernel: its agent (the chart's
	// patched-kernel shape) weighs threads through sched_setweight.
	g, err := c.AddGuestNode(ctx, cluster.GuestConfig{Forward: []int{agentMetricsPort}}.OnPatchedKernel())
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("guest node %s Ready %.0f s after boot", g.Name(), time.Since(start).Seconds())
	if err := c.FollowPodLogs(ctx, namespace, g.Name()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			logCtx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			if err := g.SaveLogs(logCtx); err != nil { // into the cluster's logs, which its cleanup keeps
				t.Logf("the guest's journal: %v", err)
			}
		}
	})
	// Beside the greedy tenants, render's one pod runs processes of 1, 8
	// and 50 threads: each window reads how they split the pod too.
	sc := scenario.GreedyThreads.On(g.Name())
	threadsTenant, _ := sc.ThreadsTenant()
	procs := &processSampler{g: g, tenant: threadsTenant}
	w := &world{t: t, c: c, k8s: newClient(t, c), ctx: ctx, tools: scenario.Tools{Cluster: c, Helm: os.Getenv("HELM")},
		sc: sc, node: g.Name(), cpu: procs.wrap(scenario.GuestUsage(g)), window: guestWindow, windows: guestWindows, scraper: new(string), goneCPU: map[string]int64{}}
	n := &guestWorld{world: w, g: g}
	n.checkNodeShape()

	// The controller stays on the host node: the guest is the node under
	// test. Under TCG the guest runs Go programs several times slower than
	// a real CPU, so the agent requests more of it than the chart's 100m.
	onHost := []string{"--set", "controller.nodeSelector.kubernetes\\.io/hostname=" + c.NodeName(),
		"--set", "agent.resources.requests.cpu=500m"}
	if err := w.tools.InstallKubefair(ctx, false, onHost...); err != nil {
		t.Fatal(err)
	}
	w.waitReady(2*time.Minute, 1, "the controller", client.InNamespace(namespace))
	if err := w.sc.Create(ctx, w.k8s, 5*time.Minute); err != nil {
		t.Fatal(err)
	}
	// What kubelet and runc wrote, before kubefair: every pod slice at
	// kubelet's linear conversion of its request, every container scope at
	// runc's own (read back, never assumed, by the agent too).
	stockWeights := n.weights()
	n.checkStockWeights(stockWeights)
	n.checkLogsThroughAPIServer()
	procs.find(w)
	time.Sleep(2 * time.Second)
	stock := w.measureN(stockWindows)
	stockProcs := procs.take()

	if err := w.tools.InstallKubefair(ctx, true, onHost...); err != nil {
		t.Fatal(err)
	}
	w.waitReady(3*time.Minute, 3, "the controller and both agents", client.InNamespace(namespace))
	guestMounts, err := g.Run(ctx, agentProc("mountinfo"))
	if err != nil {
		t.Fatal(err)
	}
	guestStatus, err := g.Run(ctx, agentProc("status"))
	if err != nil {
		t.Fatal(err)
	}
	// Each backend's privileges, on the node it runs on: the guest's
	// syscall backend, the host's cgroup backend.
	checkAgentMounts(t, guestMounts, "kubepods.slice")
	checkAgentCaps(t, "the guest", guestStatus, capSysNice)
	checkAgentMounts(t, hostAgentProc(t, "mountinfo"), "cpu/kubepods")
	checkAgentCaps(t, "the host", hostAgentProc(t, "status"), 0)
	n.checkSyscallBackend()
	firstBoot := w.waitReport(time.Time{}, "")
	time.Sleep(10 * time.Second) // the closed loops settle
	procs.take()
	kf := w.measure()
	kfProcs := procs.take()
	w.printComparison(stock, kf)
	t.Log("\n" + procs.table(fairness.PFS, stockProcs, kfProcs))
	w.checkShares("kubefair on the cgroup v2 systemd node", kf)
	w.checkStock(stock, true)
	procs.check(w, "kubefair's PFS under kubelet", fairness.PFS, kfProcs)
	procs.checkStock(w, stockProcs)
	r := w.report()
	if c := meta.FindStatusCondition(r.Conditions, kubefairv1.ConditionPodCgroupsFound); c == nil || c.Status != metav1.ConditionTrue || !strings.Contains(c.Message, "systemd driver") {
		t.Errorf("the guest's report says %+v, want PodCgroupsFound True with the systemd driver", c)
	}
	w.checkCost()

	t.Run("two nodes", n.checkTwoNodes)

	t.Run("systemd daemon-reload", func(t *testing.T) {
		w := w.with(t)
		drift := w.report().DriftCorrections
		weighted := n.podWeights()
		// systemd applies every unit's CPUWeight again — kubelet's value
		// on each pod slice: drift, which the agent counts and undoes.
		if _, err := g.Run(ctx, "systemctl daemon-reload"); err != nil {
			t.Fatal(err)
		}
		// Under TCG systemd's re-application and the agent's passes can
		// spread the corrections over several reports: a minute and a half
		// covers a handful of them.
		w.eventually(90*time.Second, "the drift in the node's report", func() (bool, string) {
			d := w.report().DriftCorrections
			return d >= drift+int64(len(weighted)), fmt.Sprintf("driftCorrections %d, was %d (%d pods)", d, drift, len(weighted))
		})
		// Back means far from kubelet's value and what the agent recorded
		// writing (within 10 %). The closed loop moves weights every 1-s
		// period, and under TCG a pass over the pods takes much of it, so
		// a weight read mid-pass is either in the state the agent saved
		// last or in the one it saves next: the read samples the agent's
		// state file between its reads of the weights and until the next
		// save (states of no more than a few seconds, all the agent's).
		kubelet := fairness.CgroupV2WeightFromShares(51)
		w.eventually(30*time.Second, "kubefair's weights back on every pod", func() (bool, string) {
			now, saved := n.podWeightsAndSaved(t)
			for cg := range weighted {
				got := now[cg]
				var recorded []uint64
				for _, s := range saved {
					recorded = append(recorded, s[cg])
				}
				if got < 10*kubelet || !slices.ContainsFunc(recorded, func(v uint64) bool { return near(got, v, 0.10) }) {
					return false, fmt.Sprintf("%s holds %d, the agent recorded %v around the read (kubelet's is %d)", cg, got, recorded, kubelet)
				}
			}
			return true, ""
		})
	})

	// The restarted agent finds render under TWRS: its windows check both.
	t.Run("agent restarted", func(t *testing.T) {
		w := w.with(t)
		procs.setThreadPolicy(w, kubefairv1.ThreadPolicyTWRS)
		defer procs.setThreadPolicy(w, kubefairv1.ThreadPolicyPFS)
		old := n.agentPod()
		if err := w.k8s.Delete(w.ctx, &old); err != nil {
			t.Fatal(err)
		}
		w.eventually(3*time.Minute, "a new agent pod Ready on the guest", func() (bool, string) {
			p := n.agentPod()
			return p.UID != old.UID && ready(p), "waiting"
		})
		w.waitReport(time.Now(), firstBoot)
		// The new agent's per-pod loop learns TWRS from the plain weights.
		time.Sleep(30 * time.Second)
		procs.take()
		restarted := w.measure()
		twrs := procs.take()
		t.Log("\n" + procs.table(fairness.TWRS, stockProcs, twrs))
		w.checkShares("after the agent restarted", restarted)
		procs.check(w, "kubefair's TWRS under kubelet, after the agent restarted", fairness.TWRS, twrs)
		w.checkCost()
	})

	t.Run("in-place resize", func(t *testing.T) {
		w := w.with(t)
		batch := w.pods(client.InNamespace("batch"))
		p := batch[0]
		drift := w.report().DriftCorrections
		patch := []byte(`{"spec":{"containers":[{"name":"burner","resources":{"requests":{"cpu":"100m"}}}]}}`)
		if err := w.k8s.SubResource("resize").Patch(w.ctx, &p, client.RawPatch("application/strategic-merge-patch+json", patch)); err != nil {
			t.Fatalf("resizing %s: %v", p.Name, err)
		}
		// kubelet asks systemd for the pod slice's new CPUWeight (4 for
		// 100m); the agent puts its own back and counts the drift.
		w.eventually(2*time.Minute, "the drift in the node's report", func() (bool, string) {
			d := w.report().DriftCorrections
			return d > drift, fmt.Sprintf("driftCorrections %d, was %d", d, drift)
		})
		w.eventually(10*time.Second, "the resized pod weighed as its peers", func() (bool, string) {
			ws := n.podWeights()
			got, peer := ws[scenario.SystemdPodSlice(p)], ws[scenario.SystemdPodSlice(batch[1])]
			return near(got, peer, 0.02), fmt.Sprintf("cpu.weight %d, another batch pod %d", got, peer)
		})
	})

	t.Run("pods not found", func(t *testing.T) {
		w := w.with(t)
		// An agent told the wrong kubelet cgroup root finds no pods: it
		// says so, and the tenants are Degraded, with an event.
		wrong := append(onHost, "--set", "agent.kubelet.cgroupRoot=/nowhere.slice")
		if err := w.tools.InstallKubefair(ctx, true, wrong...); err != nil {
			t.Fatal(err)
		}
		w.eventually(3*time.Minute, "the guest's report to say it finds no pod cgroups", func() (bool, string) {
			c := meta.FindStatusCondition(w.report().Conditions, kubefairv1.ConditionPodCgroupsFound)
			if c == nil {
				return false, "no condition"
			}
			return c.Status == metav1.ConditionFalse && c.Reason == kubefairv1.ReasonLayoutNotFound &&
				strings.Contains(c.Message, "/nowhere.slice/nowhere-kubepods.slice"), c.Reason + ": " + c.Message
		})
		w.eventually(time.Minute, "every tenant Degraded for its unmeasured pods", func() (bool, string) {
			var tenants kubefairv1.TenantList
			if err := w.k8s.List(w.ctx, &tenants); err != nil {
				return false, err.Error()
			}
			for _, tn := range tenants.Items {
				d := meta.FindStatusCondition(tn.Status.Conditions, kubefairv1.ConditionDegraded)
				if d == nil || d.Reason != kubefairv1.ReasonPodsUnmeasured || !strings.Contains(d.Message, g.Name()) {
					return false, fmt.Sprintf("%s: %+v", tn.Name, d)
				}
			}
			return true, ""
		})
		w.eventually(30*time.Second, "a PodsUnmeasured event", func() (bool, string) {
			out := w.kubectl("get", "events", "-A", "--field-selector", "reason="+kubefairv1.EventPodsUnmeasured, "-o", "name")
			return strings.TrimSpace(out) != "", "no event yet"
		})
		if got := w.agentMetric(n.g.HostPort(agentMetricsPort), "kubefair_agent_unmeasured_pods"); got < float64(w.sc.Pods()) {
			t.Errorf("kubefair_agent_unmeasured_pods is %v, want at least the scenario's %d pods", got, w.sc.Pods())
		}
		if err := w.tools.InstallKubefair(ctx, true, onHost...); err != nil {
			t.Fatal(err)
		}
		w.eventually(3*time.Minute, "the pods found again", func() (bool, string) {
			c := meta.FindStatusCondition(w.report().Conditions, kubefairv1.ConditionPodCgroupsFound)
			return c != nil && c.Status == metav1.ConditionTrue, fmt.Sprintf("%+v", c)
		})
	})

	t.Run("helm uninstall", func(t *testing.T) {
		w := w.with(t)
		stopping := n.watchAgentStop()
		if _, err := w.tools.HelmRun(w.ctx, "uninstall", scenario.Release, "--namespace", namespace, "--wait", "--timeout", "3m"); err != nil {
			t.Fatal(err)
		}
		// helm waits for the DaemonSet object; its pods stop after it (the
		// terminating ones count: they restore kubelet's weights as they go).
		w.eventually(2*time.Minute, "the agent pods to be gone", func() (bool, string) {
			var list corev1.PodList
			if err := w.k8s.List(w.ctx, &list, client.InNamespace(namespace)); err != nil {
				return false, err.Error()
			}
			return len(list.Items) == 0, fmt.Sprintf("%d kubefair pods left", len(list.Items))
		})
		if took, states := stopping(); t.Failed() || took > 10*time.Second {
			t.Logf("the guest's agent took %s to stop; its threads meanwhile (state, wait channel; the pod's cpu.weight):\n%s", took, states)
		}
		// Every value kubelet, systemd and runc had written is back. The
		// batch pod resized above has kubelet's and runc's new values for
		// 100m.
		after := n.weights()
		resized := scenario.SystemdPodSlice(w.pods(client.InNamespace("batch"))[0])
		for cg, want := range stockWeights {
			switch {
			case cg == resized:
				want = fairness.CgroupV2WeightFromShares(102)
			case strings.HasPrefix(cg, resized+"/"):
				want = fairness.RuncV2WeightFromShares(102)
			}
			if got, ok := after[cg]; ok && got != want {
				t.Errorf("after uninstall %s has cpu.weight %d, want %d as before kubefair", cg, got, want)
			}
		}
	})

	// Last, kubefair back on: the guest drained and deleted takes its report
	// with it, and no tenant keeps an entitlement there.
	t.Run("node drained and deleted", func(t *testing.T) {
		n := &guestWorld{world: w.with(t), g: g}
		if err := n.tools.InstallKubefair(ctx, true, onHost...); err != nil {
			t.Fatal(err)
		}
		n.checkNodeDeleted()
	})
}

// findAgent sets $pid to the guest's kubefair-agent process, if any.
const findAgent = `pid=; for d in /proc/[0-9]*; do [ "$(cat $d/comm 2>/dev/null)" = kubefair-agent ] && pid=${d#/proc/}; done`

// agentStopSampler prints, every 2 s while a kubefair-agent process runs
// in the guest, how long it has been stopping, its threads' states and
// wait channels, and its pod's cpu.weight: what an agent that outlives its
// grace period was doing (starved of CPU, or waiting in the kernel).
const agentStopSampler = `t0=$(date +%s)
while :; do
  ` + findAgent + `
  [ -n "$pid" ] || break
  cg=$(cut -d: -f3 /proc/$pid/cgroup 2>/dev/null)
  echo "$(( $(date +%s) - t0 )) s: pid $pid, pod cpu.weight $(cat /sys/fs/cgroup${cg%/*}/cpu.weight 2>/dev/null)"
  for t in /proc/$pid/task/*; do echo "  $(cut -d' ' -f3 $t/stat 2>/dev/null) $(cat $t/wchan 2>/dev/null)"; done | sort | uniq -c
  sleep 2
done
echo "$(( $(date +%s) - t0 )) s: no kubefair-agent left"`

// watchAgentStop samples the guest's agent until it is gone (a minute and
// a half at most); the function it returns waits for that and tells how
// long it took, with the samples.
func (n *guestWorld) watchAgentStop() func() (time.Duration, string) {
	start := time.Now()
	done := make(chan string, 1)
	go func() {
		ctx, cancel := context.WithTimeout(n.ctx, 90*time.Second)
		defer cancel()
		out, err := n.g.Run(ctx, agentStopSampler)
		if err != nil {
			out += err.Error()
		}
		done <- out
	}()
	return func() (time.Duration, string) {
		out := <-done
		return time.Since(start), out
	}
}

// guestWorld is the world of the node suite: the guest node under test.
type guestWorld struct {
	*world
	g *cluster.GuestNode
}

// checkNodeShape: the guest is the node the suite is about.
func (n *guestWorld) checkNodeShape() {
	t := n.t
	var node corev1.Node
	if err := n.k8s.Get(n.ctx, client.ObjectKey{Name: n.g.Name()}, &node); err != nil {
		t.Fatal(err)
	}
	info := node.Status.NodeInfo
	t.Logf("guest node %s: kubelet %s, %s, kernel %s", n.g.Name(), info.KubeletVersion, info.ContainerRuntimeVersion, info.KernelVersion)
	if info.KubeletVersion != "v1.37.2" || info.ContainerRuntimeVersion != "containerd://2.4.2" {
		t.Errorf("the guest runs kubelet %s and %s, want v1.37.2 and containerd://2.4.2", info.KubeletVersion, info.ContainerRuntimeVersion)
	}
	out, err := n.g.Run(n.ctx, "stat -f -c %T /sys/fs/cgroup; cat /sys/fs/cgroup/cgroup.controllers; readlink /proc/1/exe; ls -d /sys/fs/cgroup/kubepods.slice")
	if err != nil {
		t.Fatal(err)
	}
	f := strings.Split(strings.TrimSpace(out), "\n")
	if len(f) != 4 || f[0] != "cgroup2fs" || !strings.Contains(" "+f[1]+" ", " cpu ") || !strings.HasSuffix(f[2], "systemd") {
		t.Fatalf("the guest's cgroups and init: %q; want cgroup2fs with the cpu controller, systemd as PID 1 and kubelet's kubepods.slice", f)
	}
}

// checkSyscallBackend: on kubefair's kernel the agent found the ABI and
// weighs threads through sched_setweight, confined twice — by the node's
// Localhost profile (runc's filter) and by its own allow-list, which names
// the two kernel calls — while the host's agent keeps to pod weights.
func (n *guestWorld) checkSyscallBackend() {
	t := n.t
	n.waitReport(time.Time{}, "")
	if r := n.report(); r.Backend != kubefairv1.BackendSyscall || r.KernelABI != 2 {
		t.Errorf("the guest's report says backend %q, kernel ABI %d; want syscall and 2", r.Backend, r.KernelABI)
	}
	table := n.kubectl("get", "nodesharereports")
	t.Logf("kubectl get nodesharereports:\n%s", table)
	for _, want := range [][]string{{n.g.Name(), "syscall", "2"}, {n.c.NodeName(), "cgroup"}} {
		if !tableHasRow(table, want...) {
			t.Errorf("kubectl get nodesharereports has no row starting %q", want)
		}
	}
	p := n.agentPod()
	if sc := p.Spec.Containers[0].SecurityContext; sc == nil || sc.SeccompProfile == nil ||
		sc.SeccompProfile.Type != corev1.SeccompProfileTypeLocalhost || ptr.Deref(sc.SeccompProfile.LocalhostProfile, "") != "kubefair-agent.json" {
		t.Errorf("the guest's agent runs with security context %+v, want the Localhost profile kubefair-agent.json", sc)
	}
	out, err := n.g.Run(n.ctx, "grep -h '^Seccomp' /proc/$(pgrep -x kubefair-agent)/status")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "Seccomp:\t2") || !strings.Contains(out, "Seccomp_filters:\t2") {
		t.Errorf("the guest's agent: %q; want filter mode (2) and two filters, runc's and its own", out)
	}
	// Its allow-list, and the patched kernel's two calls.
	listed, err := seccomp.AllowList()
	if err != nil {
		t.Fatal(err)
	}
	want := len(listed) + 2
	logs := n.kubectl("logs", "-n", namespace, p.Name)
	if !regexp.MustCompile(fmt.Sprintf(`seccomp filter installed.*"allowed":%d,"sched_setweight":true`, want)).MatchString(logs) {
		t.Errorf("the guest's agent did not log its filter with %d calls, sched_setweight among them:\n%.2000s", want, logs)
	}
}

// tableHasRow: a row of kubectl's table output that starts with cells.
func tableHasRow(table string, cells ...string) bool {
	for _, line := range strings.Split(table, "\n") {
		f := strings.Fields(line)
		if len(f) >= len(cells) && slices.Equal(f[:len(cells)], cells) {
			return true
		}
	}
	return false
}

// checkLogsThroughAPIServer: the API server reaches the guest's kubelet at
// the node's address (what kubectl logs and exec need).
func (n *guestWorld) checkLogsThroughAPIServer() {
	t := n.t
	cfg, err := n.c.RESTConfig()
	if err != nil {
		t.Fatal(err)
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	p := n.scenarioPods()[0]
	if _, err := cs.CoreV1().Pods(p.Namespace).GetLogs(p.Name, &corev1.PodLogOptions{}).DoRaw(n.ctx); err != nil {
		t.Errorf("pod %s/%s's logs through the API server: %v", p.Namespace, p.Name, err)
	}
}

// scenarioPods are the scenario's pods on the guest.
func (n *guestWorld) scenarioPods() []corev1.Pod {
	var out []corev1.Pod
	for _, tn := range n.sc.Tenants {
		out = append(out, n.pods(client.InNamespace(tn.Namespace))...)
	}
	return out
}

// weights reads cpu.weight of every scenario pod's slice and of its
// container's scope in the guest, in one ssh round trip.
func (n *guestWorld) weights() map[string]uint64 {
	var dirs []string
	for _, p := range n.scenarioPods() {
		dirs = append(dirs, scenario.SystemdPodSlice(p))
		for _, cs := range p.Status.ContainerStatuses {
			dirs = append(dirs, scenario.SystemdPodSlice(p)+"/cri-containerd-"+strings.TrimPrefix(cs.ContainerID, "containerd://")+".scope")
		}
	}
	return n.readUints(dirs, "cpu.weight")
}

// podSlices are the scenario's pod slices.
func (n *guestWorld) podSlices() []string {
	var dirs []string
	for _, p := range n.scenarioPods() {
		dirs = append(dirs, scenario.SystemdPodSlice(p))
	}
	return dirs
}

// podWeights are the pod slices' weights alone.
func (n *guestWorld) podWeights() map[string]uint64 { return n.readUints(n.podSlices(), "cpu.weight") }

// podWeightsAndSaved are the pod slices' weights, by cgroup directory,
// and the weights the agent's cgroup backend recorded around the read: its
// state file, read before each weight, after the last, and again until it
// changes (the save that ends a pass in progress) or 3 s have passed.
func (n *guestWorld) podWeightsAndSaved(t *testing.T) (now map[string]uint64, saved []map[string]uint64) {
	t.Helper()
	state := path.Join(scenario.AgentStateDir(n.c), "cgroup-weights.json")
	out, err := n.g.Run(n.ctx, "st="+state+"; for d in "+strings.Join(n.podSlices(), " ")+
		`; do cat $st; echo; [ -f $d/cpu.weight ] && echo $d $(cat $d/cpu.weight); done
s=$(cat $st); echo "$s"
for i in $(seq 30); do sleep 0.1; n=$(cat $st); [ "$n" != "$s" ] && { echo "$n"; break; }; done`)
	if err != nil {
		t.Fatal(err)
	}
	var pairs strings.Builder
	seen := map[string]bool{}
	for _, line := range strings.Split(out, "\n") {
		if !strings.HasPrefix(line, "{") {
			pairs.WriteString(line + "\n")
			continue
		}
		if seen[line] {
			continue
		}
		seen[line] = true
		var st struct {
			Written map[string]uint64 `json:"written"`
		}
		if err := json.Unmarshal([]byte(line), &st); err != nil {
			t.Fatalf("the agent's cgroup state: %v", err)
		}
		written := map[string]uint64{}
		for cg, w := range st.Written {
			written[path.Join("/sys/fs/cgroup", cg)] = w
		}
		saved = append(saved, written)
	}
	return parsePairs(t, pairs.String()), saved
}

// readUints reads a one-number file in each directory; a directory that
// is gone is left out.
func (n *guestWorld) readUints(dirs []string, file string) map[string]uint64 {
	n.t.Helper()
	out, err := n.g.Run(n.ctx, "for d in "+strings.Join(dirs, " ")+"; do [ -f $d/"+file+" ] && echo $d $(cat $d/"+file+"); done")
	if err != nil {
		n.t.Fatal(err)
	}
	return parsePairs(n.t, out)
}

func parsePairs(t *testing.T, out string) map[string]uint64 {
	vals := map[string]uint64{}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		f := strings.Fields(line)
		if len(f) != 2 {
			continue
		}
		v, err := strconv.ParseUint(f[1], 10, 64)
		if err != nil {
			t.Fatalf("reading %q: %v", line, err)
		}
		vals[f[0]] = v
	}
	return vals
}

// checkStockWeights: kubelet gave each pod slice its linear conversion of
// the 50m request, runc each container scope its own.
func (n *guestWorld) checkStockWeights(ws map[string]uint64) {
	kubelet, runc := fairness.CgroupV2WeightFromShares(51), fairness.RuncV2WeightFromShares(51)
	pods := 0
	for cg, w := range ws {
		want := kubelet
		if strings.HasSuffix(cg, ".scope") {
			want = runc
		} else {
			pods++
		}
		if strings.Contains(cg, "besteffort") { // 2 shares, by either conversion
			want = fairness.MinWeight
		}
		if w != want {
			n.t.Errorf("stock: %s has cpu.weight %d, want %d", cg, w, want)
		}
	}
	if pods != n.sc.Pods() {
		n.t.Fatalf("stock: read %d pod slices, want the scenario's %d", pods, n.sc.Pods())
	}
	n.t.Logf("stock weights: pod slices %d (kubelet's conversion of 51 shares), container scopes %d (runc's), BestEffort ones %d", kubelet, runc, fairness.MinWeight)
}

// agentPod is the agent pod on the guest.
func (n *guestWorld) agentPod() corev1.Pod {
	for _, p := range n.pods(client.InNamespace(namespace), client.MatchingLabels{"app.kubernetes.io/component": "agent"}) {
		if p.Spec.NodeName == n.g.Name() {
			return p
		}
	}
	return corev1.Pod{}
}

// near: a and b differ by at most the fraction tol of the larger.
func near(a, b uint64, tol float64) bool {
	return math.Abs(float64(a)-float64(b)) <= tol*math.Max(float64(a), float64(b))
}
