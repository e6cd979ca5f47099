package fairness

import (
	"testing"
	"time"
)

// TestClosedLoop: a principal that gets less than its entitlement is
// weighted up and one that gets more down — but only from windows of at
// least a period; an entitlement that moves against the others' starts
// over from 1, one that comes or goes moves none; a principal that leaves
// is forgotten.
func TestClosedLoop(t *testing.T) {
	var l Loop
	const period = time.Second
	step := func(dt time.Duration, aCPU, bCPU time.Duration, aEntitled float64) []float64 {
		return l.Step(DefaultCorrection, []LoopInput{
			{Name: "a", Entitled: aEntitled, CPU: aCPU, Backlogged: true},
			{Name: "b", Entitled: 1 - aEntitled, CPU: bCPU, Backlogged: true},
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
	l.Step(DefaultCorrection, []LoopInput{{Name: "a", Entitled: 0.8, Backlogged: true}, {Name: "b", Entitled: 0.2, Backlogged: true}}, time.Second, period)
	before := l.Mult["a"]
	if scaled := l.Step(DefaultCorrection, []LoopInput{{Name: "a", Entitled: 0.4, Backlogged: true}, {Name: "b", Entitled: 0.1, Backlogged: true}}, 100*time.Millisecond, period); scaled[0] != before {
		t.Fatalf("scaling every entitlement by half reset the loop: %v, was %v", scaled[0], before)
	}
	// A principal that comes or goes moves no other's part: a and b keep
	// what they learnt.
	l.Step(DefaultCorrection, []LoopInput{{Name: "a", Entitled: 0.8, CPU: 300 * time.Millisecond, Backlogged: true}, {Name: "b", Entitled: 0.2, CPU: 700 * time.Millisecond, Backlogged: true}}, time.Second, period)
	learnt := []float64{l.Mult["a"], l.Mult["b"]}
	with := l.Step(DefaultCorrection, []LoopInput{{Name: "a", Entitled: 0.8, Backlogged: true}, {Name: "b", Entitled: 0.2, Backlogged: true}, {Name: "c", Entitled: 1}}, 100*time.Millisecond, period)
	without := l.Step(DefaultCorrection, []LoopInput{{Name: "a", Entitled: 0.8, Backlogged: true}, {Name: "b", Entitled: 0.2, Backlogged: true}}, 100*time.Millisecond, period)
	if with[0] != learnt[0] || with[1] != learnt[1] || without[0] != learnt[0] || without[1] != learnt[1] {
		t.Fatalf("c coming and going moved a and b: learnt %v, with c %v, after %v", learnt, with[:2], without)
	}
	// A principal that is gone is forgotten.
	l.Step(DefaultCorrection, []LoopInput{{Name: "a", Entitled: 1, CPU: time.Second, Backlogged: true}}, time.Second, period)
	if _, ok := l.Mult["b"]; ok {
		t.Fatal("b is still remembered after it left")
	}
}
