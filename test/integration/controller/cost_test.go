package controller

import (
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kubefairv1 "github.com/kubefair/kubefair/api/v1alpha1"
	"github.com/kubefair/kubefair/controllers/billing"
)

// TestSharesFollowCurrentReports: the nodes' current reports make the
// tenant's shares (weighted by CPUs) and Enforced; a node that stopped
// reporting no longer counts; the status shows today's bill.
func TestSharesFollowCurrentReports(t *testing.T) {
	startManager(t)
	create(t, namespace("share-ns", nil), tier("share-tier", 100, "3.6"), tenantOnTier("share", "share-tier", "share-ns"))
	tn := getTenant(t, "share")
	now := time.Now()
	n1, n2 := newNode(t, "share-n1", 2, now.Add(-20*time.Second)), newNode(t, "share-n2", 4, now.Add(-20*time.Second))
	podOn(t, "share-ns", "p1", "share-n1")
	podOn(t, "share-ns", "p2", "share-n2")
	n1.use(tn, 10*second)
	n2.use(tn, 5*second)
	r1, r2 := n1.report(now), n2.report(now)
	r2.Tenants[0].EntitledShare, r2.Tenants[0].AchievedShare = 0.25, 0.25
	putReport(t, r1)
	putReport(t, r2)
	eventually(t, "CPU-weighted shares, two reporting nodes, today's bill in the status", func() (bool, string) {
		tn := getTenant(t, "share")
		s := tn.Status
		return s.EntitledShare == "33.3%" && s.AchievedShare == "30.0%" && s.ReportingNodes == 2 &&
			condition(tn, kubefairv1.ConditionEnforced).Status == metav1.ConditionTrue &&
			condition(tn, kubefairv1.ConditionBilled).Reason == kubefairv1.ReasonAccruing &&
			s.Period == billing.Period(time.Now()) && s.CPUSeconds == "15.000000000" && s.Cost == "0.015000" && s.Currency == "EUR" &&
			s.Bill == billing.BillName("share", string(tn.UID), s.Period), describe(tn)
	})
	// The same counters again, observed later: nothing is billed, and the
	// tenant's status is not rewritten.
	before := getTenant(t, "share").ResourceVersion
	n1.write(now.Add(time.Second))
	time.Sleep(2 * time.Second)
	if after := getTenant(t, "share"); after.ResourceVersion != before {
		t.Fatalf("status rewritten for a repeated report: resourceVersion %s → %s (%s)", before, after.ResourceVersion, describe(after))
	}
	// n2 stops reporting (its last report is now older than three report
	// windows): it no longer counts.
	stale := n2.report(now.Add(-time.Minute))
	stale.Tenants[0].AchievedShare = 0.9
	putReport(t, stale)
	eventually(t, "only n1 counted", func() (bool, string) {
		tn := getTenant(t, "share")
		return tn.Status.ReportingNodes == 1 && tn.Status.AchievedShare == "40.0%" &&
			strings.Contains(condition(tn, kubefairv1.ConditionEnforced).Message, "stopped reporting (share-n2)"), describe(tn)
	})
	// n2 drained and deleted: its report goes with it (deleted by the
	// controller here: envtest runs no garbage collector), its open record
	// is archived, the tenant no longer names it (not even its refused
	// stale report), and what n2 billed stays billed.
	if err := k8s.Delete(ctx(), &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "share-ns", Name: "p2"}}); err != nil {
		t.Fatal(err)
	}
	if err := k8s.Delete(ctx(), &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "share-n2"}}); err != nil {
		t.Fatal(err)
	}
	reportGone := func(what string) {
		t.Helper()
		eventually(t, what, func() (bool, string) {
			err := k8s.Get(ctx(), client.ObjectKey{Name: "share-n2"}, &kubefairv1.NodeShareReport{})
			return apierrors.IsNotFound(err), fmt.Sprintf("report share-n2: %v", err)
		})
	}
	reportGone("the deleted node's report gone")
	eventually(t, "the tenant no longer naming share-n2", func() (bool, string) {
		tn := getTenant(t, "share")
		for _, c := range tn.Status.Conditions {
			if strings.Contains(c.Message, "share-n2") {
				return false, c.Type + ": " + c.Message
			}
		}
		return tn.Status.ReportingNodes <= 1, describe(tn)
	})
	var archived kubefairv1.UsageRecord
	eventually(t, "n2's open record archived", func() (bool, string) {
		err := k8s.Get(ctx(), client.ObjectKey{Name: billing.OpenRecordName("share-n2")}, &kubefairv1.UsageRecord{})
		err2 := k8s.Get(ctx(), client.ObjectKey{Name: billing.RecordName("share-n2", billing.Period(now))}, &archived)
		return apierrors.IsNotFound(err) && err2 == nil && archived.Closed, fmt.Sprintf("open: %v; archive: %v, closed %v", err, err2, archived.Closed)
	})
	// Its agent, outliving the Node, writes the report again: refused and
	// deleted again, nothing billed, no ledger reopened.
	n2.use(tn, second)
	n2.write(time.Now())
	eventually(t, "an UnknownNode event on n2's report", func() (bool, string) {
		return hasEventSaying("NodeShareReport", "share-n2", kubefairv1.ReasonUnknownNode)
	})
	reportGone("the report written again deleted again")
	if err := k8s.Get(ctx(), client.ObjectKey{Name: billing.OpenRecordName("share-n2")}, &kubefairv1.UsageRecord{}); !apierrors.IsNotFound(err) {
		t.Fatalf("n2's ledger reopened after its Node was deleted: %v", err)
	}
	stillBilled(t, "n2's CPU billed once, before it went", tn, 15*second)

	// A node whose agent finds the tenant's pods but not their cgroups names
	// it only by name, among the unmeasured: the tenant is Degraded for it.
	n3 := newNode(t, "share-n3", 2, now.Add(-20*time.Second))
	blind := n3.report(time.Now())
	blind.Tenants = nil
	blind.Unmeasured = []kubefairv1.UnmeasuredPods{{Tenant: "share", Pods: 2}}
	putReport(t, blind)
	eventually(t, "Degraded=PodsUnmeasured naming share-n3", func() (bool, string) {
		tn := getTenant(t, "share")
		d := condition(tn, kubefairv1.ConditionDegraded)
		return d.Reason == kubefairv1.ReasonPodsUnmeasured && strings.Contains(d.Message, "node share-n3 runs 2 pod(s)"), describe(tn)
	})
	// The report is owned by its Node, so it goes with it.
	var r kubefairv1.NodeShareReport
	if err := k8s.Get(ctx(), client.ObjectKey{Name: "share-n1"}, &r); err != nil || len(r.OwnerReferences) != 1 || r.OwnerReferences[0].Kind != "Node" {
		t.Fatalf("report owners %+v, %v: want its Node", r.OwnerReferences, err)
	}
}

