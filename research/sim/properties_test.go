package sim

import (
	"math"
	"math/rand/v2"
	"testing"
)

// Mode bits of a generated simulation.
const (
	modeGlobal = 1 << iota
	modeBalance
	modeShuttle
	modePlace
	modeSurplus
	modeReadjust
	modeQuantum
	modeChurn // some threads arrive late, some finish
)

var policies = []Policy{None, PFS, TFPS, TWRS}

// generated is a simulation built from a handful of numbers, so that the
// fuzzer and the property tests explore the same space: n threads with
// weights 1..10000 on cpus CPUs, every option that mode allows.
func generated(n, cpus int, mode uint8, seed uint32) *Sim {
	r := rand.New(rand.NewPCG(uint64(seed), uint64(n)))
	s := &Sim{
		CPUs:     cpus,
		Global:   mode&modeGlobal != 0,
		Readjust: mode&modeReadjust != 0,
		Place:    mode&modePlace != 0,
		Policy:   policies[seed%4],
	}
	if !s.Global && mode&modeBalance != 0 {
		s.Balance = Tick * float64(1+seed%5)
		s.Shuttle = mode&modeShuttle != 0
	}
	s.Surplus = s.Global && mode&modeSurplus != 0
	if mode&modeQuantum != 0 {
		s.Quantum = Tick * float64(1+seed%7)
	}
	processes := 1 + int(seed%9)
	for i := 0; i < n; i++ {
		t := &Thread{Process: i % processes, Weight: float64(1 + r.IntN(10000)), CPU: r.IntN(cpus), Work: math.Inf(1)}
		if mode&modeChurn != 0 {
			if r.IntN(3) == 0 {
				t.Arrive = Tick * float64(r.IntN(5))
			}
			if r.IntN(4) == 0 {
				t.Work = Tick * float64(1+r.IntN(3))
			}
		}
		s.Threads = append(s.Threads, t)
	}
	return s
}

// conserving says whether every CPU must be busy while enough threads are
// runnable: one global queue, or per-CPU queues with an idle CPU pulling.
func conserving(s *Sim) bool { return s.Global || s.Balance > 0 }

// checkedRun steps s and checks, every step, the simulator's invariants: all
// figures finite and ≥ 0; no thread above one CPU; no more CPU than the
// machine has; with a work-conserving setup exactly min(runnable, CPUs) CPUs
// busy; and GMS's ideal service always min(runnable, CPUs) CPUs.
func checkedRun(t *testing.T, s *Sim, steps int) {
	t.Helper()
	if err := s.Validate(); err != nil {
		t.Fatalf("generated an invalid simulation: %v", err)
	}
	prev := make([]float64, len(s.Threads))
	prevIdeal := make([]float64, len(s.Threads))
	for step := 0; step < steps; step++ {
		runnable := 0
		for _, th := range s.Threads {
			if th.runnable(s.Now) {
				runnable++
			}
		}
		s.Step(Tick)
		var used, ideal float64
		for i, th := range s.Threads {
			for _, v := range []float64{th.Service, th.Wait, th.Ideal, th.vruntime, th.Finish} {
				if math.IsNaN(v) || math.IsInf(v, 0) || v < 0 {
					t.Fatalf("step %d, thread %d: a figure is %v (%+v)", step, i, v, *th)
				}
			}
			d := th.Service - prev[i]
			if d > Tick+1e-12 {
				t.Fatalf("step %d, thread %d ran %.6f s in a %.3f-s step", step, i, d, Tick)
			}
			used += d
			ideal += th.Ideal - prevIdeal[i]
			prev[i], prevIdeal[i] = th.Service, th.Ideal
			if th.CPU < 0 || th.CPU >= s.CPUs {
				t.Fatalf("step %d, thread %d on CPU %d of %d", step, i, th.CPU, s.CPUs)
			}
		}
		busy := float64(min(runnable, s.CPUs)) * Tick
		if used > float64(s.CPUs)*Tick+1e-9 {
			t.Fatalf("step %d: %.6f CPU-s used on %d CPUs in %.3f s", step, used, s.CPUs, Tick)
		}
		if conserving(s) && math.Abs(used-busy) > 1e-9 {
			t.Fatalf("step %d: %d runnable threads on %d CPUs used %.6f CPU-s, want %.6f (global=%v, balance=%v)", step, runnable, s.CPUs, used, busy, s.Global, s.Balance)
		}
		if math.Abs(ideal-busy) > 1e-9*math.Max(1, float64(runnable)) {
			t.Fatalf("step %d: GMS gave %.9f CPU-s, want %.9f", step, ideal, busy)
		}
	}
}

