package e2e

import (
	"fmt"
	"math/big"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kubefairv1 "github.com/kubefair/kubefair/api/v1alpha1"
	"github.com/kubefair/kubefair/controllers/billing"
	"github.com/kubefair/kubefair/controllers/cost"
)

// checkBillingFaults repeats issue 16's faults on the real cluster and
// asserts that nothing is billed twice: the NodeShareReports deleted (the
// clean-up that billed every tenant again), the UsageRecords deleted, the
// controller restarted, a Tenant deleted and created again under its name.
// After each, every tenant's bill grew by no more than its pods used over
// the time (plus the report window before the fault); then the node's CPU
// time adds up. TestEndToEnd runs it as a subtest.
func (w *world) checkBillingFaults(t *testing.T) {
	w = w.with(t)
	if r := w.report(); len(r.OwnerReferences) != 1 || r.OwnerReferences[0].Kind != "Node" || r.OwnerReferences[0].Name != w.node {
		t.Errorf("the NodeShareReport's owners are %+v, want its Node (it goes with it)", r.OwnerReferences)
	}
	// One window for the three: a report counted again would bill
	// everything since the agent started, far more than the window's use.
	w.noDoubleBilling("NodeShareReports and UsageRecords deleted, the controller restarted", func() {
		w.kubectl("delete", "nodesharereports", "--all")
		w.kubectl("delete", "usagerecords", "--all", "--wait=false")
		w.restartController()
	})
	w.recreateTenant("batch")
	w.checkReconciliation()
}

// billedByUID is every tenant's TenantBills: CPU in nanoseconds by
// tenant UID, over all periods.
func (w *world) billedByUID() map[string]int64 {
	w.t.Helper()
	var bills kubefairv1.TenantBillList
	if err := w.k8s.List(w.ctx, &bills); err != nil {
		w.t.Fatal(err)
	}
	out := map[string]int64{}
	for _, b := range bills.Items {
		ns, err := cost.ParseSeconds(b.CPUSeconds)
		if err != nil {
			w.t.Fatalf("bill %s: %v", b.Name, err)
		}
		out[b.TenantUID] += ns.Int64()
	}
	return out
}

// billedMicros is what a tenant's TenantBills cost, in millionths of its
// currency, over all periods.
func (w *world) billedMicros(tn kubefairv1.Tenant) int64 {
	w.t.Helper()
	var bills kubefairv1.TenantBillList
	if err := w.k8s.List(w.ctx, &bills, client.MatchingFields{"tenantUID": string(tn.UID)}); err != nil {
		w.t.Fatal(err)
	}
	var sum int64
	for _, b := range bills.Items {
		for _, c := range b.Costs {
			if m, err := cost.ParseMicros(c.Amount); err == nil {
				sum += m.Int64()
			}
		}
	}
	return sum
}

// billedNanoseconds is a tenant's CPU billed over all periods.
func (w *world) billedNanoseconds(tn kubefairv1.Tenant) int64 { return w.billedByUID()[string(tn.UID)] }

// tenantUsage is what each tenant's pods have used, by tenant name.
func (w *world) tenantUsage() map[string]int64 {
	w.t.Helper()
	groups := w.groups()
	var all []corev1.Pod
	for _, pods := range groups {
		all = append(all, pods...)
	}
	used, err := w.cpu(w.ctx, all)
	if err != nil {
		w.t.Fatal(err)
	}
	out := map[string]int64{}
	for name, pods := range groups {
		for _, p := range pods {
			out[name] += used[p.UID]
		}
	}
	return out
}

// tenantUIDs are the scenario's tenants' UIDs, by name.
func (w *world) tenantUIDs() map[string]string {
	w.t.Helper()
	var list kubefairv1.TenantList
	if err := w.k8s.List(w.ctx, &list); err != nil {
		w.t.Fatal(err)
	}
	out := map[string]string{}
	for _, tn := range list.Items {
		out[tn.Name] = string(tn.UID)
	}
	return out
}

