package agent

import (
	"slices"
	"sort"
	"time"

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
		m := membership{tenant: t.Name, uid: string(t.UID), weight: t.Status.EffectiveWeight, policy: fairness.ThreadPolicy(t.Spec.ThreadPolicy),
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

// splitTenant divides a tenant's group weight over its pods: workloads by
// their weights, pods of one workload equally, unselected pods one default
// weight each (docs/design.md §Fairness model, level 2). When the tenant
// declares workloads, their own closed loop corrects the split by what each
// achieved of the tenant's CPU, as the tenant loop does between tenants;
// equal pods of a plain tenant get equal weights, uncorrected (per-pod
// correction would chase the noise of single pods).
func splitTenant(groupWeight float64, pods []*podState, loop *closedLoop, dt, period time.Duration) map[*podState]float64 {
	byWorkload := map[string][]*podState{}
	var keys []string
	for _, p := range pods {
		key := p.member.workload
		if key == "" {
			key = "pod/" + p.uid // a workload of its own
		}
		if len(byWorkload[key]) == 0 {
			keys = append(keys, key)
		}
		byWorkload[key] = append(byWorkload[key], p)
	}
	sort.Strings(keys)
	out := make(map[*podState]float64, len(pods))
	ms := make([]measured, len(keys))
	for i, key := range keys {
		members := byWorkload[key]
		ms[i] = measured{name: key, entitled: float64(members[0].member.wlWeight)}
		for _, p := range members {
			ms[i].cpu += p.cpu
			ms[i].backlogged = ms[i].backlogged || p.backlogged
		}
	}
	mult := make([]float64, len(ms))
	if len(pods) > 0 && pods[0].member.declared {
		mult = loop.step(ms, dt, period)
	} else {
		for i := range mult {
			mult[i] = 1
		}
	}
	var total float64
	for i := range keys {
		total += ms[i].entitled * mult[i]
	}
	if !(total > 0) {
		return out
	}
	for i, key := range keys {
		members := byWorkload[key]
		part := groupWeight * ms[i].entitled * mult[i] / total
		for _, p := range members {
			out[p] = part / float64(len(members))
		}
	}
	return out
}
