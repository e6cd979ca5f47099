//go:build kubefair_guest

package threads

import (
	"errors"
	"runtime"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/kubefair/kubefair/node-agent/enforce"
	"github.com/kubefair/kubefair/node-agent/fairness"
	"github.com/kubefair/kubefair/node-agent/seccomp"
)

// TestBackendUnderSeccompFilter confines this test process with the
// agent's own seccomp filter, exactly as the agent's main does (kernel ABI
// calls only when the probe reads a known ABI), then weighs four threads
// of its own with PFS. In the patched guest sched_setweight and
// sched_getweight pass the filter and the weights are set and restored; in
// the stock guest the probe is absent, the calls are never made, and the
// nice fallback works under the same filter. test/kernel runs it alone in
// each guest: the filter cannot be removed again.
func TestBackendUnderSeccompFilter(t *testing.T) {
	abi := KnownABI(ProbeABI("/proc"))
	if (inGuest == "patched") != abi {
		t.Fatalf("%s guest: the probe says ABI %d", inGuest, ProbeABI("/proc"))
	}
	var kernelCalls []seccomp.Call
	if abi {
		kernelCalls = SeccompCalls()
	}
	allowed, err := seccomp.AllowList(kernelCalls...)
	if err != nil {
		t.Fatal(err)
	}
	if err := seccomp.Install(allowed); err != nil {
		t.Fatal(err)
	}
	t.Logf("confined to %d system calls (kernel ABI calls: %v)", len(allowed), abi)
	if err := unix.Sethostname([]byte("refused")); !errors.Is(err, unix.EPERM) {
		t.Fatalf("sethostname under the filter: %v, want EPERM", err)
	}

	// Four threads of this process, parked.
	tids := make(chan int)
	release := make(chan struct{})
	defer close(release)
	for i := 0; i < 4; i++ {
		go func() {
			runtime.LockOSThread()
			tids <- unix.Gettid()
			<-release
		}()
	}
	var threads []int
	for i := 0; i < 4; i++ {
		threads = append(threads, <-tids)
	}
	plan := enforce.Plan{Pods: []enforce.Pod{{ThreadPolicy: fairness.PFS, Processes: []enforce.Process{{PID: unix.Getpid(), Threads: threads}}}}}

	if !abi {
		if _, err := New("/proc", 2); !errors.Is(err, ErrNoABI) {
			t.Fatalf("New on the stock kernel = %v, want ErrNoABI", err)
		}
		applyUnderFilter(t, NewNice("/proc", 2), plan, 4, func(tid int, applied bool) {
			prio, err := unix.Getpriority(unix.PRIO_PROCESS, tid)
			if applied && (err != nil || 20-prio == 0) {
				t.Errorf("thread %d: nice %d, %v; want the level nearest 256", tid, 20-prio, err)
			}
			if !applied && 20-prio != 0 {
				t.Errorf("thread %d after restore: nice %d, want 0", tid, 20-prio)
			}
		})
		return
	}
	pid := unix.Getpid()
	// ABI 2: one process-scope call puts the process in the kernel's PFS mode.
	b, err := New("/proc", 2)
	if err != nil {
		t.Fatalf("the syscall backend under the filter: %v", err)
	}
	applyUnderFilter(t, b, plan, 1, func(_ int, applied bool) {
		want := 0
		if applied {
			want = modePFS
		}
		if m := getMode(t, pid); m != want {
			t.Errorf("the process is in mode %#x, want %#x", m, want)
		}
	})
	// As on an ABI 1 kernel: a weight per thread.
	b, _ = New("/proc", 2)
	b.abi = ABIVersion
	applyUnderFilter(t, b, plan, 4, func(tid int, applied bool) {
		want := 1024 // nice 0's weight after restore
		if applied {
			want = 256 // PFS: 1024 / 4 threads
		}
		if w, err := getweight(tid, 0); err != nil || w != want {
			t.Errorf("thread %d: sched_getweight = %d, %v; want %d", tid, w, err, want)
		}
	})
}

// applyUnderFilter applies plan with b, checks the number of writes and
// each thread (applied true), restores, and checks each thread again.
func applyUnderFilter(t *testing.T, b *Backend, plan enforce.Plan, writes int, check func(tid int, applied bool)) {
	t.Helper()
	res, err := b.Apply(plan)
	if err != nil {
		t.Fatalf("%s backend under the filter: %v", b.Name(), err)
	}
	if res.Writes != writes {
		t.Errorf("%s backend (ABI %d) made %d writes, want %d", b.Name(), b.KernelABI(), res.Writes, writes)
	}
	threads := plan.Pods[0].Processes[0].Threads
	for _, tid := range threads {
		check(tid, true)
	}
	if err := b.Restore(plan.Pods); err != nil {
		t.Fatalf("restore under the filter: %v", err)
	}
	for _, tid := range threads {
		check(tid, false)
	}
	t.Logf("%s backend (ABI %d) under the agent's seccomp filter: %d writes, restored", b.Name(), b.KernelABI(), writes)
}
