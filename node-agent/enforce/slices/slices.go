// Package slices gives the threads of a tenant with a latency class the
// scheduler slice of that class: EEVDF's custom slice, which Linux 6.12
// and later take from sched_setattr's sched_runtime on a fair task (0.1–100
// ms). A short slice gives a thread that wakes an earlier deadline, so it
// is picked (and preempts) sooner; a long one lets a thread run longer
// between switches. A slice changes no weight: shares between tenants do
// not move. It is the only code that calls sched_setattr.
package slices

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/kubefair/kubefair/node-agent/enforce"
	"github.com/kubefair/kubefair/node-agent/internal/taskstat"
)

// Name is what the agent's log calls this backend.
const Name = "slices"

// ErrNoCustomSlices: the kernel keeps no slice per fair task (before
// Linux 6.12), or a seccomp profile refuses sched_getattr.
var ErrNoCustomSlices = errors.New("the kernel has no custom slices for fair tasks (Linux 6.12 or later needed)")

// Backend sets the slices of the threads of the plan's pods whose Slice
// is not zero, and gives the kernel's default back to the threads it set
// once their pod no longer asks for a slice (or leaves, or the agent
// stops). A thread's id is trusted only with the start time it had when
// the backend set its slice: ids are reused.
type Backend struct {
	procRoot string

	mu sync.Mutex
	// set are the threads whose slice this backend set, by thread id.
	set map[int]thread
	// named is Apply's scratch set of the thread ids the plan names.
	named map[int]bool
}

// thread is a slice this backend set.
type thread struct {
	cgroup string // the pod's: what Restore(pods) matches
	slice  time.Duration
	start  uint64 // /proc/<tid>/stat's start time when it was set
}

// New returns the backend when the kernel keeps a slice per fair task:
// sched_getattr reports the agent's own thread's (the default, non-zero),
// where older kernels report none.
func New(procRoot string) (*Backend, error) {
	attr, err := unix.SchedGetAttr(0, 0)
	if err != nil {
		return nil, fmt.Errorf("%w: sched_getattr: %v", ErrNoCustomSlices, err)
	}
	if attr.Runtime == 0 {
		return nil, fmt.Errorf("%w: sched_getattr reports no slice for a fair task", ErrNoCustomSlices)
	}
	return &Backend{procRoot: procRoot, set: map[int]thread{}, named: map[int]bool{}}, nil
}

// Name is "slices".
func (b *Backend) Name() string { return Name }

// KernelABI is 0: custom slices are stock Linux.
func (b *Backend) KernelABI() int { return 0 }

// Apply gives every thread the plan lists in a pod with a Slice that slice
// (a pod's threads are listed when it ran in the period, so a new thread
// gets it within a period of its start), and the kernel's default back
// to each thread it set whose pod no longer asks for that slice. Threads
// that exited are forgotten. Result.Sliced counts, by tenant, the threads
// holding their class's slice; Result.SlicesRefused those the kernel
// refused (EPERM: another user's thread without CAP_SYS_NICE).
func (b *Backend) Apply(plan enforce.Plan) (enforce.Result, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	res := enforce.Result{Sliced: map[string]int{}}
	var errs []error
	want := make(map[string]time.Duration, len(plan.Pods))
	tenant := make(map[string]string, len(plan.Pods))
	listed := make(map[string]bool, len(plan.Pods)) // pods whose threads were read this period
	clear(b.named)
	for _, pod := range plan.Pods {
		want[pod.Cgroup], tenant[pod.Cgroup], listed[pod.Cgroup] = pod.Slice, pod.Tenant, len(pod.Threads) > 0
		if pod.Slice == 0 {
			continue
		}
		for _, tid := range pod.Threads {
			b.named[tid] = true
			if t, ok := b.set[tid]; ok && t.slice == pod.Slice && t.cgroup == pod.Cgroup {
				continue
			}
			b.give(tid, pod.Cgroup, pod.Slice, &res, &errs)
		}
	}
	// The threads set earlier and not listed now: those of a pod that did
	// not run keep their slice unread (no /proc read a period for idle
	// pods); the others are checked before anything changes.
	swept := map[int]bool{}
	for tid, t := range b.set {
		w := want[t.cgroup]
		switch {
		case b.named[tid]: // given above
		case w == t.slice && !listed[t.cgroup]: // an idle pod's thread
		case !b.same(tid, t):
			delete(b.set, tid) // exited, or the id is another task's now
		case w == t.slice: // alive, though its pod's list missed it
		case w == 0: // with the threads that inherited its slice
			errs = append(errs, b.restoreSame(tid, t, swept, &res))
		default: // the tenant's class changed while the thread was idle
			b.give(tid, t.cgroup, w, &res, &errs)
		}
	}
	for _, t := range b.set {
		res.Sliced[tenant[t.cgroup]]++
	}
	delete(res.Sliced, "")
	return res, errors.Join(errs...)
}

