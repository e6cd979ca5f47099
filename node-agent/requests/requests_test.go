package requests

import (
	"net"
	"os"
	"syscall"
	"testing"
)

// TestCountsReadsThatReturnData loads the program into this machine's
// kernel and reads from real sockets in this process: reads that return
// data count, by family, while the process is watched; a peek, a read of
// nothing, and reads before it is watched or after it is dropped do not.
func TestCountsReadsThatReturnData(t *testing.T) {
	c, err := Open()
	if err != nil {
		t.Fatalf("the request counter needs root and a kernel with BTF and the sock_recv_length tracepoint: %v", err)
	}
	defer c.Close()

	unix, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Close(unix[0])
	defer syscall.Close(unix[1])
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	client, err := net.Dial("tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	server, err := l.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer server.Close()

	buf := make([]byte, 16)
	readUnix := func() {
		t.Helper()
		if _, err := syscall.Write(unix[0], []byte("x")); err != nil {
			t.Fatal(err)
		}
		if n, err := syscall.Read(unix[1], buf); err != nil || n != 1 {
			t.Fatalf("unix read: %d, %v", n, err)
		}
	}
	readTCP := func() {
		t.Helper()
		if _, err := client.Write([]byte("y")); err != nil {
			t.Fatal(err)
		}
		if n, err := server.Read(buf); err != nil || n != 1 {
			t.Fatalf("tcp read: %d, %v", n, err)
		}
	}

	readUnix() // not watched yet
	readTCP()
	if err := c.Watch([]int{os.Getpid()}); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		readUnix()
	}
	for range 5 {
		readTCP()
	}
	// A peek returns data without taking it: no request.
	if _, err := syscall.Write(unix[0], []byte("z")); err != nil {
		t.Fatal(err)
	}
	if _, _, err := syscall.Recvfrom(unix[1], buf, syscall.MSG_PEEK); err != nil {
		t.Fatal(err)
	}
	if n, err := syscall.Read(unix[1], buf); err != nil || n != 1 { // taken: one more
		t.Fatalf("unix read: %d, %v", n, err)
	}
	// A read that returns nothing: no request.
	if _, _, err := syscall.Recvfrom(unix[1], buf, syscall.MSG_DONTWAIT); err != syscall.EAGAIN {
		t.Fatalf("an empty socket's read: %v, want EAGAIN", err)
	}

	got, err := c.Take()
	if err != nil {
		t.Fatal(err)
	}
	if want := (Counts{Local: 4, Network: 5}); got[os.Getpid()] != want {
		t.Errorf("counted %+v for this process, want %+v", got[os.Getpid()], want)
	}
	readTCP()
	if got, _ := c.Take(); got[os.Getpid()] != (Counts{Network: 1}) {
		t.Errorf("the second take counted %+v, want only the read since the first", got[os.Getpid()])
	}

	// Dropped: not counted, and its entry gone from the kernel's map.
	if err := c.Watch([]int{1}); err != nil {
		t.Fatal(err)
	}
	readUnix()
	if got, _ := c.Take(); got[os.Getpid()] != (Counts{}) {
		t.Errorf("a process no longer watched was counted: %+v", got[os.Getpid()])
	}
	var left Counts
	if err := c.watched.Lookup(uint32(os.Getpid()), &left); err == nil {
		t.Errorf("a process no longer watched is still in the map")
	}
}

// TestWatchRefusesTooMany: the map's size is a limit said, not a silent
// shortfall.
func TestWatchRefusesTooMany(t *testing.T) {
	c, err := Open()
	if err != nil {
		t.Fatalf("the request counter needs root and a kernel with BTF and the sock_recv_length tracepoint: %v", err)
	}
	defer c.Close()
	pids := make([]int, MaxProcesses+1)
	for i := range pids {
		pids[i] = 1<<22 + i // past pid_max's default: no real process
	}
	if err := c.Watch(pids); err == nil {
		t.Errorf("watching %d processes: no error", len(pids))
	}
}

// BenchmarkSocketRead is what the counter adds to each request a process
// receives: a one-byte write and read on a UNIX socket pair, with no
// counter loaded, with it loaded and the process not watched (every socket
// read on the node pays this), and watched.
//
//	go test -run '^$' -bench SocketRead ./node-agent/requests/
func BenchmarkSocketRead(b *testing.B) {
	pair, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM, 0)
	if err != nil {
		b.Fatal(err)
	}
	defer syscall.Close(pair[0])
	defer syscall.Close(pair[1])
	buf := make([]byte, 1)
	loop := func(b *testing.B) {
		for b.Loop() {
			if _, err := syscall.Write(pair[0], buf); err != nil {
				b.Fatal(err)
			}
			if _, err := syscall.Read(pair[1], buf); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.Run("no counter", loop)
	c, err := Open()
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	b.Run("not watched", loop)
	if err := c.Watch([]int{os.Getpid()}); err != nil {
		b.Fatal(err)
	}
	b.Run("watched", loop)
}
