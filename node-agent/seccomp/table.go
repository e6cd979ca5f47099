package seccomp

// A Group is system calls the agent makes for one reason.
type Group struct {
	Why   string
	Calls []string
}

// Agent is every system call the agent makes, by reason: what `strace -f`
// saw the real agent make through all its paths (startup, the API client
// and cache, containerd's gRPC API, cgroup and /proc reads and writes, the
// thread backends, the state file, metrics and probe servers, SIGTERM, the
// one-shot restore), plus the few the Go runtime makes only in rare
// situations, each marked. test/integration/agent's
// TestAgentSyscallsAreListed traces the agent again and fails on any call
// missing here. The patched kernel's sched_setweight/sched_getweight are
// not here: they have no name in Linux 6.12's table, and the agent adds
// them by number only when the kernel publishes their ABI.
var Agent = []Group{
	{"Go runtime: threads, scheduling, signals (preemption uses tgkill), memory", []string{
		"clone", "exit_group", "futex", "nanosleep", "sched_yield", "sched_getaffinity", "gettid", "getpid", "tgkill",
		"rt_sigaction", "rt_sigprocmask", "rt_sigreturn", "sigaltstack", "mmap", "madvise",
		"arch_prctl", "prlimit64", "uname", "getrandom", "readlinkat",
		"prctl", // the runtime names its anonymous mappings (PR_SET_VMA); the agent sets no_new_privs
	}},
	{"Go runtime, rare: a thread exits when a locked goroutine ends; memory returned to the kernel; clock reads when the clock source has no vDSO; the kernel resuming a sleep a signal interrupted (seen under load)", []string{
		"exit", "munmap", "clock_gettime", "restart_syscall",
	}},
	{"files: /proc (threads, schedstat, the ABI probe), cgroupfs (cpu.shares read and written through kept-open files, cpuacct.usage, cgroup.procs), the state file (written then renamed)", []string{
		"openat", "read", "pread64", "write", "pwrite64", "close", "fstat", "newfstatat", "statfs", "getdents64", "fcntl", "renameat",
	}},
	{"the network poller, for the API client, containerd's socket and the HTTP servers", []string{
		"epoll_create1", "epoll_ctl", "epoll_pwait", "eventfd2",
	}},
	{"sockets: the API server (TCP, TLS), containerd (unix socket, gRPC), the metrics and probe servers", []string{
		"socket", "connect", "bind", "listen", "accept4", "getsockname", "getpeername", "setsockopt", "getsockopt",
	}},
	{"the nice thread backend: read and set threads' nice levels", []string{
		"getpriority", "setpriority",
	}},
	{"the slices backend: read and set the scheduler slices of latency classes' threads (and the probe for custom slices)", []string{
		"sched_getattr", "sched_setattr",
	}},
	{"request-based elevation (--request-elevation): load the eBPF request counter, attach it to the sock_recv_length tracepoint, watch processes and read their counts in its map", []string{
		"bpf",
	}},
	{"installing this filter (after prctl(PR_SET_NO_NEW_PRIVS)); once it is in, more filters could only narrow it", []string{
		"seccomp",
	}},
}

// ContainerStart is what the container runtime does under the container's
// profile before the agent runs: runc loads the profile as late as it can
// (with no_new_privs), then checks that /proc/self/fd is procfs (fstatfs)
// and — runc 1.5, not 1.1 — that /proc/thread-self is not overmounted
// (statx for the mount id; refused, runc fails the container with "reopen
// exec fifo: … could not get mount id"), closes the file descriptors it does
// not pass on, and calls execve. Only the runtime-level profile allows
// these; the agent's own filter does not.
var ContainerStart = Group{"the container runtime starts the agent and its preStop hook", []string{"execve", "fstatfs", "statx"}}
