package agent

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// threadTimes is one thread's cumulative scheduler times from
// /proc/<pid>/task/<tid>/schedstat: on-CPU time and time spent runnable
// but waiting for a CPU, in nanoseconds.
type threadTimes struct {
	run, wait uint64
}

// readThreads returns every thread of pid with its scheduler times. A
// process or thread that exits while we read is skipped, not an error.
func readThreads(procRoot string, pid int) map[int]threadTimes {
	taskDir := filepath.Join(procRoot, strconv.Itoa(pid), "task")
	entries, err := os.ReadDir(taskDir)
	if err != nil {
		return nil
	}
	out := make(map[int]threadTimes, len(entries))
	for _, e := range entries {
		tid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		data, err := os.ReadFile(filepath.Join(taskDir, e.Name(), "schedstat"))
		if err != nil {
			continue
		}
		f := strings.Fields(string(data))
		if len(f) < 2 {
			continue
		}
		run, err1 := strconv.ParseUint(f[0], 10, 64)
		wait, err2 := strconv.ParseUint(f[1], 10, 64)
		if err1 == nil && err2 == nil {
			out[tid] = threadTimes{run: run, wait: wait}
		}
	}
	return out
}
