package e2e

import (
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kubefairv1 "github.com/kubefair/kubefair/api/v1alpha1"
	"github.com/kubefair/kubefair/controllers/billing"
	"github.com/kubefair/kubefair/test/harness/scenario"
)

// spreadTenant has one pod on each node of the node suite's cluster.
const spreadTenant = "spread"

// checkTwoNodes: a tenant with a pod on each node — the host (cgroup
// backend) and the guest (kubefair's kernel, syscall backend) — is
// reported by both agents; its status aggregates the two nodes by their
// CPUs; deleted, it is billed through both nodes' final counters, the sum
// of what each node's ledger counted, once; and neither real agent may
// write the other node's report.
func (n *guestWorld) checkTwoNodes(t *testing.T) {
	n = &guestWorld{world: n.with(t), g: n.g}
	w := n.world
	nodes := []string{w.c.NodeName(), n.g.Name()}
	tn := &kubefairv1.Tenant{ObjectMeta: metav1.ObjectMeta{Name: spreadTenant},
		Spec: kubefairv1.TenantSpec{Tier: "bronze", Namespaces: []string{spreadTenant}}}
	objs := []client.Object{&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: spreadTenant}}, tn}
	for _, node := range nodes {
		objs = append(objs, spreadPod(node))
	}
	for _, o := range objs {
		if err := w.k8s.Create(w.ctx, o); err != nil {
			t.Fatalf("creating %s: %v", o.GetName(), err)
		}
	}
	defer func() { // gone before the next checks measure the guest
		_ = w.k8s.Delete(w.ctx, tn)
		_ = w.k8s.Delete(w.ctx, objs[0])
		w.eventually(2*time.Minute, "the spread tenant's pods gone", func() (bool, string) {
			var left corev1.PodList
			err := w.k8s.List(w.ctx, &left, client.InNamespace(spreadTenant))
			return err == nil && len(left.Items) == 0, fmt.Sprintf("%d pods left (%v)", len(left.Items), err)
		})
	}()
	var pods []corev1.Pod
	w.eventually(3*time.Minute, "a spread pod running on each node", func() (bool, string) {
		pods = w.pods(client.InNamespace(spreadTenant))
		running := 0
		for _, p := range pods {
			if p.Status.Phase == corev1.PodRunning {
				running++
			}
		}
		return running == len(nodes), fmt.Sprintf("%d of %d running", running, len(nodes))
	})

	// Both agents report it, and its status is the CPU-weighted mean of
	// their entitled shares.
	w.eventually(2*time.Minute, "the tenant's status to aggregate both nodes", func() (bool, string) {
		if err := w.k8s.Get(w.ctx, client.ObjectKeyFromObject(tn), tn); err != nil {
			return false, err.Error()
		}
		var entitledCPUs float64
		var cpus int32
		var seen []string
		for _, node := range nodes {
			var r kubefairv1.NodeShareReport
			if err := w.k8s.Get(w.ctx, client.ObjectKey{Name: node}, &r); err != nil {
				return false, err.Error()
			}
			for _, s := range r.Tenants {
				if s.UID == string(tn.UID) && !s.Final {
					entitledCPUs += s.EntitledShare * float64(r.CPUs)
					cpus += r.CPUs
					seen = append(seen, fmt.Sprintf("%s %.1f%% of %d CPUs", node, 100*s.EntitledShare, r.CPUs))
				}
			}
		}
		got, _ := strconv.ParseFloat(strings.TrimSuffix(tn.Status.EntitledShare, "%"), 64)
		want := 100 * entitledCPUs / float64(max(cpus, 1))
		return tn.Status.ReportingNodes == 2 && len(seen) == 2 && math.Abs(got-want) <= 0.5,
			fmt.Sprintf("status: %d reporting nodes, entitled %s; reports: %s (mean %.1f%%)", tn.Status.ReportingNodes, tn.Status.EntitledShare, strings.Join(seen, ", "), want)
	})
	t.Logf("tenant %s on two nodes: entitled %s, achieved %s, %d reporting nodes", tn.Name, tn.Status.EntitledShare, tn.Status.AchievedShare, tn.Status.ReportingNodes)

	n.checkOwnReportOnly(pods)

	// Deleted, the tenant is billed through both nodes' final counters:
	// no less than its pods had used when it was deleted, no more than
	// they have used since, and the sum of the two nodes' ledgers.
	time.Sleep(10 * time.Second) // CPU worth billing on both nodes
	before := n.spreadUsage(pods)
	if err := w.k8s.Delete(w.ctx, tn); err != nil {
		t.Fatal(err)
	}
	w.eventually(2*time.Minute, "the deleted tenant's final bill", func() (bool, string) {
		err := w.k8s.Get(w.ctx, client.ObjectKeyFromObject(tn), &kubefairv1.Tenant{})
		return apierrors.IsNotFound(err), fmt.Sprintf("tenant still there (%v)", err)
	})
	after := n.spreadUsage(pods)
	billed := w.billedByUID()[string(tn.UID)]
	byNode := w.ledgerByNode(string(tn.UID))
	t.Logf("tenant %s billed %.3f CPU-s: %.3f on %s, %.3f on %s; its pods used %.3f CPU-s when it was deleted, %.3f after",
		tn.Name, sec(billed), sec(byNode[nodes[0]]), nodes[0], sec(byNode[nodes[1]]), nodes[1], sec(before), sec(after))
	for _, node := range nodes {
		if byNode[node] <= 0 {
			t.Errorf("node %s's ledger billed nothing for tenant %s", node, tn.Name)
		}
	}
	if sum := byNode[nodes[0]] + byNode[nodes[1]]; billed != sum || len(byNode) != 2 {
		t.Errorf("tenant %s's bills hold %d ns, its nodes' ledgers %v (sum %d): each node's CPU once", tn.Name, billed, byNode, sum)
	}
	// The agents count a pod from their first read of its cgroup, a period
	// at most after it started.
	if billed > after || float64(billed) < 0.9*float64(before) {
		t.Errorf("tenant %s billed %.3f CPU-s; its pods used %.3f when it was deleted and %.3f after", tn.Name, sec(billed), sec(before), sec(after))
	}
}

