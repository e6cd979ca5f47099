package agent

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	kubefairv1 "github.com/kubefair/kubefair/api/v1alpha1"
	"github.com/kubefair/kubefair/node-agent/enforce"
	"github.com/kubefair/kubefair/node-agent/enforce/cgroup"
)

// TestBillingCounters: counters follow tenant UIDs, a tenant being deleted
// is final and one gone is dropped, and a pod that started after the
// agent is counted from its start — once.
func TestBillingCounters(t *testing.T) {
	b := newBillingCounters()
	boot := time.Date(2026, 11, 25, 10, 0, 0, 500_000_000, time.UTC)
	shop := kubefairv1.Tenant{ObjectMeta: metav1.ObjectMeta{Name: "shop", UID: "uid-1"}}
	b.begin(boot, []kubefairv1.Tenant{shop})
	if !b.bootTime.Equal(boot) {
		t.Fatalf("boot time %s", b.bootTime)
	}
	pod := func(uid string, started time.Time) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{UID: types.UID(uid)}, Status: corev1.PodStatus{StartTime: &metav1.Time{Time: started}}}
	}
	if b.newPod(pod("before", boot.Add(-time.Minute))) {
		t.Error("a pod running before the agent started is counted from its start")
	}
	if !b.newPod(pod("after", boot.Add(-200*time.Millisecond))) { // start times are in seconds: same second as the boot
		t.Error("a pod started after the agent is not counted from its start")
	}
	if b.newPod(pod("after", boot.Add(-200*time.Millisecond))) {
		t.Error("a pod counted from its start twice (it left its tenant and came back)")
	}
	b.podGone("after")
	if len(b.counted) != 1 {
		t.Errorf("pods counted %v: a pod gone is forgotten (the set does not grow with every pod)", b.counted)
	}

	b.add(membership{tenant: "shop", uid: "uid-1"}, 5)
	b.add(membership{tenant: "shop", uid: "uid-1"}, 7)
	if c := b.sorted(); len(c) != 1 || c[0].ns != 12 || !c[0].live {
		t.Fatalf("counters %+v", c)
	}
	// Being deleted: final. Created again: a new counter beside it.
	deleting := shop
	deleting.DeletionTimestamp = &metav1.Time{Time: boot}
	again := kubefairv1.Tenant{ObjectMeta: metav1.ObjectMeta{Name: "shop", UID: "uid-2"}}
	b.begin(boot.Add(time.Second), []kubefairv1.Tenant{deleting, again})
	b.add(membership{tenant: "shop", uid: "uid-2"}, 3)
	c := b.sorted()
	if len(c) != 2 || c[0].uid != "uid-1" || c[0].live || c[1].uid != "uid-2" || !c[1].live || c[1].ns != 3 {
		t.Fatalf("counters %+v: want uid-1 final at 12, uid-2 live at 3", c)
	}
	// Gone from the API: dropped.
	b.begin(boot.Add(2*time.Second), []kubefairv1.Tenant{again})
	if c := b.sorted(); len(c) != 1 || c[0].uid != "uid-2" {
		t.Fatalf("counters %+v: want the gone tenant dropped", c)
	}
}

// TestReportCarriesWhatIsBilled: the report names tenants by UID, marks a
// final counter, and carries the run's start and the node's counters.
func TestReportCarriesWhatIsBilled(t *testing.T) {
	boot := time.Date(2026, 11, 25, 10, 0, 0, 0, time.UTC)
	cgroups, err := cgroup.NewBackend(nil, "")
	if err != nil {
		t.Fatal(err)
	}
	a := &Agent{cfg: Config{NodeName: "n1", CPUs: 2}, bootID: "b1", billed: newBillingCounters(), node: &node{backends: []enforce.Backend{cgroups}},
		window: map[string]*tenantWindow{"shop": {cpu: int64(time.Second)}}, windowFrom: boot}
	a.billed.begin(boot, []kubefairv1.Tenant{{ObjectMeta: metav1.ObjectMeta{Name: "shop", UID: "uid-2"}}})
	a.billed.add(membership{tenant: "shop", uid: "uid-2"}, 4)
	a.billed.tenants["uid-1"] = &tenantCounter{uid: "uid-1", name: "shop", ns: 9} // its tenant being deleted
	a.billed.node, a.billed.pods, a.billed.nodeOK = 30, 20, true
	a.Last.Result.NiceRoundingErrorPoints = 1.23456 // the nice backend's rounding in the last period
	r := a.buildReport(boot.Add(10 * time.Second))
	if r.NiceRoundingErrorPoints != 1.2346 {
		t.Errorf("report's nice rounding error %v, want the last period's 1.2346", r.NiceRoundingErrorPoints)
	}
	if r.BootTime == nil || !r.BootTime.Time.Equal(boot) || r.Node == nil || r.Node.CPUNanoseconds != 30 || r.Node.PodsCPUNanoseconds != 20 {
		t.Fatalf("report boot time %v, node %+v", r.BootTime, r.Node)
	}
	if r.Backend != kubefairv1.BackendCgroup || r.KernelABI != 0 {
		t.Errorf("report names backend %q, kernel ABI %d; want cgroup, 0", r.Backend, r.KernelABI)
	}
	if len(r.Tenants) != 2 || r.Tenants[0].UID != "uid-1" || !r.Tenants[0].Final || r.Tenants[0].CPUNanoseconds != 9 || r.Tenants[0].AchievedShare != 0 ||
		r.Tenants[1].UID != "uid-2" || r.Tenants[1].Final || r.Tenants[1].CPUNanoseconds != 4 || r.Tenants[1].AchievedShare != 0.05 {
		t.Fatalf("tenants %+v: want uid-1 final with no shares, uid-2 live with the window's shares", r.Tenants)
	}
}

// TestReportNamesTheBoundHit: a bound is reported only for a backlogged
// tenant more than a point off its entitlement; the weight range before
// the closed loop's range.
func TestReportNamesTheBoundHit(t *testing.T) {
	off := kubefairv1.TenantShare{EntitledShare: 0.0001, AchievedShare: 0.05, Backlogged: true}
	close := kubefairv1.TenantShare{EntitledShare: 0.0001, AchievedShare: 0.005, Backlogged: true}
	idle := kubefairv1.TenantShare{EntitledShare: 0.3, AchievedShare: 0.1}
	for _, tc := range []struct {
		name  string
		w     tenantWindow
		share kubefairv1.TenantShare
		want  kubefairv1.WeightBound
	}{
		{"no bound hit", tenantWindow{}, off, ""},
		{"weight range, 5 points off", tenantWindow{weightRange: true}, off, kubefairv1.BoundWeightRange},
		{"weight range, half a point off", tenantWindow{weightRange: true}, close, ""},
		{"both: the weight range is named", tenantWindow{weightRange: true, bounded: true}, off, kubefairv1.BoundWeightRange},
		{"the closed loop's range", tenantWindow{bounded: true}, off, kubefairv1.BoundCorrection},
		{"not backlogged: it took what it wanted", tenantWindow{weightRange: true, bounded: true}, idle, ""},
	} {
		if got := tc.w.bound(tc.share); got != tc.want {
			t.Errorf("%s: bound %q, want %q", tc.name, got, tc.want)
		}
	}
}
