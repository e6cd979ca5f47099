package fairness

import "math"

// QoSTree is kubelet's pod cgroups on a node: Guaranteed pods directly
// below kubepods, beside the QoS cgroups (Burstable, BestEffort) that hold
// the other pods. The CPU scheduler shares CPU down this tree — a pod's
// share is its QoS cgroup's share of kubepods times its own share inside
// the QoS cgroup — so weights planned as if all pods were siblings must be
// realised level by level (Flatten). Weights are in the node's native
// units (cpu.shares or cpu.weight).
type QoSTree struct {
	// Classes are kubelet's weights of the QoS cgroups.
	Classes []float64
	Pods    []QoSPod
}

// QoSPod is one pod cgroup in a QoSTree.
type QoSPod struct {
	// Class is the index of the pod's QoS cgroup in Classes, or -1 for a
	// Guaranteed pod, which sits directly in kubepods.
	Class int
	// Kubelet is kubelet's weight of the pod cgroup.
	Kubelet float64
	// Part > 0 marks a tenants' pod: its part of what all tenants' pods on
	// the node weigh together (any common scale). Part ≤ 0 marks a pod of
	// no tenant.
	Part float64
	// Limit is the most of the node a tenants' pod can use in the period
	// (0..1: its demand, bounded by its threads and CPU limit). Pods of no
	// tenant are taken as wanting all they may have.
	Limit float64
}

// QoSWeights are the weights that realise a plan in a QoSTree, before any
// scaling for resolution.
type QoSWeights struct {
	// Classes are the QoS cgroups' weights among kubepods' children.
	Classes []float64
	// Pods are the pods' weights among their siblings, in input order.
	Pods []float64
}

// Flatten gives every pod of the tree the node-level weight the plan
// means — the tenants' pods split by their parts what kubelet made all of
// them weigh at the node level; each pod of no tenant as much as it needs
// to keep the share stock Kubernetes gives it — and realises those
// node-level weights through kubelet's hierarchy: a QoS cgroup weighs the
// sum of its pods' node-level weights, and inside it the pods weigh theirs
// (docs/agent.md §QoS classes). The CPU a pod gets when everyone is
// backlogged is then its node-level weight over the sum of all of them,
// whatever its QoS class. Each level keeps the sum of kubelet's weights
// at that level, so neither the pods' nor kubepods' weights as a whole
// grow.
//
// A pod of no tenant keeps its stock share (StockShares, with every such
// pod wanting all it may have): its weight is kubelet's node-level one,
// raised as far as a flat level needs to give it that share.
func Flatten(t QoSTree) QoSWeights {
	out := QoSWeights{Classes: append([]float64(nil), t.Classes...), Pods: make([]float64, len(t.Pods))}
	inClass := make([]float64, len(t.Classes)) // Σ kubelet weights of each class's pods
	for _, p := range t.Pods {
		if p.Class >= 0 {
			inClass[p.Class] += math.Max(p.Kubelet, 0)
		}
	}
	// A pod's node-level weight in stock: its share of its class's weight.
	stockFlat := func(p QoSPod) float64 {
		if p.Class < 0 {
			return math.Max(p.Kubelet, 0)
		}
		if inClass[p.Class] <= 0 {
			return 0
		}
		return t.Classes[p.Class] * math.Max(p.Kubelet, 0) / inClass[p.Class]
	}
	var budget, parts float64
	for _, p := range t.Pods {
		if p.Part > 0 {
			budget += stockFlat(p)
			parts += p.Part
		}
	}
	if !(budget > 0) || !(parts > 0) {
		for i, p := range t.Pods {
			out.Pods[i] = p.Kubelet // nothing to plan: kubelet's tree as it is
		}
		return out
	}

	// Node-level weights: the tenants' pods by their parts of the budget,
	// the pods of no tenant their stock ones — raised where a flat level
	// would give one less than stock does: stock hands what a capped pod
	// leaves to its QoS siblings first, a flat level to every pod by
	// weight. A few rounds settle it; idle tenants need none (the pods of
	// no tenant then get all they want either way).
	stock := StockShares(t)
	flat := make([]float64, len(t.Pods))
	for i, p := range t.Pods {
		if p.Part > 0 {
			flat[i] = budget * p.Part / parts
		} else {
			flat[i] = stockFlat(p)
		}
	}
	for range boostRounds {
		got := flatShares(t, flat)
		raised := false
		for i, p := range t.Pods {
			if p.Part <= 0 && got[i] > 0 && got[i] < stock[i]*(1-1e-9) {
				// Aim a little above: raising one weight raises the total too.
				flat[i] *= math.Min(stock[i]*1.01/got[i], maxBoost)
				raised = true
			}
		}
		if !raised {
			break
		}
	}

	// Realise them level by level, each level keeping kubelet's sum.
	classFlat := make([]float64, len(t.Classes))
	var topKubelet, topFlat float64
	for i, p := range t.Pods {
		if p.Class < 0 {
			topKubelet += math.Max(p.Kubelet, 0)
			topFlat += flat[i]
		} else {
			classFlat[p.Class] += flat[i]
		}
	}
	for c := range t.Classes {
		if inClass[c] > 0 { // an empty QoS cgroup competes for nothing: kubelet's weight stays
			topKubelet += t.Classes[c]
			topFlat += classFlat[c]
		}
	}
	top := topKubelet / topFlat
	for c := range t.Classes {
		if inClass[c] > 0 && classFlat[c] > 0 {
			out.Classes[c] = classFlat[c] * top
		}
	}
	for i, p := range t.Pods {
		switch {
		case p.Class < 0:
			out.Pods[i] = flat[i] * top
		case classFlat[p.Class] > 0:
			out.Pods[i] = flat[i] * inClass[p.Class] / classFlat[p.Class]
		}
	}
	return out
}

