package billing

import (
	"math"
	"math/big"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	kubefairv1 "github.com/kubefair/kubefair/api/v1alpha1"
	"github.com/kubefair/kubefair/controllers/cost"
)

const sec = int64(time.Second)

// t0 is a quiet moment: 2026-11-25 10:00 UTC.
var t0 = time.Date(2026, 11, 25, 10, 0, 0, 0, time.UTC)

// ledger drives Accrue as the reconciler does: it keeps the node's open
// record and writes what Accrue returns.
type ledger struct {
	t      *testing.T
	open   *kubefairv1.UsageRecord
	closed map[string]*kubefairv1.UsageRecord // by period
	facts  Facts
	billed map[string]int64 // by tenant UID
	last   Result
}

func newLedger(t *testing.T) *ledger {
	return &ledger{t: t, billed: map[string]int64{}, closed: map[string]*kubefairv1.UsageRecord{}, facts: Facts{Now: t0.Add(time.Hour), NodeMilliCPU: 2000, Tenants: map[string]Tenant{
		"uid-a": {Name: "a", Tier: "gold", Currency: "EUR", Prices: []cost.Price{{Micros: 3_600_000}}, LastPod: t0.Add(time.Hour)},
		"uid-b": {Name: "b", LastPod: t0.Add(time.Hour)}, // spec.weight: unpriced
	}}}
}

func (l *ledger) accrue(r *kubefairv1.NodeShareReport) Result {
	l.t.Helper()
	res := Accrue(l.open, l.furthest(), r, l.facts)
	if a := res.Archive; a != nil {
		if !a.Closed || len(a.Finalizers) != 0 || a.Name != RecordName(a.Node, a.Period) {
			l.t.Fatalf("archive %s: closed=%v finalizers=%v", a.Name, a.Closed, a.Finalizers)
		}
		checkIdentity(l.t, a)
		if have := l.closed[a.Period]; have == nil || Advances(a, have) {
			l.closed[a.Period] = a
		}
	}
	if res.Write != nil {
		if res.Create && (len(res.Write.Finalizers) != 1 || res.Write.Finalizers[0] != kubefairv1.FinalizerLedgerCursor || res.Write.Name != OpenRecordName("n1")) {
			l.t.Fatalf("new record %s without the cursor finalizer: %v", res.Write.Name, res.Write.Finalizers)
		}
		checkIdentity(l.t, res.Write)
		l.open = res.Write
	}
	for _, c := range res.Billed {
		l.billed[c.TenantUID] += c.Nanoseconds
	}
	l.last = res
	return res
}

// furthest is the closed record that counted furthest.
func (l *ledger) furthest() *kubefairv1.UsageRecord {
	var out *kubefairv1.UsageRecord
	for _, c := range l.closed {
		if out == nil || Advances(c, out) {
			out = c
		}
	}
	return out
}

// checkIdentity: a record's node CPU parts add up to its capacity exactly,
// and its lines add up to what it billed the tenants.
func checkIdentity(t *testing.T, rec *kubefairv1.UsageRecord) {
	t.Helper()
	c := rec.CPU
	if sum := c.TenantsNanoseconds + c.OtherPodsNanoseconds + c.SystemNanoseconds + c.IdleNanoseconds; sum != c.CapacityNanoseconds {
		t.Fatalf("record %s: tenants+other+system+idle = %d, capacity %d (%+v)", rec.Name, sum, c.CapacityNanoseconds, c)
	}
	var lines int64
	for _, l := range rec.Lines {
		lines += l.CPUNanoseconds
	}
	if lines != c.TenantsNanoseconds {
		t.Fatalf("record %s: lines hold %d ns, tenants billed %d", rec.Name, lines, c.TenantsNanoseconds)
	}
}

