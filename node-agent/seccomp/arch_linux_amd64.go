package seccomp

import "golang.org/x/sys/unix"

// auditArch is what the kernel reports in seccomp_data.arch for this
// architecture's native calls.
const auditArch = unix.AUDIT_ARCH_X86_64
