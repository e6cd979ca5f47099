// Package billing is kubefair's ledger (docs/controller.md §Billing): given
// a node's open UsageRecord, the node's latest NodeShareReport and what the
// cluster says about the node and the tenants the report names, Accrue
// decides what the report bills and what it refuses, and returns the
// records to write. It does no I/O — the reconciler reads, Accrue decides,
// the reconciler writes — so every rule here is unit-tested without an API
// server.
//
// Exactly once rests on one rule: a node's cursor (how far its cumulative
// counters were counted) and the amounts they bill change in the same
// write of the same object — the node's open UsageRecord, whose name is
// fixed (<node>.current) — guarded by its resourceVersion. A report is
// counted from the cursor, never from anything the report or the Tenant
// says was counted before. A period that ends is archived as a closed
// UsageRecord (<node>.<day>) before the open record moves on, and an
// archive is only ever replaced by one that counts further, so a write
// computed from a cache that is behind can fail, but never count twice.
package billing

import (
	"fmt"
	"hash/fnv"
	"math"
	"math/big"
	"slices"
	"sort"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	kubefairv1 "github.com/kubefair/kubefair/api/v1alpha1"
	"github.com/kubefair/kubefair/controllers/cost"
)

const (
	// MaxClockSkew is how far ahead of the controller's clock a report may
	// be observed; later ones are refused, so that a report from a clock
	// far ahead cannot make every later report stale.
	MaxClockSkew = 2 * time.Minute
	// SlackPercent and SlackPerCPU are what CPU in a window may exceed the
	// node's CPUs × its length by: report times are kept to the second, so
	// a window's length is known within a second, and the agent reads its
	// counters a few milliseconds after the window's ends.
	SlackPercent = 2
	SlackPerCPU  = 1500 * time.Millisecond
	// MaxRetiredBoots is how many earlier agent runs a record remembers
	// (and refuses reports from).
	MaxRetiredBoots = 8
)

// Facts are what the cluster says about a report, as the reconciler read
// them.
type Facts struct {
	// Now is the controller's clock.
	Now time.Time
	// NodeMilliCPU is the Node's CPU capacity in millicores; 0 when no
	// Node of the report's name exists.
	NodeMilliCPU int64
	// Tenants are the existing tenants the report names, by UID.
	Tenants map[string]Tenant
}

// Tenant is what billing needs to know of one Tenant.
type Tenant struct {
	Name string
	// Tier is spec.tier; empty for a tenant with spec.weight (billed at
	// price 0, as CPU with no currency).
	Tier     string
	Currency string
	// Prices is the tier's price timeline, oldest first. Empty with a Tier
	// set means the price is unknown (the tier is missing): the tenant's
	// counter is held, and billed when the tier is back.
	Prices []cost.Price
	// LastPod is the last time the tenant had a pod on the node (Now when
	// it has one); zero when it never had one the controller saw.
	LastPod time.Time
}

// Charge is CPU billed to one tenant by one report, for metrics and events.
type Charge struct {
	TenantUID, Tenant, Currency string
	Nanoseconds                 int64
	CostMicros                  *big.Int
}

// Result is what Accrue decided.
type Result struct {
	// Archive, when set, is a period that ended, to write first: created,
	// or replacing an archive of the same period that counted less.
	Archive *kubefairv1.UsageRecord
	// Write is the node's open record to create (Create) or update; nil
	// when there is nothing to write (a report already counted).
	Write  *kubefairv1.UsageRecord
	Create bool
	// Billed are the charges the report adds once Write is written.
	Billed []Charge
	// Refused are the tenants' counters refused; Reason is set when the
	// whole report was refused, with Message.
	Refused []kubefairv1.RefusedTenant
	Reason  string
	Message string
	// RetiredBoot is the agent run the report's run replaced, if any.
	RetiredBoot string
	// CPU is how the report's window split the node's CPU time.
	CPU kubefairv1.NodeCPUTime
}

// Period is the billing period t falls in: its UTC day.
func Period(t time.Time) string { return t.UTC().Format(time.DateOnly) }