// TestExactlyOnceThroughFaults drives one node's reports through what
// could bill twice or lose a window: the report deleted, controller
// restarts, the status wiped, the usage records deleted, an agent restart
// and its old run reporting late, and reports the ledger must refuse.
func TestExactlyOnceThroughFaults(t *testing.T) {
	stop := startManager(t)
	// 3.6 per CPU-hour is exactly 0.001 (1000 micro-units) per CPU-second.
	create(t, namespace("fault-ns", nil), namespace("fault-elsewhere", nil), tier("fault-tier", 100, "3.6"),
		tenantOnTier("fault", "fault-tier", "fault-ns"), tenantOnTier("fault-other", "fault-tier", "fault-elsewhere"))
	tn, other := getTenant(t, "fault"), getTenant(t, "fault-other")
	base := yesterdayNoon()
	n1 := newNode(t, "fault-n1", 2, base.Add(-20*time.Second))
	podOn(t, "fault-ns", "p", "fault-n1")
	at := func(s int) time.Time { return base.Add(time.Duration(s) * time.Second) }
	want := func(what string, s int64) { t.Helper(); wantBilled(t, what, tn, s*second, "EUR", s*1000) }

	n1.use(tn, 10*second)
	n1.write(at(0))
	want("10 s since the agent started", 10)
	// The clean-up: the report deleted; the agent writes it again.
	if err := k8s.Delete(ctx(), &kubefairv1.NodeShareReport{ObjectMeta: metav1.ObjectMeta{Name: "fault-n1"}}); err != nil {
		t.Fatal(err)
	}
	stillBilled(t, "report deleted", tn, 10*second)
	n1.use(tn, 4*second)
	n1.write(at(10))
	want("14 after the report was written again, not 24", 14)

	// Reports written while the controller is down are counted once when
	// it starts, and a second restart counts nothing more.
	stop()
	n1.use(tn, 4*second)
	n1.write(at(20))
	n1.use(tn, 7*second)
	n1.write(at(30))
	stop = startManager(t)
	want("25 after a controller restart", 25)
	stop()
	stop = startManager(t)
	stillBilled(t, "a second restart", tn, 25*second)

	// The status wiped (a restore without status): recomputed, not billed.
	fresh := getTenant(t, "fault")
	fresh.Status = kubefairv1.TenantStatus{}
	if err := k8s.Status().Update(ctx(), fresh); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the status recomputed", func() (bool, string) {
		tn := getTenant(t, "fault")
		return tn.Status.EffectiveWeight == 100 && tn.Status.Period != "", describe(tn)
	})
	stillBilled(t, "status wiped", tn, 25*second)

	// Every usage record deleted: the open one holds the cursor until it is
	// archived; bills keep what they billed; nothing is counted again.
	if err := k8s.DeleteAllOf(ctx(), &kubefairv1.UsageRecord{}); err != nil {
		t.Fatal(err)
	}
	stillBilled(t, "usage records deleted", tn, 25*second)
	n1.use(tn, 2*second)
	n1.write(at(40))
	want("27 after the usage records were deleted", 27)

	// The agent restarts: a new run counts from zero.
	oldBoot, oldBootTime := n1.boot, n1.bootTime
	n1.restart("fault-n1-boot-2", at(45))
	n1.use(tn, 3*second)
	n1.write(at(50))
	want("30 after the agent restarted", 30)
	eventually(t, "an AgentRestarted event on the report", func() (bool, string) { return hasEventOn("NodeShareReport", "fault-n1", kubefairv1.EventCounterReset) })

	// The old run reporting late, and an older report of the new one: stale.
	late := n1.report(at(55))
	late.BootID, late.BootTime = oldBoot, &metav1.Time{Time: oldBootTime}
	late.Tenants[0].CPUNanoseconds = 29 * second
	putReport(t, late)
	wantAccepted(t, "fault-n1", kubefairv1.ReasonStaleReport, at(55))
	putReport(t, n1.report(at(48)))
	stillBilled(t, "stale reports", tn, 30*second)

	// More CPU than 2 CPUs can run in 10 s: refused, surfaced, never billed;
	// the next report is measured from the refused one.
	n1.use(tn, 100*second)
	n1.write(at(60))
	wantAccepted(t, "fault-n1", kubefairv1.ReasonExceedsCapacity, at(60))
	eventually(t, "Billed=False/ReportRefused on the tenant", func() (bool, string) {
		tn := getTenant(t, "fault")
		c := condition(tn, kubefairv1.ConditionBilled)
		return c.Reason == kubefairv1.ReasonReportRefused && strings.Contains(c.Message, "ExceedsCapacity"), describe(tn)
	})
	eventually(t, "a ReportRefused event on the tenant", func() (bool, string) { return hasEvent("fault", kubefairv1.EventReportRefused) })
	n1.use(tn, 2*second)
	n1.write(at(70))
	wantAccepted(t, "fault-n1", kubefairv1.ReasonBilled, at(70))
	want("32: the refused 100 s never billed", 32)
	eventually(t, "Billed=True again", func() (bool, string) {
		tn := getTenant(t, "fault")
		return condition(tn, kubefairv1.ConditionBilled).Status == metav1.ConditionTrue, describe(tn)
	})

	// More CPUs than the Node has, a tenant that does not exist, a tenant
	// with no pod on the node: refused.
	n1.use(tn, second)
	r := n1.report(at(80))
	r.CPUs = 64
	putReport(t, r)
	wantAccepted(t, "fault-n1", kubefairv1.ReasonCPUsAboveCapacity, at(80))
	n1.use(tn, second)
	n1.use(other, 3*second)
	r = n1.report(at(90))
	r.Tenants = append(r.Tenants, kubefairv1.TenantShare{Name: "ghost", UID: "0bad0bad-0000-0000-0000-000000000000", CPUNanoseconds: second})
	putReport(t, r)
	var u *kubefairv1.UsageRecord
	eventually(t, "the report at 90 s counted", func() (bool, string) {
		u = openRecord(t, "fault-n1")
		return u.LastReport.ObservedTime.Equal(&metav1.Time{Time: at(90)}), u.LastReport.ObservedTime.String()
	})
	reasons := map[string]string{}
	for _, rt := range u.LastReport.Refused {
		reasons[rt.Tenant] = rt.Reason
	}
	if reasons["ghost"] != kubefairv1.ReasonUnknownTenant || reasons["fault-other"] != kubefairv1.ReasonNoPodsOnNode || len(reasons) != 2 {
		t.Fatalf("refused %+v: want ghost UnknownTenant and fault-other NoPodsOnNode", u.LastReport.Refused)
	}
	want("33: the CPUs report refused, the next one billed", 33)
	wantBilled(t, "nothing for the tenant with no pod here", other, 0, "", 0)

	// A report for a node that does not exist: refused with an event, and
	// deleted; no ledger is opened for it.
	ghost := n1.report(at(95))
	ghost.Name = "fault-no-such-node"
	putReport(t, ghost)
	eventually(t, "an UnknownNode event on the report of no node", func() (bool, string) {
		return hasEventSaying("NodeShareReport", "fault-no-such-node", kubefairv1.ReasonUnknownNode)
	})
	eventually(t, "the report of no node deleted", func() (bool, string) {
		err := k8s.Get(ctx(), client.ObjectKey{Name: "fault-no-such-node"}, &kubefairv1.NodeShareReport{})
		return apierrors.IsNotFound(err), fmt.Sprint(err)
	})
	if err := k8s.Get(ctx(), client.ObjectKey{Name: billing.OpenRecordName("fault-no-such-node")}, &kubefairv1.UsageRecord{}); !apierrors.IsNotFound(err) {
		t.Fatalf("a usage record for a node that does not exist: %v", err)
	}
	stillBilled(t, "a report of no node", tn, 33*second)

	// The record's CPU adds up: capacity = tenants + other pods + system + idle.
	u = openRecord(t, "fault-n1")
	if c := u.CPU; c.TenantsNanoseconds+c.OtherPodsNanoseconds+c.SystemNanoseconds+c.IdleNanoseconds != c.CapacityNanoseconds {
		t.Fatalf("the record's CPU does not add up: %+v", c)
	}
	stop()
}

