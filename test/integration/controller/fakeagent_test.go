package controller

import (
	"fmt"
	"math/big"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kubefairv1 "github.com/kubefair/kubefair/api/v1alpha1"
	"github.com/kubefair/kubefair/controllers/billing"
	"github.com/kubefair/kubefair/controllers/cost"
)

const second = int64(time.Second)

// yesterdayNoon is when the suites' agents report by default: a moment in
// the past (reports are not believed from the future) far from midnight,
// so that every window falls into one billing period.
func yesterdayNoon() time.Time {
	y, m, d := time.Now().UTC().Date()
	return time.Date(y, m, d-1, 12, 0, 0, 0, time.UTC)
}

// fakeAgent writes one node's NodeShareReport as the node agent does: one
// object per node, cumulative counters per tenant UID since its boot.
type fakeAgent struct {
	t        *testing.T
	node     string
	cpus     int32
	boot     string
	bootTime time.Time
	counters map[string]int64 // by tenant UID
	names    map[string]string
	final    map[string]bool
}

// newNode registers a Node with cpus CPUs and returns its agent, started
// at bootTime.
func newNode(t *testing.T, name string, cpus int32, bootTime time.Time) *fakeAgent {
	t.Helper()
	if _, err := api.CreateNode(ctx(), name, int64(cpus)); err != nil {
		t.Fatalf("creating node %s: %v", name, err)
	}
	a := &fakeAgent{t: t, node: name, cpus: cpus}
	a.restart(fmt.Sprintf("%s-boot-1", name), bootTime)
	return a
}

// restart is a new run of the agent: counters from zero.
func (a *fakeAgent) restart(boot string, at time.Time) {
	a.boot, a.bootTime = boot, at
	a.counters, a.names, a.final = map[string]int64{}, map[string]string{}, map[string]bool{}
}

// use adds CPU to a tenant's counter.
func (a *fakeAgent) use(tn *kubefairv1.Tenant, ns int64) {
	uid := string(tn.UID)
	a.counters[uid] += ns
	a.names[uid] = tn.Name
}

// report is the report the agent would write at obs.
func (a *fakeAgent) report(obs time.Time) *kubefairv1.NodeShareReport {
	r := &kubefairv1.NodeShareReport{ObjectMeta: metav1.ObjectMeta{Name: a.node}, Backend: kubefairv1.BackendCgroup, CPUs: a.cpus,
		BootID: a.boot, BootTime: &metav1.Time{Time: a.bootTime}, ObservedTime: metav1.NewTime(obs), Window: metav1.Duration{Duration: 10 * time.Second}}
	for uid, ns := range a.counters {
		r.Tenants = append(r.Tenants, kubefairv1.TenantShare{Name: a.names[uid], UID: uid, CPUNanoseconds: ns, Final: a.final[uid],
			EntitledShare: 0.5, AchievedShare: 0.4, Backlogged: true, Pods: 1, RunnableThreads: 1})
	}
	return r
}

// write writes the report the agent would write at obs.
func (a *fakeAgent) write(obs time.Time) { a.t.Helper(); putReport(a.t, a.report(obs)) }

// putReport creates or replaces a node's report.
func putReport(t *testing.T, r *kubefairv1.NodeShareReport) {
	t.Helper()
	var have kubefairv1.NodeShareReport
	err := k8s.Get(ctx(), client.ObjectKey{Name: r.Name}, &have)
	if err == nil {
		r.ObjectMeta = have.ObjectMeta
		err = k8s.Update(ctx(), r)
	} else {
		err = k8s.Create(ctx(), r)
	}
	if err != nil {
		t.Fatalf("writing report %s: %v", r.Name, err)
	}
}

// podOn creates a pod of namespace ns bound to node (no kubelet runs it).
func podOn(t *testing.T, ns, name, node string) {
	t.Helper()
	create(t, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "c", Image: "none"}}}})
}

// billed is what a tenant's TenantBills hold over all periods: CPU and
// money by currency.
func billed(t *testing.T, uid string) (cpu *big.Int, money map[string]*big.Int, bills []kubefairv1.TenantBill) {
	t.Helper()
	var list kubefairv1.TenantBillList
	if err := k8s.List(ctx(), &list, client.MatchingFields{"tenantUID": uid}); err != nil {
		t.Fatal(err)
	}
	cpu, money = new(big.Int), map[string]*big.Int{}
	for _, b := range list.Items {
		v, err := cost.ParseSeconds(b.CPUSeconds)
		if err != nil {
			t.Fatalf("bill %s: %v", b.Name, err)
		}
		cpu.Add(cpu, v)
		for _, c := range b.Costs {
			m, err := cost.ParseMicros(c.Amount)
			if err != nil {
				t.Fatal(err)
			}
			if money[c.Currency] == nil {
				money[c.Currency] = new(big.Int)
			}
			money[c.Currency].Add(money[c.Currency], m)
		}
	}
	return cpu, money, list.Items
}

// wantBilled waits until a tenant's bills hold ns of CPU costing micros
// in currency (none when currency is empty).
func wantBilled(t *testing.T, what string, tn *kubefairv1.Tenant, ns int64, currency string, micros int64) {
	t.Helper()
	eventually(t, what, func() (bool, string) {
		cpu, money, bills := billed(t, string(tn.UID))
		got := money[currency]
		ok := cpu.Int64() == ns && (currency == "" || (got != nil && got.Int64() == micros))
		return ok, fmt.Sprintf("billed %s ns, money %v in %d bill(s), want %d ns and %d µ%s", cpu, money, len(bills), ns, micros, currency)
	})
}

// stillBilled checks, a moment after something that must not bill again,
// that the bills still hold ns.
func stillBilled(t *testing.T, what string, tn *kubefairv1.Tenant, ns int64) {
	t.Helper()
	time.Sleep(1500 * time.Millisecond)
	if cpu, _, _ := billed(t, string(tn.UID)); cpu.Int64() != ns {
		t.Fatalf("%s: billed %s ns, want still %d", what, cpu, ns)
	}
}

// openRecord is a node's open UsageRecord.
func openRecord(t *testing.T, node string) *kubefairv1.UsageRecord {
	t.Helper()
	var u kubefairv1.UsageRecord
	if err := k8s.Get(ctx(), client.ObjectKey{Name: billing.OpenRecordName(node)}, &u); err != nil {
		t.Fatalf("node %s's open usage record: %v", node, err)
	}
	return &u
}

// wantAccepted waits for a node's last report to come out with reason
// (ReasonBilled when it was billed in full).
func wantAccepted(t *testing.T, node, reason string, obs time.Time) {
	t.Helper()
	eventually(t, fmt.Sprintf("node %s's report at %s: %s", node, obs.Format(time.TimeOnly), reason), func() (bool, string) {
		var u kubefairv1.UsageRecord
		if err := k8s.Get(ctx(), client.ObjectKey{Name: billing.OpenRecordName(node)}, &u); err != nil {
			return false, err.Error()
		}
		c := meta.FindStatusCondition(u.Conditions, kubefairv1.ConditionReportAccepted)
		last := u.LastReport
		if c == nil || last == nil {
			return false, "no outcome yet"
		}
		return c.Reason == reason && last.ObservedTime.Equal(&metav1.Time{Time: obs}), fmt.Sprintf("%s: %s (last report %s)", c.Reason, c.Message, last.ObservedTime.Format(time.TimeOnly))
	})
}
