package slices

import (
	"os/exec"
	"testing"
	"time"

	"github.com/kubefair/kubefair/node-agent/enforce"
	"github.com/kubefair/kubefair/node-agent/internal/testthread"
)

// sleeper starts a process of one thread that the test owns.
func sleeper(t *testing.T) int {
	t.Helper()
	cmd := exec.Command("sleep", "300")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	return cmd.Process.Pid
}

func newBackend(t *testing.T) *Backend {
	t.Helper()
	b, err := New("/proc")
	if err != nil {
		t.Fatalf("this kernel (the host's, 6.12 or later) should have custom slices: %v", err)
	}
	return b
}

func sliceOf(t *testing.T, tid int) time.Duration {
	t.Helper()
	s, err := Of(tid)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func pod(tenant, cgroup string, slice time.Duration, tids ...int) enforce.Pod {
	return enforce.Pod{Tenant: tenant, Cgroup: cgroup, Slice: slice, Threads: tids}
}

// TestApplyFollowsTheClass runs on the real kernel: a listed thread of a
// pod with a slice gets it, a pod without one keeps the kernel's; a class
// that changes reaches a thread that is idle (not listed); a class that
// goes away gives the kernel's slice back; the threads are counted by
// tenant.
func TestApplyFollowsTheClass(t *testing.T) {
	b := newBackend(t)
	a, other := sleeper(t), sleeper(t)
	def := sliceOf(t, other)
	interactive, batch := 500*time.Microsecond, 20*time.Millisecond

	res, err := b.Apply(enforce.Plan{Pods: []enforce.Pod{pod("shop", "podA", interactive, a), pod("etl", "podB", 0, other)}})
	if err != nil {
		t.Fatal(err)
	}
	if got := sliceOf(t, a); got != interactive {
		t.Errorf("the interactive pod's thread has slice %v, want %v", got, interactive)
	}
	if got := sliceOf(t, other); got != def {
		t.Errorf("the classless pod's thread has slice %v, want the kernel's %v", got, def)
	}
	if res.Sliced["shop"] != 1 || res.Sliced["etl"] != 0 || res.Writes != 1 {
		t.Errorf("sliced %v, %d writes; want shop 1, one write", res.Sliced, res.Writes)
	}

	// Again: nothing to write.
	if res, _ := b.Apply(enforce.Plan{Pods: []enforce.Pod{pod("shop", "podA", interactive, a)}}); res.Writes != 0 || res.Sliced["shop"] != 1 {
		t.Errorf("a second apply wrote %d (want 0), sliced %v", res.Writes, res.Sliced)
	}

	// The tier's class changes while the thread sleeps (not listed).
	if _, err := b.Apply(enforce.Plan{Pods: []enforce.Pod{pod("shop", "podA", batch)}}); err != nil {
		t.Fatal(err)
	}
	if got := sliceOf(t, a); got != batch {
		t.Errorf("after the class changed, the idle thread has slice %v, want %v", got, batch)
	}

	// The class is gone.
	res, err = b.Apply(enforce.Plan{Pods: []enforce.Pod{pod("shop", "podA", 0)}})
	if err != nil {
		t.Fatal(err)
	}
	if got := sliceOf(t, a); got != def || len(b.Held()) != 0 || res.Sliced["shop"] != 0 {
		t.Errorf("after the class went away: slice %v (want the kernel's %v), held %v, sliced %v", got, def, b.Held(), res.Sliced)
	}
}

// TestRestore: Restore gives back the slices of the leaving pods' threads
// only (listed or not), RestoreAll the rest.
func TestRestore(t *testing.T) {
	b := newBackend(t)
	a, c := sleeper(t), sleeper(t)
	def := sliceOf(t, a)
	s := 2 * time.Millisecond
	if _, err := b.Apply(enforce.Plan{Pods: []enforce.Pod{pod("shop", "podA", s, a), pod("etl", "podC", s, c)}}); err != nil {
		t.Fatal(err)
	}
	if err := b.Restore([]enforce.Pod{{Cgroup: "podA"}}); err != nil {
		t.Fatal(err)
	}
	if got, other := sliceOf(t, a), sliceOf(t, c); got != def || other != s {
		t.Errorf("after Restore(podA): %v and %v, want %v and %v", got, other, def, s)
	}
	if err := b.RestoreAll(); err != nil {
		t.Fatal(err)
	}
	if got := sliceOf(t, c); got != def || len(b.Held()) != 0 {
		t.Errorf("after RestoreAll: %v (want %v), held %v", got, def, b.Held())
	}
}

// TestRestoreFindsInheritedSlices: a thread that a sliced thread started
// after the last Apply holds the slice too without being listed; RestoreAll
// gives it the kernel's back, and leaves another process's thread that set
// the same slice itself alone.
func TestRestoreFindsInheritedSlices(t *testing.T) {
	b := newBackend(t)
	listed, inherited, stranger := lockedThread(t), lockedThread(t), sleeper(t)
	def := sliceOf(t, listed)
	s := 700 * time.Microsecond
	if _, err := b.Apply(enforce.Plan{Pods: []enforce.Pod{pod("shop", "podA", s, listed)}}); err != nil {
		t.Fatal(err)
	}
	for _, tid := range []int{inherited, stranger} { // as a clone of the listed thread would; the stranger's own choice
		if err := setSlice(tid, s); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.RestoreAll(); err != nil {
		t.Fatal(err)
	}
	if l, i, o := sliceOf(t, listed), sliceOf(t, inherited), sliceOf(t, stranger); l != def || i != def || o != s {
		t.Errorf("after RestoreAll: the listed thread %v, the inherited one %v (want the kernel's %v), the other process's %v (want its own %v)", l, i, def, o, s)
	}
}

// TestClassDroppedFindsInheritedSlices: when a pod's class goes away, the
// threads that inherited the slice after the last listing get the kernel's
// back with the ones it set (TestLatencyClasses once found one left).
func TestClassDroppedFindsInheritedSlices(t *testing.T) {
	b := newBackend(t)
	listed, inherited := lockedThread(t), lockedThread(t)
	def := sliceOf(t, listed)
	s := 700 * time.Microsecond
	if _, err := b.Apply(enforce.Plan{Pods: []enforce.Pod{pod("shop", "podA", s, listed)}}); err != nil {
		t.Fatal(err)
	}
	if err := setSlice(inherited, s); err != nil { // as a clone of the listed thread would
		t.Fatal(err)
	}
	if _, err := b.Apply(enforce.Plan{Pods: []enforce.Pod{pod("shop", "podA", 0, listed)}}); err != nil {
		t.Fatal(err)
	}
	if l, i := sliceOf(t, listed), sliceOf(t, inherited); l != def || i != def {
		t.Errorf("after the class went away: the listed thread %v, the inherited one %v, want the kernel's %v", l, i, def)
	}
}

// lockedThread is the id of an OS thread of the test's own process, kept
// until the test ends (testthread.Locked).
func lockedThread(t *testing.T) int {
	end := make(chan struct{})
	t.Cleanup(func() { close(end) })
	return testthread.Locked(end)
}

// TestIDsReusedOrGoneAreLeftAlone: a thread id whose start time is not
// the one noted belongs to another task now — no restore touches it, and
// it is forgotten; a thread that exited is skipped without an error.
func TestIDsReusedOrGoneAreLeftAlone(t *testing.T) {
	b := newBackend(t)
	stranger := sleeper(t)
	own := 3 * time.Millisecond
	if err := setSlice(stranger, own); err != nil { // the stranger's own choice
		t.Fatal(err)
	}
	b.set[stranger] = thread{cgroup: "podA", slice: 500 * time.Microsecond, start: 1} // planted: an id noted long ago
	if err := b.RestoreAll(); err != nil {
		t.Fatal(err)
	}
	if got := sliceOf(t, stranger); got != own || len(b.Held()) != 0 {
		t.Errorf("the reused id's slice is %v (want its own %v), held %v", got, own, b.Held())
	}

	gone := exec.Command("true")
	if err := gone.Run(); err != nil {
		t.Fatal(err)
	}
	res, err := b.Apply(enforce.Plan{Pods: []enforce.Pod{pod("shop", "podA", own, gone.Process.Pid)}})
	if err != nil || res.Vanished != 1 || len(b.Held()) != 0 {
		t.Errorf("an exited thread: error %v, %d vanished (want 1), held %v", err, res.Vanished, b.Held())
	}
}

// TestResetThreads: the one-shot restore gives every thread of the
// processes the kernel's slice back.
func TestResetThreads(t *testing.T) {
	a := sleeper(t)
	def := sliceOf(t, a)
	if err := setSlice(a, 7*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if err := ResetThreads("/proc", []int{a, 1 << 30}); err != nil {
		t.Fatal(err)
	}
	if got := sliceOf(t, a); got != def {
		t.Errorf("after ResetThreads: %v, want %v", got, def)
	}
}
