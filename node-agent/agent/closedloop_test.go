package agent

import (
	"testing"
	"time"

	"github.com/kubefair/kubefair/node-agent/fairness"
)

// TestLoopsSurviveRestart: what the loops learnt is saved with the report
// and a new agent on the same state directory resumes from it.
func TestLoopsSurviveRestart(t *testing.T) {
	dir := t.TempDir()
	a := &Agent{cfg: Config{StateDir: dir, Correction: fairness.DefaultCorrection}}
	c := fairness.DefaultCorrection
	a.loops.Tenants.Step(c, []fairness.LoopInput{{Name: "a", Entitled: 0.5, CPU: 300 * time.Millisecond, Backlogged: true}, {Name: "b", Entitled: 0.5, CPU: 900 * time.Millisecond, Backlogged: true}}, time.Second, time.Second)
	a.loops.Workloads = map[string]*fairness.Loop{"a": {}}
	a.loops.Workloads["a"].Step(c, []fairness.LoopInput{{Name: "vm", Entitled: 3, CPU: time.Second, Backlogged: true}, {Name: "vm2", Entitled: 1, CPU: time.Second, Backlogged: true}}, time.Second, time.Second)
	if err := a.saveLoops(); err != nil {
		t.Fatal(err)
	}
	b := &Agent{cfg: a.cfg}
	b.loadLoops()
	if b.loops.Tenants.Mult["a"] != a.loops.Tenants.Mult["a"] || b.loops.Tenants.Mult["a"] <= 1 {
		t.Fatalf("tenant multiplier after restart %v, saved %v", b.loops.Tenants.Mult["a"], a.loops.Tenants.Mult["a"])
	}
	if got := b.loops.Workloads["a"].Mult["vm"]; got != a.loops.Workloads["a"].Mult["vm"] || got <= 1 {
		t.Fatalf("workload multiplier after restart %v, saved %v", got, a.loops.Workloads["a"].Mult["vm"])
	}
}
