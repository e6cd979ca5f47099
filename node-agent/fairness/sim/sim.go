// Package sim is a small deterministic CPU scheduler simulator for the
// fairness model: threads with weights on CPUs, picked by least weighted
// virtual runtime (the way CFS/EEVDF share a CPU), either from one run queue
// per CPU (threads stay where they were placed) or from one global queue
// (an ideal balancer), with the thread policies of seed 000 and SFS's weight
// readjustment (seed 003) as options. It does no I/O.
package sim

import (
	"math"
	"sort"

	"github.com/kubefair/kubefair/node-agent/fairness"
)

// Thread is one simulated thread.
type Thread struct {
	Process int
	// Weight is the thread's own weight (policies may override it).
	Weight float64
	// CPU is the run queue the thread is on (per-CPU mode).
	CPU int
	// Arrive is when the thread becomes runnable; Work is how much CPU it
	// needs before it exits (math.Inf(1) for a greedy thread).
	Arrive, Work float64

	vruntime float64
	// Service is the CPU time received; Wait the time runnable but not running.
	Service, Wait float64
	// Finish is when it completed its Work (0 while running).
	Finish float64
}

func (t *Thread) runnable(now float64) bool { return now >= t.Arrive && t.Finish == 0 }

// Policy sets the weights the scheduler uses for one tick.
type Policy func(s *Sim) []float64

// Sim is one simulation.
type Sim struct {
	CPUs    int
	Threads []*Thread
	// Global picks from one run queue for all CPUs; otherwise each CPU
	// picks among the threads placed on it.
	Global bool
	// Readjust applies SFS's weight readjustment each tick (global mode):
	// no thread may ask for more than one CPU.
	Readjust bool
	// Surplus picks, in global mode, the threads with the least surplus
	// φ·(S − v) instead of the least start tag S (SFS, 003 §2.3); v is the
	// least start tag of the runnable threads.
	Surplus bool
	Policy  Policy
	Now     float64
}

// Step advances the simulation by dt.
func (s *Sim) Step(dt float64) {
	weights := s.weights()
	var run []*Thread
	var runW []float64
	idx := map[*Thread]int{}
	for i, t := range s.Threads {
		if t.runnable(s.Now) {
			if t.vruntime == 0 && t.Service == 0 {
				t.vruntime = s.minVruntime(t) // a newcomer starts level with the others
			}
			run = append(run, t)
			runW = append(runW, weights[i])
			idx[t] = i
		}
	}
	if s.Global && s.Readjust {
		adj := fairness.Readjust(runW, s.CPUs)
		for i, t := range run {
			weights[idx[t]] = adj[i]
		}
	}
	var chosen []*Thread
	if s.Global && s.Surplus {
		chosen = pickSurplus(run, runW, s.CPUs)
	} else if s.Global {
		chosen = pick(run, s.CPUs)
	} else {
		for cpu := 0; cpu < s.CPUs; cpu++ {
			var q []*Thread
			for _, t := range run {
				if t.CPU == cpu {
					q = append(q, t)
				}
			}
			chosen = append(chosen, pick(q, 1)...)
		}
	}
	running := map[*Thread]bool{}
	for _, t := range chosen {
		running[t] = true
		w := weights[idx[t]]
		if w <= 0 {
			w = 1e-9
		}
		t.vruntime += dt * fairness.Nice0Weight / w
		t.Service += dt
		if t.Service >= t.Work {
			t.Finish = s.Now + dt
		}
	}
	for _, t := range run {
		if !running[t] {
			t.Wait += dt
		}
	}
	s.Now += dt
}

// Run steps until time end.
func (s *Sim) Run(end, dt float64) {
	for s.Now < end-dt/2 {
		s.Step(dt)
	}
}

func (s *Sim) weights() []float64 {
	if s.Policy != nil {
		return s.Policy(s)
	}
	w := make([]float64, len(s.Threads))
	for i, t := range s.Threads {
		w[i] = t.Weight
	}
	return w
}

