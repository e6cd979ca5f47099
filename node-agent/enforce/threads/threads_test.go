package threads

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/kubefair/kubefair/node-agent/enforce"
	"github.com/kubefair/kubefair/node-agent/fairness"
)

// inGuest is set by test/kernel when it runs this test binary inside the
// QEMU guest: "patched" or "stock".
var inGuest = os.Getenv("KUBEFAIR_IN_GUEST")

func TestMain(m *testing.M) {
	// Re-executed as a spinner: N threads burning CPU until killed.
	if n, err := strconv.Atoi(os.Getenv("KUBEFAIR_SPIN")); err == nil {
		// Every spinner needs a P of its own to stay runnable in the kernel's eyes.
		runtime.GOMAXPROCS(n + 1)
		var cpu0 unix.CPUSet
		cpu0.Set(0)
		for i := 0; i < n; i++ {
			go func() {
				runtime.LockOSThread()
				_ = unix.SchedSetaffinity(0, &cpu0) // this thread only
				for {
				}
			}()
		}
		select {}
	}
	os.Exit(m.Run())
}

func TestThreadWeightsFollowThePolicy(t *testing.T) {
	pod := enforce.Pod{Processes: []enforce.Process{{PID: 1, Threads: []int{1}}, {PID: 2, Threads: []int{2, 3, 4, 5}}}}
	pod.ThreadPolicy = fairness.PFS
	w := threadWeights(pod, 2)
	if w[1] != 1024 || w[2] != 256 || w[5] != 256 {
		t.Fatalf("PFS weights %v", w)
	}
	// 200 threads: integers adding up to exactly 1024 (24 × 6 + 176 × 5).
	many := enforce.Pod{ThreadPolicy: fairness.PFS, Processes: []enforce.Process{{PID: 9}}}
	for tid := 100; tid < 300; tid++ {
		many.Processes[0].Threads = append(many.Processes[0].Threads, tid)
	}
	var sum float64
	for _, v := range threadWeights(many, 2) {
		sum += v
	}
	if sum != 1024 {
		t.Fatalf("200 PFS thread weights add up to %v, want 1024", sum)
	}
	pod.ThreadPolicy = fairness.TFPS
	w = threadWeights(pod, 2)
	if w[1] != 1024 || w[2] != 512 {
		t.Fatalf("TFPS weights %v", w)
	}
	pod.ThreadPolicy = fairness.None
	if w = threadWeights(pod, 2); len(w) != 0 {
		t.Fatalf("None must leave threads alone: %v", w)
	}
}

// TestProbeOnThisKernel: a kernel without the patch (the host running the
// unit tests, or the stock guest) has no ABI, and New says so instead of
// calling numbers that mean something else there.
func TestProbeOnThisKernel(t *testing.T) {
	if inGuest == "patched" {
		if v := ProbeABI("/proc"); v != ABIVersion {
			t.Fatalf("patched kernel probe = %d", v)
		}
		if _, err := New("/proc", 2); err != nil {
			t.Fatal(err)
		}
		return
	}
	if v := ProbeABI("/proc"); v != 0 {
		t.Skipf("this kernel publishes sched_weight_abi %d; the stock check runs in the stock guest", v)
	}
	if _, err := New("/proc", 2); !errors.Is(err, ErrNoABI) {
		t.Fatalf("New on a kernel without the ABI = %v, want ErrNoABI", err)
	}
}

// spinner starts a process spinning n threads pinned to CPU 0, and returns
// it with its spinning threads (those that used CPU over 300 ms).
func spinner(t *testing.T, n int) (*exec.Cmd, []int) {
	t.Helper()
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), "KUBEFAIR_SPIN="+strconv.Itoa(n))
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _, _ = cmd.Process.Wait() })
	var cpu0 unix.CPUSet
	cpu0.Set(0)
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		before := taskTimes(cmd.Process.Pid)
		for tid := range before {
			_ = unix.SchedSetaffinity(tid, &cpu0)
		}
		time.Sleep(500 * time.Millisecond)
		after := taskTimes(cmd.Process.Pid)
		var active []int
		for tid, run := range after {
			if run-before[tid] > uint64(10*time.Millisecond) {
				active = append(active, tid)
			}
		}
		if len(active) == n {
			return cmd, active
		}
	}
	t.Fatalf("the %d-thread spinner did not get going", n)
	return nil, nil
}

