// Package threads is the thread-level enforcement layer: inside each pod it
// gives every thread the weight its tenant's thread policy asks for, through
// the patched kernel's sched_setweight() when the kernel publishes that ABI
// (the `syscall` backend), or rounded to per-thread nice levels when it does
// not (the `nice` backend, which reports the error its rounding causes).
// On ABI 2 kernels PFS and TWRS are one process mode per process, and the
// kernel keeps the thread weights right as threads come and go; TFPS, and
// PFS on ABI 1, are weights per thread. It is the only code that calls
// these system calls.
package threads

import (
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/kubefair/kubefair/node-agent/enforce"
	"github.com/kubefair/kubefair/node-agent/fairness"
	"github.com/kubefair/kubefair/node-agent/internal/taskstat"
)

// The kernel ABI (kernel/README.md). The numbers mean sched_setweight and
// sched_getweight only on a kernel whose probe file publishes an ABI
// version: other kernels use them for other calls (463 is setxattrat from
// 6.13 on).
const (
	// ABIVersion is the first ABI: thread and process weights.
	ABIVersion = 1
	// ModesABI adds the process modes PFS and TWRS.
	ModesABI          = 2
	sysSchedSetweight = 463
	sysSchedGetweight = 464
	// MinWeight and MaxWeight bound sched_setweight's weight.
	MinWeight = 2
	MaxWeight = 1 << 20

	flagProcess = 0x1 // SCHED_WEIGHT_PROCESS: every thread of the process
	modePFS     = 0x2 // SCHED_WEIGHT_MODE_PFS
	modeTWRS    = 0x4 // SCHED_WEIGHT_MODE_TWRS
	flagGetMode = 0x8 // SCHED_WEIGHT_GET_MODE
)

// KnownABI is true for the ABI versions this backend speaks: from the first
// (thread and process weights) to the modes. The calls' numbers mean
// sched_setweight/getweight only on such kernels.
func KnownABI(v int) bool { return v >= ABIVersion && v <= ModesABI }

// ProbeABI reads the ABI version the kernel publishes, 0 when it has none.
func ProbeABI(procRoot string) int {
	data, err := os.ReadFile(filepath.Join(procRoot, "sys", "kernel", "sched_weight_abi"))
	if err != nil {
		return 0
	}
	v, err := strconv.Atoi(strings.TrimSpace(string(data)))
	if err != nil {
		return 0
	}
	return v
}

// Kind is the mechanism a Backend uses.
type Kind string

const (
	Syscall Kind = "syscall"
	Nice    Kind = "nice"
)

// Backend sets thread weights inside pods.
type Backend struct {
	kind     Kind
	cpus     int
	procRoot string
	// abi is the kernel's sched_setweight ABI (syscall backend).
	abi int

	mu sync.Mutex
	// held is what we last set per thread (weight or nice level).
	held map[int]heldThread
	// inherited is, per process, each nice level the nice backend set on
	// one of its threads, and that thread's original level: the threads it
	// starts later hold its level, and get its original back.
	inherited map[int]map[int]int
	// modes is the process mode and weight we last set per process (ABI 2).
	modes map[int]heldMode
	// loops hold, per pod (by UID), each process at its part of the pod
	// under the pod's policy (fairness.ProcessTargets) through its process
	// weight: the kernel splits a process's weight among its threads, but
	// on several CPUs the load balancer's placement decides what each
	// process gets (syscall backend).
	loops map[string]*fairness.Loop
	// started is each thread's or process's start time when the backend
	// first set its value: an id whose start time differs now belongs to
	// another task (ids are reused), which no restore may touch.
	started map[int]uint64
	// named is prune's scratch set of the ids the plan names, kept to
	// spare an allocation per period.
	named map[int]bool
}

// heldMode is a process mode the backend set, with the process weight.
type heldMode struct{ mode, weight int }

// heldThread is a value the backend set on a thread.
type heldThread struct {
	value    int // the weight (syscall) or nice level (nice) set, for drift
	original int // the nice level before the nice backend changed it
	pid      int // its process
}