// OpenRecordName is the name of a node's open UsageRecord: the cursor and
// the current period.
func OpenRecordName(node string) string { return objectName(node, ".current") }

// RecordName is the name of a node's closed UsageRecord of a period.
func RecordName(node, period string) string { return objectName(node, "."+period) }

// BillName is the name of a tenant's TenantBill for a period.
func BillName(tenant, uid, period string) string {
	return objectName(tenant, "."+period+"."+strings.ToLower(uid[:min(8, len(uid))]))
}

// objectName joins a name and a suffix into a DNS subdomain of at most 253
// characters, shortening the name (with a hash of it) when needed.
func objectName(name, suffix string) string {
	if len(name)+len(suffix) <= 253 {
		return name + suffix
	}
	h := fnv.New32a()
	_, _ = h.Write([]byte(name))
	short := strings.TrimRight(name[:253-len(suffix)-9], ".-")
	return fmt.Sprintf("%s-%08x%s", short, h.Sum32(), suffix)
}

// Accrue counts a node's report against its open UsageRecord (nil when it
// has none). last is the node's closed record that counted furthest (nil
// when none): an open record deleted is continued from it. See
// docs/controller.md §Billing for the rules.
func Accrue(open, last *kubefairv1.UsageRecord, r *kubefairv1.NodeShareReport, f Facts) Result {
	obs := r.ObservedTime.Time
	rec, create := open.DeepCopy(), false
	if open == nil {
		rec, create = continueFrom(r.Name, last, Period(obs)), true
	}
	cur := *rec.Cursor.DeepCopy()

	// Reports that move nothing: one already counted, a stale one, one of
	// an agent run already replaced, one from the future.
	if cur.Through != nil && !obs.After(cur.Through.Time) {
		// Report times are kept to the second: a later report may share
		// the second of the last one counted — if it counts no less, or
		// comes from a new run of the agent.
		sameSecond, sameBoot := obs.Equal(cur.Through.Time), r.BootID == cur.BootID
		grown, same := compare(&cur, r)
		switch {
		case sameSecond && sameBoot && same:
			return Result{} // counted already
		case !sameSecond || (sameBoot && !grown):
			return refuseUnmoved(open, last, r, f, kubefairv1.ReasonStaleReport,
				fmt.Sprintf("observed at %s, not after %s, up to which node %s was already counted", stamp(obs), stamp(cur.Through.Time), r.Name))
		}
	}
	if slices.Contains(cur.RetiredBoots, r.BootID) {
		return refuseUnmoved(open, last, r, f, kubefairv1.ReasonStaleReport,
			fmt.Sprintf("from agent run %s, which run %s replaced on node %s", r.BootID, cur.BootID, r.Name))
	}
	if obs.After(f.Now.Add(MaxClockSkew)) {
		return refuseUnmoved(open, last, r, f, kubefairv1.ReasonFutureReport,
			fmt.Sprintf("observed at %s, more than %s after the controller's clock (%s)", stamp(obs), MaxClockSkew, stamp(f.Now)))
	}

	// The window the report covers: since the cursor, or for a run not
	// seen before, since it started counting — but never before what was
	// already counted on the node.
	a := accrual{report: r, facts: f, next: cur}
	if cur.Through != nil {
		a.from = cur.Through.Time
	}
	if r.BootID != cur.BootID {
		bootTime := obs.Add(-r.Window.Duration)
		if r.BootTime != nil {
			bootTime = r.BootTime.Time
		}
		if bootTime.After(a.from) {
			a.from = bootTime
		}
		if cur.BootID != "" {
			a.retired = cur.BootID
			a.next.RetiredBoots = append(a.next.RetiredBoots, cur.BootID)
			if n := len(a.next.RetiredBoots); n > MaxRetiredBoots {
				a.next.RetiredBoots = a.next.RetiredBoots[n-MaxRetiredBoots:]
			}
		}
		a.next.BootID, a.next.BootTime = r.BootID, &metav1.Time{Time: bootTime}
		a.next.Node = nil
		// The new run counts from zero; CPU held for a price goes on waiting.
		held := a.next.Tenants[:0:0]
		for _, c := range a.next.Tenants {
			if c.HeldNanoseconds > 0 {
				held = append(held, kubefairv1.TenantCounter{UID: c.UID, At: metav1.Time{Time: a.from}, HeldNanoseconds: c.HeldNanoseconds,
					HeldSince: c.HeldSince, HeldUntil: c.HeldUntil})
			}
		}
		a.next.Tenants = held
	}
	a.count()

	res := Result{Create: create}
	if period := Period(obs); period > rec.Period { // a new period: archive the one that ended
		if !create {
			res.Archive = closedCopy(rec)
		}
		*rec = kubefairv1.UsageRecord{ObjectMeta: rec.ObjectMeta, Node: rec.Node, Period: period, Cursor: rec.Cursor}
	}
	a.apply(rec)
	res.Write, res.Billed, res.Refused, res.Reason, res.Message, res.RetiredBoot = rec, a.billed, a.refused, a.reason, a.message, a.retired
	if a.reason != kubefairv1.ReasonTotalOutOfRange {
		res.CPU = a.cpu
	}
	return res
}

