package agent

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/kubefair/kubefair/node-agent/enforce/threads"
)

func TestReadThreads(t *testing.T) {
	root := t.TempDir()
	for file, content := range map[string]string{
		"42/task/42/schedstat":  "123456789 987654321 77\n",
		"42/task/43/schedstat":  "5 6",
		"42/task/44/schedstat":  "garbage\n",
		"42/task/45/schedstat":  "12\n",
		"42/task/xyz/schedstat": "1 2 3\n",
	} {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(root, file)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(root, file), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	r := procReader{root: root}
	got := map[int]threadTimes{}
	r.readThreads(42, func(tid int, tt threadTimes) { got[tid] = tt })
	want := map[int]threadTimes{42: {run: 123456789, wait: 987654321}, 43: {run: 5, wait: 6}}
	if len(got) != len(want) || got[42] != want[42] || got[43] != want[43] {
		t.Fatalf("read %v, want %v", got, want)
	}
	r.readThreads(7, func(int, threadTimes) { t.Fatal("a process that is gone has threads") })

	// This process's own threads, from the real /proc.
	self := procReader{root: "/proc"}
	n := 0
	self.readThreads(os.Getpid(), func(int, threadTimes) { n++ })
	if n == 0 {
		t.Fatal("no threads read for this process")
	}
}

func TestStatNumThreads(t *testing.T) {
	line := "4242 (odd) name (x)) S 1 4242 4242 0 -1 4194560 100 0 0 0 5 6 0 0 20 0 7 0 12345 1000000 200 18446744073709551615\n"
	if n := statNumThreads([]byte(line)); n != 7 {
		t.Fatalf("num_threads = %d, want 7", n)
	}
	if n := statNumThreads([]byte("garbage")); n != -1 {
		t.Fatalf("num_threads of garbage = %d, want -1", n)
	}
	data, err := os.ReadFile("/proc/self/stat")
	if err != nil {
		t.Fatal(err)
	}
	tasks, _ := os.ReadDir("/proc/self/task")
	if n := statNumThreads(data); n < 1 || n > len(tasks)+8 {
		t.Fatalf("num_threads of this process = %d, its task directory lists %d", n, len(tasks))
	}
}

// TestThreadFiguresKeptWhileSteady: with pod weights only, a pod's thread
// figures stand for the periods its CPU holds steady, and the read after
// them spreads the waits over the periods they cover.
func TestThreadFiguresKeptWhileSteady(t *testing.T) {
	root := t.TempDir()
	write := func(file, content string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(filepath.Join(root, file)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(root, file), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("42/task/42/schedstat", "100 0 1\n")
	write("42/task/43/schedstat", "5 0 1\n")
	a := &Agent{node: &node{}, procs: procReader{root: root}, owner: map[int]int{}, active: map[int][]int{}, spent: map[int]processTimes{}}
	ps := &podState{pids: []int{42}}
	t0 := time.Now()
	if wait := a.readThreads(ps, t0, time.Second); wait != 0 || ps.running != 0 {
		t.Fatalf("a first read found wait %v and %d running threads, want none (no earlier figures)", wait, ps.running)
	}
	ps.seen, ps.cpu, ps.threadsCPU = true, 500*time.Millisecond, 500*time.Millisecond

	for _, c := range []struct {
		name   string
		cpu    time.Duration
		age    int
		kind   threads.Kind
		steady bool
	}{
		{"CPU unchanged", 500 * time.Millisecond, 0, "", true},
		{"CPU within an eighth", 560 * time.Millisecond, 0, "", true},
		{"CPU up by more than an eighth", 600 * time.Millisecond, 0, "", false},
		{"CPU down by more than an eighth", 400 * time.Millisecond, 0, "", false},
		{"figures as old as allowed", 500 * time.Millisecond, threadsRefreshPeriods - 1, "", false},
		{"a thread backend", 500 * time.Millisecond, 0, threads.Kind("nice"), false},
	} {
		ps.cpu, ps.threadsAge, a.node.threads = c.cpu, c.age, c.kind
		if got := a.threadsSteady(ps, time.Second); got != c.steady {
			t.Errorf("%s: steady %v, want %v", c.name, got, c.steady)
		}
	}
	// A small pod: 1 % of a CPU is within what counts as steady.
	ps.cpu, ps.threadsCPU, ps.threadsAge, a.node.threads = 18*time.Millisecond, 10*time.Millisecond, 0, ""
	if !a.threadsSteady(ps, time.Second) {
		t.Error("a pod at 10 ms a period moving to 18 ms is not steady, want steady (within 1 % of a CPU)")
	}

	// Three periods later: thread 42 ran and waited 3 s in all, 43 did nothing.
	write("42/task/42/schedstat", "400 3000000000 2\n")
	a.node.threads = threads.Kind("syscall") // process times are a thread backend's
	wait := a.readThreads(ps, t0.Add(3*time.Second), time.Second)
	if wait != time.Second || ps.running != 1 || ps.waitRate != 1 {
		t.Errorf("after three periods: wait %v a period (rate %v), %d running threads; want 1s, 1, 1", wait, ps.waitRate, ps.running)
	}
	if len(ps.processes) != 1 || ps.processes[0].PID != 42 || len(ps.processes[0].Threads) != 1 || ps.processes[0].Threads[0] != 42 {
		t.Errorf("processes %+v, want process 42 with thread 42 alone", ps.processes)
	} else if p := ps.processes[0]; p.CPU != 100 || p.Wait != time.Second {
		t.Errorf("process 42 ran %v and waited %v a period, want 100ns and 1s (its thread's, over three periods)", p.CPU, p.Wait)
	}
	if ps.threadsAge != 0 || !ps.threadsCurrent || ps.threadsCPU != ps.cpu {
		t.Errorf("the read left age %d, current %v, CPU %v (pod %v): want a fresh read", ps.threadsAge, ps.threadsCurrent, ps.threadsCPU, ps.cpu)
	}

	// A period later 42 was runnable all of it, 43 (a helper) waited 0.4 s:
	// both ran, only 42 was busy (runnable half the period or more).
	write("42/task/42/schedstat", "200000400 3800000000 3\n")
	write("42/task/43/schedstat", "6 400000000 2\n")
	a.readThreads(ps, t0.Add(4*time.Second), time.Second)
	if len(ps.processes) != 1 || len(ps.processes[0].Threads) != 2 {
		t.Fatalf("processes %+v, want process 42 with both threads", ps.processes)
	}
	if p := ps.processes[0]; p.Busy != time.Second || p.Wait != 1200*time.Millisecond {
		t.Errorf("process 42: busy %v, wait %v; want 1s (thread 42 alone) and 1.2s (both)", p.Busy, p.Wait)
	}
}
