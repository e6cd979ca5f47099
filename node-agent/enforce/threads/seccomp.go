package threads

import "github.com/kubefair/kubefair/node-agent/seccomp"

// SeccompCalls are the kernel ABI's system calls, for the agent's seccomp
// filter. Allow them only when ProbeABI reads a KnownABI: on other kernels
// the same numbers are other calls (setxattrat, getxattrat from 6.13 on).
func SeccompCalls() []seccomp.Call {
	return []seccomp.Call{{Name: "sched_setweight", Nr: sysSchedSetweight}, {Name: "sched_getweight", Nr: sysSchedGetweight}}
}
