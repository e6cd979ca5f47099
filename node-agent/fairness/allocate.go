package fairness

import (
	"math"
	"slices"
	"time"
)

// Snapshot is what one period on a node gives the allocation: the tenants
// with pods there, as measured. The agent's loop is snapshot → Allocate →
// apply (backends) → account (docs/design.md §The agent's loop).
type Snapshot struct {
	CPUs int
	// Left is the fraction of the node's CPU time in the period that went
	// to the tenants or to nobody: what the node spent on anything else
	// (system daemons, pods of no tenant) no pod weight can give them.
	Left float64
	// Window is the period just measured; Period the agent's period (a
	// closed loop learns from at least one).
	Window, Period time.Duration
	Tenants        []TenantSnapshot
}

// TenantSnapshot is one tenant on the node in one period.
type TenantSnapshot struct {
	Name    string
	Weight  float64
	Threads int // that ran or waited
	// Demand is the most of the node it would have used (0..1): its CPU
	// and waiting time over the node's capacity.
	Demand float64
	// Limit is the most of the node its pods' CPU limits let it use, 0
	// when some pod has none.
	Limit      float64
	CPU        time.Duration
	Backlogged bool
	// Declared: the tenant weighs workloads (spec.workloads); only then
	// does a closed loop correct the split inside it (per-pod correction
	// would chase the noise of single pods).
	Declared  bool
	Workloads []WorkloadSnapshot
}

// WorkloadSnapshot is one workload inside a tenant: a declared workload's
// pods on the node, or a pod no workload selects (a workload of its own).
type WorkloadSnapshot struct {
	Name       string
	Weight     float64
	Pods       int
	CPU        time.Duration
	Backlogged bool
	// Elevation multiplies its pods' parts when request-based elevation
	// raises it (Elevation.Multiplier; 0 or 1: not raised). It is on top of
	// the tenant's split, not a share of it: the rest of the tenant keeps
	// its weight, so a server that mostly waits takes nothing from its
	// tenant's other pods, and the tenants' loop holds what it uses.
	Elevation float64
}

// Loops are the closed loops of a node: the tenants', and the workloads'
// inside each tenant that declares workloads, by tenant name. What they
// learnt survives the agent's restarts (the agent keeps it on disk).
type Loops struct {
	Tenants   Loop             `json:"tenants"`
	Workloads map[string]*Loop `json:"workloads"`
}

// Allocation is what Allocate decides for each tenant, in input order.
type Allocation struct {
	// Spare: the tenants together want less than what is left to them, so
	// each gets what it wants whatever the weights; weights stay at the
	// plain weight shares, the right start when contention begins.
	Spare   bool
	Tenants []TenantAllocation
}

// TenantAllocation is one tenant's outcome.
type TenantAllocation struct {
	// Entitled is its share of the node (0..1).
	Entitled float64
	// Limited: its CPU limits keep it below what its weight alone would
	// entitle it to (by more than LimitedMargin); the rest goes to the
	// others.
	Limited bool
	// Multiplier is the closed loop's correction on its entitled share,
	// and Bounded says the loop's range cut it while the tenant was still
	// off its entitlement (Loop.Bounded).
	Multiplier float64
	Bounded    bool
	// PodParts are each workload's pods' part, per pod, of what all the
	// tenants' pods on the node weigh together (in input order; Σ over
	// every pod of every tenant is 1, plus what elevation adds on top).
	PodParts []float64
}

// LimitedMargin is how far below its entitlement without CPU limits a
// tenant must be entitled for its limits to count as keeping it there: a
// fraction of a point is noise in the measured demand.
const LimitedMargin = 0.005