// report is node n1's report at t with boot and counters "uid=ns".
func report(at time.Time, boot string, bootTime time.Time, counters ...any) *kubefairv1.NodeShareReport {
	r := &kubefairv1.NodeShareReport{ObjectMeta: metav1.ObjectMeta{Name: "n1"}, CPUs: 2, BootID: boot,
		BootTime: &metav1.Time{Time: bootTime}, ObservedTime: metav1.Time{Time: at}, Window: metav1.Duration{Duration: 10 * time.Second}}
	for i := 0; i+1 < len(counters); i += 2 {
		uid := counters[i].(string)
		var ns int64
		switch v := counters[i+1].(type) {
		case int:
			ns = int64(v)
		case int64:
			ns = v
		}
		r.Tenants = append(r.Tenants, kubefairv1.TenantShare{Name: strings.TrimPrefix(uid, "uid-"), UID: uid, CPUNanoseconds: ns})
	}
	return r
}

func withNode(r *kubefairv1.NodeShareReport, node, pods int64) *kubefairv1.NodeShareReport {
	r.Node = &kubefairv1.NodeCPU{CPUNanoseconds: node, PodsCPUNanoseconds: pods}
	return r
}

func (l *ledger) want(what string, billed map[string]int64) {
	l.t.Helper()
	for uid, ns := range billed {
		if l.billed[uid] != ns {
			l.t.Fatalf("%s: billed %s %d ns, want %d (refused %+v, reason %q)", what, uid, l.billed[uid], ns, l.last.Refused, l.last.Reason)
		}
	}
}

func (l *ledger) wantRefused(what, reason string) {
	l.t.Helper()
	got := l.last.Reason
	if got == "" && len(l.last.Refused) > 0 {
		got = l.last.Refused[0].Reason
	}
	if got != reason {
		l.t.Fatalf("%s: refused for %q, want %q (%+v)", what, got, reason, l.last)
	}
}

func TestExactlyOnceThroughRepeatsAndRestarts(t *testing.T) {
	l := newLedger(t)
	boot := t0.Add(-10 * time.Second)
	// The first report of a node bills its counters since the agent started.
	l.accrue(report(t0, "b1", boot, "uid-a", 4*sec, "uid-b", 2*sec))
	l.want("first report", map[string]int64{"uid-a": 4 * sec, "uid-b": 2 * sec})
	if !l.last.Create || l.open.Name != "n1.current" || l.open.Period != "2026-11-25" || l.open.Cursor.Through.Time != t0 {
		t.Fatalf("first record %s create=%v through %v", l.open.Name, l.last.Create, l.open.Cursor.Through)
	}
	// The same report again (a resync, a Node event, the report deleted and
	// written again with the same figures) writes nothing.
	if res := l.accrue(report(t0, "b1", boot, "uid-a", 4*sec, "uid-b", 2*sec)); res.Write != nil || len(res.Billed) > 0 {
		t.Fatalf("a repeated report wrote %+v", res)
	}
	// Report times are kept to the second: a later report within the same
	// second (the agent's last, as it stops) is counted all the same.
	l.accrue(report(t0, "b1", boot, "uid-a", 5*sec, "uid-b", 2*sec))
	l.want("same second", map[string]int64{"uid-a": 5 * sec, "uid-b": 2 * sec})
	// The next report bills only the growth.
	l.accrue(report(t0.Add(10*time.Second), "b1", boot, "uid-a", 10*sec, "uid-b", 2*sec))
	l.want("growth", map[string]int64{"uid-a": 10 * sec, "uid-b": 2 * sec})
	if len(l.open.Lines) != 2 || l.open.Lines[0].CPUNanoseconds != 10*sec || l.open.Lines[0].Cost != "0.010000" {
		t.Fatalf("lines %+v: want a's 10 s at 3.6/h = 0.01", l.open.Lines)
	}
	// The agent restarts: a new run counts from zero; the old one is retired.
	boot2 := t0.Add(15 * time.Second)
	l.accrue(report(t0.Add(20*time.Second), "b2", boot2, "uid-a", 3*sec))
	l.want("new boot", map[string]int64{"uid-a": 13 * sec})
	if l.last.RetiredBoot != "b1" || l.open.Cursor.RetiredBoots[0] != "b1" {
		t.Fatalf("retired %q, %v", l.last.RetiredBoot, l.open.Cursor.RetiredBoots)
	}
	// The old run reporting again (its last report, late) is refused.
	l.accrue(report(t0.Add(25*time.Second), "b1", boot, "uid-a", 11*sec))
	l.wantRefused("retired run", kubefairv1.ReasonStaleReport)
	l.want("retired run billed nothing", map[string]int64{"uid-a": 13 * sec})
	// An older report of the current run: out of order, refused, noted once.
	res := l.accrue(report(t0.Add(18*time.Second), "b2", boot2, "uid-a", 2*sec))
	if res.Reason != kubefairv1.ReasonStaleReport || res.Write == nil {
		t.Fatalf("out of order: %+v", res)
	}
	if again := l.accrue(report(t0.Add(18*time.Second), "b2", boot2, "uid-a", 2*sec)); again.Write != nil {
		t.Fatal("a refusal noted twice")
	}
	if r := l.open.Refusals; len(r) != 1 || r[0].Count != 2 || r[0].Reason != kubefairv1.ReasonStaleReport {
		t.Fatalf("refusals %+v: want 2 stale reports", r)
	}
	l.accrue(report(t0.Add(30*time.Second), "b2", boot2, "uid-a", 5*sec))
	l.want("after the refusals", map[string]int64{"uid-a": 15 * sec})
	if c := meta.FindStatusCondition(l.open.Conditions, kubefairv1.ConditionReportAccepted); c == nil || c.Status != metav1.ConditionTrue {
		t.Fatalf("ReportAccepted = %+v after a billed report", c)
	}
}