// Archive is the closed copy of a node's open record, to write when the
// open record is being deleted. It holds the node's cursor then, so it
// keeps the cursor finalizer until a new open record continues from it.
func Archive(open *kubefairv1.UsageRecord) *kubefairv1.UsageRecord {
	c := closedCopy(open)
	c.Finalizers = []string{kubefairv1.FinalizerLedgerCursor}
	return c
}

// Advances tells whether a record counted further than another of the
// same node (and so a closed one may replace it).
func Advances(next, existing *kubefairv1.UsageRecord) bool {
	return next.Cursor.Sequence > existing.Cursor.Sequence
}

func closedCopy(open *kubefairv1.UsageRecord) *kubefairv1.UsageRecord {
	c := &kubefairv1.UsageRecord{ObjectMeta: metav1.ObjectMeta{Name: RecordName(open.Node, open.Period)}}
	c.Node, c.Period, c.Closed = open.Node, open.Period, true
	open.Cursor.DeepCopyInto(&c.Cursor)
	c.Lines = append([]kubefairv1.ChargeLine(nil), open.Lines...)
	c.CPU = open.CPU
	c.Refusals = append([]kubefairv1.Refusal(nil), open.Refusals...)
	c.LastReport = open.LastReport.DeepCopy()
	c.Conditions = append([]metav1.Condition(nil), open.Conditions...)
	return c
}

// continueFrom makes a node's open record: empty for a node never seen,
// else from its closed record that counted furthest — the whole of it when
// it is of the current period (its open record was deleted today), its
// cursor otherwise.
func continueFrom(node string, last *kubefairv1.UsageRecord, period string) *kubefairv1.UsageRecord {
	rec := &kubefairv1.UsageRecord{ObjectMeta: metav1.ObjectMeta{Name: OpenRecordName(node), Finalizers: []string{kubefairv1.FinalizerLedgerCursor}},
		Node: node, Period: period}
	if last == nil {
		return rec
	}
	last.Cursor.DeepCopyInto(&rec.Cursor)
	if last.Period >= period {
		c := closedCopy(last)
		rec.Period, rec.Lines, rec.CPU, rec.Refusals, rec.LastReport, rec.Conditions = c.Period, c.Lines, c.CPU, c.Refusals, c.LastReport, c.Conditions
	}
	return rec
}

