package sim

import "math"

// Tick is the simulated scheduling granularity (seconds).
const Tick = 0.001

// S0Result is one run of the thesis's S0 experiment (000 §3.4): processes A,
// B and C with 1, 8 and k threads on one CPU.
type S0Result struct {
	// Shares of the CPU per process (A, B, C), greedy threads.
	Shares [3]float64
	// GapPoints is the largest minus the smallest share, in points (fig. 3.5).
	GapPoints float64
	// AvgWaiting and AvgTurnaround (seconds) when each process must do
	// the same work, split over its threads (fig. 3.6-3.7; 000 §3.1.1:
	// turnaround = completion − arrival, waiting = turnaround − work).
	AvgWaiting, AvgTurnaround float64
}

// S0 runs the experiment with k threads in C under policy.
func S0(k int, policy Policy) S0Result {
	threads := [3]int{1, 8, k}
	var r S0Result

	greedy := &Sim{CPUs: 1, Policy: policy}
	for p, n := range threads {
		for i := 0; i < n; i++ {
			greedy.Threads = append(greedy.Threads, &Thread{Process: p, Weight: 1024, Work: math.Inf(1)})
		}
	}
	greedy.Run(20, Tick)
	shares := greedy.ProcessShares(3)
	copy(r.Shares[:], shares)
	lo, hi := 1.0, 0.0
	for _, s := range shares {
		lo, hi = math.Min(lo, s), math.Max(hi, s)
	}
	r.GapPoints = 100 * (hi - lo)

	const work = 2.0 // seconds of CPU per process
	finite := &Sim{CPUs: 1, Policy: policy}
	for p, n := range threads {
		for i := 0; i < n; i++ {
			finite.Threads = append(finite.Threads, &Thread{Process: p, Weight: 1024, Work: work / float64(n)})
		}
	}
	for !allDone(finite) {
		finite.Step(Tick)
	}
	for p := range threads {
		var done float64
		for _, t := range finite.Threads {
			if t.Process == p {
				done = math.Max(done, t.Finish)
			}
		}
		r.AvgTurnaround += done / 3
		r.AvgWaiting += (done - work) / 3
	}
	return r
}

func allDone(s *Sim) bool {
	for _, t := range s.Threads {
		if t.Finish == 0 {
			return false
		}
	}
	return true
}

// VMShare is table 5.3's setting: two VMs with 6 vCPU threads each on 2
// CPUs (3 threads of each per CPU), VM weights 1 and n, threads weighted
// process-fairly inside each VM. It returns VM 1's share.
func VMShare(n float64) float64 {
	s := &Sim{CPUs: 2, Policy: PFS}
	for vm, w := range []float64{1024, 1024 * n} {
		for i := 0; i < 6; i++ {
			s.Threads = append(s.Threads, &Thread{Process: vm, Weight: w, CPU: i % 2, Work: math.Inf(1)})
		}
	}
	s.Run(10, Tick)
	return s.ProcessShares(2)[0]
}

// Fig41 is the thesis's fig. 4.1 example on 2 CPUs: T1 (weight 1024) alone
// on CPU 0, T2..T5 (weight 335 each) on CPU 1. CFS does not migrate — the
// imbalance (4×335 − 1024)/2 = 158 is below half a small thread's load,
// 167.5 — so T1 gets 4× a small thread's CPU instead of 1024/335 = 3.06×.
// With shuttle, one small thread moves between the CPUs every period
// (000 §4.4). It returns T1's CPU over a small thread's, and T1's lag
// behind its GPS service (seconds, over the run; fig. 4.4-4.5).
func Fig41(shuttle bool, period float64) (ratio, lag float64) {
	s := &Sim{CPUs: 2}
	s.Threads = append(s.Threads, &Thread{Process: 0, Weight: 1024, CPU: 0, Work: math.Inf(1)})
	for i := 1; i <= 4; i++ {
		s.Threads = append(s.Threads, &Thread{Process: i, Weight: 335, CPU: 1, Work: math.Inf(1)})
	}
	const end = 20.0
	next := period
	for s.Now < end-Tick/2 {
		if shuttle && s.Now >= next {
			sh := s.Threads[4]
			sh.CPU = 1 - sh.CPU
			sh.vruntime = s.minVruntime(sh)
			next += period
		}
		s.Step(Tick)
	}
	var small float64
	for _, t := range s.Threads[1:] {
		small += t.Service / 4
	}
	gps := end * 2 * 1024 / (1024 + 4*335)
	return s.Threads[0].Service / small, math.Abs(s.Threads[0].Service - gps)
}

// SFSExample1 is SFS's first example (003 §2.1): on 2 CPUs, T1 (weight 1)
// and T2 (weight 10) run for 1 s, then T3 (weight 1) arrives. Without
// readjustment T2's weight is infeasible (10/11 of the machine, more than
// one CPU) and T1, whose virtual time ran ahead, starves once T3 arrives;
// with readjustment the weights in force are 1:1 and then 1:2:1. It
// returns the three threads' CPU in the second after T3 arrives.
func SFSExample1(readjust bool) [3]float64 {
	s := &Sim{CPUs: 2, Global: true, Readjust: readjust}
	s.Threads = []*Thread{
		{Process: 0, Weight: 1, Work: math.Inf(1)},
		{Process: 1, Weight: 10, Work: math.Inf(1)},
		{Process: 2, Weight: 1, Work: math.Inf(1), Arrive: 1},
	}
	s.Run(1, Tick)
	before := [3]float64{}
	for i, t := range s.Threads {
		before[i] = t.Service
	}
	s.Run(2, Tick)
	var out [3]float64
	for i, t := range s.Threads {
		out[i] = t.Service - before[i]
	}
	return out
}

// SFSExample2 is SFS's short-jobs experiment (003 §1.2 example 2, §4.3): on
// 2 CPUs, T1 (weight 20), twenty threads of weight 1, and a sequence of
// short threads of weight 5, each running 300 ms, one after another. The
// weights ask for 20:20:5 = 4:4:1, which picking by least surplus (SFS)
// keeps. The paper measured start-time fair queuing giving the groups about
// the same; this model of SFQ (newcomers start at the least start tag) does
// not reproduce that. It returns the groups' shares of the CPU in 30 s.
func SFSExample2(surplus bool) [3]float64 {
	s := &Sim{CPUs: 2, Global: true, Readjust: true, Surplus: surplus}
	s.Threads = append(s.Threads, &Thread{Process: 0, Weight: 20, Work: math.Inf(1)})
	for i := 0; i < 20; i++ {
		s.Threads = append(s.Threads, &Thread{Process: 1, Weight: 1, Work: math.Inf(1)})
	}
	const end = 30.0
	for s.Now < end-Tick/2 {
		short := s.Threads[len(s.Threads)-1]
		if short.Process != 2 || short.Finish != 0 {
			s.Threads = append(s.Threads, &Thread{Process: 2, Weight: 5, Work: 0.3, Arrive: s.Now})
		}
		s.Step(Tick)
	}
	var out [3]float64
	copy(out[:], s.ProcessShares(3))
	return out
}
