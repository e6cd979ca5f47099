// Package sim is a small deterministic CPU scheduler simulator for the
// fairness model. Threads with weights run on CPUs in fixed time steps; a
// CPU runs the thread with the least weighted virtual runtime (the way CFS
// shares a CPU; SFQ's start tag, seed 003 §2.3), taken from its own run
// queue or from one global queue. Options: the thread policies of seed 000,
// quanta, SFS's weight readjustment and surplus picking (seed 003), CFS's
// placement and load balancing by the imbalance rule of 000 eq. 4.1-4.3, and
// the shuttle balancer of 000 §4.4. Every thread also accrues what GMS (GPS
// with SFS's feasibility, fairness.EntitledShares) would have given it, so
// its lag is known. The simulator does no I/O and draws no random numbers:
// the same input gives the same output.
package sim

import (
	"fmt"
	"math"
	"sort"

	"github.com/kubefair/kubefair/node-agent/fairness"
)

// Thread is one simulated thread.
type Thread struct {
	Process int
	// Weight is the thread's own weight (policies may override it).
	Weight float64
	// CPU is the thread's run queue (per-CPU mode). Sim.Place and the
	// balancers change it.
	CPU int
	// Arrive is when the thread becomes runnable; Work is how much CPU it
	// needs before it exits (math.Inf(1) for a greedy thread).
	Arrive, Work float64

	// Service is the CPU time received; Wait the time runnable but not
	// running; Ideal the CPU time GMS would have given it (000 §4.3.1, 003
	// §2.2), so Ideal − Service is its lag (000 fig. 4.4).
	Service, Wait, Ideal float64
	// Finish is when it completed its Work (0 until then).
	Finish float64
	// Migrations counts its moves between run queues.
	Migrations int

	started bool
	// vruntime is the weighted service q/φ summed (CFS's vruntime, SFQ's
	// start tag S between quanta); start is its value when the thread's
	// current quantum began, which is its tag while it runs.
	vruntime, start float64
	held            bool // a CPU runs it until its quantum ends
	ran             bool // it ran in the step being taken
	idx             int  // its place in Sim.Threads
}

func (t *Thread) runnable(now float64) bool { return now >= t.Arrive && t.Finish == 0 }

// tag is SFQ's start tag: fixed while the thread runs a quantum.
func (t *Thread) tag() float64 {
	if t.held {
		return t.start
	}
	return t.vruntime
}

// Policy sets the weights the scheduler uses for one step, one per thread.
type Policy func(s *Sim) []float64

// Sim is one simulation.
type Sim struct {
	CPUs    int
	Threads []*Thread
	// Global picks from one run queue for all CPUs (an ideal balancer);
	// otherwise each CPU picks among the threads on its run queue.
	Global bool
	// Readjust applies SFS's weight readjustment every step (global mode):
	// no thread may ask for more than one CPU (003 §2.1).
	Readjust bool
	// Surplus picks, in global mode, the thread with the least surplus
	// φ·(S − v) instead of the least start tag S (SFS, 003 §2.3); v is the
	// virtual time, the least start tag of the runnable threads.
	Surplus bool
	// Quantum is how long a CPU keeps the thread it picked (SFS's
	// experiments use 200 ms, 003 §4.1); a thread that finishes gives its
	// CPU up at once. 0 picks afresh every step.
	Quantum float64
	// Place puts a thread, when it becomes runnable, on the run queue with
	// the least load (eq. 4.1), as CFS places a new task (000 §4.2.2);
	// otherwise it starts on Thread.CPU.
	Place bool
	// Balance is the period of CFS's load balancer (000 §4.2.1): every
	// period each run queue pulls from the busiest by eq. 4.1-4.3, and a
	// CPU whose run queue is empty pulls a waiting thread at once (000
	// §2.8). 0 leaves threads on their run queues.
	Balance float64
	// Shuttle adds the shuttle-process balancer of 000 §4.4 to every
	// Balance period.
	Shuttle bool
	Policy  Policy
	Now     float64
	// Migrations counts the moves between run queues.
	Migrations int

	virtual     []float64 // per queue: CFS's min_vruntime, SFQ's virtual time v; never decreases
	held        []*Thread // per CPU: the thread it runs until the quantum ends
	left        []float64 // per CPU: what is left of that quantum
	nextBalance float64
	shuttle     *Thread // the shuttle while it is away from its heavy queue
	shuttleHome int
}