// TestTenantCreatedAgainIsBilledFromZero: a tenant deleted and created
// again under the same name is another tenant (another UID): the old one
// is held until its final counter is recorded, keeps its bill, and the new
// one is billed from zero.
func TestTenantCreatedAgainIsBilledFromZero(t *testing.T) {
	startManager(t)
	create(t, namespace("again-ns", nil), tier("again-tier", 100, "3.6"), tenantOnTier("again", "again-tier", "again-ns"))
	old := getTenant(t, "again")
	base := time.Now()
	n1 := newNode(t, "again-n1", 2, base.Add(-20*time.Second))
	podOn(t, "again-ns", "p", "again-n1")
	n1.use(old, 10*second)
	n1.write(base)
	wantBilled(t, "the first tenant", old, 10*second, "EUR", 10_000)
	eventually(t, "the final-bill finalizer", func() (bool, string) {
		tn := getTenant(t, "again")
		return len(tn.Finalizers) == 1 && tn.Finalizers[0] == kubefairv1.FinalizerFinalBill, fmt.Sprint(tn.Finalizers)
	})

	if err := k8s.Delete(ctx(), old); err != nil {
		t.Fatal(err)
	}
	// Its node still counts it (the agent has not seen the deletion): it
	// waits, saying so.
	eventually(t, "Billed=False/AwaitingFinalUsage", func() (bool, string) {
		tn := getTenant(t, "again")
		return condition(tn, kubefairv1.ConditionBilled).Reason == kubefairv1.ReasonAwaitingFinalUsage, describe(tn)
	})
	n1.use(old, 2*second)
	n1.final[string(old.UID)] = true
	n1.write(time.Now())
	eventually(t, "the old tenant gone once its final counter is recorded", func() (bool, string) {
		err := k8s.Get(ctx(), client.ObjectKey{Name: "again"}, &kubefairv1.Tenant{})
		return err != nil, fmt.Sprint(err)
	})
	wantBilled(t, "the old tenant's final bill", old, 12*second, "EUR", 12_000)
	eventually(t, "a FinalBill event", func() (bool, string) { return hasEvent("again", kubefairv1.EventFinalBill) })

	create(t, tenantOnTier("again", "again-tier", "again-ns"))
	renewed := getTenant(t, "again")
	if renewed.UID == old.UID {
		t.Fatal("the tenant created again has the old UID")
	}
	n1.use(renewed, 3*second)
	n1.write(time.Now().Add(time.Second))
	wantBilled(t, "the new tenant, from zero", renewed, 3*second, "EUR", 3_000)
	stillBilled(t, "the old tenant's bill unchanged", old, 12*second)
	eventually(t, "the new tenant's status shows its own bill", func() (bool, string) {
		tn := getTenant(t, "again")
		return tn.Status.CPUSeconds == "3.000000000" && tn.Status.Bill == billing.BillName("again", string(tn.UID), tn.Status.Period), describe(tn)
	})
}

