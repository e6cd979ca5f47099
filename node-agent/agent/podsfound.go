package agent

import (
	"fmt"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	kubefairv1 "github.com/kubefair/kubefair/api/v1alpha1"
	"github.com/kubefair/kubefair/node-agent/cgroupfs"
)

// missingPeriods is how many periods in a row a running pod must lack a
// cgroup before it counts as unmeasured: the runtime may not list a pod
// that has just started yet.
const missingPeriods = 3

// podsFound says whether the agent finds the cgroups of the pods the API
// runs on its node — never a silent zero: a node whose kubelet cgroups are
// not where the agent looks (another cgroup root or driver) or are laid out
// in a way it does not know shows up in the report's PodCgroupsFound
// condition, per tenant in its Unmeasured list, in the agent's metrics
// and in its log.
type podsFound struct {
	// missing counts, per running pod without a cgroup, the periods in a row.
	missing map[string]int
	// conditions holds the report's PodCgroupsFound, with its transition time.
	conditions []metav1.Condition
	// unmeasured is, per tenant, its pods counted unmeasured last period.
	unmeasured map[string]int32
	total      int // running pods on the node, last period
	count      int // of which unmeasured
}

// update judges one period. running are the node's running pods by UID,
// discovered the UIDs that have a pod cgroup, tenantOf a pod's tenant. It
// returns the condition, and whether its reason or its message changed.
func (f *podsFound) update(h *cgroupfs.Hierarchy, running map[string]*corev1.Pod, discovered map[string]bool, tenantOf func(*corev1.Pod) (string, bool), now time.Time) (metav1.Condition, bool) {
	if f.missing == nil {
		f.missing = map[string]int{}
	}
	var names []string
	f.unmeasured = map[string]int32{}
	for uid, p := range running {
		if discovered[uid] {
			delete(f.missing, uid)
			continue
		}
		f.missing[uid]++
		if f.missing[uid] < missingPeriods {
			continue
		}
		names = append(names, p.Namespace+"/"+p.Name)
		if tenant, ok := tenantOf(p); ok {
			f.unmeasured[tenant]++
		}
	}
	for uid := range f.missing {
		if running[uid] == nil {
			delete(f.missing, uid)
		}
	}
	sort.Strings(names)
	f.total, f.count = len(running), len(names)

	c := metav1.Condition{Type: kubefairv1.ConditionPodCgroupsFound, Status: metav1.ConditionTrue, Reason: kubefairv1.ReasonLayoutFound}
	layout, err := h.Layout()
	switch {
	case err != nil:
		c.Status, c.Reason = metav1.ConditionFalse, kubefairv1.ReasonLayoutNotFound
		c.Message = fmt.Sprintf("%v; %d running pod(s) are neither enforced nor measured", err, len(running))
	case len(names) > 0:
		c.Status, c.Reason = metav1.ConditionFalse, kubefairv1.ReasonPodCgroupsMissing
		c.Message = fmt.Sprintf("%d of %d running pod(s) have no cgroup the agent recognises below %s (cgroup v%d, %s driver), so they are neither enforced nor measured: %s",
			len(names), len(running), h.Where(layout.Kubepods), h.Mode, layout.Driver, abbreviate(names, 5))
	default:
		c.Message = fmt.Sprintf("kubelet's pod cgroups are below %s (cgroup v%d, %s driver); %d running pod(s), each with its cgroup", h.Where(layout.Kubepods), h.Mode, layout.Driver, len(running))
	}
	var old metav1.Condition
	if o := meta.FindStatusCondition(f.conditions, c.Type); o != nil {
		old = *o
	}
	c.LastTransitionTime = metav1.NewTime(now)
	meta.SetStatusCondition(&f.conditions, c)
	// The pod count is in the found message: a change of it alone is no news.
	news := old.Reason != c.Reason || (c.Status == metav1.ConditionFalse && old.Message != c.Message)
	return c, news
}

// unmeasuredList is the report's Unmeasured field.
func (f *podsFound) unmeasuredList() []kubefairv1.UnmeasuredPods {
	var out []kubefairv1.UnmeasuredPods
	for tenant, n := range f.unmeasured {
		out = append(out, kubefairv1.UnmeasuredPods{Tenant: tenant, Pods: n})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Tenant < out[j].Tenant })
	return out
}

// abbreviate lists at most n names and says how many more there are.
func abbreviate(names []string, n int) string {
	if len(names) <= n {
		return strings.Join(names, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(names[:n], ", "), len(names)-n)
}