// Validate reports what in the simulation cannot run.
func (s *Sim) Validate() error {
	if s.CPUs < 1 {
		return fmt.Errorf("sim: %d CPUs, need at least 1", s.CPUs)
	}
	for _, f := range []struct {
		name string
		v    float64
	}{{"quantum", s.Quantum}, {"balance period", s.Balance}, {"time", s.Now}} {
		if !(f.v >= 0) || math.IsInf(f.v, 0) {
			return fmt.Errorf("sim: %s %v, want a finite number ≥ 0", f.name, f.v)
		}
	}
	if s.Shuttle && (s.Global || s.Balance == 0) {
		return fmt.Errorf("sim: the shuttle balancer needs per-CPU run queues and a balance period")
	}
	for i, t := range s.Threads {
		switch {
		case t == nil:
			return fmt.Errorf("sim: thread %d is nil", i)
		case !(t.Weight > 0) || math.IsInf(t.Weight, 0):
			return fmt.Errorf("sim: thread %d has weight %v, want a finite number > 0", i, t.Weight)
		case t.CPU < 0 || t.CPU >= s.CPUs:
			return fmt.Errorf("sim: thread %d is on CPU %d of %d", i, t.CPU, s.CPUs)
		case !(t.Arrive >= 0) || math.IsInf(t.Arrive, 0):
			return fmt.Errorf("sim: thread %d arrives at %v, want a finite time ≥ 0", i, t.Arrive)
		case !(t.Work > 0):
			return fmt.Errorf("sim: thread %d needs %v s of work, want > 0", i, t.Work)
		case t.Process < 0:
			return fmt.Errorf("sim: thread %d is in process %d, want ≥ 0", i, t.Process)
		}
	}
	return nil
}

// Run validates the simulation and steps it by dt until time end.
func (s *Sim) Run(end, dt float64) error {
	if !(dt > 0) || math.IsInf(dt, 0) {
		return fmt.Errorf("sim: step %v, want a finite number > 0", dt)
	}
	if err := s.Validate(); err != nil {
		return err
	}
	for s.Now < end-dt/2 {
		s.Step(dt)
	}
	return nil
}

func (s *Sim) queues() int {
	if s.Global {
		return 1
	}
	return s.CPUs
}

func (s *Sim) queue(t *Thread) int {
	if s.Global {
		return 0
	}
	return t.CPU
}

// Step advances a valid simulation (see Validate) by dt.
func (s *Sim) Step(dt float64) {
	if s.virtual == nil {
		s.virtual = make([]float64, s.queues())
		s.held = make([]*Thread, s.CPUs)
		s.left = make([]float64, s.CPUs)
		s.nextBalance = s.Balance
	}
	for i, t := range s.Threads {
		t.idx = i
	}
	s.advanceVirtual()
	weights := s.weights()
	s.arrive(weights)
	if !s.Global && s.Balance > 0 {
		moved := s.pullToIdle(weights)
		if s.Now >= s.nextBalance-dt/2 {
			moved = s.balance(weights) || moved
			s.nextBalance += s.Balance
		}
		if moved {
			weights = s.weights()
		}
	}
	var run []int // runnable threads, in order
	for i, t := range s.Threads {
		if t.started && t.runnable(s.Now) {
			run = append(run, i)
		}
	}
	s.accrueIdeal(run, weights, dt)
	if s.Global && s.Readjust {
		w := make([]float64, len(run))
		for k, i := range run {
			w[k] = weights[i]
		}
		for k, adj := range fairness.Readjust(w, s.CPUs) {
			weights[run[k]] = adj
		}
	}
	s.pick(run, weights, dt)

	for cpu, t := range s.held {
		if t == nil {
			continue
		}
		t.vruntime += dt * fairness.Nice0Weight / weights[t.idx]
		t.Service += dt
		t.ran = true
		s.left[cpu] -= dt
		if t.Service >= t.Work-1e-9 {
			t.Finish = s.Now + dt
			s.release(cpu)
		} else if s.left[cpu] < dt/2 {
			s.release(cpu)
		}
	}
	for _, i := range run {
		if t := s.Threads[i]; !t.ran {
			t.Wait += dt
		}
		s.Threads[i].ran = false
	}
	s.Now += dt
}

