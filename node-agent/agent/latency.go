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
	off := setTenantsCondition(&l.conditions, kubefairv1.ConditionLatencyClasses, classed, now, func(who string) (metav1.ConditionStatus, string, string) {
		switch {
		case n.slices == nil && n.slicesOff == errClassesOff:
			return metav1.ConditionFalse, kubefairv1.ReasonLatencyClassesOff, fmt.Sprintf("%s: %v; their threads keep the kernel's slice", who, n.slicesOff)
		case n.slices == nil:
			return metav1.ConditionFalse, kubefairv1.ReasonNoCustomSlices, fmt.Sprintf("%s: %v; their threads keep the kernel's slice", who, n.slicesOff)
		case step.Result.SlicesRefused > 0:
			return metav1.ConditionFalse, kubefairv1.ReasonSlicesRefused, fmt.Sprintf("%s: the kernel refused %d thread(s) their slice (EPERM: another user's threads need CAP_SYS_NICE, which the chart's agent.latencyClasses.enabled grants)", who, step.Result.SlicesRefused)
		}
		return metav1.ConditionTrue, kubefairv1.ReasonSlicesApplied, fmt.Sprintf("%s: %d thread(s) with their class's slice (%s)", who, sliced, n.classSlices())
	})
	for _, t := range tenants {
		t.LatencyOff = off
	}
}

// setTenantsCondition keeps a report condition about the tenants named:
// removed when there are none, else set to what judge says given their
// names (sorted, abbreviated). It returns whether the condition is False:
// the node does not serve those tenants what they ask for.
func setTenantsCondition(conditions *[]metav1.Condition, typ string, names []string, now time.Time, judge func(who string) (metav1.ConditionStatus, string, string)) bool {
	if len(names) == 0 {
		meta.RemoveStatusCondition(conditions, typ)
		return false
	}
	slices.Sort(names)
	status, reason, message := judge(abbreviate(names, 5))
	meta.SetStatusCondition(conditions, metav1.Condition{Type: typ, Status: status, Reason: reason, Message: message, LastTransitionTime: metav1.NewTime(now)})
	return status == metav1.ConditionFalse
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
