package agent

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
	"unsafe"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"

	"github.com/kubefair/kubefair/node-agent/seccomp"
	"github.com/kubefair/kubefair/test/harness/containerd"
)

// runcContainer is a bundle for runc (the one hack/build-runtime.sh builds,
// which containerd's shim runs on kubefair's nodes) that runs the agent
// binary the way the chart runs it on a patched-kernel node: root without
// capabilities but CAP_SYS_NICE (and CAP_BPF, CAP_PERFMON, as with
// agent.requestElevation.enabled; the kernel's BTF, which sysfs shows a
// pod, bound read-only), no_new_privs (allowPrivilegeEscalation:
// false), a read-only root filesystem, the host's PIDs (hostPID), and the
// Localhost seccomp profile from config/seccomp/kubefair-agent.json —
// containerd reads that file into the OCI spec's linux.seccomp exactly as
// here. The host network stands in for the pod network (the API server is
// on localhost).
type runcContainer struct {
	runc, root, bundle, id string
}

func newRuncContainer(t *testing.T, n *nodeScene, id string, args []string) *runcContainer {
	t.Helper()
	profileJSON, err := os.ReadFile(filepath.Join("..", "..", "..", "config", "seccomp", "kubefair-agent.json"))
	if err != nil {
		t.Fatal(err)
	}
	var profile specs.LinuxSeccomp
	if err := json.Unmarshal(profileJSON, &profile); err != nil {
		t.Fatalf("the Localhost profile is not an OCI linux.seccomp: %v", err)
	}
	return newRuncContainerWithProfile(t, n, id, args, &profile)
}

func newRuncContainerWithProfile(t *testing.T, n *nodeScene, id string, args []string, profile *specs.LinuxSeccomp) *runcContainer {
	t.Helper()
	if err := containerd.CheckBuilt(); err != nil {
		t.Fatal(err)
	}
	c := &runcContainer{runc: containerd.Binary("runc"), root: t.TempDir(), bundle: t.TempDir(), id: fmt.Sprintf("%s-%d", id, os.Getpid())}
	rootfs := filepath.Join(c.bundle, "rootfs")
	if err := os.MkdirAll(rootfs, 0o755); err != nil {
		t.Fatal(err)
	}
	bin, err := os.ReadFile(agentBinary(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(rootfs, "kubefair-agent"), bin, 0o755); err != nil {
		t.Fatal(err)
	}
	bind := func(path string, opts ...string) specs.Mount {
		return specs.Mount{Destination: path, Type: "bind", Source: path, Options: append([]string{"rbind"}, opts...)}
	}
	caps := []string{"CAP_SYS_NICE", "CAP_BPF", "CAP_PERFMON"}
	spec := specs.Spec{
		Version: "1.0.2",
		Process: &specs.Process{
			Args: append([]string{"/kubefair-agent"}, args...), Cwd: "/",
			Env:             []string{"PATH=/", "KUBECONFIG=" + n.kubeconfig},
			NoNewPrivileges: true,
			Capabilities:    &specs.LinuxCapabilities{Bounding: caps, Effective: caps, Permitted: caps},
		},
		Root: &specs.Root{Path: rootfs, Readonly: true},
		Mounts: []specs.Mount{
			{Destination: "/proc", Type: "proc", Source: "proc"},
			{Destination: "/dev", Type: "tmpfs", Source: "tmpfs", Options: []string{"nosuid", "mode=755", "size=1m"}},
			bind("/sys/fs/cgroup", "rw"),
			bind("/sys/kernel/btf", "ro"),
			bind(n.w.tree.Root, "rw"),
			bind(n.w.stateDir, "rw"),
			bind(filepath.Dir(n.kubeconfig), "ro"),
			bind(filepath.Dir(n.containerd.Address), "rw"),
		},
		Linux: &specs.Linux{
			Namespaces:  []specs.LinuxNamespace{{Type: specs.MountNamespace}, {Type: specs.IPCNamespace}, {Type: specs.UTSNamespace}},
			Seccomp:     profile,
			CgroupsPath: "/" + c.id,
		},
	}
	data, err := json.Marshal(spec)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(c.bundle, "config.json"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = exec.Command(c.runc, "--root", c.root, "delete", "--force", c.id).Run() })
	return c
}

