package billing

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	kubefairv1 "github.com/kubefair/kubefair/api/v1alpha1"
	"github.com/kubefair/kubefair/controllers/cost"
)

// TestPropertyBilledEqualsUsed drives Accrue with random interleavings of
// what happens to a node's reports — skipped reports, agent restarts
// (clean and crashed), tenants created again, prices changing, a tier gone
// and back, midnight, impossible, stale, future and foreign reports, a
// controller that crashed between closing a record and creating the next,
// and stale reads whose writes must lose — against a store that enforces
// what the API server does (resourceVersions, names). It asserts that, per
// tenant and price, the CPU billed is exactly the CPU used minus the CPU
// of windows refused and of agent crashes (the documented losses), and
// never more.
func TestPropertyBilledEqualsUsed(t *testing.T) {
	for seed := uint64(1); seed <= 300; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) { runModel(t, seed, 300) })
	}
}

// store holds a node's UsageRecords as the API server does (names,
// resourceVersions), what it held before the last write (what a cache that
// is behind still shows), and what the bills hold: per period, the record
// that counted furthest, as the bill reconciler saw it (bills never lose
// what they saw when records are deleted).
type store struct {
	records  map[string]*kubefairv1.UsageRecord
	before   map[string]*kubefairv1.UsageRecord
	bills    map[string]*kubefairv1.UsageRecord // by period
	deleting map[string]bool                    // held by their finalizer
}

func (s *store) open(view map[string]*kubefairv1.UsageRecord) *kubefairv1.UsageRecord {
	return view[OpenRecordName("n1")].DeepCopy()
}

// furthest is the closed record that counted furthest, read live.
func (s *store) furthest() *kubefairv1.UsageRecord {
	var out *kubefairv1.UsageRecord
	for _, r := range s.records {
		if r.Closed && (out == nil || Advances(r, out)) {
			out = r
		}
	}
	return out.DeepCopy()
}

// write applies a Result as the reconciler does; false when the API server
// refused the open record's write (a conflict, a name taken).
func (s *store) write(res Result) bool {
	before := map[string]*kubefairv1.UsageRecord{}
	for k, v := range s.records {
		before[k] = v
	}
	if a := res.Archive; a != nil {
		have, ok := s.records[a.Name]
		switch {
		case !ok || Advances(a, have):
			s.put(a, have)
		case len(a.Finalizers) > 0: // the same figures, now holding the cursor
			c := have.DeepCopy()
			c.Finalizers = a.Finalizers
			s.put(c, have)
		}
	}
	if w := res.Write; w != nil {
		have, exists := s.records[w.Name]
		if res.Create == exists || (exists && have.ResourceVersion != w.ResourceVersion) {
			return false
		}
		s.put(w, have)
	}
	if res.Archive != nil || res.Write != nil {
		s.before = before
	}
	return true
}

// release is what the reconciler does once a new open record continued
// from a closed one: that one no longer holds the cursor.
func (s *store) release(last *kubefairv1.UsageRecord) {
	if last == nil || len(last.Finalizers) == 0 {
		return
	}
	if s.deleting[last.Name] {
		delete(s.records, last.Name)
		delete(s.deleting, last.Name)
		return
	}
	c := s.records[last.Name].DeepCopy()
	c.Finalizers = nil
	s.put(c, s.records[last.Name])
}

func (s *store) put(r, have *kubefairv1.UsageRecord) {
	c := r.DeepCopy()
	v := 0
	if have != nil {
		fmt.Sscan(have.ResourceVersion, &v)
	}
	c.ResourceVersion = fmt.Sprint(v + 1)
	s.records[r.Name] = c
	if b := s.bills[c.Period]; b == nil || Advances(c, b) {
		s.bills[c.Period] = c
	}
}

// deleteAll is `kubectl delete usagerecords --all`: records without a
// finalizer go; the one that holds the cursor stays until a new open
// record continues from it; the open record is archived (holding the
// cursor) and goes.
func (s *store) deleteAll() {
	for k, r := range s.records {
		if !r.Closed {
			continue
		}
		if len(r.Finalizers) > 0 {
			s.deleting[k] = true
		} else {
			delete(s.records, k)
		}
	}
	if open := s.records[OpenRecordName("n1")]; open != nil {
		s.write(Result{Archive: Archive(open)})
		delete(s.records, open.Name)
	}
	s.before = nil
}

// billOf is what a period's bills hold.
func (s *store) billOf(period string) []kubefairv1.ChargeLine {
	if b := s.bills[period]; b != nil {
		return b.Lines
	}
	return nil
}

func (s *store) periods() []string {
	var out []string
	for p := range s.bills {
		out = append(out, p)
	}
	return out
}

type simTenant struct {
	uid, name string
	counter   int64 // the agent's counter in the current boot
	final     bool
}

