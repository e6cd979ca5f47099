package agent

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/cpuset"

	"github.com/kubefair/kubefair/node-agent/cgroupfs"
)

// Exclusive CPUs. kubelet's static CPU manager gives each container of a
// Guaranteed pod that requests whole CPUs those CPUs alone (its cpuset),
// and takes them out of every other container's: the shared pool. Weights
// only divide the shared pool, so a pod running on exclusive CPUs is left
// out of the allocation — its CPU then counts outside the tenants, which
// shrinks the CPU left to them by what it uses — while its CPU time is
// still billed to its tenant, and its tenant is told (the report's
// exclusiveCPUs, the Tenant's Degraded=ExclusiveCPUs).

// mayHoldWholeCPUs tells whether kubelet's static CPU manager could give
// the pod exclusive CPUs: it is Guaranteed and some container requests a
// whole number of CPUs.
func mayHoldWholeCPUs(pod *corev1.Pod) bool {
	if !guaranteed(pod) {
		return false
	}
	for _, c := range pod.Spec.Containers {
		q, ok := c.Resources.Requests[corev1.ResourceCPU]
		if !ok {
			q = c.Resources.Limits[corev1.ResourceCPU] // the API server's default for the request
		}
		if m := q.MilliValue(); m > 0 && m%1000 == 0 {
			return true
		}
	}
	return false
}

// guaranteed is kubelet's QoS class Guaranteed: every container has CPU
// and memory limits, and requests (where given) equal to them. The class
// kubelet published is used when there is one.
func guaranteed(pod *corev1.Pod) bool {
	if pod.Status.QOSClass != "" {
		return pod.Status.QOSClass == corev1.PodQOSGuaranteed
	}
	for _, c := range pod.Spec.Containers {
		for _, r := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
			limit, ok := c.Resources.Limits[r]
			if !ok || limit.IsZero() {
				return false
			}
			if req, ok := c.Resources.Requests[r]; ok && req.Cmp(limit) != 0 {
				return false
			}
		}
	}
	return len(pod.Spec.Containers) > 0
}

// exclusiveCPUs is the CPUs a pod's containers hold alone: the union of
// its containers' cpusets that share no CPU with the shared pool. The pool
// is what the containers of the pods that cannot hold whole CPUs may all
// run on (the intersection of their cpusets: a sandbox keeps the whole
// node's, an application container has the pool). Without such a pod the
// pool is unknown and nothing counts as exclusive.
func exclusiveCPUs(pod []cpuset.CPUSet, others []cpuset.CPUSet) cpuset.CPUSet {
	if len(others) == 0 {
		return cpuset.New()
	}
	pool := others[0]
	for _, s := range others[1:] {
		pool = pool.Intersection(s)
	}
	held := cpuset.New()
	if pool.IsEmpty() { // the pods disagree: no pool to tell exclusive CPUs from
		return held
	}
	for _, s := range pod {
		if !s.IsEmpty() && s.Intersection(pool).IsEmpty() {
			held = held.Union(s)
		}
	}
	return held
}

// sharedPool finds the pods that hold exclusive CPUs during one step,
// reading the cpusets of the pods that cannot hold any only once, and only
// when some pod might.
type sharedPool struct {
	hier    *cgroupfs.Hierarchy
	cgroups map[string]*podRef
	pods    map[string]*corev1.Pod // by UID
	others  []cpuset.CPUSet
	read    bool
}

// poolSample is how many pods that cannot hold whole CPUs are read for the
// pool: their containers all have it, a few agree on it.
const poolSample = 8

// exclusive updates and returns the pod's exclusive CPUs, read again every
// discoveryRefreshPeriods periods: kubelet assigns them when a container
// starts, and only such a pod can have any.
func (p *sharedPool) exclusive(ps *podState, pod *corev1.Pod, containers []string) int {
	if !mayHoldWholeCPUs(pod) {
		ps.exclusive = 0
		return 0
	}
	if ps.cpusAge%discoveryRefreshPeriods == 0 {
		var sets []cpuset.CPUSet
		for _, c := range containers {
			if s, err := p.hier.CPUSet(c); err == nil {
				sets = append(sets, s)
			}
		}
		ps.exclusive = exclusiveCPUs(sets, p.pool()).Size()
	}
	ps.cpusAge++
	return ps.exclusive
}

// pool reads the cpusets of up to poolSample pods that cannot hold whole
// CPUs, once per step.
func (p *sharedPool) pool() []cpuset.CPUSet {
	if p.read {
		return p.others
	}
	p.read = true
	n := 0
	for _, ref := range p.cgroups {
		pod := p.pods[ref.uid]
		if pod == nil || mayHoldWholeCPUs(pod) || len(ref.containers) == 0 {
			continue
		}
		for _, c := range ref.containers {
			if s, err := p.hier.CPUSet(c); err == nil {
				p.others = append(p.others, s)
			}
		}
		if n++; n == poolSample {
			break
		}
	}
	return p.others
}