// New returns the syscall backend when the kernel publishes the ABI, else
// an error wrapping ErrNoABI (the caller decides whether to fall back to
// NewNice).
func New(procRoot string, cpus int) (*Backend, error) {
	v := ProbeABI(procRoot)
	if !KnownABI(v) {
		return nil, fmt.Errorf("%w (probe %s/sys/kernel/sched_weight_abi reads %d, want %d..%d)", ErrNoABI, procRoot, v, ABIVersion, ModesABI)
	}
	// The kernel has the calls; a seccomp profile may still refuse them
	// (RuntimeDefault does). Ask for our own weight once to find out.
	if _, err := getweight(unix.Gettid(), 0); err != nil {
		return nil, fmt.Errorf("%w: sched_getweight is refused (%v); allow it in the agent's seccomp profile", ErrNoABI, err)
	}
	b := newBackend(Syscall, procRoot, cpus)
	b.abi = v
	return b, nil
}

// NewNice returns the nice fallback, which works on any kernel.
func NewNice(procRoot string, cpus int) *Backend { return newBackend(Nice, procRoot, cpus) }

func newBackend(kind Kind, procRoot string, cpus int) *Backend {
	return &Backend{kind: kind, cpus: cpus, procRoot: procRoot, held: map[int]heldThread{}, inherited: map[int]map[int]int{}, modes: map[int]heldMode{}, loops: map[string]*fairness.Loop{}, started: map[int]uint64{}}
}

// KernelABI is the sched_setweight ABI in use, 0 for the nice backend.
func (b *Backend) KernelABI() int { return b.abi }

// ErrNoABI: the kernel does not have kubefair's sched_setweight().
var ErrNoABI = errors.New("the kernel does not publish the sched_setweight ABI")

// Name is what the node's report shows.
func (b *Backend) Name() string { return string(b.kind) }

// threadWeights gives every thread of a pod its weight under the pod's
// policy, in nice-0 = 1024 units, from each process's weight (weights, in
// pod.Processes' order): PFS gives each of its threads an n-th of it for n
// runnable threads, as integers any n of which add up to it exactly
// (rounding each thread alone would skew a 200-thread process by several
// points); TFPS scales it by CPUs / n. n is the process's runnable
// threads over the window (runnable; at most the threads that ran).
// Without a window, every thread that ran counts.
func threadWeights(pod enforce.Pod, cpus int, weights []int, window time.Duration) map[int]float64 {
	out := map[int]float64{}
	for i, p := range pod.Processes {
		n := len(p.Threads)
		if n == 0 {
			continue
		}
		if window > 0 {
			n = min(n, runnable(p, window))
		}
		processWeight := weights[i]
		switch pod.ThreadPolicy {
		case fairness.PFS:
			base, extra := processWeight/n, processWeight%n
			for i, tid := range p.Threads {
				w := base
				if i%n < extra {
					w++
				}
				out[tid] = float64(max(w, MinWeight))
			}
		case fairness.TFPS:
			for _, tid := range p.Threads {
				out[tid] = math.Max(MinWeight, math.Round(fairness.TFPSThreadWeight(float64(processWeight), n, cpus)))
			}
		default: // None; TWRS only as the kernel's process mode (ABI 2)
		}
	}
	return out
}

// runnable is how many of a process's threads were runnable in the
// window: the run + wait over it of those runnable at least half of it
// (enforce.Process.Busy), rounded, at least 1. Helpers that wake for
// moments, such as the Go runtime's, do not count: each would take a
// runnable thread's part of the weight, and their waits grow with the
// load. One runnable most of the time does count, as the kernel's modes
// count it (docs/guest-node.md: a Go burner's sysmon in the TCG guest).
func runnable(p enforce.Process, window time.Duration) int {
	return max(1, int(math.Round(float64(p.Busy)/float64(window))))
}