// give sets tid's slice and notes it; a refusal is counted, a vanished
// thread skipped.
func (b *Backend) give(tid int, cgroup string, slice time.Duration, res *enforce.Result, errs *[]error) {
	start, err := taskstat.StartTime(b.procRoot, tid)
	if err != nil {
		res.Vanished++
		return
	}
	switch err := setSlice(tid, slice); {
	case err == nil:
		b.set[tid] = thread{cgroup: cgroup, slice: slice, start: start}
		res.Writes++
	case errors.Is(err, unix.ESRCH):
		res.Vanished++
	case errors.Is(err, unix.EPERM):
		res.SlicesRefused++
	case errors.Is(err, errNotFair):
		// real-time or deadline: its policy is not ours to change
	default:
		*errs = append(*errs, fmt.Errorf("setting the slice of thread %d: %w", tid, err))
	}
}

// restore gives tid the kernel's default slice back and forgets it.
func (b *Backend) restore(tid int, t thread, res *enforce.Result) error {
	delete(b.set, tid)
	switch err := setSlice(tid, 0); {
	case err == nil:
		if res != nil {
			res.Writes++
		}
		return nil
	case errors.Is(err, unix.ESRCH), errors.Is(err, errNotFair):
		return nil
	default:
		return fmt.Errorf("restoring the default slice of thread %d (pod cgroup %s): %w", tid, t.cgroup, err)
	}
}

// Restore gives the threads of these pods whose slice it set the kernel's
// default back.
func (b *Backend) Restore(pods []enforce.Pod) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	leaving := make(map[string]bool, len(pods))
	for _, p := range pods {
		leaving[p.Cgroup] = true
	}
	var errs []error
	swept := map[int]bool{}
	for tid, t := range b.set {
		if leaving[t.cgroup] {
			errs = append(errs, b.restoreSame(tid, t, swept, nil))
		}
	}
	return errors.Join(errs...)
}

// RestoreAll gives every thread whose slice it set the default back.
func (b *Backend) RestoreAll() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	var errs []error
	swept := map[int]bool{}
	for tid, t := range b.set {
		errs = append(errs, b.restoreSame(tid, t, swept, nil))
	}
	return errors.Join(errs...)
}

// restoreSame restores tid only while it is still the thread it set, and
// the threads of its process that hold the slice it set on tid without
// having been set: a sliced thread's new threads inherit its slice, and
// those started after the last Apply were never listed (the Go runtime of
// a pod starting up makes them). swept holds the threads of the processes
// already looked at. A process a sliced thread forked in that last period
// keeps the slice (docs/agent.md, "Latency classes"). Writes are counted in
// res when it is given.
func (b *Backend) restoreSame(tid int, t thread, swept map[int]bool, res *enforce.Result) error {
	if !b.same(tid, t) {
		delete(b.set, tid)
		return nil
	}
	var errs []error
	if !swept[tid] {
		for _, sibling := range taskstat.Threads(b.procRoot, tid) {
			swept[sibling] = true
			if _, set := b.set[sibling]; set || sibling == tid {
				continue // restored as itself
			}
			if s, err := Of(sibling); err == nil && s == t.slice {
				errs = append(errs, b.restore(sibling, thread{cgroup: t.cgroup}, res))
			}
		}
	}
	return errors.Join(append(errs, b.restore(tid, t, res))...)
}

// Held is the slice it set per thread id (tests read it).
func (b *Backend) Held() map[int]time.Duration {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := make(map[int]time.Duration, len(b.set))
	for tid, t := range b.set {
		out[tid] = t.slice
	}
	return out
}

// same tells whether tid is still the thread whose slice it set.
func (b *Backend) same(tid int, t thread) bool {
	st, err := taskstat.StartTime(b.procRoot, tid)
	return err == nil && st == t.start
}

// ResetThreads gives every thread of pids the kernel's default slice back
// without knowing which an earlier agent set (`kubefair-agent --restore`);
// vanished processes and threads are skipped.
func ResetThreads(procRoot string, pids []int) error {
	var errs []error
	for _, pid := range pids {
		for _, tid := range taskstat.Threads(procRoot, pid) {
			if err := setSlice(tid, 0); err != nil && !errors.Is(err, unix.ESRCH) && !errors.Is(err, errNotFair) {
				errs = append(errs, fmt.Errorf("resetting the slice of thread %d: %w", tid, err))
			}
		}
	}
	return errors.Join(errs...)
}

// Of is the slice a thread has now (tests and the agent's probe).
func Of(tid int) (time.Duration, error) {
	attr, err := unix.SchedGetAttr(tid, 0)
	if err != nil {
		return 0, err
	}
	return time.Duration(attr.Runtime), nil
}

var errNotFair = errors.New("not a fair-class thread")

// setSlice sets a fair thread's slice (0: the kernel's default), keeping
// its nice level and reset-on-fork flag, which sched_setattr sets too.
func setSlice(tid int, slice time.Duration) error {
	attr, err := unix.SchedGetAttr(tid, 0)
	if err != nil {
		return err
	}
	if attr.Policy != unix.SCHED_NORMAL && attr.Policy != unix.SCHED_BATCH {
		return errNotFair
	}
	attr.Size = unix.SizeofSchedAttr
	attr.Flags &= unix.SCHED_FLAG_RESET_ON_FORK
	attr.Runtime = uint64(slice.Nanoseconds())
	return unix.SchedSetAttr(tid, attr, 0)
}
