package controller

import (
	"fmt"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kubefairv1 "github.com/kubefair/kubefair/api/v1alpha1"
)

const second = int64(time.Second)

// putReport writes node's report as its agent would: one object per node,
// overwritten every report period.
func putReport(t *testing.T, node string, cpus int32, boot string, shares ...kubefairv1.TenantShare) {
	t.Helper()
	r := &kubefairv1.NodeShareReport{ObjectMeta: metav1.ObjectMeta{Name: node}}
	err := k8s.Get(ctx(), client.ObjectKey{Name: node}, r)
	r.Backend, r.CPUs, r.BootID, r.Tenants = kubefairv1.BackendCgroup, cpus, boot, shares
	r.Window = metav1.Duration{Duration: 10 * time.Second}
	r.ObservedTime = metav1.NewTime(time.Now())
	if err == nil {
		err = k8s.Update(ctx(), r)
	} else {
		err = k8s.Create(ctx(), r)
	}
	if err != nil {
		t.Fatalf("writing report %s: %v", node, err)
	}
}

func share(tenant string, entitled, achieved float64, cpuNS int64) kubefairv1.TenantShare {
	return kubefairv1.TenantShare{Name: tenant, EntitledShare: entitled, AchievedShare: achieved, CPUNanoseconds: cpuNS, Backlogged: true, Pods: 1, RunnableThreads: 1}
}

// TestReportsAggregateAndCostIsExactlyOnce drives the cost model through
// everything that could count a window twice or lose one: repeated reports,
// controller restarts, an agent restart, and reports arriving out of order.
func TestReportsAggregateAndCostIsExactlyOnce(t *testing.T) {
	stop := startManager(t)
	// 3.6 per CPU-hour is exactly 0.001 (1000 micro-units) per CPU-second.
	create(t, namespace("bill-ns", nil), tier("bill-tier", 100, "3.6"), tenantOnTier("bill", "bill-tier", "bill-ns"))

	wantUsage := func(what string, cpuSeconds int64) {
		t.Helper()
		eventually(t, what, func() (bool, string) {
			tn := getTenant(t, "bill")
			return tn.Status.CPUNanoseconds == cpuSeconds*second && tn.Status.CostMicros == cpuSeconds*1000 &&
				tn.Status.CostRemainder == 0 && tn.Status.Cost == fmt.Sprintf("0.%06d", cpuSeconds*1000) &&
				tn.Status.CPUSeconds == fmt.Sprintf("%d.000", cpuSeconds) && tn.Status.Currency == "EUR", describe(tn)
		})
	}

	// Two nodes of 2 and 4 CPUs: totals weigh each node by its CPUs.
	putReport(t, "bill-n1", 2, "boot-a", share("bill", 0.5, 0.4, 10*second))
	putReport(t, "bill-n2", 4, "boot-x", share("bill", 0.25, 0.25, 5*second))
	wantUsage("15 CPU-seconds from two nodes", 15)
	eventually(t, "CPU-weighted totals and per-node entries", func() (bool, string) {
		tn := getTenant(t, "bill")
		s := tn.Status
		return s.EntitledShare == "33.3%" && s.AchievedShare == "30.0%" && len(s.Nodes) == 2 &&
			s.Nodes[0].Node == "bill-n1" && s.Nodes[0].AchievedShare == "40.0%" && s.Nodes[0].CPUSeconds == "10.000000000" &&
			s.Nodes[1].Node == "bill-n2" && s.Nodes[1].EntitledShare == "25.0%" &&
			condition(tn, kubefairv1.ConditionEnforced).Status == metav1.ConditionTrue, describe(tn)
	})

	// The same counters again (a new observation time only): nothing accrues
	// and the status is not rewritten.
	before := getTenant(t, "bill").ResourceVersion
	putReport(t, "bill-n1", 2, "boot-a", share("bill", 0.5, 0.4, 10*second))
	time.Sleep(2 * time.Second)
	if after := getTenant(t, "bill"); after.ResourceVersion != before {
		t.Fatalf("status rewritten for a repeated report: resourceVersion %s → %s (%s)", before, after.ResourceVersion, describe(after))
	}
	wantUsage("still 15 after a repeated report", 15)

	// Reports written while the controller is down are accrued once on start,
	// and a second restart accrues nothing more.
	stop()
	putReport(t, "bill-n1", 2, "boot-a", share("bill", 0.5, 0.4, 20*second))
	stop = startManager(t)
	wantUsage("25 after a controller restart", 25)
	stop()
	stop = startManager(t)
	time.Sleep(2 * time.Second)
	wantUsage("still 25 after a second restart", 25)

	// The agent on n1 restarts: a new boot id, its counter from zero.
	putReport(t, "bill-n1", 2, "boot-b", share("bill", 0.5, 0.4, 3*second))
	wantUsage("28 after the agent restarted", 28)
	eventually(t, "an AgentRestarted event", func() (bool, string) { return hasEvent("bill", kubefairv1.EventCounterReset) })

	// Out of order: an older report of the old boot is ignored; the old
	// boot's last report, arriving late, adds only what was not yet seen.
	putReport(t, "bill-n1", 2, "boot-a", share("bill", 0.5, 0.4, 15*second))
	time.Sleep(time.Second)
	wantUsage("still 28 after a stale report", 28)
	putReport(t, "bill-n1", 2, "boot-a", share("bill", 0.5, 0.4, 22*second))
	wantUsage("30 after the old boot's late last report", 30)
	putReport(t, "bill-n1", 2, "boot-b", share("bill", 0.5, 0.4, 3*second))
	time.Sleep(time.Second)
	wantUsage("still 30 when the new boot reports the same counter again", 30)
	stop()
}

// TestCostStaysExactForSubMicroWindows: many tiny windows at a low price add
// up to exactly the price of their sum.
func TestCostStaysExactForSubMicroWindows(t *testing.T) {
	startManager(t)
	create(t, namespace("tiny-ns", nil), tier("tiny-tier", 100, "0.000001"), tenantOnTier("tiny", "tiny-tier", "tiny-ns"))
	// 0.000001 per CPU-hour: one CPU-second is 1/3600 micro-unit.
	var counter int64
	for i := 0; i < 12; i++ {
		counter += 300 * second
		putReport(t, "tiny-n1", 2, "boot", share("tiny", 0.5, 0.5, counter))
		want := counter
		eventually(t, fmt.Sprintf("window %d consumed", i), func() (bool, string) {
			tn := getTenant(t, "tiny")
			return tn.Status.CPUNanoseconds == want, describe(tn)
		})
	}
	tn := getTenant(t, "tiny")
	// 3600 CPU-seconds = one CPU-hour = exactly 1 micro-unit, no remainder.
	if tn.Status.CostMicros != 1 || tn.Status.CostRemainder != 0 || tn.Status.Cost != "0.000001" {
		t.Fatalf("one CPU-hour in 12 windows cost %s", describe(tn))
	}
}
