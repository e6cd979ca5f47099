package threads

import (
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"strconv"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/kubefair/kubefair/node-agent/enforce"
	"github.com/kubefair/kubefair/node-agent/fairness"
	"github.com/kubefair/kubefair/node-agent/internal/testthread"
)

// inGuest is set by test/kernel when it runs this test binary inside the
// QEMU guest: "patched" or "stock".
var inGuest = os.Getenv("KUBEFAIR_IN_GUEST")

func TestMain(m *testing.M) {
	// Re-executed as a spinner: N threads burning CPU until killed, and N
	// more on SIGUSR1; each prints its thread id once it spins, so that the
	// test knows them from the runtime's own threads. They run on CPU 0.
	if n, err := strconv.Atoi(os.Getenv("KUBEFAIR_SPIN")); err == nil {
		// Every spinner needs a P of its own to stay runnable in the kernel's eyes.
		runtime.GOMAXPROCS(2*n + 1)
		var cpu0 unix.CPUSet
		cpu0.Set(0)
		// Every thread is made and announced before any spins: under TCG a
		// new thread beside dozens of busy ones takes seconds to start.
		start := func() {
			var made sync.WaitGroup
			spin := make(chan struct{})
			for i := 0; i < n; i++ {
				made.Add(1)
				go func() {
					runtime.LockOSThread()
					_ = unix.SchedSetaffinity(0, &cpu0) // this thread only
					fmt.Println(unix.Gettid())
					made.Done()
					<-spin
					for {
					}
				}()
			}
			made.Wait()
			close(spin)
		}
		more := make(chan os.Signal, 1)
		signal.Notify(more, unix.SIGUSR1)
		start()
		<-more
		start()
		select {}
	}
	os.Exit(m.Run())
}

func TestThreadWeightsFollowThePolicy(t *testing.T) {
	pod := enforce.Pod{Processes: []enforce.Process{{PID: 1, Threads: []int{1}}, {PID: 2, Threads: []int{2, 3, 4, 5}}}}
	pod.ThreadPolicy = fairness.PFS
	w := threadWeights(pod, 2, []int{1024, 1024}, 0)
	if w[1] != 1024 || w[2] != 256 || w[5] != 256 {
		t.Fatalf("PFS weights %v", w)
	}
	// 200 threads: integers adding up to exactly 1024 (24 × 6 + 176 × 5).
	many := enforce.Pod{ThreadPolicy: fairness.PFS, Processes: []enforce.Process{{PID: 9}}}
	for tid := 100; tid < 300; tid++ {
		many.Processes[0].Threads = append(many.Processes[0].Threads, tid)
	}
	var sum float64
	for _, v := range threadWeights(many, 2, []int{1024}, 0) {
		sum += v
	}
	if sum != 1024 {
		t.Fatalf("200 PFS thread weights add up to %v, want 1024", sum)
	}
	pod.ThreadPolicy = fairness.TFPS
	w = threadWeights(pod, 2, []int{1024, 2048}, 0)
	if w[1] != 1024 || w[2] != 1024 {
		t.Fatalf("TFPS weights %v", w)
	}
	pod.ThreadPolicy = fairness.None
	if w = threadWeights(pod, 2, []int{1024, 1024}, 0); len(w) != 0 {
		t.Fatalf("None must leave threads alone: %v", w)
	}

	// Over a window, a process's weight is split by its runnable threads
	// (the run + wait of those runnable half the window or more, rounded),
	// not by every thread that ran: a spinner with two helpers that waited
	// for a CPU most of a second between them keeps the whole weight, and
	// so do its helpers (they hardly run); 4 threads runnable 3/4 of the
	// time get a third each; 1000 threads that ran can count at most
	// themselves.
	window := time.Second
	pod = enforce.Pod{ThreadPolicy: fairness.PFS, Processes: []enforce.Process{
		{PID: 1, Threads: []int{1, 2, 3}, CPU: 900 * time.Millisecond, Wait: 900 * time.Millisecond, Busy: time.Second},
		{PID: 2, Threads: []int{4, 5, 6, 7}, CPU: 2 * time.Second, Wait: 900 * time.Millisecond, Busy: 2900 * time.Millisecond},
	}}
	w = threadWeights(pod, 2, []int{1024, 1024}, window)
	if w[1] != 1024 || w[3] != 1024 || w[4] != 342 || w[5] != 341 || w[6] != 341 || w[7] != 342 {
		t.Fatalf("PFS weights over a window %v, want 1024 for the spinner's threads, 342/341/341 for the others'", w)
	}
	pod.ThreadPolicy = fairness.TFPS
	if w = threadWeights(pod, 2, []int{1024, 1024}, window); w[1] != 1024 || w[4] != math.Round(fairness.TFPSThreadWeight(1024, 3, 2)) {
		t.Fatalf("TFPS weights over a window %v, want the spinner's 1024 and the others' CPUs/3", w)
	}
	pod.Processes[0].Busy = 10 * time.Second // cannot be more than the threads that ran
	pod.ThreadPolicy = fairness.PFS
	if w = threadWeights(pod, 2, []int{1024, 1024}, window); w[1] != 342 || w[2] != 341 {
		t.Fatalf("PFS weights %v, want a third each for 3 threads", w)
	}
}

