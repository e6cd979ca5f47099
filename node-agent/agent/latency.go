package agent

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	kubefairv1 "github.com/kubefair/kubefair/api/v1alpha1"
)

// The slices a latency class may have (or 0, the kernel's): the kernel
// takes none shorter than MinSlice; longer ones than MaxSlice moved
// tenants' CPU shares by up to 16 points on 2 CPUs (docs/agent.md,
// "Latency classes").
const (
	MinSlice = 100 * time.Microsecond
	MaxSlice = 10 * time.Millisecond
)

// latencyState is the report's LatencyClasses condition: set while a
// tenant on the node has a latency class, so that a class the node does
// not honour is never a silent no-op.
type latencyState struct {
	conditions []metav1.Condition // the one condition, or none
}

// update judges one step: which tenants have a class with a slice (a class
// whose slice is the kernel's asks for nothing), and whether their threads
// got it; it marks the tenants whose class is not applied.
func (l *latencyState) update(n *node, step *Step, now time.Time) {
	var classed []string
	var tenants []*TenantStep
	sliced := 0
	for i := range step.Tenants {
		t := &step.Tenants[i]
		if t.Latency != "" && n.classSlice[t.Latency] != 0 {
			classed = append(classed, fmt.Sprintf("%s (%s)", t.Name, t.Latency))
			tenants = append(tenants, t)
			sliced += t.SlicedThreads
		}
	}
	if len(classed) == 0 {
		meta.RemoveStatusCondition(&l.conditions, kubefairv1.ConditionLatencyClasses)
		return
	}
	slices.Sort(classed)
	names := abbreviate(classed, 5)
	c := metav1.Condition{Type: kubefairv1.ConditionLatencyClasses, Status: metav1.ConditionFalse, LastTransitionTime: metav1.NewTime(now)}
	switch {
	case n.slices == nil && n.slicesOff == errClassesOff:
		c.Reason = kubefairv1.ReasonLatencyClassesOff
		c.Message = fmt.Sprintf("%s: %v; their threads keep the kernel's slice", names, n.slicesOff)
	case n.slices == nil:
		c.Reason = kubefairv1.ReasonNoCustomSlices
		c.Message = fmt.Sprintf("%s: %v; their threads keep the kernel's slice", names, n.slicesOff)
	case step.Result.SlicesRefused > 0:
		c.Reason = kubefairv1.ReasonSlicesRefused
		c.Message = fmt.Sprintf("%s: the kernel refused %d thread(s) their slice (EPERM: another user's threads need CAP_SYS_NICE, which the chart's agent.latencyClasses.enabled grants)", names, step.Result.SlicesRefused)
	default:
		c.Status, c.Reason = metav1.ConditionTrue, kubefairv1.ReasonSlicesApplied
		c.Message = fmt.Sprintf("%s: %d thread(s) with their class's slice (%s)", names, sliced, n.classSlices())
	}
	for _, t := range tenants {
		t.LatencyOff = c.Status == metav1.ConditionFalse
	}
	meta.SetStatusCondition(&l.conditions, c)
}

// classSlices names each class's slice, e.g. "batch the kernel's,
// interactive 500µs".
func (n *node) classSlices() string {
	var out []string
	for c, s := range n.classSlice {
		if s == 0 {
			out = append(out, fmt.Sprintf("%s the kernel's", c))
		} else {
			out = append(out, fmt.Sprintf("%s %v", c, s))
		}
	}
	slices.Sort(out)
	return strings.Join(out, ", ")
}