// advanceVirtual moves each queue's virtual time up to the least tag of its
// runnable threads (003 §2.3: v is the minimum start tag; it stays put while
// the queue is empty).
func (s *Sim) advanceVirtual() {
	least := make([]float64, len(s.virtual))
	for q := range least {
		least[q] = math.Inf(1)
	}
	for _, t := range s.Threads {
		if t.started && t.runnable(s.Now) {
			q := s.queue(t)
			least[q] = math.Min(least[q], t.tag())
		}
	}
	for q, m := range least {
		if !math.IsInf(m, 1) && m > s.virtual[q] {
			s.virtual[q] = m
		}
	}
}

// arrive starts the threads that became runnable: on the least loaded run
// queue with Place, with the queue's virtual time as their tag (a newcomer
// starts level with the least served, CFS and SFQ alike).
func (s *Sim) arrive(weights []float64) {
	var loads []float64
	for i, t := range s.Threads {
		if t.started || !t.runnable(s.Now) {
			continue
		}
		if s.Place && !s.Global {
			if loads == nil {
				loads, _ = s.loads(weights)
			}
			t.CPU = leastLoaded(loads)
			loads[t.CPU] += weights[i]
		}
		t.vruntime = s.virtual[s.queue(t)]
		t.started = true
	}
}

func leastLoaded(loads []float64) int {
	best := 0
	for q, l := range loads {
		if l < loads[best] {
			best = q
		}
	}
	return best
}

// loads are the run queues' loads, the sums of their runnable threads'
// weights (000 eq. 4.1), and how many threads each has.
func (s *Sim) loads(weights []float64) ([]float64, []int) {
	loads, nr := make([]float64, s.CPUs), make([]int, s.CPUs)
	for i, t := range s.Threads {
		if t.started && t.runnable(s.Now) {
			loads[t.CPU] += weights[i]
			nr[t.CPU]++
		}
	}
	return loads, nr
}

// migrate moves t to run queue dst, keeping its place relative to the
// queue's virtual time (as CFS renormalises vruntime); a CPU running it
// loses it.
func (s *Sim) migrate(t *Thread, dst int) {
	if t.CPU == dst {
		return
	}
	if t.held {
		s.release(t.CPU)
	}
	t.vruntime = s.virtual[dst] + math.Max(0, t.vruntime-s.virtual[t.CPU]) // ≥ 0 but for rounding
	t.CPU = dst
	t.Migrations++
	s.Migrations++
}

// lightest is the runnable thread of least weight on run queue q, the first
// of equals; nil if the queue is empty.
func (s *Sim) lightest(q int, weights []float64) *Thread {
	var best *Thread
	bestW := math.Inf(1)
	for i, t := range s.Threads {
		if t.CPU == q && t.started && t.runnable(s.Now) && weights[i] < bestW {
			best, bestW = t, weights[i]
		}
	}
	return best
}

// busiest is the run queue with the most load among those with at least two
// threads (moving a queue's only thread balances nothing); -1 if none.
func busiest(loads []float64, nr []int) int {
	b := -1
	for q := range loads {
		if nr[q] >= 2 && (b < 0 || loads[q] > loads[b]) {
			b = q
		}
	}
	return b
}