// processWeight is a process's weight in nice-0 = 1024 units before its
// pod's loop corrects it. Heavier ones are not used on purpose: with one
// thread hundreds of times heavier than others EEVDF's shares drift from
// the weights (kernel/README.md).
const processWeight = fairness.Nice0Weight

// processCorrection is the per-pod loop's correction: the tenants' gain
// (fairness.DefaultCorrection) in a wider range, since the kernel's modes
// already set the threads' weights far apart (docs/guest-node.md has the
// TWRS run that sat on the tenants' 1/8).
var processCorrection = fairness.Correction{Gain: fairness.DefaultCorrection.Gain, Min: 1.0 / 32, Max: 32}

// processWeights is the weight of each of the pod's processes (in
// pod.Processes' order): processWeight, times what the pod's loop learnt
// where the backend is the syscall one and the policy splits the pod
// between its processes (fairness.ProcessTargets). The loop compares each
// process's CPU in the window with its target, among the backlogged
// processes, by how many of their threads were runnable (runnable: helper
// threads that wake for a moment would otherwise move the targets every
// period, and a target that moves restarts the loop).
func (b *Backend) processWeights(pod enforce.Pod, window, period time.Duration) []int {
	out := make([]int, len(pod.Processes))
	for i := range out {
		out[i] = processWeight
	}
	var targets []float64
	if b.kind == Syscall && len(pod.Processes) > 1 && window > 0 {
		counts := make([]float64, len(pod.Processes))
		for i, p := range pod.Processes {
			counts[i] = float64(runnable(p, window))
		}
		targets = fairness.ProcessTargets(pod.ThreadPolicy, counts)
	}
	if targets == nil {
		delete(b.loops, pod.UID)
		return out
	}
	l := b.loops[pod.UID]
	if l == nil {
		l = &fairness.Loop{}
		b.loops[pod.UID] = l
	}
	in := make([]fairness.LoopInput, len(pod.Processes))
	for i, p := range pod.Processes {
		in[i] = fairness.LoopInput{Name: strconv.Itoa(p.PID), Entitled: targets[i], CPU: p.CPU, Backlogged: fairness.Backlogged(p.Wait, window)}
	}
	// A period's window lands a hair either side of the period (the
	// ticker): each one counts, a kicked step's short one adds to the next.
	for i, m := range l.Step(processCorrection, in, window, period-period/10) {
		out[i] = int(math.Round(math.Min(MaxWeight, math.Max(MinWeight, processWeight*m))))
	}
	return out
}

// modeOf is the kernel's process mode for a policy, 0 when the policy is
// not one (or this backend cannot set modes).
func (b *Backend) modeOf(policy fairness.ThreadPolicy) int {
	if b.kind != Syscall || b.abi < ModesABI {
		return 0
	}
	switch policy {
	case fairness.PFS:
		return modePFS
	case fairness.TWRS:
		return modeTWRS
	}
	return 0
}

// Apply sets each process's mode or each thread's weight, writing only what
// differs.
func (b *Backend) Apply(plan enforce.Plan) (enforce.Result, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	var res enforce.Result
	var errs []error
	defer b.prune(plan)
	for _, pod := range plan.Pods {
		weights := b.processWeights(pod, plan.Window, plan.Period)
		if mode := b.modeOf(pod.ThreadPolicy); mode != 0 {
			for i, p := range pod.Processes {
				if err := b.setMode(p, mode, weights[i], &res); err != nil {
					errs = append(errs, err)
				}
			}
			continue
		}
		if b.kind == Syscall && b.abi >= ModesABI {
			// A mode we set is left when the policy changes; for TFPS any
			// mode is, as per-thread weights are refused (EBUSY) in one.
			for _, p := range pod.Processes {
				if _, ours := b.modes[p.PID]; !ours && pod.ThreadPolicy != fairness.TFPS {
					continue
				}
				if err := b.leaveMode(p.PID, &res); err != nil {
					errs = append(errs, err)
				}
			}
		}
		threadWeight := threadWeights(pod, b.cpus, weights, plan.Window)
		var exact, rounded []float64
		for _, p := range pod.Processes {
			var e, r float64
			for _, tid := range p.Threads {
				w, ok := threadWeight[tid]
				if !ok {
					continue
				}
				got, err := b.set(tid, p.PID, w, &res)
				if err != nil {
					errs = append(errs, err)
				}
				e += w
				r += got
			}
			if e > 0 {
				exact, rounded = append(exact, e), append(rounded, r)
			}
		}
		if b.kind == Nice {
			res.NiceRoundingErrorPoints = math.Max(res.NiceRoundingErrorPoints, fairness.NiceShareErrorPoints(exact, rounded))
		}
	}
	return res, errors.Join(errs...)
}

