// Package statfile reads the small kernel statistics files the agent reads
// again every period — a thread's /proc schedstat, a cgroup's CPU usage
// and weight. It keeps each one open and reads it again from offset 0:
// procfs and cgroupfs regenerate the content on every read at offset 0,
// and a pread costs a seventh of an open, read and close on this kind of
// file (0.7 µs against 5–8 µs measured), which at a thousand threads a
// period is most of the agent's CPU time. Files opened writable are
// written the same way: a cgroup file takes each write whole, whatever
// its offset, so a weight the agent writes every period costs one pwrite.
//
// Not for cgroup v1's cgroup.procs or tasks: a kept-open descriptor may be
// served a cached pid list.
package statfile

import (
	"errors"
	"os"
	"sync"
	"syscall"
)

// Files is a set of kept-open statistics files. It is safe for concurrent use.
type Files struct {
	// Writable opens the files for reading and writing (WriteJoined);
	// never creates one. Truncate: a write also cuts the file at its end,
	// for regular files (cgroupfs files take each write whole by
	// themselves).
	Writable, Truncate bool

	mu   sync.Mutex
	open map[string]*file
	buf  [4096]byte
	path []byte // ReadJoined's, reused
}

type file struct {
	fd   int
	used bool
}

// Read reads the file and hands its content to parse, which must not keep
// it. A file whose object went away (an exited thread, a removed cgroup)
// is opened again once, in case its path names a new one; os.ErrNotExist
// (or ESRCH/ENODEV) means it is gone.
func (f *Files) Read(path string, parse func([]byte) error) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if fl := f.open[path]; fl != nil {
		if data, ok := f.reread(fl); ok {
			return parse(data)
		}
		delete(f.open, path)
	}
	return f.openAndRead(path, parse)
}

// ReadPath is Read with the path in a byte slice the caller may reuse: a
// file already open is found without allocating (a map index by
// string(bytes) does not copy the bytes).
func (f *Files) ReadPath(pathBytes []byte, parse func([]byte) error) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if fl := f.open[string(pathBytes)]; fl != nil {
		if data, ok := f.reread(fl); ok {
			return parse(data)
		}
		delete(f.open, string(pathBytes))
	}
	return f.openAndRead(string(pathBytes), parse)
}

// ReadJoined is Read of the path that parts spell one after the other,
// found without allocating when it is open already.
func (f *Files) ReadJoined(parse func([]byte) error, parts ...string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.path = f.path[:0]
	for _, p := range parts {
		f.path = append(f.path, p...)
	}
	if fl := f.open[string(f.path)]; fl != nil {
		if data, ok := f.reread(fl); ok {
			return parse(data)
		}
		delete(f.open, string(f.path))
	}
	return f.openAndRead(string(f.path), parse)
}

// reread reads a kept-open file again from offset 0; one whose read fails
// is closed, for the caller to forget.
func (f *Files) reread(fl *file) ([]byte, bool) {
	n, err := syscall.Pread(fl.fd, f.buf[:], 0)
	if err != nil {
		syscall.Close(fl.fd)
		return nil, false
	}
	fl.used = true
	return f.buf[:n], true
}

func (f *Files) openAndRead(path string, parse func([]byte) error) error {
	fl, err := f.openFile(path)
	if err != nil {
		return err
	}
	n, err := syscall.Pread(fl.fd, f.buf[:], 0)
	if err != nil {
		f.drop(path, fl)
		return &os.PathError{Op: "read", Path: path, Err: err}
	}
	return parse(f.buf[:n])
}

// WriteJoined writes data whole at offset 0 of the file that parts spell
// (see ReadJoined), keeping it open. A file whose object went away is
// opened again once, as by Read; one that is gone is not created
// (os.ErrNotExist, or ENODEV).
func (f *Files) WriteJoined(data []byte, parts ...string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.Writable {
		return errors.New("statfile: not opened for writing")
	}
	f.path = f.path[:0]
	for _, p := range parts {
		f.path = append(f.path, p...)
	}
	if fl := f.open[string(f.path)]; fl != nil {
		err := f.pwrite(fl, data)
		if err == nil {
			fl.used = true
			return nil
		}
		if !Gone(err) {
			return &os.PathError{Op: "write", Path: string(f.path), Err: err}
		}
		f.drop(string(f.path), fl) // removed since it was opened: try its path again
	}
	path := string(f.path)
	fl, err := f.openFile(path)
	if err != nil {
		return err
	}
	if err := f.pwrite(fl, data); err != nil {
		if Gone(err) {
			f.drop(path, fl)
		}
		return &os.PathError{Op: "write", Path: path, Err: err}
	}
	return nil
}

func (f *Files) pwrite(fl *file, data []byte) error {
	if _, err := syscall.Pwrite(fl.fd, data, 0); err != nil || !f.Truncate {
		return err
	}
	return syscall.Ftruncate(fl.fd, int64(len(data)))
}

// openFile opens path (read-only, or for reading and writing when
// Writable) and keeps it, marked used.
func (f *Files) openFile(path string) (*file, error) {
	if f.open == nil {
		f.open = map[string]*file{}
	}
	mode := syscall.O_RDONLY
	if f.Writable {
		mode = syscall.O_RDWR
	}
	fd, err := syscall.Open(path, mode|syscall.O_CLOEXEC, 0)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: path, Err: err}
	}
	fl := &file{fd: fd, used: true}
	f.open[path] = fl
	return fl, nil
}

// drop closes a kept file and forgets it.
func (f *Files) drop(path string, fl *file) {
	syscall.Close(fl.fd)
	delete(f.open, path)
}

// Sweep closes the files not read since the last Sweep: threads and
// cgroups that are gone, or no longer of interest.
func (f *Files) Sweep() {
	f.mu.Lock()
	defer f.mu.Unlock()
	for path, fl := range f.open {
		if !fl.used {
			syscall.Close(fl.fd)
			delete(f.open, path)
			continue
		}
		fl.used = false
	}
}

// Len is how many files are open.
func (f *Files) Len() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.open)
}

// Gone tells whether err says the file's object no longer exists.
func Gone(err error) bool {
	return errors.Is(err, os.ErrNotExist) || errors.Is(err, syscall.ESRCH) || errors.Is(err, syscall.ENODEV)
}