// pullToIdle lets every CPU whose run queue is empty pull the lightest
// thread from the busiest queue (000 §2.8: an idle core pulls a waiting
// process). It keeps per-CPU scheduling work-conserving.
func (s *Sim) pullToIdle(weights []float64) bool {
	loads, nr := s.loads(weights)
	moved := false
	for k := range loads {
		if nr[k] > 0 {
			continue
		}
		b := busiest(loads, nr)
		if b < 0 {
			break
		}
		t := s.lightest(b, weights)
		w := weights[t.idx]
		s.migrate(t, k)
		loads[b], nr[b], loads[k], nr[k] = loads[b]-w, nr[b]-1, w, 1
		moved = true
	}
	return moved
}

// Imbalance is 000 eq. 4.2, the load to move from the busiest run queue to
// run queue k: min(min(Load_busiest, Load_avg), Load_avg − Load_k).
func Imbalance(loadBusiest, loadAvg, loadK float64) float64 {
	return math.Min(math.Min(loadBusiest, loadAvg), loadAvg-loadK)
}

// MigrationThreshold is 000 eq. 4.3: CFS migrates only if the imbalance is
// at least half the least weight on the busiest queue.
func MigrationThreshold(leastWeightOnBusiest float64) float64 { return leastWeightOnBusiest / 2 }

// balance is one period of load balancing: every run queue k below the
// average load, in turn, pulls from the busiest queue when eq. 4.2's imbalance reaches eq. 4.3's
// threshold, threads whose half weight fits in the load still to move (the
// rule of eq. 4.3 applied thread by thread); then, if CFS moved nothing,
// the shuttle balancer takes its turn.
func (s *Sim) balance(weights []float64) bool {
	loads, nr := s.loads(weights)
	var total float64
	for _, l := range loads {
		total += l
	}
	avg := total / float64(s.CPUs)
	// The queues below the average at the start of the period pull; one that
	// has just received threads does not hand them straight back.
	below := make([]bool, len(loads))
	for k, l := range loads {
		below[k] = l < avg
	}
	moved := false
	for k := range loads {
		b := busiest(loads, nr)
		if !below[k] || b < 0 || b == k {
			continue
		}
		least := weights[s.lightest(b, weights).idx]
		imbalance := Imbalance(loads[b], avg, loads[k])
		if imbalance < MigrationThreshold(least) {
			continue
		}
		for i, t := range s.Threads {
			if t.CPU != b || !t.started || !t.runnable(s.Now) || nr[b] < 2 {
				continue
			}
			if w := weights[i]; w/2 <= imbalance {
				s.migrate(t, k)
				imbalance -= w
				loads[b], nr[b], loads[k], nr[k] = loads[b]-w, nr[b]-1, loads[k]+w, nr[k]+1
				moved = true
			}
		}
	}
	if !s.Shuttle {
		return moved
	}
	return s.shuttleStep(weights, moved) || moved
}

// shuttleStep is 000 §4.4's balancer. When CFS finds nothing to move and
// the heavy queue has at least two threads more than the light one, the
// heavy queue's lightest thread (the shuttle) goes to the light queue for
// one period and comes back for the next, and so on; CFS's own migrations
// come first.
func (s *Sim) shuttleStep(weights []float64, cfsMoved bool) bool {
	if sh := s.shuttle; sh != nil && (sh.CPU == s.shuttleHome || !sh.runnable(s.Now)) {
		s.shuttle = nil // CFS took it home, or it finished
	}
	if cfsMoved {
		return false
	}
	if s.shuttle != nil {
		s.migrate(s.shuttle, s.shuttleHome)
		s.shuttle = nil
		return true
	}
	loads, nr := s.loads(weights)
	heavy, light := 0, 0
	for q, l := range loads {
		if l > loads[heavy] {
			heavy = q
		}
		if l < loads[light] {
			light = q
		}
	}
	if nr[heavy]-nr[light] <= 1 {
		return false
	}
	s.shuttle, s.shuttleHome = s.lightest(heavy, weights), heavy
	s.migrate(s.shuttle, light)
	return true
}