// minVruntime is the least virtual runtime among the threads t will
// compete with.
func (s *Sim) minVruntime(t *Thread) float64 {
	m := math.Inf(1)
	for _, o := range s.Threads {
		if o != t && o.runnable(s.Now) && (o.Service > 0 || o.vruntime > 0) && (s.Global || o.CPU == t.CPU) {
			m = math.Min(m, o.vruntime)
		}
	}
	if math.IsInf(m, 1) {
		return 0
	}
	return m
}

// pick returns up to n threads with the least virtual runtime (ties by
// order, so runs are deterministic).
func pick(q []*Thread, n int) []*Thread {
	sorted := append([]*Thread(nil), q...)
	sort.SliceStable(sorted, func(i, j int) bool { return sorted[i].vruntime < sorted[j].vruntime })
	if len(sorted) > n {
		sorted = sorted[:n]
	}
	return sorted
}

// pickSurplus returns up to n threads with the least surplus w·(S − v).
func pickSurplus(q []*Thread, w []float64, n int) []*Thread {
	v := math.Inf(1)
	for _, t := range q {
		v = math.Min(v, t.vruntime)
	}
	type cand struct {
		t       *Thread
		surplus float64
	}
	cs := make([]cand, len(q))
	for i, t := range q {
		cs[i] = cand{t, w[i] * (t.vruntime - v)}
	}
	sort.SliceStable(cs, func(i, j int) bool { return cs[i].surplus < cs[j].surplus })
	var out []*Thread
	for i := 0; i < len(cs) && i < n; i++ {
		out = append(out, cs[i].t)
	}
	return out
}

// ProcessShares is each process's share of the CPU time all threads used.
func (s *Sim) ProcessShares(processes int) []float64 {
	out := make([]float64, processes)
	var total float64
	for _, t := range s.Threads {
		out[t.Process] += t.Service
		total += t.Service
	}
	for i := range out {
		if total > 0 {
			out[i] /= total
		}
	}
	return out
}

// The thread policies of seed 000 §3.3 for processes sharing one machine.

// None gives every thread its own weight (stock Linux).
func None(s *Sim) []float64 {
	w := make([]float64, len(s.Threads))
	for i, t := range s.Threads {
		w[i] = t.Weight
	}
	return w
}

// runnableThreads counts each process's runnable threads, in total and per CPU.
func runnableThreads(s *Sim) (perProcess map[int]int, perCPU map[int]int, perCPUProcess map[[2]int]int) {
	perProcess, perCPU, perCPUProcess = map[int]int{}, map[int]int{}, map[[2]int]int{}
	for _, t := range s.Threads {
		if t.runnable(s.Now) {
			perProcess[t.Process]++
			perCPU[t.CPU]++
			perCPUProcess[[2]int{t.CPU, t.Process}]++
		}
	}
	return
}

// PFS divides a process's weight among its runnable threads (000 §3.3.2).
func PFS(s *Sim) []float64 {
	n, _, _ := runnableThreads(s)
	w := make([]float64, len(s.Threads))
	for i, t := range s.Threads {
		w[i] = fairness.PFSThreadWeight(t.Weight, n[t.Process])
	}
	return w
}

// TFPS scales by online CPUs / threads (000 §3.3.3).
func TFPS(s *Sim) []float64 {
	n, _, _ := runnableThreads(s)
	w := make([]float64, len(s.Threads))
	for i, t := range s.Threads {
		w[i] = fairness.TFPSThreadWeight(t.Weight, n[t.Process], s.CPUs)
	}
	return w
}

// TWRS readjusts a thread's weight by the threads on its CPU's run queue:
// w × (threads on the CPU − threads of its own process on the CPU)
// (000 eq. 3.3, 001 eq. 4); a process alone on its CPU keeps w.
func TWRS(s *Sim) []float64 {
	_, cpu, cpuProc := runnableThreads(s)
	w := make([]float64, len(s.Threads))
	for i, t := range s.Threads {
		others := cpu[t.CPU] - cpuProc[[2]int{t.CPU, t.Process}]
		if others <= 0 {
			w[i] = t.Weight
			continue
		}
		w[i] = t.Weight * float64(others)
	}
	return w
}