// compare tells whether a report of the cursor's boot has every counter
// at least as far as the cursor (grown), and exactly as far (same).
func compare(cur *kubefairv1.LedgerCursor, r *kubefairv1.NodeShareReport) (grown, same bool) {
	have := map[string]kubefairv1.TenantCounter{}
	for _, c := range cur.Tenants {
		if c.CPUNanoseconds > 0 { // (CPU held from an earlier run has no counter)
			have[c.UID] = c
		}
	}
	grown, same = true, true
	named := 0
	for _, s := range r.Tenants {
		c, ok := have[s.UID]
		if ok {
			named++
		}
		grown = grown && s.CPUNanoseconds >= c.CPUNanoseconds
		same = same && s.CPUNanoseconds == c.CPUNanoseconds && s.Final == c.Final
	}
	if named < len(have) { // a counter the cursor has is missing: an older report
		grown, same = false, false
	}
	if r.Node != nil {
		n := kubefairv1.NodeCPU{}
		if cur.Node != nil {
			n = *cur.Node
		}
		grown = grown && r.Node.CPUNanoseconds >= n.CPUNanoseconds && r.Node.PodsCPUNanoseconds >= n.PodsCPUNanoseconds
		same = same && *r.Node == n
	}
	return grown, same
}

// accrual is one report being counted.
type accrual struct {
	report *kubefairv1.NodeShareReport
	facts  Facts
	next   kubefairv1.LedgerCursor // the cursor after the report
	from   time.Time               // the report window's start
	// What the report adds: charge segments by tenant, node CPU parts.
	lines   []kubefairv1.ChargeLine
	cpu     kubefairv1.NodeCPUTime
	billed  []Charge
	refused []kubefairv1.RefusedTenant
	reason  string // the whole report refused
	message string
	retired string
}

// decision is what becomes of one tenant's counter.
type decision struct {
	share  kubefairv1.TenantShare
	prev   kubefairv1.TenantCounter
	delta  int64
	reason string // refused, when set
	msg    string
	held   bool // no price: the CPU is held
}