// Properties of the simulator over many generated setups: the invariants of
// checkedRun (work conservation included) and determinism.
func TestSimProperties(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for c := 0; c < 300; c++ {
		n, cpus, mode, seed := r.IntN(40), 1+r.IntN(8), uint8(r.IntN(256)), r.Uint32()
		s := generated(n, cpus, mode, seed)
		checkedRun(t, s, 200)
		again := generated(n, cpus, mode, seed)
		if err := again.Run(s.Now, Tick); err != nil {
			t.Fatal(err)
		}
		for i := range s.Threads {
			a, b := s.Threads[i], again.Threads[i]
			if a.Service != b.Service || a.Wait != b.Wait || a.Ideal != b.Ideal || a.CPU != b.CPU || a.Finish != b.Finish || a.Migrations != b.Migrations {
				t.Fatalf("case %d (n=%d, cpus=%d, mode=%08b, seed=%d): thread %d differs between two runs: %+v vs %+v", c, n, cpus, mode, seed, i, *a, *b)
			}
		}
	}
}

// Greedy threads, at least as many as CPUs: the CPU time used is exactly
// CPUs × time with one global queue or with per-CPU queues and balancing,
// and each thread's GMS service is its weight's share, capped at one CPU.
func TestWorkConservation(t *testing.T) {
	for _, global := range []bool{true, false} {
		for cpus := 1; cpus <= 6; cpus++ {
			s := &Sim{CPUs: cpus, Global: global, Balance: 0.01}
			if global {
				s.Balance = 0
			}
			for i := 0; i < cpus+3; i++ {
				s.Threads = append(s.Threads, &Thread{Process: i, Weight: float64(100 * (i + 1)), CPU: 0, Work: math.Inf(1)})
			}
			if err := s.Run(2, Tick); err != nil {
				t.Fatal(err)
			}
			var used float64
			for _, th := range s.Threads {
				used += th.Service
			}
			if math.Abs(used-float64(cpus)*2) > 1e-6 {
				t.Errorf("global=%v, %d CPUs: %.4f CPU-s used in 2 s, want %d", global, cpus, used, 2*cpus)
			}
		}
	}
}

func TestValidateRejectsBadInput(t *testing.T) {
	greedy := func() *Thread { return &Thread{Weight: 1, Work: math.Inf(1)} }
	cases := map[string]*Sim{
		"no CPU":             {CPUs: 0},
		"zero weight":        {CPUs: 1, Threads: []*Thread{{Weight: 0, Work: 1}}},
		"NaN weight":         {CPUs: 1, Threads: []*Thread{{Weight: math.NaN(), Work: 1}}},
		"CPU out of range":   {CPUs: 2, Threads: []*Thread{{Weight: 1, CPU: 2, Work: 1}}},
		"no work":            {CPUs: 1, Threads: []*Thread{{Weight: 1}}},
		"negative arrival":   {CPUs: 1, Threads: []*Thread{{Weight: 1, Work: 1, Arrive: -1}}},
		"nil thread":         {CPUs: 1, Threads: []*Thread{nil}},
		"negative quantum":   {CPUs: 1, Quantum: -1, Threads: []*Thread{greedy()}},
		"shuttle, no period": {CPUs: 2, Shuttle: true, Threads: []*Thread{greedy()}},
		"shuttle, global":    {CPUs: 2, Shuttle: true, Global: true, Balance: 1},
	}
	for name, s := range cases {
		if err := s.Run(1, Tick); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
	if err := (&Sim{CPUs: 1}).Run(1, 0); err == nil {
		t.Error("a zero step: no error")
	}
}

// FuzzSim runs generated simulations of 0..100000 threads with weights
// 1..10000 on 1..64 CPUs under every option, for a number of steps bounded
// so that one input runs fast, and checks the invariants every step. Its
// seed corpus (f.Add and testdata/fuzz/FuzzSim) runs in `go test`; explore
// with `go test -fuzz FuzzSim -fuzztime 1m ./research/sim/`.
func FuzzSim(f *testing.F) {
	f.Add(uint32(5), uint8(1), uint8(0), uint32(0), uint16(100))
	f.Add(uint32(0), uint8(3), uint8(modeBalance|modeShuttle), uint32(1), uint16(10))
	f.Add(uint32(100000), uint8(63), uint8(modeGlobal|modeSurplus|modeReadjust), uint32(2), uint16(5))
	f.Add(uint32(100000), uint8(1), uint8(modeBalance|modePlace|modeChurn), uint32(3), uint16(5))
	f.Add(uint32(9), uint8(7), uint8(0xff), uint32(11), uint16(300))
	f.Fuzz(func(t *testing.T, threads uint32, cpus uint8, mode uint8, seed uint32, steps uint16) {
		n := int(threads % 100001)
		const budget = 200000 // thread-steps per input
		s := generated(n, 1+int(cpus%64), mode, seed)
		checkedRun(t, s, min(1+int(steps%400), max(1, budget/max(n, 1))))
	})
}