func TestUnknownBootIsBoundedByUptime(t *testing.T) {
	l := newLedger(t)
	boot := t0.Add(-time.Hour)
	l.accrue(report(t0, "b1", boot, "uid-a", 100*sec))
	// The ledger forgot the node (its record deleted): the agent's next
	// report is a boot never seen, billed since it started, within its
	// bound: 2 CPUs × 1 h.
	l.open = nil
	l.accrue(report(t0.Add(10*time.Second), "b1", boot, "uid-a", 110*sec))
	l.want("re-counted within the bound", map[string]int64{"uid-a": 210 * sec})
	// A counter beyond CPUs × uptime is refused, and its counters become
	// the baseline: the next report bills the growth only.
	l.open = nil
	l.accrue(report(t0.Add(20*time.Second), "b9", t0.Add(10*time.Second), "uid-a", 30*sec))
	l.wantRefused("beyond 2 CPUs × 10 s", kubefairv1.ReasonExceedsCapacity)
	l.accrue(report(t0.Add(30*time.Second), "b9", t0.Add(10*time.Second), "uid-a", 35*sec))
	l.want("growth after the refusal", map[string]int64{"uid-a": 215 * sec})
	// A new run whose start overlaps what was counted is bounded by the time
	// not counted yet: 2 CPUs × 10 s here, not its whole 20 s.
	l.accrue(report(t0.Add(40*time.Second), "b10", t0.Add(20*time.Second), "uid-a", 30*sec))
	l.wantRefused("overlapping run", kubefairv1.ReasonExceedsCapacity)
	l.accrue(report(t0.Add(50*time.Second), "b11", t0.Add(35*time.Second), "uid-a", 20*sec))
	l.want("a run within the time not counted", map[string]int64{"uid-a": 235 * sec})
}