// spreadPod is a burner of the spread tenant bound to node, spinning a
// fifth of the time: enough CPU to bill on both nodes without taking the
// host's CPUs from the guest.
func spreadPod(node string) *corev1.Pod {
	d := scenario.Deployment(spreadTenant, scenario.Workload{Name: "spread", Pods: 1, Threads: 1})
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: spreadTenant, Name: "spread-" + node, Labels: d.Spec.Template.Labels},
		Spec: d.Spec.Template.Spec}
	p.Spec.NodeName = node
	c := &p.Spec.Containers[0]
	c.Command = append(c.Command, "-duty", "0.2")
	return p
}

// spreadUsage is what the spread pods have used on both nodes.
func (n *guestWorld) spreadUsage(pods []corev1.Pod) (ns int64) {
	n.t.Helper()
	for _, p := range pods {
		var used map[types.UID]int64
		var err error
		if p.Spec.NodeName == n.g.Name() {
			used, err = scenario.GuestUsage(n.g)(n.ctx, []corev1.Pod{p})
		} else {
			used, err = scenario.HostUsage(n.ctx, []corev1.Pod{p})
		}
		if err != nil {
			n.t.Fatalf("pod %s's CPU: %v", p.Name, err)
		}
		ns += used[p.UID]
	}
	return ns
}

// ledgerByNode is what each node's UsageRecords billed a tenant, in
// nanoseconds: per node and day, the record that counted furthest (an
// open record deleted and continued leaves a closed copy of its day).
func (w *world) ledgerByNode(uid string) map[string]int64 {
	w.t.Helper()
	var records kubefairv1.UsageRecordList
	if err := w.k8s.List(w.ctx, &records); err != nil {
		w.t.Fatal(err)
	}
	furthest := map[[2]string]*kubefairv1.UsageRecord{}
	for i := range records.Items {
		u := &records.Items[i]
		key := [2]string{u.Node, u.Period}
		if f := furthest[key]; f == nil || billing.Advances(u, f) {
			furthest[key] = u
		}
	}
	out := map[string]int64{}
	for _, u := range furthest {
		for _, l := range u.Lines {
			if l.TenantUID == uid {
				out[u.Node] += l.CPUNanoseconds
			}
		}
	}
	return out
}

// checkOwnReportOnly: each node's real agent, with its own service-account
// token (bound to its pod, so it names its node), is refused when it
// writes the other node's report.
func (n *guestWorld) checkOwnReportOnly(spread []corev1.Pod) {
	t := n.t
	agents := n.pods(client.InNamespace(namespace), client.MatchingLabels{"app.kubernetes.io/component": "agent"})
	if len(agents) != 2 {
		t.Fatalf("%d agent pods, want one per node", len(agents))
	}
	cfg, err := n.c.RESTConfig()
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range agents {
		token, err := n.agentToken(a)
		if err != nil {
			t.Fatalf("agent %s's token: %v", a.Name, err)
		}
		other := n.g.Name()
		if a.Spec.NodeName == other {
			other = n.c.NodeName()
		}
		as := rest.AnonymousClientConfig(cfg)
		as.BearerToken = token
		k, err := client.New(as, client.Options{Scheme: n.k8s.Scheme()})
		if err != nil {
			t.Fatal(err)
		}
		var r kubefairv1.NodeShareReport
		if err := k.Get(n.ctx, client.ObjectKey{Name: other}, &r); err != nil {
			t.Fatalf("agent %s reading node %s's report: %v", a.Name, other, err)
		}
		err = k.Update(n.ctx, &r)
		if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "only the NodeShareReport of its own node, not "+other) {
			t.Errorf("the agent on node %s writing node %s's report: %v, want refused by the own-report policy", a.Spec.NodeName, other, err)
		} else {
			t.Logf("the agent on node %s writing node %s's report: %v", a.Spec.NodeName, other, err)
		}
	}
}