// TestProcessWeightsFollowTheirTargets: the syscall backend's per-pod loop
// raises the weight of a backlogged process that got less than its part of
// the pod under the policy and lowers one that got more, settles where each
// gets its part, is not restarted by an idle process waking, and leaves a
// lone process, a policy without a split and the nice backend at the plain
// process weight.
func TestProcessWeightsFollowTheirTargets(t *testing.T) {
	const window = time.Second
	// A 1-thread process beside processes of 8 and 50 threads, all
	// backlogged, measured at 20 / 30 / 50 % of the pod's 1.5 CPUs.
	pod := func(policy fairness.ThreadPolicy, cpu ...time.Duration) enforce.Pod {
		threads := []int{1, 8, 50}
		p := enforce.Pod{UID: "u", ThreadPolicy: policy}
		for i, c := range cpu {
			run := time.Duration(threads[i]) * window
			p.Processes = append(p.Processes, enforce.Process{PID: 10 + i, Threads: make([]int, threads[i]), CPU: c, Wait: run - c, Busy: run})
		}
		return p
	}
	b := newBackend(Syscall, "/proc", 2)
	w := b.processWeights(pod(fairness.PFS, 300*time.Millisecond, 450*time.Millisecond, 750*time.Millisecond), window, window)
	if !(w[0] > processWeight && w[1] > processWeight && w[2] < processWeight) {
		t.Fatalf("PFS below, below and above a third: weights %v, want up, up, down from %d", w, processWeight)
	}
	// Each at its third: the weights stay where the loop took them.
	at := b.processWeights(pod(fairness.PFS, 500*time.Millisecond, 500*time.Millisecond, 500*time.Millisecond), window, window)
	if at[0] != w[0] || at[1] != w[1] || at[2] != w[2] {
		t.Fatalf("on target the weights moved: %v, then %v", w, at)
	}
	// Held far over its part, a process falls below the tenants' floor
	// (1/8 of the plain weight): the kernel's modes can need more.
	b = newBackend(Syscall, "/proc", 2)
	for range 30 {
		w = b.processWeights(pod(fairness.PFS, 300*time.Millisecond, 450*time.Millisecond, 750*time.Millisecond), window, window)
	}
	if w[2] >= processWeight/8 || w[0] <= 8*processWeight {
		t.Fatalf("after 30 periods off their parts: weights %v, want the 50-thread process under %d and the 1-thread one over %d", w, processWeight/8, 8*processWeight)
	}
	// A process that wakes for a moment (the pod's pause process, once a
	// minute) takes a part for that period, but restarts nothing: the
	// others keep what the loop learnt.
	withPause := pod(fairness.PFS, 300*time.Millisecond, 450*time.Millisecond, 750*time.Millisecond)
	withPause.Processes = append(withPause.Processes, enforce.Process{PID: 9, Threads: []int{9}, CPU: time.Millisecond, Wait: 50 * time.Millisecond})
	if w := b.processWeights(withPause, window, window); w[2] >= processWeight/8 || w[0] <= 8*processWeight {
		t.Fatalf("with the pause process awake: weights %v, want the three as the loop took them", w)
	}
	// TWRS's parts (eq. 3.3): 6.3 / 44.5 / 49.1 %; the 1-thread process
	// at 20 % is far above its part. (A new policy starts from the plain
	// weights: what the loop learnt belongs to the old one.)
	b.processWeights(pod(fairness.TWRS, 300*time.Millisecond, 450*time.Millisecond, 750*time.Millisecond), window, window)
	w = b.processWeights(pod(fairness.TWRS, 300*time.Millisecond, 450*time.Millisecond, 750*time.Millisecond), window, window)
	if !(w[0] < processWeight && w[1] > processWeight) {
		t.Fatalf("TWRS above and below eq. 3.3: weights %v, want down, up from %d", w, processWeight)
	}
	for name, c := range map[string]struct {
		b   *Backend
		pod enforce.Pod
	}{
		"a lone process":   {newBackend(Syscall, "/proc", 2), pod(fairness.PFS, 300*time.Millisecond)},
		"TFPS":             {newBackend(Syscall, "/proc", 2), pod(fairness.TFPS, 300*time.Millisecond, 750*time.Millisecond)},
		"the nice backend": {newBackend(Nice, "/proc", 2), pod(fairness.PFS, 300*time.Millisecond, 750*time.Millisecond)},
	} {
		for _, v := range c.b.processWeights(c.pod, window, window) {
			if v != processWeight {
				t.Errorf("%s: weight %d, want the plain %d", name, v, processWeight)
			}
		}
		if len(c.b.loops) != 0 {
			t.Errorf("%s: the backend keeps a loop", name)
		}
	}
}