func TestRefusals(t *testing.T) {
	for _, tc := range []struct {
		name     string
		facts    func(*Facts)
		report   *kubefairv1.NodeShareReport
		reason   string // whole report, or the first tenant refused
		billedA  int64
		unmoved  bool // the cursor stays where it was
		refusedB bool
	}{
		{name: "unknown node", facts: func(f *Facts) { f.NodeMilliCPU = 0 },
			report: report(t0.Add(10*time.Second), "b1", t0, "uid-a", 15*sec), reason: kubefairv1.ReasonUnknownNode},
		{name: "more CPUs than the Node", report: func() *kubefairv1.NodeShareReport {
			r := report(t0.Add(10*time.Second), "b1", t0, "uid-a", 15*sec)
			r.CPUs = 4
			return r
		}(), reason: kubefairv1.ReasonCPUsAboveCapacity},
		{name: "one tenant beyond 2 CPUs × 10 s", report: report(t0.Add(10*time.Second), "b1", t0, "uid-a", 15*sec, "uid-b", 31*sec),
			reason: kubefairv1.ReasonExceedsCapacity, billedA: 10 * sec, refusedB: true},
		{name: "the tenants together beyond the node", report: report(t0.Add(10*time.Second), "b1", t0, "uid-a", 20*sec, "uid-b", 15*sec),
			reason: kubefairv1.ReasonExceedsCapacity},
		{name: "a tenant that does not exist", report: report(t0.Add(10*time.Second), "b1", t0, "uid-a", 15*sec, "uid-x", 1*sec),
			reason: kubefairv1.ReasonUnknownTenant, billedA: 10 * sec},
		{name: "a tenant with no pod on the node", facts: func(f *Facts) {
			b := f.Tenants["uid-b"]
			b.LastPod = t0.Add(-time.Minute)
			f.Tenants["uid-b"] = b
		}, report: report(t0.Add(10*time.Second), "b1", t0, "uid-a", 15*sec, "uid-b", 7*sec),
			reason: kubefairv1.ReasonNoPodsOnNode, billedA: 10 * sec, refusedB: true},
		{name: "a counter that went down", report: report(t0.Add(10*time.Second), "b1", t0, "uid-a", 4*sec),
			reason: kubefairv1.ReasonCounterDecreased},
		{name: "a report from the future", facts: func(f *Facts) { f.Now = t0.Add(-5 * time.Minute) },
			report: report(t0.Add(10*time.Second), "b1", t0, "uid-a", 15*sec), reason: kubefairv1.ReasonFutureReport, unmoved: true},
		{name: "a stale report", report: report(t0.Add(-time.Second), "b1", t0, "uid-a", 15*sec),
			reason: kubefairv1.ReasonStaleReport, unmoved: true},
		{name: "pods above the node", report: withNode(report(t0.Add(10*time.Second), "b1", t0, "uid-a", 15*sec), 12*sec, 16*sec),
			reason: kubefairv1.ReasonInconsistentCounters},
		{name: "tenants above the pods", report: withNode(report(t0.Add(10*time.Second), "b1", t0, "uid-a", 15*sec), 16*sec, 8*sec),
			reason: kubefairv1.ReasonInconsistentCounters},
		{name: "the node above its CPUs", report: withNode(report(t0.Add(10*time.Second), "b1", t0, "uid-a", 15*sec), 30*sec, 16*sec),
			reason: kubefairv1.ReasonExceedsCapacity},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := newLedger(t)
			l.accrue(withNode(report(t0, "b1", t0.Add(-10*time.Second), "uid-a", 5*sec, "uid-b", 0), 6*sec, 5*sec))
			if tc.facts != nil {
				tc.facts(&l.facts)
			}
			through := l.open.Cursor.Through.Time
			l.accrue(tc.report)
			l.wantRefused(tc.name, tc.reason)
			l.want(tc.name, map[string]int64{"uid-a": 5*sec + tc.billedA, "uid-b": 0})
			if moved := l.open.Cursor.Through.Time != through; moved == tc.unmoved {
				t.Fatalf("cursor moved=%v, want %v", moved, !tc.unmoved)
			}
			c := meta.FindStatusCondition(l.open.Conditions, kubefairv1.ConditionReportAccepted)
			if c == nil || c.Status != metav1.ConditionFalse || c.Reason != tc.reason {
				t.Fatalf("ReportAccepted = %+v, want False/%s", c, tc.reason)
			}
			if tc.refusedB {
				if r := l.last.Refused; len(r) != 1 || r[0].UID != "uid-b" {
					t.Fatalf("refused %+v, want b alone", r)
				}
			}
			// A refused claim is never billed later: the next report bills
			// only what grows after it.
			next := report(tc.report.ObservedTime.Add(10*time.Second), tc.report.BootID, tc.report.BootTime.Time)
			l.facts = newLedger(t).facts
			for _, s := range tc.report.Tenants {
				if _, ok := l.facts.Tenants[s.UID]; ok {
					next.Tenants = append(next.Tenants, kubefairv1.TenantShare{Name: s.Name, UID: s.UID, CPUNanoseconds: s.CPUNanoseconds + sec})
				}
			}
			if tc.unmoved {
				next.ObservedTime.Time = through.Add(10 * time.Second)
				next.Tenants = []kubefairv1.TenantShare{{Name: "a", UID: "uid-a", CPUNanoseconds: 6 * sec}}
			}
			l.accrue(next)
			if l.last.Reason != "" || len(l.last.Refused) > 0 {
				t.Fatalf("the report after the refusal was refused: %+v", l.last)
			}
			if got, want := l.billed["uid-a"], 5*sec+tc.billedA+sec; got != want {
				t.Fatalf("after the refusal a billed %d ns, want %d", got, want)
			}
		})
	}
}