// taskTimes is each thread's on-CPU time in ns.
func taskTimes(pid int) map[int]uint64 {
	out := map[int]uint64{}
	dir := fmt.Sprintf("/proc/%d/task", pid)
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		tid, _ := strconv.Atoi(e.Name())
		data, err := os.ReadFile(filepath.Join(dir, e.Name(), "schedstat"))
		if err != nil {
			continue
		}
		f := strings.Fields(string(data))
		if len(f) > 0 {
			v, _ := strconv.ParseUint(f[0], 10, 64)
			out[tid] = v
		}
	}
	return out
}

func processCPU(pid int) uint64 {
	var sum uint64
	for _, v := range taskTimes(pid) {
		sum += v
	}
	return sum
}

// shareOfFirst measures a's share of the CPU a and b used over window.
func shareOfFirst(a, b int, window time.Duration) float64 {
	a0, b0 := processCPU(a), processCPU(b)
	time.Sleep(window)
	da, db := processCPU(a)-a0, processCPU(b)-b0
	return float64(da) / float64(da+db)
}

// TestPFS: a 1-thread and an 8-thread process on one CPU. Stock, the
// threads compete one by one (1/9 vs 8/9); with PFS through the backend,
// each process gets half. The syscall backend (in the patched guest) is
// exact; the nice backend (in the stock guest) is off by the rounding error
// it reports. test/kernel runs it in both guests, where the test owns the
// whole machine; on a shared host the pinned measurement is not reliable.
func TestPFS(t *testing.T) {
	if inGuest == "" {
		t.Skip("runs inside the QEMU guests that test/kernel boots (TestThreadBackendInGuests)")
	}
	one, oneThreads := spinner(t, 1)
	eight, eightThreads := spinner(t, 8)
	stock := shareOfFirst(one.Process.Pid, eight.Process.Pid, 2*time.Second)
	t.Logf("stock: the 1-thread process gets %.1f%%", 100*stock)

	var b *Backend
	if inGuest == "patched" {
		var err error
		if b, err = New("/proc", 2); err != nil {
			t.Fatal(err)
		}
	} else {
		b = NewNice(2)
	}
	plan := enforce.Plan{Pods: []enforce.Pod{{ThreadPolicy: fairness.PFS, Processes: []enforce.Process{
		{PID: one.Process.Pid, Threads: oneThreads}, {PID: eight.Process.Pid, Threads: eightThreads}}}}}
	res, err := b.Apply(plan)
	if err != nil {
		t.Fatal(err)
	}
	if res.Writes != 8 && res.Writes != 9 {
		t.Errorf("writes = %d, want the 8 (and maybe 1) threads", res.Writes)
	}
	if again, _ := b.Apply(plan); again.Writes != 0 {
		t.Errorf("an unchanged plan wrote %d weights", again.Writes)
	}
	got := shareOfFirst(one.Process.Pid, eight.Process.Pid, 3*time.Second)
	t.Logf("%s backend, PFS: the 1-thread process gets %.1f%% (rounding error it reports: %.1f points)", b.Name(), 100*got, res.ApproxErrorPoints)
	bound := 2 + res.ApproxErrorPoints
	if d := 100 * (got - 0.5); d > bound || d < -bound {
		t.Errorf("PFS with the %s backend: %.1f%%, want 50%% ± %.1f points", b.Name(), 100*got, bound)
	}
	if stock > 0.2 {
		t.Errorf("stock gave the 1-thread process %.1f%%: the setup does not contend as intended", 100*stock)
	}

	if err := b.Restore(plan.Pods); err != nil {
		t.Fatal(err)
	}
	back := shareOfFirst(one.Process.Pid, eight.Process.Pid, 2*time.Second)
	if back > 0.2 {
		t.Errorf("after Restore the 1-thread process still gets %.1f%%", 100*back)
	}
}