// boostRounds and maxBoost bound how a pod of no tenant's weight is
// raised to keep its stock share: a few rounds, each at most ×4.
const (
	boostRounds = 6
	maxBoost    = 4
)

// flatShares is what each pod gets when all are siblings weighing flat,
// each wanting up to its limit.
func flatShares(t QoSTree, flat []float64) []float64 {
	ps := make([]Principal, len(t.Pods))
	for i, p := range t.Pods {
		ps[i] = Principal{Weight: flat[i], Threads: 1, Demand: podLimit(p)}
	}
	return Divide(1, ps, 1)
}

// podLimit is the most of the node a pod is taken to want: a tenants'
// pod its Limit, a pod of no tenant all it may have.
func podLimit(p QoSPod) float64 {
	if p.Part <= 0 {
		return 1
	}
	return math.Min(math.Max(p.Limit, 0), 1)
}

// StockShares is the share of the node each pod gets from kubelet's
// weights alone when it wants up to its limit (pods of no tenant: all they
// may have): GPS down the two levels, what a principal cannot use going
// to its siblings by weight (Divide at each level).
func StockShares(t QoSTree) []float64 {
	// Limits are fractions of the node already: one "CPU" that a
	// principal may fill up to its demand.
	principal := func(w, l float64) Principal { return Principal{Weight: w, Threads: 1, Demand: l} }
	// Top level: the Guaranteed pods, then the QoS cgroups.
	var top []Principal
	var topPod []int
	classLimit := make([]float64, len(t.Classes))
	for i, p := range t.Pods {
		if p.Class < 0 {
			top = append(top, principal(p.Kubelet, podLimit(p)))
			topPod = append(topPod, i)
		} else {
			classLimit[p.Class] = math.Min(1, classLimit[p.Class]+podLimit(p))
		}
	}
	for c, w := range t.Classes {
		top = append(top, principal(w, classLimit[c]))
	}
	topShares := Divide(1, top, 1)
	shares := make([]float64, len(t.Pods))
	for k, i := range topPod {
		shares[i] = topShares[k]
	}
	for c := range t.Classes {
		var inner []Principal
		var idx []int
		for i, p := range t.Pods {
			if p.Class == c {
				inner = append(inner, principal(p.Kubelet, podLimit(p)))
				idx = append(idx, i)
			}
		}
		for k, s := range Divide(topShares[len(topPod)+c], inner, 1) {
			shares[idx[k]] = s
		}
	}
	return shares
}