// TestPriceInForceWhenUsed: CPU is billed at the price in force while it
// was used (a window across a change is split in proportion to time), and
// a tier's currency cannot change.
func TestPriceInForceWhenUsed(t *testing.T) {
	startManager(t)
	create(t, namespace("price-ns", nil), tier("price-tier", 100, "3.6"), tenantOnTier("price", "price-tier", "price-ns"))
	tn := getTenant(t, "price")
	n1 := newNode(t, "price-n1", 2, time.Now().Add(-time.Second))
	podOn(t, "price-ns", "p", "price-n1")
	n1.use(tn, second)
	n1.write(time.Now())
	wantBilled(t, "one second at 3.6", tn, second, "EUR", 1000)

	// A new price from now on: the next window straddles it.
	time.Sleep(1100 * time.Millisecond)
	var pt kubefairv1.PricingTier
	if err := k8s.Get(ctx(), client.ObjectKey{Name: "price-tier"}, &pt); err != nil {
		t.Fatal(err)
	}
	pt.Spec.PricePerCPUHour = "7.2"
	if err := k8s.Update(ctx(), &pt); err != nil {
		t.Fatal(err)
	}
	changed := time.Now()
	eventually(t, "the tier's price history", func() (bool, string) {
		_ = k8s.Get(ctx(), client.ObjectKey{Name: "price-tier"}, &pt)
		p := pt.Status.Prices
		return len(p) == 2 && p[0].PricePerCPUHour == "3.6" && p[1].PricePerCPUHour == "7.2" &&
			!p[1].Since.After(changed) && changed.Sub(p[1].Since.Time) < 2*time.Second, fmt.Sprint(p)
	})
	time.Sleep(1100 * time.Millisecond)
	n1.use(tn, 2*second)
	n1.write(time.Now())
	eventually(t, "the straddling window split between the prices", func() (bool, string) {
		_, _, bills := billed(t, string(tn.UID))
		lines := map[string]string{}
		for _, b := range bills {
			for _, l := range b.Lines {
				lines[l.PricePerCPUHour] = l.CPUSeconds
			}
		}
		return len(lines) == 2 && lines["7.2"] != "" && lines["3.6"] > "1.000000000", fmt.Sprint(lines)
	})
	// A window wholly after the change: the new price alone.
	time.Sleep(1100 * time.Millisecond)
	_, money, _ := billed(t, string(tn.UID))
	before := money["EUR"].Int64()
	n1.use(tn, second)
	n1.write(time.Now())
	wantBilled(t, "one more second at 7.2", tn, 4*second, "EUR", before+2000)

	pt.Spec.Currency = "USD"
	if err := k8s.Update(ctx(), &pt); err == nil || !strings.Contains(err.Error(), "currency cannot change") {
		t.Fatalf("changing a tier's currency: %v", err)
	}
}