// agentToken is an agent pod's service-account token, read on its node
// from the volume kubelet projects it into.
func (n *guestWorld) agentToken(p corev1.Pod) (string, error) {
	const volume = "/volumes/kubernetes.io~projected/*/token"
	if p.Spec.NodeName == n.g.Name() {
		out, err := n.g.Run(n.ctx, "cat /var/lib/kubelet/pods/"+string(p.UID)+volume)
		return strings.TrimSpace(out), err
	}
	files, err := filepath.Glob(filepath.Join(n.c.Dir(), "kubelet", "pods", string(p.UID)) + volume)
	if err != nil || len(files) != 1 {
		return "", errors.Join(err, fmt.Errorf("%d token files", len(files)))
	}
	b, err := os.ReadFile(files[0])
	return strings.TrimSpace(string(b)), err
}

func sec(ns int64) float64 { return float64(ns) / 1e9 }

// checkNodeDeleted: the guest, reporting every tenant, is drained and its
// Node deleted. Its report goes with the Node — and stays gone once its
// agent, which outlives the Node until the pod garbage collector removes
// its pod, has written its last one — no tenant names the guest or keeps
// an entitlement there, and what the guest billed stays billed.
func (n *guestWorld) checkNodeDeleted() {
	w, guest := n.world, n.g.Name()
	tenants := func() []kubefairv1.Tenant {
		var list kubefairv1.TenantList
		if err := w.k8s.List(w.ctx, &list); err != nil {
			w.t.Fatal(err)
		}
		return list.Items
	}
	w.waitReport(time.Now(), "")
	w.eventually(time.Minute, "every tenant reported by the guest", func() (bool, string) {
		for _, tn := range tenants() {
			if tn.Status.ReportingNodes != 1 {
				return false, fmt.Sprintf("tenant %s: %d reporting nodes", tn.Name, tn.Status.ReportingNodes)
			}
		}
		return true, ""
	})
	w.kubectl("drain", guest, "--ignore-daemonsets", "--delete-emptydir-data", "--timeout=3m")
	w.waitReport(time.Now(), "") // the drained pods' last CPU counted
	billed := w.billedByUID()
	if err := w.k8s.Delete(w.ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: guest}}); err != nil {
		w.t.Fatal(err)
	}
	w.eventually(3*time.Minute, "the guest's agent gone with its pod", func() (bool, string) {
		out, err := n.g.Run(w.ctx, `for p in /proc/[0-9]*; do [ "$(cat $p/comm 2>/dev/null)" = kubefair-agent ] && echo ${p#/proc/}; done; true`)
		return err == nil && strings.TrimSpace(out) == "", fmt.Sprintf("agent pids %q (%v)", strings.TrimSpace(out), err)
	})
	w.eventually(time.Minute, "no report and no entitlement left on the deleted node", func() (bool, string) {
		err := w.k8s.Get(w.ctx, client.ObjectKey{Name: guest}, &kubefairv1.NodeShareReport{})
		if !apierrors.IsNotFound(err) {
			return false, fmt.Sprintf("report %s: %v", guest, err)
		}
		for _, tn := range tenants() {
			if tn.Status.ReportingNodes != 0 || (tn.Status.EntitledShare != "" && tn.Status.EntitledShare != "0.0%") {
				return false, fmt.Sprintf("tenant %s: %d reporting nodes, entitled %q", tn.Name, tn.Status.ReportingNodes, tn.Status.EntitledShare)
			}
			for _, c := range tn.Status.Conditions {
				if strings.Contains(c.Message, guest) {
					return false, fmt.Sprintf("tenant %s: %s: %s", tn.Name, c.Type, c.Message)
				}
			}
		}
		return true, ""
	})
	if table := w.kubectl("get", "nodesharereports"); strings.Contains(table, guest) {
		w.t.Errorf("kubectl get nodesharereports still lists the deleted node:\n%s", table)
	}
	after := w.billedByUID()
	for uid, ns := range billed {
		if after[uid] < ns {
			w.t.Errorf("tenant %s's bills went from %d to %d ns when its node was deleted", uid, ns, after[uid])
		}
	}
	w.t.Logf("the guest drained and deleted: its report gone, no tenant names it; the bills kept")
}
