package containerd

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/kubefair/kubefair/test/harness/kubeapi"
)

// TestPinsMatchTheMakefile: the runtime the harness looks for is the one
// `make runtime` builds — the same versions, the same cache directory.
func TestPinsMatchTheMakefile(t *testing.T) {
	makefile, err := os.ReadFile(filepath.Join(kubeapi.RepoRoot(), "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]string{"CONTAINERD_VERSION": Version, "RUNC_VERSION": RuncVersion, "CNI_VERSION": CNIVersion} {
		pin := ""
		if m := regexp.MustCompile(`(?m)^` + name + `\s*\?=\s*(\S+)`).FindSubmatch(makefile); m != nil {
			pin = string(m[1])
		}
		if pin != want {
			t.Errorf("the Makefile pins %s to %q, the harness to %q", name, pin, want)
		}
	}

	cache := t.TempDir()
	t.Setenv("KUBEFAIR_CACHE", cache)
	t.Setenv("KUBEFAIR_RUNTIME", "")
	for _, v := range []string{"CONTAINERD_VERSION", "RUNC_VERSION", "CNI_VERSION"} {
		t.Setenv(v, "") // the script's own defaults
	}
	out, err := exec.Command("bash", filepath.Join(kubeapi.RepoRoot(), "hack", "build-runtime.sh"), "--dir").Output()
	if err != nil {
		t.Fatal(err)
	}
	if got, want := strings.TrimSpace(string(out)), RuntimeDir(); got != want {
		t.Errorf("hack/build-runtime.sh builds into %s, the harness looks in %s", got, want)
	}
	if entries, _ := os.ReadDir(cache); len(entries) != 0 {
		t.Errorf("build-runtime.sh --dir created %d entries in the cache, want none", len(entries))
	}
}
