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

	var b *Backend
	if abi {
		if b, err = New("/proc", 2); err != nil {
			t.Fatalf("the syscall backend under the filter: %v", err)
		}
	} else {
		if _, err := New("/proc", 2); !errors.Is(err, ErrNoABI) {
			t.Fatalf("New on the stock kernel = %v, want ErrNoABI", err)
		}
		b = NewNice(2)
	}
	res, err := b.Apply(plan)
	if err != nil {
		t.Fatalf("%s backend under the filter: %v", b.Name(), err)
	}
	if res.Writes != 4 {
		t.Errorf("%s backend wrote %d thread weights, want 4", b.Name(), res.Writes)
	}
	for _, tid := range threads {
		if abi {
			if w, err := getweight(tid); err != nil || w != 256 {
				t.Errorf("thread %d: sched_getweight = %d, %v; want PFS's 1024/4 = 256", tid, w, err)
			}
		} else if prio, err := unix.Getpriority(unix.PRIO_PROCESS, tid); err != nil || 20-prio == 0 {
			t.Errorf("thread %d: nice %d, %v; want the level nearest 256", tid, 20-prio, err)
		}
	}
	if err := b.Restore(plan.Pods); err != nil {
		t.Fatalf("restore under the filter: %v", err)
	}
	for _, tid := range threads {
		if abi {
			if w, err := getweight(tid); err != nil || w != 1024 {
				t.Errorf("thread %d after restore: weight %d, %v; want nice 0's 1024", tid, w, err)
			}
		} else if prio, _ := unix.Getpriority(unix.PRIO_PROCESS, tid); 20-prio != 0 {
			t.Errorf("thread %d after restore: nice %d, want 0", tid, 20-prio)
		}
	}
	t.Logf("%s backend under the agent's seccomp filter: 4 weights set and restored", b.Name())
}
