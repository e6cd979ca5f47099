package kernel

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// TestThreadBackendUnderSeccompInGuests runs the thread backend confined by
// the agent's own seccomp filter in both kernels: in the patched one
// sched_setweight/sched_getweight pass the filter and set weights; in the
// stock one the probe is absent, the calls are never made, and the nice
// fallback works under the same filter. Each guest runs the test alone,
// as the filter stays for the rest of the process.
func TestThreadBackendUnderSeccompInGuests(t *testing.T) {
	bin := backendTest(t)
	for _, flavour := range []string{"patched", "stock"} {
		t.Run(flavour, func(t *testing.T) {
			script := fmt.Sprintf("grep Seccomp /proc/self/status; KUBEFAIR_IN_GUEST=%s /threads.test -test.v -test.count=1 -test.run 'TestBackendUnderSeccompFilter'; echo KUBEFAIR-RC=$?", flavour)
			console := boot(t, bzImage(t, flavour), initramfs(t, fmt.Sprintf(initTemplate, script), map[string]string{"threads.test": bin}), 5*time.Minute)
			for _, line := range strings.Split(console, "\n") {
				if strings.Contains(line, "_test.go") || strings.HasPrefix(line, "--- ") {
					t.Logf("guest: %s", strings.TrimSpace(line))
				}
			}
			if !strings.Contains(console, "KUBEFAIR-RC=0") || !strings.Contains(console, "--- PASS: TestBackendUnderSeccompFilter") {
				t.Fatalf("the confined backend test failed in the %s guest; console:\n%s", flavour, console)
			}
		})
	}
}