// setMode puts a process in the kernel's mode with the process weight,
// unless it is there already.
func (b *Backend) setMode(p enforce.Process, mode, weight int, res *enforce.Result) error {
	haveMode, err := getweight(p.PID, flagProcess|flagGetMode)
	var haveWeight int
	if err == nil {
		haveWeight, err = getweight(p.PID, flagProcess)
	}
	if errors.Is(err, unix.ESRCH) {
		res.Vanished++
		delete(b.modes, p.PID)
		return nil
	}
	if err != nil {
		return fmt.Errorf("sched_getweight(%d, process): %w", p.PID, err)
	}
	if last, ok := b.modes[p.PID]; ok && last != (heldMode{haveMode, haveWeight}) {
		res.Drift++
	}
	if haveMode != mode || haveWeight != weight {
		if err := setweight(p.PID, flagProcess|mode, weight); err != nil {
			if errors.Is(err, unix.ESRCH) {
				res.Vanished++
				delete(b.modes, p.PID)
				return nil
			}
			return fmt.Errorf("sched_setweight(%d, process mode %#x, %d): %w", p.PID, mode, weight, err)
		}
		res.Writes++
	}
	b.own(p.PID)
	b.modes[p.PID] = heldMode{mode, weight}
	// The mode owns the threads' weights now: nothing per thread to restore.
	for _, tid := range p.Threads {
		delete(b.held, tid)
	}
	return nil
}

// leaveMode takes a process out of a kernel mode, with its threads back at
// their nice weights, if it is in one.
func (b *Backend) leaveMode(pid int, res *enforce.Result) error {
	mode, err := getweight(pid, flagProcess|flagGetMode)
	if err == nil && mode != 0 {
		if err = setweight(pid, flagProcess, 0); err == nil {
			res.Writes++
		}
	}
	delete(b.modes, pid)
	if errors.Is(err, unix.ESRCH) {
		res.Vanished++
		return nil
	}
	if err != nil {
		return fmt.Errorf("leaving the process mode of %d: %w", pid, err)
	}
	return nil
}

// set gives one thread of process pid the weight w and returns the weight
// it really got: exact through the syscall, the nearest nice level's
// with nice.
func (b *Backend) set(tid, pid int, w float64, res *enforce.Result) (float64, error) {
	want := int(math.Round(math.Min(MaxWeight, math.Max(MinWeight, w))))
	got := float64(want)
	if b.kind == Nice {
		want, got = fairness.NearestNice(w)
	}
	have, err := b.value(tid)
	if errors.Is(err, unix.ESRCH) {
		res.Vanished++
		return got, nil
	}
	if err != nil {
		return got, fmt.Errorf("reading the %s value of thread %d: %w", b.kind, tid, err)
	}
	last, ok := b.held[tid]
	if !ok {
		last.original, ok = b.inherited[pid][have] // started by a thread we set
		if !ok {
			last.original = have
		}
	} else if last.value != have {
		res.Drift++
	}
	if have != want {
		if err := b.write(tid, want); err != nil {
			if errors.Is(err, unix.ESRCH) {
				res.Vanished++
				return got, nil
			}
			return got, fmt.Errorf("setting the %s value of thread %d to %d: %w", b.kind, tid, want, err)
		}
		res.Writes++
		if b.kind == Nice {
			if b.inherited[pid] == nil {
				b.inherited[pid] = map[int]int{}
			}
			b.inherited[pid][want] = last.original
		}
	}
	b.own(tid)
	b.held[tid] = heldThread{value: want, original: last.original, pid: pid}
	return got, nil
}

