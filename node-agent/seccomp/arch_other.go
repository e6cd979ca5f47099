//go:build !(linux && amd64)

package seccomp

// No numbers on other architectures: AllowList and Filter refuse.
const auditArch = 0

var syscallNumbers map[string]uint32