// TestProbeOnThisKernel: on a kernel with the patch (the patched guest)
// New succeeds; on any other (the host running the unit tests, the stock
// guest) it reports ErrNoABI instead of calling numbers that mean something
// else there.
func TestProbeOnThisKernel(t *testing.T) {
	v := ProbeABI("/proc")
	if inGuest == "patched" && v != ModesABI {
		t.Fatalf("patched kernel probe = %d, want %d", v, ModesABI)
	}
	b, err := New("/proc", 2)
	if v >= ABIVersion && (err != nil || b.KernelABI() != v) {
		t.Fatalf("the kernel publishes ABI %d, but New: %v", v, err)
	}
	if v < ABIVersion && !errors.Is(err, ErrNoABI) {
		t.Fatalf("New on a kernel without the ABI = %v, want ErrNoABI", err)
	}
}

// TestModeOfPolicy: process modes only through the syscall backend on an
// ABI 2 kernel, and only for PFS and TWRS; TFPS stays per thread.
func TestModeOfPolicy(t *testing.T) {
	for _, c := range []struct {
		kind   Kind
		abi    int
		policy fairness.ThreadPolicy
		want   int
	}{
		{Syscall, 2, fairness.PFS, modePFS},
		{Syscall, 2, fairness.TWRS, modeTWRS},
		{Syscall, 3, fairness.PFS, modePFS},
		{Syscall, 2, fairness.TFPS, 0},
		{Syscall, 2, fairness.None, 0},
		{Syscall, 1, fairness.PFS, 0},
		{Syscall, 1, fairness.TWRS, 0},
		{Nice, 0, fairness.PFS, 0},
	} {
		b := newBackend(c.kind, "/proc", 2)
		b.abi = c.abi
		if got := b.modeOf(c.policy); got != c.want {
			t.Errorf("%s backend, ABI %d, %s: mode %#x, want %#x", c.kind, c.abi, c.policy, got, c.want)
		}
	}
}

// TestRestoreTouchesOnlyWhatItChanged: the nice backend weighs three real
// threads of this process by PFS. One exits and is pruned at the next
// apply; another's id is planted as taken by a task started later (an id
// reused): restoring everything gives the remaining thread its nice level
// back and leaves the planted id alone.
func TestRestoreTouchesOnlyWhatItChanged(t *testing.T) {
	stop, exit := make(chan struct{}), make(chan struct{})
	kept, planted, gone := testthread.Locked(stop), testthread.Locked(stop), testthread.Locked(exit)
	defer close(stop)
	nice := func(tid int) int { return niceOf(t, tid) }
	b := NewNice("/proc", 2)
	if _, err := b.Apply(ownPFS(kept, planted, gone)); err != nil {
		t.Fatal(err)
	}
	if nice(kept) == 0 || nice(planted) == 0 {
		t.Fatalf("PFS over three threads left nice levels %d, %d; want them raised", nice(kept), nice(planted))
	}
	close(exit)
	waitGone := time.Now().Add(5 * time.Second)
	for _, err := os.Stat("/proc/" + strconv.Itoa(gone)); err == nil && time.Now().Before(waitGone); _, err = os.Stat("/proc/" + strconv.Itoa(gone)) {
		time.Sleep(10 * time.Millisecond)
	}
	if _, err := b.Apply(ownPFS(kept, planted)); err != nil {
		t.Fatal(err)
	}
	if _, held := b.held[gone]; held || b.started[gone] != 0 {
		t.Errorf("the exited thread %d is still held", gone)
	}
	b.started[planted]++ // as if another task had taken the id
	raised := nice(planted)
	if err := b.RestoreAll(); err != nil {
		t.Fatal(err)
	}
	if got := nice(kept); got != 0 {
		t.Errorf("thread %d restored to nice %d, want its original 0", kept, got)
	}
	if got := nice(planted); got != raised {
		t.Errorf("the planted id %d was changed to nice %d (was %d): a restore touched a task kubefair never weighed", planted, got, raised)
	}
	if len(b.held) != 0 || len(b.inherited) != 0 {
		t.Errorf("after RestoreAll the backend still holds %v (inherited levels %v)", b.held, b.inherited)
	}
	_ = unix.Setpriority(unix.PRIO_PROCESS, planted, 0)
}