func TestHeldWhilePriceUnknown(t *testing.T) {
	l := newLedger(t)
	l.accrue(report(t0, "b1", t0.Add(-10*time.Second), "uid-a", 5*sec))
	a := l.facts.Tenants["uid-a"]
	prices := a.Prices
	a.Prices = nil // the tier is gone
	l.facts.Tenants["uid-a"] = a
	l.accrue(report(t0.Add(10*time.Second), "b1", t0.Add(-10*time.Second), "uid-a", 9*sec))
	l.accrue(report(t0.Add(20*time.Second), "b1", t0.Add(-10*time.Second), "uid-a", 12*sec))
	l.want("held", map[string]int64{"uid-a": 5 * sec})
	if c := l.open.Cursor.Tenants[0]; c.HeldNanoseconds != 7*sec || c.CPUNanoseconds != 12*sec || c.HeldSince.Time != t0 {
		t.Fatalf("cursor %+v: want 7 s held since t0, counted to 12 s", c)
	}
	// The agent restarts meanwhile: the held CPU waits on, the new run
	// counts from zero.
	l.accrue(report(t0.Add(25*time.Second), "b2", t0.Add(22*time.Second), "uid-a", 1*sec))
	l.want("still held", map[string]int64{"uid-a": 5 * sec})
	a.Prices = prices
	l.facts.Tenants["uid-a"] = a
	l.accrue(report(t0.Add(30*time.Second), "b2", t0.Add(22*time.Second), "uid-a", 3*sec))
	l.want("released", map[string]int64{"uid-a": 15 * sec})
	if ln := l.open.Lines; len(ln) != 1 || ln[0].From.Time != t0.Add(-10*time.Second) || ln[0].To.Time != t0.Add(30*time.Second) {
		t.Fatalf("lines %+v: want one from the boot to the release", ln)
	}
}

func TestPriceInForceWhenUsed(t *testing.T) {
	l := newLedger(t)
	a := l.facts.Tenants["uid-a"]
	// 3.6/h until t0+5s, then 7.2/h: a window of 10 s straddling the change
	// bills half at each.
	a.Prices = []cost.Price{{Micros: 3_600_000, Since: t0.Add(-time.Hour)}, {Micros: 7_200_000, Since: t0.Add(5 * time.Second)}}
	l.facts.Tenants["uid-a"] = a
	l.accrue(report(t0, "b1", t0, "uid-a", 0))
	l.accrue(report(t0.Add(10*time.Second), "b1", t0, "uid-a", 10*sec))
	if len(l.open.Lines) != 2 {
		t.Fatalf("lines %+v: want one per price", l.open.Lines)
	}
	for _, want := range []struct {
		price string
		ns    int64
		cost  string
	}{{"3.6", 5 * sec, "0.005000"}, {"7.2", 5 * sec, "0.010000"}} {
		found := false
		for _, ln := range l.open.Lines {
			if ln.PricePerCPUHour == want.price {
				found = true
				if ln.CPUNanoseconds != want.ns || ln.Cost != want.cost || ln.Currency != "EUR" || ln.Tier != "gold" {
					t.Errorf("line at %s: %+v, want %d ns costing %s EUR", want.price, ln, want.ns, want.cost)
				}
			}
		}
		if !found {
			t.Errorf("no line at price %s: %+v", want.price, l.open.Lines)
		}
	}
	if c := l.last.Billed[0].CostMicros; c.Cmp(big.NewInt(15_000)) != 0 {
		t.Errorf("charge %s micros, want 15000", c)
	}
}

