package kubeapi

import (
	"os"
	"path/filepath"
	"regexp"
	"testing"
)

// TestPinMatchesTheMakefile: without KUBEBUILDER_ASSETS the suites look
// for the Kubernetes version `make envtest` builds.
func TestPinMatchesTheMakefile(t *testing.T) {
	makefile, err := os.ReadFile(filepath.Join(RepoRoot(), "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	pin := ""
	if m := regexp.MustCompile(`(?m)^K8S_VERSION\s*\?=\s*(\S+)`).FindSubmatch(makefile); m != nil {
		pin = string(m[1])
	}
	if pin != K8sVersion {
		t.Errorf("the Makefile pins K8S_VERSION to %q, the harness to %q", pin, K8sVersion)
	}
}
