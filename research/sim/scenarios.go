package sim

import "math"

// Tick is the simulated scheduling granularity (seconds).
const Tick = 0.001

// S0Result is one run of the thesis's S0 experiment (000 §3.6, table 3.2):
// processes A, B and C with 1, 8 and k threads on one CPU.
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
	mustRun(greedy, 20)
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

// VMShare is 000 table 5.3's setting: two VMs with 6 vCPU threads each on 2
// CPUs (3 threads of each per CPU), VM weights 1 and n, threads weighted
// process-fairly inside each VM. It returns VM 1's share.
func VMShare(n float64) float64 {
	s := &Sim{CPUs: 2, Policy: PFS}
	for vm, w := range []float64{1024, 1024 * n} {
		for i := 0; i < 6; i++ {
			s.Threads = append(s.Threads, &Thread{Process: vm, Weight: w, CPU: i % 2, Work: math.Inf(1)})
		}
	}
	mustRun(s, 10)
	return s.ProcessShares(2)[0]
}

// Fig. 4.1's setting (000 §4.2.2, §4.5.2): T1 of weight 1024 (nice 0) and
// T2..T5 of weight 335 (nice 5), all CPU-bound, on 2 CPUs.
const (
	fig41Heavy = 1024
	fig41Light = 335
	// Fig41Balance is the load balancer's period, and so the shuttle's.
	Fig41Balance = 0.1
)

// Fig41GPSRatio is how much more CPU T1 gets than a small thread under
// GPS: 1024/335 = 3.06.
const Fig41GPSRatio = float64(fig41Heavy) / fig41Light

// LagTimes are when Fig41 records T1's lag (fig. 4.4).
var LagTimes = []float64{0.2, 1, 5, 10, 20}

// Fig41Start is where fig. 4.1's threads start.
type Fig41Start int

const (
	// OnArrival places T1..T5, in that order, each on the run queue with
	// the least load, as CFS places new tasks.
	OnArrival Fig41Start = iota
	// AllOnCPU0 starts all five on CPU 0 and leaves the rest to the
	// balancer.
	AllOnCPU0
)

func (f Fig41Start) String() string {
	if f == AllOnCPU0 {
		return "all on CPU 0"
	}
	return "on arrival"
}

// Fig41Result is one run of fig. 4.1's example.
type Fig41Result struct {
	// Service and Ideal (GPS) are each thread's CPU-seconds over the run,
	// T1 first; Queues is each thread's run queue at the end.
	Service, Ideal [5]float64
	Queues         [5]int
	// Ratio is T1's CPU over the mean of the small threads' (GPS: 3.06).
	Ratio float64
	// Lag is T1's GPS service minus its own at each of LagTimes (fig. 4.4).
	Lag []float64
	// Migrations counts moves between run queues.
	Migrations int
	// Loads are the run queues' loads at the end (000 eq. 4.1).
	Loads [2]float64
}

// Fig41 runs fig. 4.1's example for 20 s with CFS's load balancer (000
// eq. 4.1-4.3) every 100 ms, and optionally the shuttle balancer (§4.4).
// Nothing is placed by hand: from either start the balancer ends with T1
// alone on one CPU, because the imbalance, 158, stays below half a small
// thread's weight, 167.5, and T1 then runs 4× a small thread instead of
// 3.06×; the shuttle moves T1 towards 3.06×.
func Fig41(start Fig41Start, shuttle bool) Fig41Result {
	s := &Sim{CPUs: 2, Place: start == OnArrival, Balance: Fig41Balance, Shuttle: shuttle}
	for i := 0; i < 5; i++ {
		w := float64(fig41Light)
		if i == 0 {
			w = fig41Heavy
		}
		s.Threads = append(s.Threads, &Thread{Process: i, Weight: w, Work: math.Inf(1)})
	}
	var r Fig41Result
	for _, at := range LagTimes {
		mustRun(s, at)
		r.Lag = append(r.Lag, s.Threads[0].Ideal-s.Threads[0].Service)
	}
	var small float64
	for i, t := range s.Threads {
		r.Service[i], r.Ideal[i], r.Queues[i] = t.Service, t.Ideal, t.CPU
		r.Loads[t.CPU] += t.Weight
		if i > 0 {
			small += t.Service / 4
		}
	}
	r.Ratio = r.Service[0] / small
	r.Migrations = s.Migrations
	return r
}

// mustRun runs a scenario built in this file, whose input is valid.
func mustRun(s *Sim, end float64) {
	if err := s.Run(end, Tick); err != nil {
		panic(err)
	}
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
	mustRun(s, 1)
	before := [3]float64{}
	for i, t := range s.Threads {
		before[i] = t.Service
	}
	mustRun(s, 2)
	var out [3]float64
	for i, t := range s.Threads {
		out[i] = t.Service - before[i]
	}
	return out
}

// SFSQuantum is the quantum of SFS's experiments (003 §4.1: Linux's 200 ms).
const SFSQuantum = 0.2

// SFSExample2 is SFS's short-jobs experiment (003 §4.3, after §1.2's
// example 2): on 2 CPUs, T1 of weight 20 and twenty threads of weight 1, all
// CPU-bound, and a sequence of short threads of weight 5 that need 300 ms of
// CPU each, the next arriving as soon as the previous finishes; weights
// readjusted (never changed: they are feasible), quanta of the given length.
// The weights ask for 20:20:5 = 4:4:1. Every short thread starts at the
// virtual time v, so it is first in line (least start tag; surplus 0). It
// returns the three groups' shares of the CPU over 60 s, SFQ's (least start
// tag) or, with surplus, SFS's (least surplus).
func SFSExample2(surplus bool, quantum float64) [3]float64 {
	s := &Sim{CPUs: 2, Global: true, Readjust: true, Surplus: surplus, Quantum: quantum}
	s.Threads = append(s.Threads, &Thread{Process: 0, Weight: 20, Work: math.Inf(1)})
	for i := 0; i < 20; i++ {
		s.Threads = append(s.Threads, &Thread{Process: 1, Weight: 1, Work: math.Inf(1)})
	}
	const end = 60.0
	for s.Now < end-Tick/2 {
		if short := s.Threads[len(s.Threads)-1]; short.Process != 2 || short.Finish != 0 {
			s.Threads = append(s.Threads, &Thread{Process: 2, Weight: 5, Work: 0.3, Arrive: s.Now})
		}
		s.Step(Tick)
	}
	var out [3]float64
	copy(out[:], s.ProcessShares(3))
	return out
}
