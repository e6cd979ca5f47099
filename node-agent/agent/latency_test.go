package agent

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	kubefairv1 "github.com/kubefair/kubefair/api/v1alpha1"
	"github.com/kubefair/kubefair/node-agent/enforce"
	kfslices "github.com/kubefair/kubefair/node-agent/enforce/slices"
)

// TestLatencyCondition: the report's LatencyClasses condition names the
// tenants with a class and why their threads do or do not get its slice,
// and is gone when no tenant on the node has one.
func TestLatencyCondition(t *testing.T) {
	classSlice := map[kubefairv1.LatencyClass]time.Duration{kubefairv1.LatencyClassInteractive: 500 * time.Microsecond, kubefairv1.LatencyClassBatch: 0}
	on := &node{slices: &kfslices.Backend{}, classSlice: classSlice}
	classed := Step{Tenants: []TenantStep{{Name: "shop", Latency: kubefairv1.LatencyClassInteractive, SlicedThreads: 7},
		{Name: "etl", Latency: kubefairv1.LatencyClassBatch}, {Name: "plain"}}}
	refused := classed
	refused.Result = enforce.Result{SlicesRefused: 3}
	for _, tc := range []struct {
		name         string
		node         *node
		step         Step
		status       metav1.ConditionStatus
		reason, says string
	}{
		{"applied", on, classed, metav1.ConditionTrue, kubefairv1.ReasonSlicesApplied, "shop (interactive): 7 thread(s) with their class's slice (batch the kernel's, interactive 500µs)"},
		{"refused", on, refused, metav1.ConditionFalse, kubefairv1.ReasonSlicesRefused, "refused 3 thread(s) their slice (EPERM"},
		{"off", &node{slicesOff: errClassesOff, classSlice: classSlice}, classed, metav1.ConditionFalse, kubefairv1.ReasonLatencyClassesOff, "--latency-classes=false"},
		{"old kernel", &node{slicesOff: errors.New("no custom slices"), classSlice: classSlice}, classed, metav1.ConditionFalse, kubefairv1.ReasonNoCustomSlices, "shop (interactive): no custom slices; their threads keep the kernel's slice"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var l latencyState
			step := tc.step
			step.Tenants = slices.Clone(step.Tenants)
			l.update(tc.node, &step, time.Now())
			c := meta.FindStatusCondition(l.conditions, kubefairv1.ConditionLatencyClasses)
			if c == nil || c.Status != tc.status || c.Reason != tc.reason || !strings.Contains(c.Message, tc.says) {
				t.Fatalf("condition %+v; want %s/%s saying %q", c, tc.status, tc.reason, tc.says)
			}
			// Only a class with a slice is applied, or not: the batch
			// tenant's is the kernel's.
			if off := tc.status == metav1.ConditionFalse; step.Tenants[0].LatencyOff != off || step.Tenants[1].LatencyOff || step.Tenants[2].LatencyOff {
				t.Errorf("tenants marked not applied: %+v; want shop only, when False", step.Tenants)
			}
			l.update(tc.node, &Step{Tenants: []TenantStep{{Name: "etl", Latency: kubefairv1.LatencyClassBatch}}}, time.Now())
			if len(l.conditions) != 0 {
				t.Errorf("no tenant with a class left, yet %+v", l.conditions)
			}
		})
	}
}