// hasEventOn tells whether an object has an event with that reason.
func hasEventOn(kind, name, reason string) (bool, string) {
	return eventOn(kind, name, func(e corev1.Event) bool { return e.Reason == reason })
}

// hasEventSaying tells whether an object has a warning event whose note
// contains text.
func hasEventSaying(kind, name, text string) (bool, string) {
	return eventOn(kind, name, func(e corev1.Event) bool {
		return e.Type == corev1.EventTypeWarning && strings.Contains(e.Message, text)
	})
}

// eventOn tells whether an object has an event that matches, and if not,
// what events it has.
func eventOn(kind, name string, match func(corev1.Event) bool) (bool, string) {
	var events corev1.EventList
	if err := k8s.List(ctx(), &events); err != nil {
		return false, err.Error()
	}
	var seen []string
	for _, e := range events.Items {
		if e.InvolvedObject.Name == name && e.InvolvedObject.Kind == kind {
			if match(e) {
				return true, ""
			}
			seen = append(seen, e.Reason+": "+e.Message)
		}
	}
	return false, fmt.Sprintf("events for %s %s: %q", kind, name, seen)
}

// TestPeriodEndsAtMidnight: the first report whose window ends on a new
// UTC day archives the day that ended (a closed UsageRecord) and moves the
// node's open record on, through the API server's own validation; each
// day's CPU is billed once, to the day its window ends in.
func TestPeriodEndsAtMidnight(t *testing.T) {
	startManager(t)
	create(t, namespace("midnight-ns", nil), tier("midnight-tier", 100, "3.6"), tenantOnTier("midnight", "midnight-tier", "midnight-ns"))
	tn := getTenant(t, "midnight")
	y, m, d := time.Now().UTC().Date()
	midnight := time.Date(y, m, d-1, 0, 0, 0, 0, time.UTC) // the start of yesterday: both days are past
	before, after := billing.Period(midnight.Add(-time.Second)), billing.Period(midnight)
	n1 := newNode(t, "midnight-n1", 2, midnight.Add(-30*time.Second))
	podOn(t, "midnight-ns", "p", "midnight-n1")

	n1.use(tn, 10*second)
	n1.write(midnight.Add(-10 * time.Second))
	wantBilled(t, "10 s on the day before", tn, 10*second, "EUR", 10_000)
	n1.use(tn, 6*second)
	n1.write(midnight.Add(10 * time.Second))
	wantAccepted(t, "midnight-n1", kubefairv1.ReasonBilled, midnight.Add(10*time.Second))
	wantBilled(t, "16 s over both days", tn, 16*second, "EUR", 16_000)

	lineNs := func(u *kubefairv1.UsageRecord) (ns int64) {
		for _, l := range u.Lines {
			ns += l.CPUNanoseconds
		}
		return ns
	}
	var closed kubefairv1.UsageRecord
	if err := k8s.Get(ctx(), client.ObjectKey{Name: billing.RecordName("midnight-n1", before)}, &closed); err != nil {
		t.Fatalf("the day that ended was not archived: %v", err)
	}
	open := openRecord(t, "midnight-n1")
	if !closed.Closed || closed.Period != before || lineNs(&closed) != 10*second {
		t.Fatalf("archive: closed %v, period %s, %d ns; want closed, %s, 10 s", closed.Closed, closed.Period, lineNs(&closed), before)
	}
	if open.Closed || open.Period != after || lineNs(open) != 6*second {
		t.Fatalf("open record: closed %v, period %s, %d ns; want open, %s, 6 s", open.Closed, open.Period, lineNs(open), after)
	}
	_, _, bills := billed(t, string(tn.UID))
	byPeriod := map[string]string{}
	for _, b := range bills {
		byPeriod[b.Period] = b.CPUSeconds
	}
	if len(bills) != 2 || byPeriod[before] != "10.000000000" || byPeriod[after] != "6.000000000" {
		t.Fatalf("bills by period %v, want %s: 10 s and %s: 6 s", byPeriod, before, after)
	}

	// A closed record's period never changes, an open one's never goes back.
	for _, tc := range []struct {
		what string
		rec  *kubefairv1.UsageRecord
		to   string
	}{{"a closed record moved on", &closed, after}, {"the open record moved back", open, before}} {
		tc.rec.Period = tc.to
		err := k8s.Update(ctx(), tc.rec)
		if err == nil || !strings.Contains(err.Error(), "period only moves forward, and only on a node's open record") {
			t.Fatalf("%s: the API server said %v", tc.what, err)
		}
	}

	n1.use(tn, 4*second)
	n1.write(midnight.Add(20 * time.Second))
	wantBilled(t, "20 s: the new day goes on", tn, 20*second, "EUR", 20_000)
}