// Restore gives every thread of the pods its default weight back: out of
// the process mode and weight 0 (the nice level's) for the syscall backend,
// the original nice level for the nice backend. Threads that are gone are
// forgotten.
func (b *Backend) Restore(pods []enforce.Pod) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	var errs []error
	swept := map[int]bool{}
	for _, pod := range pods {
		for _, p := range pod.Processes {
			if err := b.restoreMode(p.PID); err != nil {
				errs = append(errs, err)
			}
			for _, tid := range p.Threads {
				errs = append(errs, b.restore(tid, swept))
			}
		}
	}
	return errors.Join(errs...)
}

// RestoreAll restores every thread this backend changed.
func (b *Backend) RestoreAll() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	var errs []error
	for pid := range b.modes {
		if err := b.restoreMode(pid); err != nil {
			errs = append(errs, err)
		}
	}
	swept := map[int]bool{}
	for tid := range b.held {
		errs = append(errs, b.restore(tid, swept))
	}
	return errors.Join(errs...)
}

// restoreMode ends the process mode this backend set on pid, if any, and
// if pid is still that process.
func (b *Backend) restoreMode(pid int) error {
	if _, ok := b.modes[pid]; !ok {
		return nil
	}
	delete(b.modes, pid)
	if !b.same(pid) {
		return nil
	}
	if err := setweight(pid, flagProcess, 0); err != nil && !errors.Is(err, unix.ESRCH) {
		return fmt.Errorf("ending the process mode of %d: %w", pid, err)
	}
	return nil
}

// restore gives the threads of tid's process that it set their default
// back (weight 0, the nice level's, or the original nice level), each
// while it is still the thread it set, and with them the threads of the
// process that hold a value inherited from one of them: those started
// since the last Apply, or idle since, were never set (the Go runtime
// makes such threads). swept holds the threads of the processes already
// restored.
func (b *Backend) restore(tid int, swept map[int]bool) error {
	h, ok := b.held[tid]
	if !ok || swept[tid] {
		return nil
	}
	if !b.same(tid) { // gone, or the id is another task's now: its threads are not ours
		delete(b.held, tid)
		swept[tid] = true
		return nil
	}
	threads := taskstat.Threads(b.procRoot, tid)
	inherited := b.inherited[h.pid]
	delete(b.inherited, h.pid)
	var errs []error
	for _, th := range threads {
		if h, ok := b.held[th]; ok && !swept[th] {
			swept[th] = true
			delete(b.held, th)
			if b.same(th) {
				errs = append(errs, b.reset(th, h.original))
			}
		}
	}
	for _, th := range threads {
		if swept[th] {
			continue
		}
		swept[th] = true
		if b.kind == Syscall { // kubefair's own call: any weight on its threads is one it set
			errs = append(errs, b.reset(th, 0))
		} else if have, err := b.value(th); err == nil {
			if orig, ok := inherited[have]; ok {
				errs = append(errs, b.reset(th, orig))
			}
		}
	}
	return errors.Join(errs...)
}

// value is what a thread holds now: its sched_setweight weight, or its
// nice level.
func (b *Backend) value(tid int) (int, error) {
	if b.kind == Syscall {
		return getweight(tid, 0)
	}
	prio, err := unix.Getpriority(unix.PRIO_PROCESS, tid)
	return 20 - prio, err // the raw syscall returns 20 - nice
}

// write sets a thread's weight (syscall) or nice level (nice).
func (b *Backend) write(tid, v int) error {
	if b.kind == Syscall {
		return setweight(tid, 0, v)
	}
	return unix.Setpriority(unix.PRIO_PROCESS, tid, v)
}