// count decides every tenant's counter, checks the report as a whole, and
// prices what it accepts.
func (a *accrual) count() {
	r, f := a.report, a.facts
	obs := r.ObservedTime.Time
	window := obs.Sub(a.from)
	prev := map[string]kubefairv1.TenantCounter{}
	for _, c := range a.next.Tenants {
		prev[c.UID] = c
	}

	// The report as a whole: its node, and its CPUs against the Node's.
	switch {
	case f.NodeMilliCPU <= 0:
		a.reason, a.message = kubefairv1.ReasonUnknownNode, fmt.Sprintf("no Node named %s with a CPU capacity exists", r.Name)
	case int64(r.CPUs)*1000 > f.NodeMilliCPU:
		a.reason, a.message = kubefairv1.ReasonCPUsAboveCapacity,
			fmt.Sprintf("the report says %d CPUs; Node %s has %s", r.CPUs, r.Name, milliString(f.NodeMilliCPU))
	}

	// Each tenant's counter against its own last count.
	shares := append([]kubefairv1.TenantShare(nil), r.Tenants...)
	sort.Slice(shares, func(i, j int) bool { return shares[i].UID < shares[j].UID })
	decisions := make([]decision, 0, len(shares))
	var sum int64 // accepted CPU of this report's window, for the node-wide bound
	for _, s := range shares {
		d := decision{share: s, prev: kubefairv1.TenantCounter{UID: s.UID, At: metav1.Time{Time: a.from}}}
		if p, ok := prev[s.UID]; ok {
			d.prev = p
		}
		d.delta = s.CPUNanoseconds - d.prev.CPUNanoseconds
		t, known := f.Tenants[s.UID]
		since := d.prev.At.Time
		switch {
		case d.delta < 0:
			d.reason, d.msg = kubefairv1.ReasonCounterDecreased,
				fmt.Sprintf("tenant %s's counter went from %d to %d ns within agent run %s", s.Name, d.prev.CPUNanoseconds, s.CPUNanoseconds, r.BootID)
		case d.delta == 0:
		case !known:
			d.reason, d.msg = kubefairv1.ReasonUnknownTenant, fmt.Sprintf("no Tenant %s with UID %s exists", s.Name, s.UID)
		case t.LastPod.Before(since):
			d.reason, d.msg = kubefairv1.ReasonNoPodsOnNode,
				fmt.Sprintf("tenant %s had no pod on node %s since %s", s.Name, r.Name, stamp(since))
		case d.delta > bound(f.NodeMilliCPU, obs.Sub(since)):
			d.reason, d.msg = kubefairv1.ReasonExceedsCapacity,
				fmt.Sprintf("tenant %s: %s CPU-seconds in %s on %s CPUs", s.Name, seconds(d.delta), obs.Sub(since).Round(time.Millisecond), milliString(f.NodeMilliCPU))
		}
		d.held = known && t.Tier != "" && len(t.Prices) == 0
		if d.reason == "" && d.delta > 0 {
			sum += d.delta
		}
		decisions = append(decisions, d)
	}

	// The tenants together, and the node's own counters.
	if a.reason == "" && sum > bound(f.NodeMilliCPU, window) {
		a.reason, a.message = kubefairv1.ReasonExceedsCapacity,
			fmt.Sprintf("the tenants used %s CPU-seconds in %s on %s CPUs", seconds(sum), window.Round(time.Millisecond), milliString(f.NodeMilliCPU))
	}
	var nodeD, podsD int64
	if n := r.Node; n != nil && a.reason == "" {
		var p kubefairv1.NodeCPU
		if a.next.Node != nil {
			p = *a.next.Node
		}
		nodeD, podsD = n.CPUNanoseconds-p.CPUNanoseconds, n.PodsCPUNanoseconds-p.PodsCPUNanoseconds
		slack := bound(f.NodeMilliCPU, window) - capacity(f.NodeMilliCPU, window)
		switch {
		case nodeD < 0 || podsD < 0:
			a.reason, a.message = kubefairv1.ReasonInconsistentCounters, "the node's counters went down within one agent run"
		case nodeD > bound(f.NodeMilliCPU, window):
			a.reason, a.message = kubefairv1.ReasonExceedsCapacity,
				fmt.Sprintf("the node used %s CPU-seconds in %s on %s CPUs", seconds(nodeD), window.Round(time.Millisecond), milliString(f.NodeMilliCPU))
		case podsD > nodeD+slack:
			a.reason, a.message = kubefairv1.ReasonInconsistentCounters,
				fmt.Sprintf("the pods used %s CPU-seconds, more than the whole node's %s", seconds(podsD), seconds(nodeD))
		case sum > podsD+slack:
			a.reason, a.message = kubefairv1.ReasonInconsistentCounters,
				fmt.Sprintf("the tenants used %s CPU-seconds, more than all pods' %s", seconds(sum), seconds(podsD))
		}
	}

	// Bill what is accepted, hold what has no price yet, and move every
	// counter. CPU held earlier is billed, over the time it was used, once
	// the tenant has a price again.
	a.next.Tenants = a.next.Tenants[:0:0]
	var billed, refused int64
	for _, d := range decisions {
		s, t := d.share, f.Tenants[d.share.UID]
		next := kubefairv1.TenantCounter{UID: s.UID, CPUNanoseconds: s.CPUNanoseconds, At: r.ObservedTime, Final: s.Final,
			HeldNanoseconds: d.prev.HeldNanoseconds, HeldSince: d.prev.HeldSince, HeldUntil: d.prev.HeldUntil}
		if a.reason != "" && d.reason == "" && d.delta > 0 {
			d.reason, d.msg = a.reason, a.message
		}
		if a.reason == "" && next.HeldNanoseconds > 0 && !d.held && f.Tenants[s.UID].Name != "" {
			a.releaseHeld(t, s, &next)
			billed += d.prev.HeldNanoseconds
		}
		switch {
		case d.reason != "":
			a.refused = append(a.refused, kubefairv1.RefusedTenant{UID: s.UID, Tenant: s.Name, Reason: d.reason, Message: d.msg, CPUNanoseconds: max(d.delta, 0)})
			refused += max(d.delta, 0)
		case d.delta == 0:
		case d.held:
			if next.HeldNanoseconds == 0 {
				next.HeldSince = d.prev.At.DeepCopy()
			}
			next.HeldNanoseconds += d.delta
			next.HeldUntil = r.ObservedTime.DeepCopy()
		default:
			a.charge(t, s, d.prev.At.Time, obs, d.delta)
			billed += d.delta
		}
		a.next.Tenants = append(a.next.Tenants, next)
	}
	// CPU held for a tenant the report no longer names is billed once the
	// tenant has a price, and waits until then (it is dropped when the
	// tenant no longer exists).
	named := map[string]bool{}
	for _, s := range r.Tenants {
		named[s.UID] = true
	}
	for uid, c := range prev {
		t, known := f.Tenants[uid]
		switch {
		case named[uid] || c.HeldNanoseconds == 0 || !known:
		case a.reason == "" && (t.Tier == "" || len(t.Prices) > 0):
			billed += c.HeldNanoseconds
			a.releaseHeld(t, kubefairv1.TenantShare{UID: uid, Name: t.Name}, &c)
		default:
			a.next.Tenants = append(a.next.Tenants, c)
		}
	}
	sort.Slice(a.next.Tenants, func(i, j int) bool { return a.next.Tenants[i].UID < a.next.Tenants[j].UID })
	a.cpu.RefusedNanoseconds = refused
	if a.reason == "" { // accepted windows make up the node's CPU time
		a.cpu.CapacityNanoseconds = capacity(f.NodeMilliCPU, window)
		a.cpu.TenantsNanoseconds = billed
		if r.Node != nil {
			a.cpu.OtherPodsNanoseconds, a.cpu.SystemNanoseconds, a.cpu.IdleNanoseconds = podsD-billed, nodeD-podsD, a.cpu.CapacityNanoseconds-nodeD
		} else {
			a.cpu.IdleNanoseconds = a.cpu.CapacityNanoseconds - billed
		}
	}
	a.next.Through = &metav1.Time{Time: obs}
	a.next.Sequence++
	if r.Node != nil {
		n := *r.Node
		a.next.Node = &n
	}
}