// Allocate is the fairness model for one period on one node:
//  1. entitlements: the capacity left to the tenants divided by weight,
//     each capped by its threads, demand and CPU limits (Divide; a tenant
//     capped by its limits is an infeasible principal, the rest going to
//     the others);
//  2. the tenants' closed loop corrects each entitled share by what it
//     achieved (Loop, Correction);
//  3. each tenant's part of the node's weight is its corrected share — or
//     its plain weight share while it has no demand or the node has CPU to
//     spare, so that it gets its due at once when contention begins,
//     instead of following every period's noisy demand;
//  4. the part is split over its workloads by their weights (corrected by
//     the workloads' loop where the tenant declares workloads) and over
//     each workload's pods equally; an elevated workload's pods get their
//     elevation on top.
//
// It updates loops and does nothing else: no I/O, no clock.
func Allocate(s Snapshot, c Correction, loops *Loops) Allocation {
	n := len(s.Tenants)
	out := Allocation{Tenants: make([]TenantAllocation, n)}
	principals := make([]Principal, n)
	capped := make([]Principal, n)
	for i, t := range s.Tenants {
		principals[i] = Principal{Weight: t.Weight, Threads: t.Threads, Demand: math.Min(1, t.Demand)}
		capped[i] = principals[i]
		if t.Limit > 0 {
			capped[i].Demand = math.Min(capped[i].Demand, t.Limit)
		}
	}
	entitled := Divide(s.Left, capped, s.CPUs)
	if !slices.Equal(capped, principals) {
		free := Divide(s.Left, principals, s.CPUs)
		for i := range out.Tenants {
			out.Tenants[i].Limited = entitled[i] < free[i]-LimitedMargin
		}
	}

	in := make([]LoopInput, n)
	for i, t := range s.Tenants {
		in[i] = LoopInput{Name: t.Name, Entitled: entitled[i], CPU: t.CPU, Backlogged: t.Backlogged}
	}
	mult := loops.Tenants.Step(c, in, s.Window, s.Period)

	var weightSum, demandSum float64
	for i, t := range s.Tenants {
		weightSum += t.Weight
		demandSum += principals[i].Demand
	}
	out.Spare = demandSum < s.Left
	group := make([]float64, n)
	var groupSum float64
	for i, t := range s.Tenants {
		share := entitled[i]
		if share <= 0 || out.Spare {
			share = t.Weight / weightSum
		}
		group[i] = share * mult[i]
		groupSum += group[i]
	}

	if loops.Workloads == nil {
		loops.Workloads = map[string]*Loop{}
	}
	present := make(map[string]bool, n)
	for i, t := range s.Tenants {
		present[t.Name] = true
		a := &out.Tenants[i]
		a.Entitled, a.Multiplier, a.Bounded = entitled[i], mult[i], loops.Tenants.Bounded(t.Name)
		var part float64
		if groupSum > 0 {
			part = group[i] / groupSum
		}
		a.PodParts = splitTenant(part, t, c, s, loops)
	}
	for name := range loops.Workloads {
		if !present[name] {
			delete(loops.Workloads, name)
		}
	}
	return out
}

// splitTenant divides a tenant's part of the node's weight over its
// workloads by their weights (docs/design.md §Fairness model, level 2),
// corrected by the tenant's workload loop when it declares workloads, and
// each workload's part equally over its pods, times its elevation.
func splitTenant(part float64, t TenantSnapshot, c Correction, s Snapshot, loops *Loops) []float64 {
	mult := make([]float64, len(t.Workloads))
	if t.Declared {
		wl := loops.Workloads[t.Name]
		if wl == nil {
			wl = &Loop{}
			loops.Workloads[t.Name] = wl
		}
		in := make([]LoopInput, len(t.Workloads))
		for k, w := range t.Workloads {
			in[k] = LoopInput{Name: w.Name, Entitled: w.Weight, CPU: w.CPU, Backlogged: w.Backlogged}
		}
		mult = wl.Step(c, in, s.Window, s.Period)
	} else {
		delete(loops.Workloads, t.Name)
		for k := range mult {
			mult[k] = 1
		}
	}
	var total float64
	for k, w := range t.Workloads {
		total += w.Weight * mult[k]
	}
	parts := make([]float64, len(t.Workloads))
	if !(total > 0) {
		return parts
	}
	for k, w := range t.Workloads {
		if w.Pods > 0 {
			parts[k] = part * w.Weight * mult[k] / total / float64(w.Pods) * max(1, w.Elevation)
		}
	}
	return parts
}

// Backlogged tells whether threads that waited wait for CPU in a window
// were held back by others rather than briefly queued: they waited for
// more than 2 % of it.
func Backlogged(wait, window time.Duration) bool { return wait > window/50 }