// counted waits until the node's open UsageRecord has counted a report
// observed after since, and the bills have caught up with it.
func (w *world) counted(since time.Time) {
	w.t.Helper()
	w.eventually(60*time.Second, "a report counted after "+since.Format(time.TimeOnly), func() (bool, string) {
		var u kubefairv1.UsageRecord
		if err := w.k8s.Get(w.ctx, client.ObjectKey{Name: billing.OpenRecordName(w.node)}, &u); err != nil {
			return false, err.Error()
		}
		through := u.Cursor.Through
		return through != nil && through.After(since), fmt.Sprintf("counted to %v", through)
	})
	time.Sleep(2 * time.Second) // the bills follow the record
}

// noDoubleBilling runs a fault and checks that, from a report window
// before it to 30 s after it, no tenant was billed more CPU than its pods
// used: a report counted again would bill everything since the agent
// started.
func (w *world) noDoubleBilling(what string, fault func()) {
	w.t.Helper()
	used0 := w.tenantUsage()
	time.Sleep(15 * time.Second) // more than a report period: what is billed now was used after used0
	billed0, uids := w.billedByUID(), w.tenantUIDs()
	fault()
	time.Sleep(30 * time.Second)
	w.counted(time.Now())
	billed1, used1 := w.billedByUID(), w.tenantUsage()
	for name, uid := range uids {
		grew, used := billed1[uid]-billed0[uid], used1[name]-used0[name]
		w.t.Logf("%s: tenant %s billed %.3f CPU-s more while its pods used %.3f", what, name, float64(grew)/1e9, float64(used)/1e9)
		if grew > used {
			w.t.Errorf("%s: tenant %s was billed %.3f CPU-s in %s but its pods used %.3f: billed twice", what, name, float64(grew)/1e9, 45*time.Second, float64(used)/1e9)
		}
		if grew <= 0 {
			w.t.Errorf("%s: tenant %s was billed nothing more", what, name)
		}
	}
}

// restartController deletes the controller's pod and waits for the next.
func (w *world) restartController() {
	w.t.Helper()
	old := w.pods(client.InNamespace(namespace), client.MatchingLabels{"app.kubernetes.io/component": "controller"})
	if len(old) != 1 {
		w.t.Fatalf("%d controller pods", len(old))
	}
	if err := w.k8s.Delete(w.ctx, &old[0]); err != nil {
		w.t.Fatal(err)
	}
	w.eventually(90*time.Second, "a new controller Ready", func() (bool, string) {
		pods := w.pods(client.InNamespace(namespace), client.MatchingLabels{"app.kubernetes.io/component": "controller"})
		return len(pods) == 1 && pods[0].UID != old[0].UID && ready(pods[0]), fmt.Sprintf("%d controller pods", len(pods))
	})
}