// releaseHeld bills a counter's held CPU over the time it was used.
func (a *accrual) releaseHeld(t Tenant, s kubefairv1.TenantShare, c *kubefairv1.TenantCounter) {
	a.charge(t, s, c.HeldSince.Time, c.HeldUntil.Time, c.HeldNanoseconds)
	c.HeldNanoseconds, c.HeldSince, c.HeldUntil = 0, nil, nil
}

// charge prices one tenant's accepted CPU over [from, to] at the prices in
// force during it.
func (a *accrual) charge(t Tenant, s kubefairv1.TenantShare, from, to time.Time, ns int64) {
	prices := t.Prices
	if t.Tier == "" {
		prices = []cost.Price{{}}
	}
	c := Charge{TenantUID: s.UID, Tenant: t.Name, Currency: t.Currency, Nanoseconds: ns, CostMicros: new(big.Int)}
	for _, seg := range cost.Spread(ns, from, to, prices) {
		a.lines = append(a.lines, kubefairv1.ChargeLine{TenantUID: s.UID, Tenant: t.Name, Tier: t.Tier, Currency: t.Currency,
			PricePerCPUHour: cost.FormatPrice(seg.Micros), CPUNanoseconds: seg.Nanoseconds,
			From: metav1.Time{Time: seg.From}, To: metav1.Time{Time: seg.To}})
		c.CostMicros.Add(c.CostMicros, cost.Cost(big.NewInt(seg.Nanoseconds), seg.Micros))
	}
	a.billed = append(a.billed, c)
}

// apply writes the accrual into rec: the cursor, the lines, the node's CPU
// time, the refusals and the outcome. A total that int64 nanoseconds
// cannot hold refuses the report instead (it cannot happen below 100000
// CPUs a node and one day a record, the CRDs' bounds).
func (a *accrual) apply(rec *kubefairv1.UsageRecord) {
	lines, linesOK := mergeLines(rec.Lines, a.lines)
	cpu, cpuOK := addCPU(rec.CPU, a.cpu)
	if !linesOK || !cpuOK {
		a.reason, a.message = kubefairv1.ReasonTotalOutOfRange, "the period's totals would exceed 2^63 nanoseconds"
		for _, c := range a.billed {
			a.refused = append(a.refused, kubefairv1.RefusedTenant{UID: c.TenantUID, Tenant: c.Tenant, Reason: a.reason, Message: a.message, CPUNanoseconds: c.Nanoseconds})
		}
		a.billed, lines, cpu = nil, rec.Lines, rec.CPU
	}
	rec.Cursor = a.next
	rec.Lines, rec.CPU = lines, cpu
	out := &kubefairv1.ReportOutcome{BootID: a.report.BootID, ObservedTime: a.report.ObservedTime, Refused: a.refused, Reason: a.reason}
	for _, c := range a.billed {
		out.BilledNanoseconds += c.Nanoseconds
	}
	rec.LastReport = out
	recordRefusals(rec, a.report, a.refused, a.reason, a.message)
	setAccepted(rec, a.report, a.reason, a.message, a.refused, out.BilledNanoseconds, a.facts.Now)
}

