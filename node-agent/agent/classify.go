package agent

import (
	"maps"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"

	kubefairv1 "github.com/kubefair/kubefair/api/v1alpha1"
	"github.com/kubefair/kubefair/node-agent/fairness"
)

// defaultWorkloadWeight weighs a pod that no workloads[] entry selects: each
// such pod is a workload of its own with this weight.
const defaultWorkloadWeight = 100

// membership is where a pod belongs: its tenant and the workload inside it.
type membership struct {
	tenant string
	uid    string // the tenant's UID: what its CPU is billed to
	weight int32  // the tenant's effective weight
	// declared: the tenant weighs workloads (spec.workloads); only then
	// does a closed loop correct the split inside it.
	declared bool
	policy   fairness.ThreadPolicy
	latency  kubefairv1.LatencyClass
	elevate  bool   // spec.requestElevation
	workload string // "" for a pod no workload selects
	wlWeight int32
}

// classify maps a pod to its tenant by namespace, using the namespaces and
// weight the controller resolved into the tenant's status (one place decides
// ownership and conflicts), and to a workload by the tenant's selectors.
func classify(pod *corev1.Pod, tenants []kubefairv1.Tenant) (membership, bool) {
	for i := range tenants {
		t := &tenants[i]
		if t.Status.EffectiveWeight <= 0 || !slices.Contains(t.Status.Namespaces, pod.Namespace) {
			continue
		}
		m := membership{tenant: t.Name, uid: string(t.UID), weight: t.Status.EffectiveWeight, policy: fairness.ThreadPolicy(t.Spec.ThreadPolicy), latency: t.Status.LatencyClass, elevate: t.Spec.RequestElevation,
			wlWeight: defaultWorkloadWeight, declared: len(t.Spec.Workloads) > 0}
		for _, w := range t.Spec.Workloads {
			sel, err := w.PodSelector.AsSelector()
			if err != nil {
				continue
			}
			if sel.Matches(labels.Set(pod.Labels)) {
				m.workload, m.wlWeight = w.Name, w.Weight
				break
			}
		}
		return m, true
	}
	return membership{}, false
}

// byWorkload groups a tenant's pods into its workloads, as the fairness
// model weighs them (docs/design.md §Fairness model, level 2): the pods a
// workload selects together, each unselected pod a workload of its own at
// the default weight; sorted by name, with each workload's measured CPU
// and whether any of its pods was backlogged.
func byWorkload(pods []*podState) ([]fairness.WorkloadSnapshot, [][]*podState) {
	members := map[string][]*podState{}
	for _, p := range pods {
		key := p.member.workload
		if key == "" {
			key = "pod/" + p.uid
		}
		members[key] = append(members[key], p)
	}
	keys := slices.Sorted(maps.Keys(members))
	ws := make([]fairness.WorkloadSnapshot, len(keys))
	groups := make([][]*podState, len(keys))
	for i, key := range keys {
		groups[i] = members[key]
		ws[i] = fairness.WorkloadSnapshot{Name: key, Weight: float64(groups[i][0].member.wlWeight), Pods: len(groups[i])}
		for _, p := range groups[i] {
			ws[i].CPU += p.cpu
			ws[i].Backlogged = ws[i].Backlogged || p.backlogged
		}
	}
	return ws, groups
}
