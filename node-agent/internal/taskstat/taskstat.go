// Package taskstat reads a process's threads, and what identifies a task
// beyond its id, which the kernel reuses: its start time. The backends that
// set a value on a thread or process note it then, and touch the id again
// only while it matches.
package taskstat

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Threads are the thread ids of a process, none when it is gone.
func Threads(procRoot string, pid int) []int {
	entries, err := os.ReadDir(filepath.Join(procRoot, strconv.Itoa(pid), "task"))
	if err != nil {
		return nil
	}
	tids := make([]int, 0, len(entries))
	for _, e := range entries {
		if tid, err := strconv.Atoi(e.Name()); err == nil {
			tids = append(tids, tid)
		}
	}
	return tids
}

// StartTime is a task's start time in clock ticks after boot
// (/proc/<id>/stat, field 22); thread ids are found there too.
func StartTime(procRoot string, id int) (uint64, error) {
	data, err := os.ReadFile(filepath.Join(procRoot, strconv.Itoa(id), "stat"))
	if err != nil {
		return 0, err
	}
	// The command name (field 2) may hold spaces and parentheses: count
	// from the last ')'.
	i := strings.LastIndexByte(string(data), ')')
	if i < 0 {
		return 0, fmt.Errorf("%s/%d/stat: %q", procRoot, id, data)
	}
	f := strings.Fields(string(data[i+1:])) // from field 3
	if len(f) < 20 {
		return 0, fmt.Errorf("%s/%d/stat: %d fields", procRoot, id, len(f)+2)
	}
	return strconv.ParseUint(f[19], 10, 64)
}
