//go:build kubefair_guest

// This file is built only into the test binary that test/kernel runs inside
// its QEMU guests (go test -c -tags kubefair_guest), where the test owns the
// whole machine and the patched or the stock kernel.

package threads

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/kubefair/kubefair/node-agent/enforce"
	"github.com/kubefair/kubefair/node-agent/fairness"
)

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