// accrueIdeal adds each runnable thread's GMS service for the step: its
// entitled share of the machine by the weights asked for, never more than
// one CPU (fairness.EntitledShares).
func (s *Sim) accrueIdeal(run []int, weights []float64, dt float64) {
	ps := make([]fairness.Principal, len(run))
	for k, i := range run {
		ps[k] = fairness.Principal{Weight: weights[i], Threads: 1, Demand: 1}
	}
	for k, share := range fairness.EntitledShares(ps, s.CPUs) {
		s.Threads[run[k]].Ideal += share * float64(s.CPUs) * dt
	}
}

func (s *Sim) release(cpu int) {
	if t := s.held[cpu]; t != nil {
		t.held = false
		s.held[cpu] = nil
	}
}

// pick gives every CPU without a thread the runnable thread it would
// choose: the least start tag (or, with Surplus, the least surplus) of the
// global queue, or the least vruntime of its own queue; ties go to the
// earlier thread.
func (s *Sim) pick(run []int, weights []float64, dt float64) {
	for cpu, t := range s.held {
		if t != nil && (!t.runnable(s.Now) || (!s.Global && t.CPU != cpu)) {
			s.release(cpu)
		}
	}
	var free []int
	for cpu, t := range s.held {
		if t == nil {
			free = append(free, cpu)
		}
	}
	if len(free) == 0 {
		return
	}
	take := func(cpu int, t *Thread) {
		s.held[cpu], s.left[cpu] = t, s.Quantum
		if s.Quantum == 0 {
			s.left[cpu] = dt
		}
		t.held, t.start = true, t.vruntime
	}
	if !s.Global {
		best := make([]*Thread, s.CPUs)
		for _, i := range run {
			t := s.Threads[i]
			if !t.held && (best[t.CPU] == nil || t.vruntime < best[t.CPU].vruntime) {
				best[t.CPU] = t
			}
		}
		for _, cpu := range free {
			if best[cpu] != nil {
				take(cpu, best[cpu])
			}
		}
		return
	}
	type candidate struct {
		t   *Thread
		key float64
	}
	var cs []candidate
	for _, i := range run {
		t := s.Threads[i]
		if t.held {
			continue
		}
		key := t.vruntime
		if s.Surplus {
			key = weights[i] * (t.vruntime - s.virtual[0])
		}
		cs = append(cs, candidate{t, key})
	}
	sort.SliceStable(cs, func(a, b int) bool { return cs[a].key < cs[b].key })
	for k, cpu := range free {
		if k >= len(cs) {
			break
		}
		take(cpu, cs[k].t)
	}
}

// ProcessShares is each process's share of the CPU time all threads used.
func (s *Sim) ProcessShares(processes int) []float64 {
	out := make([]float64, processes)
	var total float64
	for _, t := range s.Threads {
		if t.Process < processes {
			out[t.Process] += t.Service
		}
		total += t.Service
	}
	for i := range out {
		if total > 0 {
			out[i] /= total
		}
	}
	return out
}

func (s *Sim) weights() []float64 {
	if s.Policy != nil {
		return s.Policy(s)
	}
	return None(s)
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
		w[i] = fairness.PFSThreadWeight(t.Weight, max(n[t.Process], 1))
	}
	return w
}

// TFPS scales by online CPUs / threads (000 §3.3.3).
func TFPS(s *Sim) []float64 {
	n, _, _ := runnableThreads(s)
	w := make([]float64, len(s.Threads))
	for i, t := range s.Threads {
		w[i] = fairness.TFPSThreadWeight(t.Weight, max(n[t.Process], 1), s.CPUs)
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
