package seccomp

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"
)

// The patched kernel's calls, as the agent passes them (threads.SeccompCalls).
var kernelCalls = []Call{{Name: "sched_setweight", Nr: 463}, {Name: "sched_getweight", Nr: 464}}

func TestMain(m *testing.M) {
	// Re-executed as a confined child: see TestRefusedCallFailsWithEPERM.
	if mode := os.Getenv("KUBEFAIR_SECCOMP_CHILD"); mode != "" {
		os.Exit(confinedChild(mode))
	}
	os.Exit(m.Run())
}

func TestTableNamesResolve(t *testing.T) {
	seen := map[string]string{}
	for _, g := range append(Agent, ContainerStart) {
		if g.Why == "" || len(g.Calls) == 0 {
			t.Errorf("group %+v has no reason or no calls", g)
		}
		for _, name := range g.Calls {
			if other, dup := seen[name]; dup {
				t.Errorf("%s is listed twice (%q and %q)", name, other, g.Why)
			}
			seen[name] = g.Why
			if _, ok := syscallNumbers[name]; !ok {
				t.Errorf("%s is not a system call of Linux 6.12 on x86_64", name)
			}
		}
	}
	allowed, err := AllowList(kernelCalls...)
	if err != nil {
		t.Fatal(err)
	}
	if want := len(seen) - len(ContainerStart.Calls) + len(kernelCalls); len(allowed) != want {
		t.Fatalf("allow-list has %d calls, want %d", len(allowed), want)
	}
}

// TestNumbersMatchTheSystemHeaders checks the generated table against the
// numbers in this system's kernel headers (Debian's linux-libc-dev, which
// gcc pulls in), for every call both know.
func TestNumbersMatchTheSystemHeaders(t *testing.T) {
	const header = "/usr/include/x86_64-linux-gnu/asm/unistd_64.h"
	data, err := os.ReadFile(header)
	if err != nil {
		t.Fatalf("%v: install gcc (hack/deps.sh), which brings the kernel headers", err)
	}
	matches := regexp.MustCompile(`#define __NR_(\w+) (\d+)`).FindAllStringSubmatch(string(data), -1)
	if len(matches) < 300 {
		t.Fatalf("found only %d calls in %s", len(matches), header)
	}
	for _, m := range matches {
		nr, _ := strconv.Atoi(m[2])
		if got, ok := syscallNumbers[m[1]]; !ok || got != uint32(nr) {
			t.Errorf("%s: header says %d, the generated table %d (present: %v)", m[1], nr, got, ok)
		}
	}
}

// seccompData is struct seccomp_data as x/net/bpf's VM loads it: the VM
// reads words big-endian, so each 32-bit field is stored that way at the
// kernel's offset and loads as the kernel would load it.
func seccompData(arch, nr uint32) []byte {
	b := make([]byte, 64)
	binary.BigEndian.PutUint32(b[offsetNr:], nr)
	binary.BigEndian.PutUint32(b[offsetArch:], arch)
	return b
}

func TestFilterAllowsExactlyTheList(t *testing.T) {
	allowed, err := AllowList(kernelCalls...)
	if err != nil {
		t.Fatal(err)
	}
	prog, err := Filter(allowed)
	if err != nil {
		t.Fatal(err)
	}
	vm, err := bpf.NewVM(prog)
	if err != nil {
		t.Fatal(err)
	}
	run := func(arch, nr uint32) uint32 {
		v, err := vm.Run(seccompData(arch, nr))
		if err != nil {
			t.Fatal(err)
		}
		return uint32(v)
	}
	listed := map[uint32]bool{}
	for _, c := range allowed {
		listed[c.Nr] = true
	}
	const refuse = unix.SECCOMP_RET_ERRNO | uint32(unix.EPERM)
	for nr := uint32(0); nr < 1024; nr++ {
		want := uint32(refuse)
		if listed[nr] {
			want = unix.SECCOMP_RET_ALLOW
		}
		if got := run(auditArch, nr); got != want {
			t.Errorf("call %d: filter returns %#x, want %#x", nr, got, want)
		}
	}
	// Another ABI's numbers mean other calls: refused even where they
	// collide with an allowed one (3 is close on x86_64, read on i386).
	if got := run(unix.AUDIT_ARCH_I386, syscallNumbers["close"]); got != refuse {
		t.Errorf("an i386 call passes the filter: %#x", got)
	}
	if got := run(auditArch, 0x40000000|syscallNumbers["read"]); got != refuse {
		t.Errorf("an x32 call passes the filter: %#x", got)
	}
	if _, err := Filter(nil); err == nil {
		t.Error("an empty allow-list gave a filter")
	}
}