// refuseUnmoved refuses a report without moving the cursor: it is noted in
// the open record (once; in a new one of the current period when the node
// has none), and nothing else changes.
func refuseUnmoved(open, last *kubefairv1.UsageRecord, r *kubefairv1.NodeShareReport, f Facts, reason, msg string) Result {
	var refused []kubefairv1.RefusedTenant
	for _, s := range r.Tenants {
		refused = append(refused, kubefairv1.RefusedTenant{UID: s.UID, Tenant: s.Name, Reason: reason, Message: msg})
	}
	res := Result{Refused: refused, Reason: reason, Message: msg}
	rec := open.DeepCopy()
	if open == nil {
		rec, res.Create = continueFrom(r.Name, last, Period(f.Now)), true
	} else if l := open.LastReport; l != nil && l.BootID == r.BootID && l.ObservedTime.Equal(&r.ObservedTime) && l.Reason == reason {
		return Result{} // noted already
	}
	rec.LastReport = &kubefairv1.ReportOutcome{BootID: r.BootID, ObservedTime: r.ObservedTime, Refused: refused, Reason: reason}
	recordRefusals(rec, r, nil, reason, msg)
	setAccepted(rec, r, reason, msg, nil, 0, f.Now)
	res.Write = rec
	return res
}

// recordRefusals counts a report's refusals in its record: once for a
// whole report, else once per tenant refused.
func recordRefusals(rec *kubefairv1.UsageRecord, r *kubefairv1.NodeShareReport, refused []kubefairv1.RefusedTenant, whole, msg string) {
	note := func(reason, msg string) {
		for i := range rec.Refusals {
			if rec.Refusals[i].Reason == reason {
				rec.Refusals[i].Count++
				rec.Refusals[i].Last, rec.Refusals[i].Message = r.ObservedTime, msg
				return
			}
		}
		rec.Refusals = append(rec.Refusals, kubefairv1.Refusal{Reason: reason, Count: 1, Last: r.ObservedTime, Message: msg})
		sort.Slice(rec.Refusals, func(i, j int) bool { return rec.Refusals[i].Reason < rec.Refusals[j].Reason })
	}
	if whole != "" {
		note(whole, msg)
		return
	}
	for _, t := range refused {
		note(t.Reason, t.Message)
	}
}

// setAccepted sets the record's ReportAccepted condition from a report's
// outcome.
func setAccepted(rec *kubefairv1.UsageRecord, r *kubefairv1.NodeShareReport, reason, msg string, refused []kubefairv1.RefusedTenant, billed int64, now time.Time) {
	c := metav1.Condition{Type: kubefairv1.ConditionReportAccepted, Status: metav1.ConditionTrue, Reason: kubefairv1.ReasonBilled,
		Message:            fmt.Sprintf("the report observed at %s billed %s CPU-seconds", stamp(r.ObservedTime.Time), seconds(billed)),
		LastTransitionTime: metav1.Time{Time: now}}
	switch {
	case reason != "":
		c.Status, c.Reason, c.Message = metav1.ConditionFalse, reason, fmt.Sprintf("the report observed at %s was refused: %s", stamp(r.ObservedTime.Time), msg)
	case len(refused) > 0:
		c.Status, c.Reason = metav1.ConditionFalse, refused[0].Reason
		c.Message = fmt.Sprintf("the report observed at %s billed %s CPU-seconds and refused %s", stamp(r.ObservedTime.Time), seconds(billed), refused[0].Message)
		if len(refused) > 1 {
			c.Message += fmt.Sprintf(", and %d more tenant(s)", len(refused)-1)
		}
	}
	meta.SetStatusCondition(&rec.Conditions, c)
}