// recreateTenant deletes a tenant and creates it again under its name:
// the old one stays until its last CPU is recorded and keeps its bills;
// the new one (another UID) is billed from zero, never the old counters.
func (w *world) recreateTenant(name string) {
	w.t.Helper()
	var old kubefairv1.Tenant
	if err := w.k8s.Get(w.ctx, client.ObjectKey{Name: name}, &old); err != nil {
		w.t.Fatal(err)
	}
	before := w.billedByUID()[string(old.UID)]
	if err := w.k8s.Delete(w.ctx, &old); err != nil {
		w.t.Fatal(err)
	}
	w.eventually(90*time.Second, "tenant "+name+" gone once its last CPU is recorded", func() (bool, string) {
		err := w.k8s.Get(w.ctx, client.ObjectKey{Name: name}, &kubefairv1.Tenant{})
		return apierrors.IsNotFound(err), fmt.Sprint(err)
	})
	final := w.billedByUID()[string(old.UID)]
	w.t.Logf("tenant %s (UID %s) deleted: billed %.3f CPU-s, %.3f before the deletion", name, old.UID, float64(final)/1e9, float64(before)/1e9)
	if final < before || final == 0 {
		w.t.Errorf("the deleted tenant's bills hold %.3f CPU-s, %.3f before its deletion", float64(final)/1e9, float64(before)/1e9)
	}
	w.t.Log("\n$ kubectl get tenantbills --field-selector tenantUID=" + string(old.UID) + "\n" +
		w.kubectl("get", "tenantbills", "--field-selector", "tenantUID="+string(old.UID)))

	renewed := &kubefairv1.Tenant{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: old.Labels}, Spec: old.Spec}
	used0 := w.tenantUsage()[name]
	if err := w.k8s.Create(w.ctx, renewed); err != nil {
		w.t.Fatal(err)
	}
	time.Sleep(30 * time.Second)
	w.counted(time.Now())
	got, used := w.billedByUID()[string(renewed.UID)], w.tenantUsage()[name]-used0
	w.t.Logf("tenant %s created again (UID %s): billed %.3f CPU-s while its pods used %.3f", name, renewed.UID, float64(got)/1e9, float64(used)/1e9)
	if got > used || got <= 0 {
		w.t.Errorf("the tenant created again was billed %.3f CPU-s; its pods used %.3f since: want more than zero and no more", float64(got)/1e9, float64(used)/1e9)
	}
	if final2 := w.billedByUID()[string(old.UID)]; final2 != final {
		w.t.Errorf("the deleted tenant's bills changed after it was gone: %.3f → %.3f CPU-s", float64(final)/1e9, float64(final2)/1e9)
	}
}

// checkReconciliation: the node's CPU time over the windows its open
// UsageRecord counted splits exactly into tenants, other pods, system and
// idle, none of them meaningfully below zero.
func (w *world) checkReconciliation() {
	w.t.Helper()
	var u kubefairv1.UsageRecord
	if err := w.k8s.Get(w.ctx, client.ObjectKey{Name: billing.OpenRecordName(w.node)}, &u); err != nil {
		w.t.Fatal(err)
	}
	c := u.CPU
	s := func(ns int64) string { return cost.FormatSeconds(big.NewInt(ns)) }
	var b strings.Builder
	fmt.Fprintf(&b, "node %s, %s (UTC), CPU-seconds over the windows counted:\n", u.Node, u.Period)
	fmt.Fprintf(&b, "  capacity   %18s\n  tenants    %18s\n  other pods %18s\n  system     %18s\n  idle       %18s\n  refused    %18s (claimed, not billed)\n",
		s(c.CapacityNanoseconds), s(c.TenantsNanoseconds), s(c.OtherPodsNanoseconds), s(c.SystemNanoseconds), s(c.IdleNanoseconds), s(c.RefusedNanoseconds))
	w.t.Log("\n" + b.String())
	w.t.Log("\n$ kubectl get usagerecords\n" + w.kubectl("get", "usagerecords"))
	w.t.Log("\n$ kubectl get tenantbills\n" + w.kubectl("get", "tenantbills"))
	if sum := c.TenantsNanoseconds + c.OtherPodsNanoseconds + c.SystemNanoseconds + c.IdleNanoseconds; sum != c.CapacityNanoseconds {
		w.t.Errorf("tenants + other pods + system + idle = %s CPU-s, capacity %s", s(sum), s(c.CapacityNanoseconds))
	}
	// The agent reads its counters a few milliseconds apart: a part may be
	// below zero by that much, never by a second of CPU.
	for part, ns := range map[string]int64{"tenants": c.TenantsNanoseconds, "other pods": c.OtherPodsNanoseconds, "system": c.SystemNanoseconds, "idle": c.IdleNanoseconds} {
		if ns < -int64(time.Second) {
			w.t.Errorf("the node's %s CPU is %s s: its counters contradict each other", part, s(ns))
		}
	}
	if c.TenantsNanoseconds <= 0 || c.CapacityNanoseconds <= 0 {
		w.t.Errorf("nothing billed on node %s: %+v", u.Node, c)
	}
}
