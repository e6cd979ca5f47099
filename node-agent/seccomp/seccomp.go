// Package seccomp confines the agent to the system calls it makes. The
// allow-list (table.go) is the one place that names them; from it come the
// filter the agent installs on itself at startup (Install) and the
// container runtime's Localhost profile (Profile).
//
// The agent filters itself because a container runtime cannot express its
// allow-list: runc resolves a profile's names through libseccomp, which
// does not know the patched kernel's sched_setweight/sched_getweight (463,
// 464 on x86_64) and silently drops names it cannot resolve, and a
// profile's default action refuses every number it does not name. The
// filter here is built from numbers, so it allows exactly the agent's calls
// plus the kernel ABI's when the kernel publishes it.
package seccomp

import (
	"errors"
	"fmt"
	"sort"

	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"
)

// Call is a system call by name and by its number on this architecture.
type Call struct {
	Name string
	Nr   uint32
}

// ErrUnsupportedArch: the allow-list has numbers for x86_64 only.
var ErrUnsupportedArch = errors.New("the agent's seccomp allow-list has numbers for x86_64 (amd64) only")

// AllowList is the agent's table resolved to this architecture's numbers,
// plus extra calls the caller resolved itself (the patched kernel's, which
// have no name in Linux 6.12's table), sorted by number.
func AllowList(extra ...Call) ([]Call, error) {
	if auditArch == 0 {
		return nil, ErrUnsupportedArch
	}
	seen := map[uint32]bool{}
	var out []Call
	add := func(c Call) {
		if !seen[c.Nr] {
			seen[c.Nr] = true
			out = append(out, c)
		}
	}
	for _, g := range Agent {
		for _, name := range g.Calls {
			nr, ok := syscallNumbers[name]
			if !ok {
				return nil, fmt.Errorf("seccomp table: %q is not an x86_64 system call of Linux 6.12", name)
			}
			add(Call{Name: name, Nr: nr})
		}
	}
	for _, c := range extra {
		add(c)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Nr < out[j].Nr })
	return out, nil
}

// Offsets into struct seccomp_data, which a filter reads.
const (
	offsetNr   = 0
	offsetArch = 4
)

// maxCalls keeps every jump of the linear filter within BPF's 8-bit offsets.
const maxCalls = 250

// Filter is the classic BPF program that allows exactly the given calls of
// this architecture and makes everything else fail with EPERM, the process
// carrying on (a refused call is an error the agent reports, never a crash).
// A call from another ABI (i386 int 0x80, x32) is refused the same way.
func Filter(allowed []Call) ([]bpf.Instruction, error) {
	n := len(allowed)
	if auditArch == 0 {
		return nil, ErrUnsupportedArch
	}
	if n == 0 || n > maxCalls {
		return nil, fmt.Errorf("seccomp filter: %d calls, want 1..%d", n, maxCalls)
	}
	prog := []bpf.Instruction{
		bpf.LoadAbsolute{Off: offsetArch, Size: 4},
		// A foreign architecture's numbers mean other calls: refuse them all.
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: auditArch, SkipFalse: uint8(n + 1)},
		bpf.LoadAbsolute{Off: offsetNr, Size: 4},
	}
	for i, c := range allowed {
		// On a match, skip the remaining checks and the refusal.
		prog = append(prog, bpf.JumpIf{Cond: bpf.JumpEqual, Val: c.Nr, SkipTrue: uint8(n - i)})
	}
	return append(prog,
		bpf.RetConstant{Val: unix.SECCOMP_RET_ERRNO | uint32(unix.EPERM)},
		bpf.RetConstant{Val: unix.SECCOMP_RET_ALLOW},
	), nil
}

// Supported tells whether the allow-list has numbers for this architecture.
func Supported() bool { return auditArch != 0 }