func TestPeriodsAreArchived(t *testing.T) {
	l := newLedger(t)
	day := time.Date(2026, 11, 25, 23, 59, 50, 0, time.UTC)
	l.facts.Now = day.Add(time.Hour)
	for uid, tn := range l.facts.Tenants {
		tn.LastPod = l.facts.Now
		l.facts.Tenants[uid] = tn
	}
	l.accrue(report(day, "b1", day.Add(-10*time.Second), "uid-a", 4*sec))
	// A window ending after midnight goes to the next day; the day that
	// ended is archived as it was, and the open record moves on.
	l.accrue(report(day.Add(20*time.Second), "b1", day.Add(-10*time.Second), "uid-a", 9*sec))
	a := l.last.Archive
	if a == nil || a.Name != "n1.2026-11-25" || a.Lines[0].CPUNanoseconds != 4*sec || l.last.Create {
		t.Fatalf("archive %+v, create %v", a, l.last.Create)
	}
	if l.open.Period != "2026-11-26" || l.open.Lines[0].CPUNanoseconds != 5*sec || l.open.Lines[0].From.Time != day {
		t.Fatalf("the open record: period %s lines %+v", l.open.Period, l.open.Lines)
	}
	// The open record's write lost (a conflict, a crash): the same report
	// archives the same day again, which replaces nothing, and the open
	// record moves on once.
	before, billed := l.open, l.billed["uid-a"]
	l.billed["uid-a"] = 4 * sec // the write that billed the window was lost
	l.open = l.closed["2026-11-25"].DeepCopy()
	l.open.Closed, l.open.Name = false, OpenRecordName("n1")
	l.accrue(report(day.Add(20*time.Second), "b1", day.Add(-10*time.Second), "uid-a", 9*sec))
	if Advances(l.last.Archive, l.closed["2026-11-25"]) || l.open.Lines[0].CPUNanoseconds != before.Lines[0].CPUNanoseconds {
		t.Fatalf("a repeated hand-over: archive advances=%v, lines %+v", Advances(l.last.Archive, l.closed["2026-11-25"]), l.open.Lines)
	}
	if l.billed["uid-a"] != billed {
		t.Fatalf("the repeated hand-over billed %d, the lost one %d", l.billed["uid-a"], billed)
	}
	// The open record deleted (kubectl delete usagerecords --all): it is
	// archived first, and the next report continues from the archive —
	// nothing counted again, nothing lost.
	l.closed[l.open.Period] = Archive(l.open)
	l.open = nil
	l.accrue(report(day.Add(30*time.Second), "b1", day.Add(-10*time.Second), "uid-a", 12*sec))
	if !l.last.Create || l.open.Period != "2026-11-26" || l.open.Lines[0].CPUNanoseconds != 8*sec {
		t.Fatalf("continued from the archive: %+v", l.open)
	}
	l.want("across midnight and a deletion", map[string]int64{"uid-a": 12 * sec})
}

func TestReconciliation(t *testing.T) {
	l := newLedger(t)
	l.accrue(withNode(report(t0, "b1", t0.Add(-10*time.Second), "uid-a", 6*sec, "uid-b", 2*sec), 12*sec, 10*sec))
	l.accrue(withNode(report(t0.Add(10*time.Second), "b1", t0.Add(-10*time.Second), "uid-a", 12*sec, "uid-b", 4*sec, "uid-x", sec), 25*sec, 21*sec))
	c := l.open.CPU
	// 20 s × 2 CPUs = 40 s: tenants 16, other pods 21−16 = 5 (the unknown
	// tenant's second among them), system 4, idle 15.
	want := kubefairv1.NodeCPUTime{CapacityNanoseconds: 40 * sec, TenantsNanoseconds: 16 * sec, OtherPodsNanoseconds: 5 * sec,
		SystemNanoseconds: 4 * sec, IdleNanoseconds: 15 * sec, RefusedNanoseconds: sec}
	if c != want {
		t.Fatalf("cpu %+v, want %+v", c, want)
	}
}

