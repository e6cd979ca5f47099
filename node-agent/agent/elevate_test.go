package agent

import (
	"errors"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"

	kubefairv1 "github.com/kubefair/kubefair/api/v1alpha1"
	"github.com/kubefair/kubefair/node-agent/requests"
)

// TestElevationConditionFailsClosed: while a tenant asks for elevation, the
// report says whether the node applies it — off by flag, no counter, a
// counter that failed to watch — and marks the tenants it does not serve;
// with no tenant asking, no condition.
func TestElevationConditionFailsClosed(t *testing.T) {
	now := time.Now()
	for _, c := range []struct {
		name   string
		e      elevation
		status string
		reason string
	}{
		{"off by flag", elevation{off: errElevationOff}, "False", kubefairv1.ReasonRequestElevationOff},
		{"no counter", elevation{off: errors.New("no eBPF request counter: reading the kernel's BTF")}, "False", kubefairv1.ReasonNoRequestCounter},
		{"never opened", elevation{}, "False", kubefairv1.ReasonNoRequestCounter},
		{"watching failed", elevation{counter: &requests.Counter{}, failed: errors.New("9000 processes to watch")}, "False", kubefairv1.ReasonNoRequestCounter},
		{"counting", elevation{counter: &requests.Counter{}, watching: []int{1, 2}}, "True", kubefairv1.ReasonCountingRequests},
	} {
		step := Step{Tenants: []TenantStep{{Name: "web", Elevate: true, ElevatedWorkloads: 1}, {Name: "batch"}}}
		c.e.update(&step, now)
		cond := meta.FindStatusCondition(c.e.conditions, kubefairv1.ConditionRequestElevation)
		if cond == nil || string(cond.Status) != c.status || cond.Reason != c.reason {
			t.Errorf("%s: condition %+v, want %s/%s", c.name, cond, c.status, c.reason)
			continue
		}
		if off := step.Tenants[0].ElevationOff; off != (c.status == "False") {
			t.Errorf("%s: the asking tenant's ElevationOff is %v", c.name, off)
		}
		if step.Tenants[1].ElevationOff {
			t.Errorf("%s: a tenant that does not ask is marked", c.name)
		}
		step = Step{Tenants: []TenantStep{{Name: "batch"}}}
		c.e.update(&step, now)
		if meta.FindStatusCondition(c.e.conditions, kubefairv1.ConditionRequestElevation) != nil {
			t.Errorf("%s: the condition stays when no tenant asks", c.name)
		}
	}
}