// TestRefusedCallFailsWithEPERM installs the filter in a child process
// (it cannot be undone) and checks that calls outside the list fail with
// EPERM while the process carries on: goroutines, timers, allocation,
// files and output still work. 463 is refused unless the caller adds the
// kernel ABI's calls; with them it reaches the kernel (which answers
// something other than EPERM: ENOSYS on 6.12, an error of setxattrat's
// from 6.13 on).
func TestRefusedCallFailsWithEPERM(t *testing.T) {
	for _, mode := range []string{"agent", "agent+kernel"} {
		t.Run(mode, func(t *testing.T) {
			cmd := exec.Command(os.Args[0], "-test.run=^$")
			cmd.Env = append(os.Environ(), "KUBEFAIR_SECCOMP_CHILD="+mode)
			out, err := cmd.CombinedOutput()
			t.Logf("child:\n%s", out)
			if m := regexp.MustCompile(`tempfile: (\S+)`).FindSubmatch(out); m != nil {
				_ = os.Remove(string(m[1])) // the child may not unlink it
			}
			if err != nil {
				t.Fatalf("the confined child failed: %v", err)
			}
			for _, want := range []string{"setxattr: EPERM", "sethostname: EPERM", "ptrace: EPERM", "survived: 100 goroutines", "Seccomp:\t2"} {
				if !strings.Contains(string(out), want) {
					t.Errorf("child output lacks %q", want)
				}
			}
			got463 := regexp.MustCompile(`463: (\S+)`).FindStringSubmatch(string(out))
			if got463 == nil {
				t.Fatal("the child did not try 463")
			}
			if mode == "agent" && got463[1] != "EPERM" {
				t.Errorf("463 without the kernel ABI: %s, want EPERM", got463[1])
			}
			if mode == "agent+kernel" && got463[1] == "EPERM" {
				t.Error("463 with the kernel ABI allowed still fails with EPERM")
			}
		})
	}
}

func confinedChild(mode string) int {
	var extra []Call
	if mode == "agent+kernel" {
		extra = kernelCalls
	}
	allowed, err := AllowList(extra...)
	if err == nil {
		err = Install(allowed)
	}
	if err != nil {
		fmt.Println("install:", err)
		return 1
	}
	name := func(err error) string {
		var errno unix.Errno
		if errors.As(err, &errno) {
			return unix.ErrnoName(errno)
		}
		if err == nil {
			return "ok"
		}
		return err.Error()
	}
	f, err := os.CreateTemp("", "kubefair-seccomp")
	if err != nil {
		fmt.Println("create:", err)
		return 1
	}
	f.Close()
	fmt.Println("tempfile:", f.Name())
	fmt.Println("setxattr:", name(unix.Setxattr(f.Name(), "user.kubefair", []byte("x"), 0)))
	fmt.Println("sethostname:", name(unix.Sethostname([]byte("confined"))))
	_, _, errno := unix.Syscall(unix.SYS_PTRACE, unix.PTRACE_TRACEME, 0, 0)
	fmt.Println("ptrace:", name(errno))
	_, _, errno = unix.Syscall(463, 0, 0, 0)
	fmt.Println("463:", name(errno))
	// Still a working Go program.
	done := make(chan int)
	for i := 0; i < 100; i++ {
		go func(i int) {
			time.Sleep(time.Millisecond)
			_ = make([]byte, 1<<16)
			done <- i
		}(i)
	}
	for i := 0; i < 100; i++ {
		<-done
	}
	fmt.Println("survived: 100 goroutines")
	status, err := os.ReadFile("/proc/self/status")
	if err != nil {
		fmt.Println("status:", err)
		return 1
	}
	for _, line := range strings.Split(string(status), "\n") {
		if strings.HasPrefix(line, "Seccomp") {
			fmt.Println(line)
		}
	}
	// os.Remove uses unlinkat, which the agent never needs: the file stays.
	fmt.Println("unlink:", name(os.Remove(f.Name())))
	return 0
}

// TestCommittedProfileIsCurrent: config/seccomp/kubefair-agent.json, the
// file nodes install, is what the table makes (`make manifests` writes it).
func TestCommittedProfileIsCurrent(t *testing.T) {
	committed, err := os.ReadFile(filepath.Join("..", "..", "config", "seccomp", "kubefair-agent.json"))
	if err != nil {
		t.Fatal(err)
	}
	var want bytes.Buffer
	enc := json.NewEncoder(&want)
	enc.SetIndent("", "  ")
	if err := enc.Encode(Profile()); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(committed, want.Bytes()) {
		t.Fatal("config/seccomp/kubefair-agent.json is stale: run `make manifests`")
	}
}

// TestProfileRefusesAllButTheAgentsCalls: every Linux 6.12 call is either
// needed by the agent (or its container start) or refused by name.
func TestProfileRefusesAllButTheAgentsCalls(t *testing.T) {
	p := Profile()
	if p.DefaultAction != "SCMP_ACT_ALLOW" || len(p.Syscalls) != 1 || p.Syscalls[0].Action != "SCMP_ACT_ERRNO" || p.Syscalls[0].ErrnoRet != uint(unix.EPERM) {
		t.Fatalf("profile shape: %+v", p)
	}
	refused := map[string]bool{}
	for _, n := range p.Syscalls[0].Names {
		refused[n] = true
	}
	needed := map[string]bool{}
	for _, g := range append(Agent, ContainerStart) {
		for _, n := range g.Calls {
			needed[n] = true
			if refused[n] {
				t.Errorf("the profile refuses %s, which the agent needs", n)
			}
		}
	}
	for n := range syscallNumbers {
		if !needed[n] && !refused[n] {
			t.Errorf("the profile lets %s through", n)
		}
	}
	for _, n := range []string{"ptrace", "mount", "setxattr", "perf_event_open", "init_module", "unshare", "process_vm_writev"} {
		if !refused[n] {
			t.Errorf("the profile does not refuse %s", n)
		}
	}
}