// argv runs the container in the foreground until its process exits.
func (c *runcContainer) argv() []string {
	return []string{c.runc, "--root", c.root, "run", "--bundle", c.bundle, c.id}
}

// pid is the container's process on the host, 0 until it runs.
func (c *runcContainer) pid() int {
	out, err := exec.Command(c.runc, "--root", c.root, "state", c.id).Output()
	if err != nil {
		return 0
	}
	var st specs.State
	if json.Unmarshal(out, &st) != nil || st.Status != specs.StateRunning {
		return 0
	}
	return st.Pid
}

// waitFiltered waits until the container's process runs under two
// filters, the runtime's and the agent's own, and returns its PID.
func (c *runcContainer) waitFiltered(t *testing.T, out fmt.Stringer) int {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		if pid := c.pid(); pid != 0 {
			status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
			if err == nil && strings.Contains(string(status), "Seccomp_filters:\t2") {
				return pid
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("the agent is not running in runc under two filters (the runtime's, its own) after 30 s; output:\n%s", out)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// seccompFilters reads the filters a process runs under, oldest first,
// through ptrace (PTRACE_SECCOMP_GET_FILTER; root): the test can then ask
// each filter what it does with any call, whatever kernel runs the test.
func seccompFilters(pid int) ([][]bpf.Instruction, error) {
	runtime.LockOSThread() // ptrace requests come from the tracing thread
	defer runtime.UnlockOSThread()
	if err := unix.PtraceSeize(pid); err != nil {
		return nil, fmt.Errorf("PTRACE_SEIZE %d: %w", pid, err)
	}
	defer unix.PtraceDetach(pid)
	if err := unix.PtraceInterrupt(pid); err != nil {
		return nil, fmt.Errorf("PTRACE_INTERRUPT: %w", err)
	}
	var ws unix.WaitStatus
	if _, err := unix.Wait4(pid, &ws, unix.WALL, nil); err != nil {
		return nil, fmt.Errorf("waiting for the stop: %w", err)
	}
	var filters [][]bpf.Instruction
	for i := 0; ; i++ {
		n, _, errno := unix.Syscall6(unix.SYS_PTRACE, unix.PTRACE_SECCOMP_GET_FILTER, uintptr(pid), uintptr(i), 0, 0, 0)
		if errno == unix.ENOENT {
			return filters, nil
		}
		if errno != 0 {
			return nil, fmt.Errorf("PTRACE_SECCOMP_GET_FILTER %d: %w", i, errno)
		}
		buf := make([]unix.SockFilter, n)
		if _, _, errno := unix.Syscall6(unix.SYS_PTRACE, unix.PTRACE_SECCOMP_GET_FILTER, uintptr(pid), uintptr(i), uintptr(unsafe.Pointer(&buf[0])), 0, 0); errno != 0 {
			return nil, fmt.Errorf("PTRACE_SECCOMP_GET_FILTER %d: %w", i, errno)
		}
		raw := make([]bpf.RawInstruction, n)
		for j, f := range buf {
			raw[j] = bpf.RawInstruction{Op: f.Code, Jt: f.Jt, Jf: f.Jf, K: f.K}
		}
		prog, ok := bpf.Disassemble(raw)
		if !ok {
			return nil, fmt.Errorf("filter %d does not disassemble", i)
		}
		filters = append(filters, prog)
	}
}

// verdict is what a filter returns for an x86_64 call with zero arguments.
func verdict(t *testing.T, filter []bpf.Instruction, nr uint32) uint32 {
	t.Helper()
	vm, err := bpf.NewVM(filter)
	if err != nil {
		t.Fatal(err)
	}
	// struct seccomp_data; x/net/bpf's VM loads words big-endian.
	data := make([]byte, 64)
	binary.BigEndian.PutUint32(data[0:], nr)
	binary.BigEndian.PutUint32(data[4:], unix.AUDIT_ARCH_X86_64)
	v, err := vm.Run(data)
	if err != nil {
		t.Fatal(err)
	}
	return uint32(v)
}

// TestAgentInRuncUnderTheLocalhostProfile runs the real agent in a real runc
// container under the generated Localhost profile, with its own filter on
// top, through a node's life (as TestAgentUnderItsSeccompFilter), then the
// one-shot restore (--restore) in a second container. It reads both filters out of the
// running agent: the runtime's lets sched_setweight/sched_getweight (463,
// 464) through — which a profile naming them could not, as runc's
// libseccomp cannot resolve them — and refuses what the agent does not
// need; the agent's own refuses them on this kernel (no ABI probe).
func TestAgentInRuncUnderTheLocalhostProfile(t *testing.T) {
	n := newNode(t, "runc")
	c := newRuncContainer(t, n, "kubefair-agent", n.args())
	p := n.start(t, c.argv())
	p.pid = c.waitFiltered(t, p.out)
	filters, err := seccompFilters(p.pid)
	if err != nil {
		t.Fatal(err)
	}
	if len(filters) != 2 {
		t.Fatalf("the agent runs under %d filters, want 2", len(filters))
	}
	runtimeProfile, own := filters[0], filters[1] // oldest first
	const refused = unix.SECCOMP_RET_ERRNO | uint32(unix.EPERM)
	for nr, want := range map[uint32]uint32{463: unix.SECCOMP_RET_ALLOW, 464: unix.SECCOMP_RET_ALLOW,
		unix.SYS_SETXATTR: refused, unix.SYS_PTRACE: refused, unix.SYS_MOUNT: refused, unix.SYS_READ: unix.SECCOMP_RET_ALLOW} {
		if got := verdict(t, runtimeProfile, nr); got != want {
			t.Errorf("the Localhost profile (as runc loaded it) returns %#x for call %d, want %#x", got, nr, want)
		}
	}
	for nr, want := range map[uint32]uint32{463: refused, unix.SYS_SETXATTR: refused, unix.SYS_EXECVE: refused, unix.SYS_READ: unix.SECCOMP_RET_ALLOW} {
		if got := verdict(t, own, nr); got != want {
			t.Errorf("the agent's own filter returns %#x for call %d on this kernel, want %#x", got, nr, want)
		}
	}
	n.enforces(t, p)
	if !strings.Contains(p.out.String(), "seccomp filter installed") || strings.Contains(p.out.String(), "operation not permitted") {
		t.Errorf("agent output in runc:\n%s", p.out.String())
	}
	restore := newRuncContainer(t, n, "kubefair-restore", n.restoreArgs())
	n.restores(t, restore.argv())
}

// TestNamedProfileCannotAllowTheKernelCalls is why the Localhost profile is
// inverted: a default-refuse profile that allows everything the agent needs
// and also names sched_setweight/sched_getweight — or their 6.13+ names
// setxattrat/getxattrat — still refuses 463 and 464 under runc linked with
// Debian 12's libseccomp (2.5.4, static in the runc hack/build-runtime.sh
// builds), which resolves none of those names and drops them.
func TestNamedProfileCannotAllowTheKernelCalls(t *testing.T) {
	n := newNode(t, "named")
	names := []string{"sched_setweight", "sched_getweight", "setxattrat", "getxattrat"}
	for _, g := range append(seccomp.Agent, seccomp.ContainerStart) {
		names = append(names, g.Calls...)
	}
	named := &specs.LinuxSeccomp{DefaultAction: specs.ActErrno, Architectures: []specs.Arch{specs.ArchX86_64},
		Syscalls: []specs.LinuxSyscall{{Names: names, Action: specs.ActAllow}}}
	c := newRuncContainerWithProfile(t, n, "kubefair-named", n.args(), named)
	p := n.start(t, c.argv())
	p.pid = c.waitFiltered(t, p.out)
	filters, err := seccompFilters(p.pid)
	if err != nil {
		t.Fatal(err)
	}
	for _, nr := range []uint32{463, 464} {
		got := verdict(t, filters[0], nr)
		t.Logf("a profile naming the calls: runc's filter returns %#x for %d", got, nr)
		if got == unix.SECCOMP_RET_ALLOW {
			t.Errorf("runc's filter allows %d by name: this runtime could use a plain allow-list profile", nr)
		}
	}
	if got := verdict(t, filters[0], unix.SYS_READ); got != unix.SECCOMP_RET_ALLOW {
		t.Errorf("the named profile refuses read (%#x): the comparison is broken", got)
	}
}
