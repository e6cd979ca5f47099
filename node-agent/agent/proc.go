package agent

import (
	"bytes"
	"os"
	"strconv"

	"github.com/kubefair/kubefair/node-agent/internal/statfile"
)

// threadTimes is one thread's cumulative scheduler times from
// /proc/<pid>/task/<tid>/schedstat: on-CPU time and time spent runnable
// but waiting for a CPU, in nanoseconds.
type threadTimes struct {
	run, wait uint64
}

// processTimes sums a process's threads' times over a period; busy is the
// run + wait of those runnable for at least half of it (enforce.Process).
type processTimes struct {
	run, wait, busy uint64
}

// procReader reads threads' scheduler statistics from /proc. It reads
// every thread of every busy pod each period, so it keeps each thread's
// schedstat open between periods, and lists a process's threads again only
// when its thread count (from its kept-open stat) changed or one of them
// ended: listing a task directory costs twenty reads of a kept-open file.
type procReader struct {
	root  string
	files statfile.Files
	known map[int]*threadList
	path  []byte // reused to spell each file's path
}

type threadList struct {
	names []string
	used  bool
}

// readThreads calls found for every thread of pid with its scheduler
// times. A process or thread that exits while we read is skipped, not an
// error.
func (r *procReader) readThreads(pid int, found func(tid int, tt threadTimes)) {
	taskPath := r.root + "/" + strconv.Itoa(pid) + "/task/"
	names := r.threads(pid, taskPath)
	var tt threadTimes
	parse := func(data []byte) error {
		var ok bool
		if tt, ok = parseSchedstat(data); !ok {
			return strconv.ErrSyntax
		}
		return nil
	}
	for _, name := range names {
		tid, err := strconv.Atoi(name)
		if err != nil {
			continue
		}
		r.path = append(append(append(r.path[:0], taskPath...), name...), "/schedstat"...)
		if r.files.ReadPath(r.path, parse) != nil {
			delete(r.known, pid) // a thread ended: list them again next time
			continue
		}
		found(tid, tt)
	}
}

// threads is pid's thread ids: the last listing while the process's thread
// count is unchanged, else a new one.
func (r *procReader) threads(pid int, taskPath string) []string {
	if r.known == nil {
		r.known = map[int]*threadList{}
	}
	count := -1
	r.path = append(append(r.path[:0], taskPath[:len(taskPath)-len("task/")]...), "stat"...)
	_ = r.files.ReadPath(r.path, func(data []byte) error {
		count = statNumThreads(data)
		return nil
	})
	if l := r.known[pid]; l != nil && count == len(l.names) {
		l.used = true
		return l.names
	}
	dir, err := os.Open(taskPath)
	if err != nil {
		delete(r.known, pid)
		return nil
	}
	names, _ := dir.Readdirnames(-1)
	dir.Close()
	r.known[pid] = &threadList{names: names, used: true}
	return names
}

// statNumThreads is num_threads, field 20 of /proc/<pid>/stat (-1 if
// unreadable); the fields are counted after the command name, which may
// hold spaces and parentheses.
func statNumThreads(data []byte) int {
	end := bytes.LastIndexByte(data, ')')
	if end < 0 {
		return -1
	}
	field, n, digits := 2, 0, false // data[end+1:] starts before field 3
	for _, c := range data[end+1:] {
		if c == ' ' {
			if field == 20 {
				break
			}
			field, n, digits = field+1, 0, false
			continue
		}
		if field == 20 && c >= '0' && c <= '9' {
			n, digits = n*10+int(c-'0'), true
		}
	}
	if field != 20 || !digits {
		return -1
	}
	return n
}

// sweep closes what was not read since the last sweep and forgets the
// processes not seen: they ended, or their pods went idle or away.
func (r *procReader) sweep() {
	r.files.Sweep()
	for pid, l := range r.known {
		if !l.used {
			delete(r.known, pid)
			continue
		}
		l.used = false
	}
}

// parseSchedstat parses "<run ns> <wait ns> <timeslices>".
func parseSchedstat(data []byte) (threadTimes, bool) {
	var fields [2]uint64
	field, digits := 0, 0
	for _, c := range data {
		if c >= '0' && c <= '9' {
			fields[field] = fields[field]*10 + uint64(c-'0')
			digits++
			continue
		}
		if digits > 0 {
			field, digits = field+1, 0
			if field == len(fields) {
				break
			}
		}
	}
	if digits > 0 {
		field++
	}
	return threadTimes{run: fields[0], wait: fields[1]}, field >= len(fields)
}
