// Package requests counts the requests that reach a set of processes'
// sockets, for request-based elevation (docs/agent.md, "Request-based
// elevation"): an eBPF program on the kernel's sock_recv_length tracepoint,
// which fires in the receiving process each time a socket read returns data
// (seed 002 takes a socket receive that returns data as a request). It is
// written with cilium/ebpf's assembler, so nothing is compiled on the node;
// the one offset it needs (a socket's family) comes from the running
// kernel's BTF.
package requests

import (
	"errors"
	"fmt"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/btf"
	"github.com/cilium/ebpf/link"
)

// Counts are a process's socket reads that returned data: from UNIX
// sockets (Local) and from IPv4/IPv6 ones (Network). Seed 002 elevates the
// first more, as requests from users of the machine itself.
type Counts struct {
	Local, Network uint64
}

// MaxProcesses is how many processes a Counter watches at most.
const MaxProcesses = 8192

// Counter counts, per watched process, the requests its sockets received.
type Counter struct {
	watched *ebpf.Map // tgid (u32) → Counts, cumulative
	prog    *ebpf.Program
	link    link.Link
	last    map[uint32]Counts
}

// tracepoint is the kernel's: trace_sock_recv_length(sk, ret, flags), in
// sock_recvmsg, in the receiving task (Linux 6.4 and later).
const tracepoint = "sock_recv_length"

// Socket families and the one flag the program reads.
const (
	afUnix  = 1
	afInet  = 2
	afInet6 = 10
	msgPeek = 2
)

// Open loads the program and attaches it. It needs CAP_BPF and
// CAP_PERFMON (or root) and a kernel with BTF; the error says which step
// failed.
func Open() (*Counter, error) {
	family, err := familyOffset()
	if err != nil {
		return nil, err
	}
	m, err := ebpf.NewMap(&ebpf.MapSpec{Name: "kubefair_reqs", Type: ebpf.Hash, KeySize: 4, ValueSize: 16, MaxEntries: MaxProcesses})
	if err != nil {
		return nil, fmt.Errorf("creating the BPF map: %w", err)
	}
	prog, err := ebpf.NewProgram(&ebpf.ProgramSpec{
		Name: "kubefair_reqs", Type: ebpf.RawTracepoint, License: "GPL",
		Instructions: program(m.FD(), family),
	})
	if err != nil {
		m.Close()
		return nil, fmt.Errorf("loading the BPF program: %w", err)
	}
	l, err := link.AttachRawTracepoint(link.RawTracepointOptions{Name: tracepoint, Program: prog})
	if err != nil {
		prog.Close()
		m.Close()
		return nil, fmt.Errorf("attaching to the %s tracepoint (Linux 6.4 and later): %w", tracepoint, err)
	}
	return &Counter{watched: m, prog: prog, link: l, last: map[uint32]Counts{}}, nil
}

// familyOffset is where a struct sock keeps its family
// (__sk_common.skc_family), from the kernel's BTF.
func familyOffset() (int16, error) {
	spec, err := btf.LoadKernelSpec()
	if err != nil {
		return 0, fmt.Errorf("reading the kernel's BTF: %w", err)
	}
	var common *btf.Struct
	if err := spec.TypeByName("sock_common", &common); err != nil {
		return 0, fmt.Errorf("finding struct sock_common in the kernel's BTF: %w", err)
	}
	var sock *btf.Struct
	if err := spec.TypeByName("sock", &sock); err != nil {
		return 0, fmt.Errorf("finding struct sock in the kernel's BTF: %w", err)
	}
	base, ok := memberOffset(sock, "__sk_common")
	if !ok {
		return 0, errors.New("struct sock has no __sk_common in the kernel's BTF")
	}
	off, ok := memberOffset(common, "skc_family")
	if !ok {
		return 0, errors.New("struct sock_common has no skc_family in the kernel's BTF")
	}
	return int16(base + off), nil
}

func memberOffset(s *btf.Struct, name string) (uint32, bool) {
	for _, m := range s.Members {
		if m.Name == name {
			return m.Offset.Bytes(), true
		}
	}
	return 0, false
}

