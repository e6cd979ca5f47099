package agent

import (
	"os"
	"path/filepath"
	"testing"
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