// reset gives a thread its default: weight 0 (its nice level's), or the
// nice level orig. A thread gone is no error.
func (b *Backend) reset(tid, orig int) error {
	if b.kind == Syscall {
		orig = 0
	}
	if err := b.write(tid, orig); err != nil && !errors.Is(err, unix.ESRCH) {
		return fmt.Errorf("restoring thread %d: %w", tid, err)
	}
	return nil
}

// own notes the start time of a thread or process the backend is about
// to hold a value of, the first time.
func (b *Backend) own(id int) {
	if _, ok := b.started[id]; ok {
		return
	}
	if st, err := taskstat.StartTime(b.procRoot, id); err == nil {
		b.started[id] = st
	}
}

// same tells whether id is still the task the backend set a value on:
// alive, with the start time noted then.
func (b *Backend) same(id int) bool {
	want, ok := b.started[id]
	if !ok {
		return false
	}
	st, err := taskstat.StartTime(b.procRoot, id)
	return err == nil && st == want
}

// prune forgets, after every apply, each thread and process the backend
// holds a value of that the plan did not name and that has exited or whose
// id another task took (nothing is ever restored on them), the start
// times of those it no longer holds a value of, the inherited levels of
// processes it holds no thread of, and the loops of pods the plan did not
// name.
func (b *Backend) prune(plan enforce.Plan) {
	if b.named == nil {
		b.named = map[int]bool{}
	}
	named := b.named
	clear(named)
	if len(b.loops) > 0 {
		planned := make(map[string]bool, len(plan.Pods))
		for _, pod := range plan.Pods {
			planned[pod.UID] = true
		}
		for uid := range b.loops {
			if !planned[uid] {
				delete(b.loops, uid)
			}
		}
	}
	for _, pod := range plan.Pods {
		for _, p := range pod.Processes {
			named[p.PID] = true
			for _, tid := range p.Threads {
				named[tid] = true
			}
		}
	}
	for id := range b.started {
		_, weighed := b.held[id]
		_, moded := b.modes[id]
		if weighed || moded {
			if named[id] || b.same(id) {
				continue
			}
		}
		delete(b.started, id)
		delete(b.held, id)
		delete(b.modes, id)
	}
	if len(b.inherited) > 0 {
		weighed := map[int]bool{}
		for _, h := range b.held {
			weighed[h.pid] = true
		}
		for pid := range b.inherited {
			if !weighed[pid] {
				delete(b.inherited, pid)
			}
		}
	}
}

func setweight(pid, flags, weight int) error {
	_, _, e := unix.Syscall(sysSchedSetweight, uintptr(pid), uintptr(flags), uintptr(weight))
	if e != 0 {
		return e
	}
	return nil
}

func getweight(pid, flags int) (int, error) {
	r, _, e := unix.Syscall(sysSchedGetweight, uintptr(pid), uintptr(flags), 0)
	if e != 0 {
		return 0, e
	}
	return int(r), nil
}

// ResetProcesses gives every thread of pids its default weight back without
// knowing what was set: through the syscall when the kernel has the ABI, one
// process-scope weight 0 per process (which also ends a process mode), nice
// 0 per thread otherwise. It is what a fresh process (`kubefair-agent
// --restore`) can do for threads an earlier
// agent weighed; vanished processes and threads are skipped.
func ResetProcesses(procRoot string, kind Kind, pids []int) error {
	var errs []error
	for _, pid := range pids {
		if kind == Syscall {
			if err := setweight(pid, flagProcess, 0); err != nil && !errors.Is(err, unix.ESRCH) {
				errs = append(errs, fmt.Errorf("resetting process %d: %w", pid, err))
			}
			continue
		}
		for _, tid := range taskstat.Threads(procRoot, pid) {
			if err := unix.Setpriority(unix.PRIO_PROCESS, tid, 0); err != nil && !errors.Is(err, unix.ESRCH) {
				errs = append(errs, fmt.Errorf("resetting thread %d: %w", tid, err))
			}
		}
	}
	return errors.Join(errs...)
}
