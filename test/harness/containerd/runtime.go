package containerd

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/kubefair/kubefair/test/harness/kubeapi"
)

// The container runtime hack/build-runtime.sh builds from the Go module
// proxy (`make runtime`), the one the suites and the local cluster's host
// node run. Keep these in step with the Makefile's pins
// (TestPinsMatchTheMakefile checks).
const (
	Version     = "v2.4.2"  // containerd
	RuncVersion = "v1.5.2"  // runc
	CNIVersion  = "v1.10.0" // containernetworking/plugins
)

// The programs the runtime's bin/ holds and the CNI plugins its cni/ holds.
var (
	programs   = []string{"containerd", "containerd-shim-runc-v2", "ctr", "runc"}
	cniPlugins = []string{"bridge", "host-local", "loopback"}
)

// RuntimeDir is the directory hack/build-runtime.sh built into:
// $KUBEFAIR_RUNTIME (the Makefile exports it), else the cache directory of
// the pinned versions.
func RuntimeDir() string {
	if dir := os.Getenv("KUBEFAIR_RUNTIME"); dir != "" {
		return dir
	}
	return filepath.Join(kubeapi.CacheDir(), fmt.Sprintf("runtime-containerd-%s-runc-%s-cni-%s", Version, RuncVersion, CNIVersion))
}

// Binary is the path of one of the runtime's programs: containerd,
// containerd-shim-runc-v2, ctr or runc.
func Binary(name string) string { return filepath.Join(RuntimeDir(), "bin", name) }

// CNIDir holds the CNI plugins bridge, host-local and loopback.
func CNIDir() string { return filepath.Join(RuntimeDir(), "cni") }

// CheckBuilt says which program or plugin is missing and how to build it.
func CheckBuilt() error {
	for _, p := range programs {
		if _, err := os.Stat(Binary(p)); err != nil {
			return fmt.Errorf("%s is not built in %s: run `make runtime` (hack/build-runtime.sh)", p, filepath.Dir(Binary(p)))
		}
	}
	for _, p := range cniPlugins {
		if _, err := os.Stat(filepath.Join(CNIDir(), p)); err != nil {
			return fmt.Errorf("the CNI plugin %s is not built in %s: run `make runtime` (hack/build-runtime.sh)", p, CNIDir())
		}
	}
	return nil
}

// Env is the environment to run containerd in: the runtime's bin/ first on
// PATH. containerd looks its shim up on PATH before beside its own binary,
// and the shim runs runc from PATH, so another containerd or runc installed
// on the host (Debian's, say) is never picked up.
func Env() []string {
	env := make([]string, 0, len(os.Environ())+1)
	path := filepath.Dir(Binary("runc"))
	for _, kv := range os.Environ() {
		if v, ok := strings.CutPrefix(kv, "PATH="); ok {
			if v != "" {
				path += string(os.PathListSeparator) + v
			}
			continue
		}
		env = append(env, kv)
	}
	return append(env, "PATH="+path)
}