func TestTenantCreatedAgainIsANewCounter(t *testing.T) {
	l := newLedger(t)
	l.accrue(report(t0, "b1", t0.Add(-10*time.Second), "uid-a", 8*sec))
	// Tenant a deleted: the agent stops counting it (final) and counts the
	// new a (another UID) from zero.
	delete(l.facts.Tenants, "uid-a")
	l.facts.Tenants["uid-a2"] = Tenant{Name: "a", Tier: "gold", Currency: "EUR", Prices: []cost.Price{{Micros: 3_600_000}}, LastPod: l.facts.Now}
	r := report(t0.Add(10*time.Second), "b1", t0.Add(-10*time.Second), "uid-a", 8*sec, "uid-a2", 3*sec)
	r.Tenants[0].Final = true
	l.accrue(r)
	l.want("new tenant", map[string]int64{"uid-a": 8 * sec, "uid-a2": 3 * sec})
	if len(l.last.Refused) != 0 {
		t.Fatalf("the old tenant's unchanged final counter was refused: %+v", l.last.Refused)
	}
}

func TestNames(t *testing.T) {
	if got := RecordName("node-1", "2026-11-25"); got != "node-1.2026-11-25" {
		t.Errorf("RecordName = %q", got)
	}
	if got := BillName("shop", "0F1E2D3C-aaaa", "2026-11-25"); got != "shop.2026-11-25.0f1e2d3c" {
		t.Errorf("BillName = %q", got)
	}
	long := strings.Repeat("n.", 130) + "x"
	got := RecordName(long, "2026-11-25")
	if len(got) > 253 || !strings.HasSuffix(got, ".2026-11-25") || got == RecordName(long+"y", "2026-11-25") {
		t.Errorf("RecordName of a long name = %q (%d)", got, len(got))
	}
	if Period(time.Date(2026, 11, 25, 23, 0, 0, 0, time.FixedZone("", -3*3600))) != "2026-11-26" {
		t.Error("periods are UTC days")
	}
}

func TestBoundsDoNotOverflow(t *testing.T) {
	if b := bound(100_000_000, 24*time.Hour); b <= 0 || b == math.MaxInt64 {
		t.Fatalf("100000 CPUs × 1 day: bound %d", b)
	}
	if b := bound(100_000_000, 30*24*time.Hour); b != math.MaxInt64 {
		t.Fatalf("100000 CPUs × 30 days: bound %d, want saturated", b)
	}
	if _, ok := addCPU(kubefairv1.NodeCPUTime{CapacityNanoseconds: math.MaxInt64 - 1}, kubefairv1.NodeCPUTime{CapacityNanoseconds: 2}); ok {
		t.Fatal("an overflowing total was accepted")
	}
	if _, ok := mergeLines([]kubefairv1.ChargeLine{{TenantUID: "u", PricePerCPUHour: "1", CPUNanoseconds: math.MaxInt64 - 1}},
		[]kubefairv1.ChargeLine{{TenantUID: "u", PricePerCPUHour: "1", CPUNanoseconds: 2}}); ok {
		t.Fatal("an overflowing line was accepted")
	}
}

// TestImpossibleTotalIsARefusal: a total that int64 nanoseconds cannot
// hold refuses the report with a reason (a condition), it is no error.
func TestImpossibleTotalIsARefusal(t *testing.T) {
	l := newLedger(t)
	l.accrue(report(t0, "b1", t0.Add(-10*time.Second), "uid-a", 5*sec))
	l.open.CPU.CapacityNanoseconds = math.MaxInt64 - sec // a record that ran for ages
	l.open.CPU.IdleNanoseconds = l.open.CPU.CapacityNanoseconds - l.open.CPU.TenantsNanoseconds
	l.accrue(report(t0.Add(10*time.Second), "b1", t0.Add(-10*time.Second), "uid-a", 10*sec))
	l.wantRefused("capacity past 2^63", kubefairv1.ReasonTotalOutOfRange)
	if len(l.last.Billed) != 0 || l.open.Lines[0].CPUNanoseconds != 5*sec {
		t.Fatalf("billed %+v, lines %+v: want nothing more", l.last.Billed, l.open.Lines)
	}
	if c := meta.FindStatusCondition(l.open.Conditions, kubefairv1.ConditionReportAccepted); c.Reason != kubefairv1.ReasonTotalOutOfRange {
		t.Fatalf("ReportAccepted = %+v", c)
	}
}
