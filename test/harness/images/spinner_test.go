package images

import (
	"bytes"
	"errors"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kubefair/kubefair/test/harness/kubeapi"
)

// TestSpinnerProcesses: the burner image holds the spinner, and a spinner
// runs exactly its -threads threads, starts one process per -children
// entry (told apart by its -threads), and takes them with it when it ends.
func TestSpinnerProcesses(t *testing.T) {
	tarball := filepath.Join(t.TempDir(), "burner.tar")
	if err := Burner.Build(kubeapi.RepoRoot(), tarball); err != nil {
		t.Fatal(err)
	}
	files := untar(t, mustRead(t, tarball))
	var manifest string
	for name := range files {
		if strings.HasSuffix(name, "/layer.tar") {
			manifest = name
		}
	}
	spinner := untar(t, files[manifest])[Spinner[1:]]
	if len(spinner) == 0 {
		t.Fatalf("the burner image holds no %s", Spinner)
	}
	bin := filepath.Join(t.TempDir(), "spinner")
	if err := os.WriteFile(bin, spinner, 0o755); err != nil {
		t.Fatal(err)
	}

	for _, bad := range [][]string{{}, {"-threads", "0"}, {"-threads", "2", "-children", "3,x"}, {"-threads", "1", "-children"}} {
		var exit *exec.ExitError
		if err := exec.Command(bin, bad...).Run(); !errors.As(err, &exit) || exit.ExitCode() != 2 {
			t.Errorf("spinner %v: %v, want exit status 2", bad, err)
		}
	}

	cmd := exec.Command(bin, "-threads", "2", "-children", "3,1")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	want := map[int]int{2: 1, 3: 1, 1: 1} // processes by -threads
	var procs []int
	deadline := time.Now().Add(5 * time.Second)
	for {
		procs = append([]int{cmd.Process.Pid}, children(cmd.Process.Pid)...)
		got := map[int]int{}
		for _, pid := range procs {
			if n, ok := threadsFlag(pid); ok && threadCount(pid) == n {
				got[n]++
			}
		}
		if len(procs) == 3 && maps.Equal(got, want) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("processes %v: by -threads with that many threads %v, want %v", procs, got, want)
		}
		time.Sleep(50 * time.Millisecond)
	}

	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Errorf("spinner after SIGTERM: %v, want exit status 0", err)
	}
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		left := 0
		for _, pid := range procs[1:] {
			if _, err := os.Stat("/proc/" + strconv.Itoa(pid) + "/task"); err == nil && !zombie(pid) {
				left++
			}
		}
		if left == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d children outlived their parent", left)
		}
	}
}

func children(pid int) []int {
	b, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/task/" + strconv.Itoa(pid) + "/children")
	var out []int
	for _, f := range strings.Fields(string(b)) {
		n, _ := strconv.Atoi(f)
		out = append(out, n)
	}
	return out
}

// threadsFlag is a process's -threads.
func threadsFlag(pid int) (int, bool) {
	b, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	args := strings.Split(string(bytes.TrimRight(b, "\x00")), "\x00")
	for i := 0; i+1 < len(args); i++ {
		if args[i] == "-threads" {
			n, err := strconv.Atoi(args[i+1])
			return n, err == nil
		}
	}
	return 0, false
}

func threadCount(pid int) int {
	entries, _ := os.ReadDir("/proc/" + strconv.Itoa(pid) + "/task")
	return len(entries)
}

func zombie(pid int) bool {
	b, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
	return len(f) > 0 && f[0] == "Z"
}
