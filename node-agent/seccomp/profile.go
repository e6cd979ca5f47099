package seccomp

import (
	"sort"

	"golang.org/x/sys/unix"
)

// RuntimeProfile is a seccomp profile for the container runtime, in the
// JSON that containerd and CRI-O read from kubelet's seccomp directory
// (a pod's Localhost profile) and that an OCI runtime spec takes as
// linux.seccomp.
type RuntimeProfile struct {
	DefaultAction string        `json:"defaultAction"`
	Architectures []string      `json:"architectures"`
	Syscalls      []ProfileRule `json:"syscalls"`
}

// ProfileRule applies one action to calls by name.
type ProfileRule struct {
	Names    []string `json:"names"`
	Action   string   `json:"action"`
	ErrnoRet uint     `json:"errnoRet"`
}

// Profile is the agent container's Localhost profile, made from the same
// table as the agent's own filter. It is inverted — allow by default,
// refuse by name every Linux 6.12 call that neither the agent nor its
// container start needs — because the runtime resolves names through its
// libseccomp, and one that cannot name a call (sched_setweight has no
// name anywhere; Debian 12's libseccomp 2.5.4 knows nothing past 450) would
// refuse it under a default-refuse profile. The price: calls newer than the
// node's libseccomp pass this profile, and only the agent's own filter,
// installed first thing at startup, refuses them. Other ABIs (i386, x32)
// get the runtime's bad-architecture action.
func Profile() RuntimeProfile {
	needed := map[string]bool{}
	for _, g := range append(Agent, ContainerStart) {
		for _, name := range g.Calls {
			needed[name] = true
		}
	}
	var refused []string
	for name := range syscallNumbers {
		if !needed[name] {
			refused = append(refused, name)
		}
	}
	sort.Slice(refused, func(i, j int) bool { return syscallNumbers[refused[i]] < syscallNumbers[refused[j]] })
	return RuntimeProfile{
		DefaultAction: "SCMP_ACT_ALLOW",
		Architectures: []string{"SCMP_ARCH_X86_64"},
		Syscalls:      []ProfileRule{{Names: refused, Action: "SCMP_ACT_ERRNO", ErrnoRet: uint(unix.EPERM)}},
	}
}