// program adds one to the reading process's Local or Network count when a
// read returned data (not a MSG_PEEK), if the process is watched. Its
// context is the tracepoint's arguments, a u64 each: sk, ret, flags.
func program(mapFD int, family int16) asm.Instructions {
	return asm.Instructions{
		asm.LoadMem(asm.R6, asm.R1, 0, asm.DWord), // sk
		asm.LoadMem(asm.R7, asm.R1, 8, asm.Word),  // ret: bytes read, or an error
		asm.JSLE.Imm32(asm.R7, 0, "out"),
		asm.LoadMem(asm.R7, asm.R1, 16, asm.Word), // flags
		asm.JSet.Imm32(asm.R7, msgPeek, "out"),
		// family: read from the socket
		asm.Mov.Reg(asm.R1, asm.RFP),
		asm.Add.Imm(asm.R1, -8),
		asm.Mov.Imm(asm.R2, 2),
		asm.Mov.Reg(asm.R3, asm.R6),
		asm.Add.Imm(asm.R3, int32(family)),
		asm.FnProbeReadKernel.Call(),
		asm.JNE.Imm(asm.R0, 0, "out"),
		asm.LoadMem(asm.R8, asm.RFP, -8, asm.Half),
		asm.Mov.Imm(asm.R9, 0), // the Local count's offset in the value
		asm.JEq.Imm(asm.R8, afUnix, "watched"),
		asm.Mov.Imm(asm.R9, 8), // the Network count's
		asm.JEq.Imm(asm.R8, afInet, "watched"),
		asm.JNE.Imm(asm.R8, afInet6, "out"),
		// watched: the reading process (tgid) in the map
		asm.FnGetCurrentPidTgid.Call().WithSymbol("watched"),
		asm.RSh.Imm(asm.R0, 32),
		asm.StoreMem(asm.RFP, -4, asm.R0, asm.Word),
		asm.LoadMapPtr(asm.R1, mapFD),
		asm.Mov.Reg(asm.R2, asm.RFP),
		asm.Add.Imm(asm.R2, -4),
		asm.FnMapLookupElem.Call(),
		asm.JEq.Imm(asm.R0, 0, "out"),
		asm.Add.Reg(asm.R0, asm.R9),
		asm.Mov.Imm(asm.R1, 1),
		asm.StoreXAdd(asm.R0, asm.R1, asm.DWord),
		asm.Mov.Imm(asm.R0, 0).WithSymbol("out"),
		asm.Return(),
	}
}

// Watch makes pids the processes counted: new ones start at zero, and the
// others are dropped. More than MaxProcesses is an error (the first
// MaxProcesses are watched).
func (c *Counter) Watch(pids []int) error {
	want := make(map[uint32]bool, len(pids))
	for _, p := range pids {
		want[uint32(p)] = true
	}
	for tgid := range c.last {
		if !want[tgid] {
			if err := c.watched.Delete(tgid); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
				return fmt.Errorf("unwatching process %d: %w", tgid, err)
			}
			delete(c.last, tgid)
		}
	}
	for tgid := range want {
		if _, ok := c.last[tgid]; ok {
			continue
		}
		if len(c.last) >= MaxProcesses {
			return fmt.Errorf("%d processes to watch, more than the %d the counter holds", len(want), MaxProcesses)
		}
		if err := c.watched.Update(tgid, Counts{}, ebpf.UpdateNoExist); err != nil && !errors.Is(err, ebpf.ErrKeyExist) {
			return fmt.Errorf("watching process %d: %w", tgid, err)
		}
		c.last[tgid] = Counts{}
	}
	return nil
}

// Take returns, per watched process, the requests received since the last
// Take (or since it was first watched), leaving out processes with none.
func (c *Counter) Take() (map[int]Counts, error) {
	out := map[int]Counts{}
	for tgid, last := range c.last {
		var now Counts
		if err := c.watched.Lookup(tgid, &now); err != nil {
			if errors.Is(err, ebpf.ErrKeyNotExist) {
				continue
			}
			return nil, fmt.Errorf("reading process %d's count: %w", tgid, err)
		}
		if d := (Counts{Local: now.Local - last.Local, Network: now.Network - last.Network}); d != (Counts{}) {
			out[int(tgid)] = d
		}
		c.last[tgid] = now
	}
	return out, nil
}

// Close detaches the program and frees the map.
func (c *Counter) Close() error {
	return errors.Join(c.link.Close(), c.prog.Close(), c.watched.Close())
}