func runModel(t *testing.T, seed uint64, steps int) {
	rng := rand.New(rand.NewPCG(seed, 7))
	st := &store{records: map[string]*kubefairv1.UsageRecord{}, bills: map[string]*kubefairv1.UsageRecord{}, deleting: map[string]bool{}}
	now := time.Date(2026, 11, 25, 20, 0, 0, 0, time.UTC)
	prices := []cost.Price{{Micros: 45_000, Since: now.Add(-time.Hour)}}
	tierGone := false
	facts := func() Facts {
		f := Facts{Now: now, NodeMilliCPU: 2000, Tenants: map[string]Tenant{}}
		for _, uid := range []string{"a1", "a2", "a3", "a4", "a5", "a6", "a7", "a8", "b"} {
			tn := Tenant{Name: uid[:1], Tier: "silver", Currency: "EUR", Prices: prices, LastPod: now}
			if uid == "b" {
				tn = Tenant{Name: "b", LastPod: now}
			} else if tierGone {
				tn.Prices = nil
			}
			f.Tenants[uid] = tn
		}
		return f
	}
	// The agent.
	boot, bootN := "boot-0", 0
	bootTime := now.Add(-5 * time.Second)
	tenants := []*simTenant{{uid: "a1", name: "a"}, {uid: "b", name: "b"}}
	aGen := 1
	// The truth: CPU used per tenant and price, what was billed, and what
	// the documented losses allow.
	used, lost := map[string]int64{}, map[string]int64{}
	key := func(uid string) string {
		if uid == "b" {
			return "b@0"
		}
		return fmt.Sprintf("%s@%d", uid, prices[len(prices)-1].Micros)
	}
	// pending: each tenant's CPU since its counter was last counted, by
	// price; held: counted, and waiting for a price.
	pending, held := map[string]map[string]int64{}, map[string]map[string]int64{}
	use := func(dt time.Duration) {
		budget := int64(float64(2*dt) * rng.Float64())
		for _, tn := range tenants {
			if tn.final {
				continue
			}
			ns := budget / int64(len(tenants)) * int64(rng.IntN(3)) / 2
			tn.counter += ns
			used[key(tn.uid)] += ns
			if pending[tn.uid] == nil {
				pending[tn.uid] = map[string]int64{}
			}
			pending[tn.uid][key(tn.uid)] += ns
		}
	}
	losePending := func(uid string) {
		for k, ns := range pending[uid] {
			lost[k] += ns
		}
		delete(pending, uid)
	}
	build := func() *kubefairv1.NodeShareReport {
		r := &kubefairv1.NodeShareReport{ObjectMeta: metav1.ObjectMeta{Name: "n1"}, CPUs: 2, BootID: boot,
			BootTime: &metav1.Time{Time: bootTime}, ObservedTime: metav1.Time{Time: now}, Window: metav1.Duration{Duration: 10 * time.Second}}
		for _, tn := range tenants {
			r.Tenants = append(r.Tenants, kubefairv1.TenantShare{Name: tn.name, UID: tn.uid, CPUNanoseconds: tn.counter, Final: tn.final})
		}
		return r
	}
	var history []*kubefairv1.NodeShareReport
	// process runs the reconciler on a report and notes what the documented
	// losses allow: the CPU since a tenant's counter was last counted, when
	// the report refuses it.
	process := func(r *kubefairv1.NodeShareReport) Result {
		t.Helper()
		if rng.IntN(8) == 0 && st.before != nil { // a reconcile from a cache one write behind: it must not count twice
			if res := Accrue(st.open(st.before), st.furthest(), r, facts()); res.Write != nil && st.write(res) {
				t.Fatalf("a write computed from a stale cache succeeded: %+v", res)
			}
		}
		last := st.furthest()
		res := Accrue(st.open(st.records), last, r, facts())
		if res.Archive != nil && rng.IntN(6) == 0 { // the controller crashes between the two writes
			st.write(Result{Archive: res.Archive})
			res = Accrue(st.open(st.records), last, r, facts())
		}
		if !st.write(res) {
			t.Fatalf("a fresh write was refused: %+v", res)
		}
		if res.Create {
			st.release(last)
		}
		if res.Write == nil || res.Reason == kubefairv1.ReasonStaleReport || res.Reason == kubefairv1.ReasonFutureReport {
			return res // nothing counted
		}
		refused := map[string]bool{}
		for _, rt := range res.Refused {
			refused[rt.UID] = true
		}
		for _, s := range r.Tenants {
			c := findCounter(res.Write, s.UID)
			switch {
			case refused[s.UID]:
				losePending(s.UID)
			case c != nil && c.HeldNanoseconds > 0:
				if held[s.UID] == nil {
					held[s.UID] = map[string]int64{}
				}
				for k, ns := range pending[s.UID] {
					held[s.UID][k] += ns
				}
				delete(pending, s.UID)
			default:
				delete(pending, s.UID)
				delete(held, s.UID)
			}
		}
		for uid := range held { // held CPU of a tenant the agent no longer reports
			if c := findCounter(res.Write, uid); c == nil || c.HeldNanoseconds == 0 {
				delete(held, uid)
			}
		}
		history = append(history, r)
		return res
	}

	for step := 0; step < steps; step++ {
		dt := time.Duration(rng.IntN(15)) * time.Second // reports are kept to the second: two may share one
		if rng.IntN(40) == 0 {
			dt = time.Duration(1+rng.IntN(8)) * time.Hour // across midnight, now and then
		}
		use(dt)
		now = now.Add(dt)
		ev := rng.IntN(100)
		switch {
		case ev < 50: // an ordinary report
			process(build())
		case ev < 60: // no report this time (a failed write, a missed event)
		case ev < 64: // the agent restarts cleanly: its last report, then a new run
			process(build())
			bootN++
			boot, bootTime = fmt.Sprintf("boot-%d", bootN), now.Add(time.Second)
			now = now.Add(2 * time.Second)
			for _, tn := range tenants {
				tn.counter = 0
			}
			tenants = slices.DeleteFunc(tenants, func(tn *simTenant) bool { return tn.final })
		case ev < 67: // the agent crashes: what it had not reported is lost
			for _, tn := range tenants {
				losePending(tn.uid)
				tn.counter = 0
			}
			tenants = slices.DeleteFunc(tenants, func(tn *simTenant) bool { return tn.final })
			bootN++
			boot, bootTime = fmt.Sprintf("boot-%d", bootN), now.Add(time.Second)
			now = now.Add(2 * time.Second)
		case ev < 70 && aGen < 8: // tenant a deleted and created again: a new UID
			process(build())
			for _, tn := range tenants {
				if tn.name == "a" {
					tn.final = true
				}
			}
			aGen++
			tenants = append(tenants, &simTenant{uid: fmt.Sprintf("a%d", aGen), name: "a"})
		case ev < 73 && !tierGone: // a new price, from this report on
			process(build())
			prices = append(prices, cost.Price{Micros: int64(1 + rng.IntN(999_999)), Since: now})
		case ev < 75: // the tier goes, or comes back
			process(build())
			tierGone = !tierGone
		case ev < 79: // an impossible report: a counter far beyond the node
			r := build()
			r.Tenants[0].CPUNanoseconds += int64(1000 * time.Hour)
			process(r)
		case ev < 82: // a report naming a tenant that does not exist
			r := build()
			r.Tenants = append(r.Tenants, kubefairv1.TenantShare{Name: "ghost", UID: "ghost", CPUNanoseconds: int64(time.Second)})
			process(r)
		case ev < 85 && len(history) > 1: // an old report written again
			old := history[rng.IntN(len(history)-1)].DeepCopy()
			if res := process(old); res.Write != nil && res.Reason != kubefairv1.ReasonStaleReport {
				t.Fatalf("an old report was not refused as stale: %+v", res)
			}
		case ev < 88: // a report from a clock far ahead
			r := build()
			r.ObservedTime.Time = now.Add(time.Hour)
			if res := process(r); res.Reason != kubefairv1.ReasonFutureReport && res.Write != nil { // (or noted already)
				t.Fatalf("a report from the future: %+v", res)
			}
		case ev < 91: // a report claiming more CPUs than the node has
			r := build()
			r.CPUs = 8
			process(r)
		case ev < 93: // kubectl delete usagerecords --all
			st.deleteAll()
		default:
			process(build())
		}
		checkBilled(t, st, used, step)
	}
	// Everything used is billed in the end, once the tier is back.
	tierGone = false
	now = now.Add(time.Second)
	process(build())
	checkBilled(t, st, used, steps)
	for uid, h := range held {
		if len(h) > 0 {
			t.Fatalf("%s: CPU still held with the tier back: %v", uid, h)
		}
	}
	for k, u := range used {
		if got := billedOf(st, k); got != u-lost[k] {
			t.Fatalf("%s: billed %d ns, used %d, lost to refusals and crashes %d: %d ns unaccounted", k, got, u, lost[k], u-lost[k]-got)
		}
	}
}

// checkBilled: no tenant, at no price, was ever billed more than it used.
func checkBilled(t *testing.T, st *store, used map[string]int64, step int) {
	t.Helper()
	for k, u := range used {
		if got := billedOf(st, k); got > u {
			t.Fatalf("step %d: %s billed %d ns but used %d", step, k, got, u)
		}
	}
	for _, r := range st.records {
		checkIdentity(t, r)
	}
}

// billedOf sums what the bills hold for "uid@price".
func billedOf(st *store, k string) int64 {
	var ns int64
	for _, p := range st.periods() {
		for _, l := range st.billOf(p) {
			price, _ := cost.ParsePrice(l.PricePerCPUHour)
			if fmt.Sprintf("%s@%d", l.TenantUID, price) == k {
				ns += l.CPUNanoseconds
			}
		}
	}
	return ns
}

func findCounter(r *kubefairv1.UsageRecord, uid string) *kubefairv1.TenantCounter {
	for i := range r.Cursor.Tenants {
		if r.Cursor.Tenants[i].UID == uid {
			return &r.Cursor.Tenants[i]
		}
	}
	return nil
}
