// Package fairness is kubefair's fairness model as pure math: entitled shares
// (GPS/GMS with the SFS feasibility constraint and work-conserving
// water-filling), thread policies, weight conversions and the measurement
// figures. It does no I/O and imports nothing from Kubernetes, so the agent,
// the tests and the benchmarks all use the same formulas (docs/design.md
// §Fairness model).
package fairness

import (
	"math"
	"sort"
)

// Principal is one competitor for CPU at one level of the hierarchy
// tenant → workload → process → thread.
type Principal struct {
	// Weight is the principal's relative weight; principals with a weight
	// ≤ 0 get nothing.
	Weight float64
	// Threads is the number of threads that can run at once (τ). A principal
	// can use at most min(Threads, CPUs) CPUs (SFS feasibility, 003 eq. 7).
	Threads int
	// Demand is the most of the node the principal would use in the window,
	// as a fraction of the node (0..1). Use 1 for a backlogged principal.
	Demand float64
}

// limit is the largest fraction of a node of cpus CPUs the principal can use.
func (p Principal) limit(cpus int) float64 {
	if p.Weight <= 0 || p.Threads <= 0 || cpus <= 0 || !(p.Demand > 0) {
		return 0
	}
	feasible := float64(min(p.Threads, cpus)) / float64(cpus)
	return math.Min(feasible, p.Demand)
}

// EntitledShares divides a whole node of cpus CPUs among principals. The
// result is each principal's share of the node (0..1), in input order.
func EntitledShares(ps []Principal, cpus int) []float64 {
	return Divide(1, ps, cpus)
}

// Divide gives capacity (a fraction of a node of cpus CPUs) to principals in
// proportion to their weights, never giving one more than it can use
// (min(Threads, cpus)/cpus, and its Demand); what a capped principal cannot
// use goes to the others by weight. This is GMS with SFS readjustment (003
// §2.1-2.2) made work-conserving by water-filling. The shares sum to
// min(capacity, Σ limits).
func Divide(capacity float64, ps []Principal, cpus int) []float64 {
	shares := make([]float64, len(ps))
	if !(capacity > 0) || len(ps) == 0 {
		return shares
	}
	limits := make([]float64, len(ps))
	order := make([]int, 0, len(ps))
	restWeight := 0.0
	for i, p := range ps {
		limits[i] = p.limit(cpus)
		if limits[i] > 0 {
			order = append(order, i)
			restWeight += p.Weight
		}
	}
	// Principals whose limit is smallest relative to their weight saturate
	// first; once one does not, none of the later ones do.
	sort.SliceStable(order, func(a, b int) bool {
		ia, ib := order[a], order[b]
		return limits[ia]/ps[ia].Weight < limits[ib]/ps[ib].Weight
	})
	rest := math.Min(capacity, 1)
	for k, i := range order {
		if limits[i]/ps[i].Weight <= rest/restWeight {
			shares[i] = limits[i]
			rest -= limits[i]
			restWeight -= ps[i].Weight
			continue
		}
		for _, j := range order[k:] {
			shares[j] = rest * ps[j].Weight / restWeight
		}
		break
	}
	return shares
}

// Readjust is SFS's optimal weight readjustment (003 §2.1, fig. 2) for
// single-thread principals on cpus CPUs: any weight that asks for more than
// one CPU (w_i / Σw > 1/cpus) is lowered so that it asks for exactly one CPU,
// the heaviest first, each against the remaining weights and CPUs. Feasible
// weights are returned unchanged; the input is not modified.
func Readjust(weights []float64, cpus int) []float64 {
	out := append([]float64(nil), weights...)
	if cpus <= 0 {
		return out
	}
	order := make([]int, len(out))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool { return out[order[a]] > out[order[b]] })
	suffix := make([]float64, len(order)+1) // suffix[k] = Σ weights of order[k:]
	for k := len(order) - 1; k >= 0; k-- {
		suffix[k] = suffix[k+1] + math.Max(out[order[k]], 0)
	}
	// Fig. 2 assumes more threads than CPUs; with fewer, each thread has a
	// CPU of its own, so only as many CPUs as threads count (and no weight
	// is readjusted to the zero sum of an empty rest).
	usable := 0
	for _, w := range out {
		if w > 0 {
			usable++
		}
	}
	usable = min(usable, cpus)
	// The first k heaviest are infeasible while w·p' > Σ(rest incl. itself),
	// p' being the CPUs left for them (fig. 2's recursion, unrolled).
	infeasible := 0
	for k := range order {
		p := usable - k
		if p <= 1 || out[order[k]] <= 0 || out[order[k]]*float64(p) <= suffix[k] {
			break
		}
		infeasible++
	}
	// Each infeasible thread gets the average weight of the feasible ones
	// over the CPUs left to them: Σ_{j>i} w_j / (p−1), innermost first.
	for k := infeasible - 1; k >= 0; k-- {
		p := usable - k
		out[order[k]] = sumReadjusted(out, order[k+1:]) / float64(p-1)
	}
	return out
}

func sumReadjusted(w []float64, idx []int) float64 {
	s := 0.0
	for _, i := range idx {
		s += math.Max(w[i], 0)
	}
	return s
}