// mergeLines adds lines into a record's, one line per tenant, tier and
// price; false when a total would overflow.
func mergeLines(have, add []kubefairv1.ChargeLine) ([]kubefairv1.ChargeLine, bool) {
	out := append([]kubefairv1.ChargeLine(nil), have...)
	for _, l := range add {
		i := slices.IndexFunc(out, func(o kubefairv1.ChargeLine) bool {
			return o.TenantUID == l.TenantUID && o.Tier == l.Tier && o.Currency == l.Currency && o.PricePerCPUHour == l.PricePerCPUHour
		})
		if i < 0 {
			out = append(out, l)
			i = len(out) - 1
		} else {
			o := &out[i]
			if o.CPUNanoseconds > math.MaxInt64-l.CPUNanoseconds {
				return nil, false
			}
			o.CPUNanoseconds += l.CPUNanoseconds
			if l.From.Before(&o.From) {
				o.From = l.From
			}
			if o.To.Before(&l.To) {
				o.To = l.To
			}
			o.Tenant = l.Tenant
		}
		price, _ := cost.ParsePrice(out[i].PricePerCPUHour)
		out[i].Cost = cost.FormatMicros(cost.Cost(big.NewInt(out[i].CPUNanoseconds), price))
	}
	sort.SliceStable(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.Tenant != b.Tenant {
			return a.Tenant < b.Tenant
		}
		if a.TenantUID != b.TenantUID {
			return a.TenantUID < b.TenantUID
		}
		return a.From.Before(&b.From)
	})
	return out, true
}

func addCPU(a, b kubefairv1.NodeCPUTime) (kubefairv1.NodeCPUTime, bool) {
	ok := true
	add := func(x, y int64) int64 {
		s := x + y
		if (y > 0 && s < x) || (y < 0 && s > x) {
			ok = false
		}
		return s
	}
	return kubefairv1.NodeCPUTime{
		CapacityNanoseconds:  add(a.CapacityNanoseconds, b.CapacityNanoseconds),
		TenantsNanoseconds:   add(a.TenantsNanoseconds, b.TenantsNanoseconds),
		OtherPodsNanoseconds: add(a.OtherPodsNanoseconds, b.OtherPodsNanoseconds),
		SystemNanoseconds:    add(a.SystemNanoseconds, b.SystemNanoseconds),
		IdleNanoseconds:      add(a.IdleNanoseconds, b.IdleNanoseconds),
		RefusedNanoseconds:   add(a.RefusedNanoseconds, b.RefusedNanoseconds),
	}, ok
}

// capacity is what milli millicores can run in d, in nanoseconds (at most
// MaxInt64).
func capacity(milli int64, d time.Duration) int64 {
	if d <= 0 || milli <= 0 {
		return 0
	}
	c := new(big.Int).Mul(big.NewInt(milli), big.NewInt(int64(d)))
	c.Quo(c, big.NewInt(1000))
	if !c.IsInt64() {
		return math.MaxInt64
	}
	return c.Int64()
}

// bound is the most CPU a node of milli millicores can have used in d:
// its capacity plus the slack for when counters are read.
func bound(milli int64, d time.Duration) int64 {
	if d < 0 {
		return 0
	}
	c := capacity(milli, d)
	slack := c/100*SlackPercent + capacity(milli, SlackPerCPU)
	if c > math.MaxInt64-slack {
		return math.MaxInt64
	}
	return c + slack
}

func stamp(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

func seconds(ns int64) string { return cost.FormatSeconds(big.NewInt(ns)) }

func milliString(m int64) string {
	if m%1000 == 0 {
		return fmt.Sprint(m / 1000)
	}
	return fmt.Sprintf("%dm", m)
}
