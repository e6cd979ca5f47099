package agent

import (
	"testing"
	"time"

	"github.com/kubefair/kubefair/node-agent/fairness"
)

// TestClosedLoop: a principal that gets less than its entitlement is
// weighted up and one that gets more down — but only from windows of at
// least a period; an entitlement that moves starts over from 1; a
// principal that leaves is forgotten.
func TestClosedLoop(t *testing.T) {
	l := newClosedLoop(fairness.DefaultCorrection)
	const period = time.Second
	step := func(dt time.Duration, aCPU, bCPU time.Duration, aEntitled float64) []float64 {
		return l.step([]measured{
			{name: "a", entitled: aEntitled, cpu: aCPU, backlogged: true},
			{name: "b", entitled: 1 - aEntitled, cpu: bCPU, backlogged: true},
		}, dt, period)
	}
	// A short (kicked) step learns nothing yet.
	if m := step(300*time.Millisecond, 100*time.Millisecond, 500*time.Millisecond, 0.5); m[0] != 1 || m[1] != 1 {
		t.Fatalf("a short window changed the multipliers: %v", m)
	}
	// A full window: a got less than its half, b more.
	m := step(time.Second, 300*time.Millisecond, 900*time.Millisecond, 0.5)
	if !(m[0] > 1 && m[1] < 1) {
		t.Fatalf("after a full window a=%v b=%v, want a > 1 > b", m[0], m[1])
	}
	// The multipliers carry over while the entitlement holds...
	if again := step(100*time.Millisecond, 0, 0, 0.52); again[0] != m[0] {
		t.Fatalf("a small entitlement change reset the loop: %v then %v", m, again)
	}
	// ... and restart from 1 when it moves by more than a tenth.
	if moved := step(100*time.Millisecond, 0, 0, 0.8); moved[0] != 1 || moved[1] != 1 {
		t.Fatalf("a moved entitlement kept its multipliers: %v", moved)
	}
	// Every entitlement scaled alike (less capacity left to the tenants)
	// is no move.
	l.step([]measured{{name: "a", entitled: 0.8, backlogged: true}, {name: "b", entitled: 0.2, backlogged: true}}, time.Second, period)
	before := l.mult["a"]
	if scaled := l.step([]measured{{name: "a", entitled: 0.4, backlogged: true}, {name: "b", entitled: 0.1, backlogged: true}}, 100*time.Millisecond, period); scaled[0] != before {
		t.Fatalf("scaling every entitlement by half reset the loop: %v, was %v", scaled[0], before)
	}
	// A principal that is gone is forgotten.
	l.step([]measured{{name: "a", entitled: 1, cpu: time.Second, backlogged: true}}, time.Second, period)
	if _, ok := l.mult["b"]; ok {
		t.Fatal("b is still remembered after it left")
	}
}

// TestLoopsSurviveRestart: what the loops learnt is saved with the report
// and a new agent on the same state directory resumes from it.
func TestLoopsSurviveRestart(t *testing.T) {
	dir := t.TempDir()
	a := &Agent{cfg: Config{StateDir: dir, Correction: fairness.DefaultCorrection}, tenantLoop: newClosedLoop(fairness.DefaultCorrection), workloadLoops: map[string]*closedLoop{}}
	a.tenantLoop.step([]measured{{name: "a", entitled: 0.5, cpu: 300 * time.Millisecond, backlogged: true}, {name: "b", entitled: 0.5, cpu: 900 * time.Millisecond, backlogged: true}}, time.Second, time.Second)
	a.workloadLoops["a"] = newClosedLoop(fairness.DefaultCorrection)
	a.workloadLoops["a"].step([]measured{{name: "vm", entitled: 3, cpu: time.Second, backlogged: true}, {name: "vm2", entitled: 1, cpu: time.Second, backlogged: true}}, time.Second, time.Second)
	if err := a.saveLoops(); err != nil {
		t.Fatal(err)
	}
	b := &Agent{cfg: a.cfg, tenantLoop: newClosedLoop(fairness.DefaultCorrection), workloadLoops: map[string]*closedLoop{}}
	b.loadLoops()
	if b.tenantLoop.mult["a"] != a.tenantLoop.mult["a"] || b.tenantLoop.mult["a"] <= 1 {
		t.Fatalf("tenant multiplier after restart %v, saved %v", b.tenantLoop.mult["a"], a.tenantLoop.mult["a"])
	}
	if got := b.workloadLoops["a"].mult["vm"]; got != a.workloadLoops["a"].mult["vm"] || got <= 1 {
		t.Fatalf("workload multiplier after restart %v, saved %v", got, a.workloadLoops["a"].mult["vm"])
	}
}