// TestRestoreFindsInheritedNiceLevels: threads that a reniced thread
// started hold its nice level without the backend having set it. One
// started after the last Apply (never listed) gets its creator's original
// level back on restore with the threads the backend set; one listed
// after it started gets its creator's original, not the inherited level
// it had when first seen (TestEndToEnd once found a Go runtime thread left
// at nice 10). Another process's thread at the same level by its own
// choice is left alone.
func TestRestoreFindsInheritedNiceLevels(t *testing.T) {
	stop := make(chan struct{})
	defer close(stop)
	a, b2, listedLater, neverListed := testthread.Locked(stop), testthread.Locked(stop), testthread.Locked(stop), testthread.Locked(stop)
	stranger := exec.Command("sleep", "300")
	if err := stranger.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = stranger.Process.Kill(); _ = stranger.Wait() }()

	b := NewNice("/proc", 2)
	if _, err := b.Apply(ownPFS(a, b2)); err != nil {
		t.Fatal(err)
	}
	level := niceOf(t, a)
	if level == 0 {
		t.Fatalf("PFS over two threads left nice 0")
	}
	for _, tid := range []int{listedLater, neverListed, stranger.Process.Pid} { // as clones of a would; the stranger's own choice
		if err := unix.Setpriority(unix.PRIO_PROCESS, tid, level); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := b.Apply(ownPFS(a, b2, listedLater)); err != nil {
		t.Fatal(err)
	}
	if err := b.RestoreAll(); err != nil {
		t.Fatal(err)
	}
	for name, tid := range map[string]int{"set": a, "listed after it started": listedLater, "never listed": neverListed} {
		if got := niceOf(t, tid); got != 0 {
			t.Errorf("after RestoreAll the thread %s (%d) is at nice %d, want its creator's original 0", name, tid, got)
		}
	}
	if got := niceOf(t, stranger.Process.Pid); got != level {
		t.Errorf("another process's thread at nice %d by its own choice was changed to %d", level, got)
	}
}

// TestReusedIDSweepsNothing: a held thread id that another task took is
// forgotten on restore, and the threads listed under it now are not
// looked at for inherited levels: they are another process's.
func TestReusedIDSweepsNothing(t *testing.T) {
	stop := make(chan struct{})
	defer close(stop)
	reused, other := testthread.Locked(stop), testthread.Locked(stop)
	b := NewNice("/proc", 2)
	const level, gonePID = 7, 1 << 22
	b.held[reused] = heldThread{value: level, pid: gonePID}
	b.inherited[gonePID] = map[int]int{level: 0}
	b.started[reused] = 1 // noted when the id was another task's
	// other's level is its own choice.
	if err := unix.Setpriority(unix.PRIO_PROCESS, other, level); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = unix.Setpriority(unix.PRIO_PROCESS, other, 0) }()
	if err := b.RestoreAll(); err != nil {
		t.Fatal(err)
	}
	if got := niceOf(t, other); got != level || len(b.held) != 0 {
		t.Errorf("a thread listed under a reused id went from nice %d to %d (held %v)", level, got, b.held)
	}
}

// ownPFS is a plan of one PFS pod: this test process with these threads.
func ownPFS(threads ...int) enforce.Plan {
	return enforce.Plan{Pods: []enforce.Pod{{ThreadPolicy: fairness.PFS, Processes: []enforce.Process{{PID: os.Getpid(), Threads: threads}}}}}
}

func niceOf(t *testing.T, tid int) int {
	t.Helper()
	prio, err := unix.Getpriority(unix.PRIO_PROCESS, tid)
	if err != nil {
		t.Fatalf("getpriority(%d): %v", tid, err)
	}
	return 20 - prio
}
