package fairness

import (
	"math"
	"time"
)

// Loop is the closed-loop correction of one level of the hierarchy: the
// tenants on a node, or the workloads inside one tenant. Each principal
// carries a multiplier on its entitled share that the measured CPU nudges
// (Correction). It learns only from windows of at least one period — a
// kicked step's short window adds to the next full one — and starts a
// principal again from the open-loop weight when its entitlement moves
// against the others', because what it learnt belongs to the old
// configuration. Mult and Entitled are what it has learnt (kept across the
// agent's restarts).
type Loop struct {
	Mult     map[string]float64 `json:"mult"`
	Entitled map[string]float64 `json:"entitled"` // proportion of the total, last step
	// Bounded are the principals whose last correction was cut by the
	// multiplier's range while they were still off their entitlement.
	bounded map[string]bool
	// Accumulated since the last correction.
	elapsed    time.Duration
	cpu        map[string]time.Duration
	backlogged map[string]bool
}

// LoopInput is one principal's figures for one step of a Loop.
type LoopInput struct {
	Name       string
	Entitled   float64 // any common scale: the loop compares proportions
	CPU        time.Duration
	Backlogged bool
}

// Step adds one step of dt and returns each principal's multiplier, in
// input order. Principals absent from ps are forgotten.
func (l *Loop) Step(c Correction, ps []LoopInput, dt, period time.Duration) []float64 {
	if l.cpu == nil || l.backlogged == nil {
		l.cpu, l.backlogged = map[string]time.Duration{}, map[string]bool{}
	}
	l.elapsed += dt
	mult := make([]float64, len(ps))
	entitled := make([]float64, len(ps))
	for i, p := range ps {
		l.cpu[p.Name] += p.CPU
		l.backlogged[p.Name] = l.backlogged[p.Name] || p.Backlogged
		mult[i], entitled[i] = l.Mult[p.Name], p.Entitled
	}
	if l.elapsed >= period {
		// Update normalises achieved over the backlogged principals, so
		// CPU time serves as "achieved" directly.
		achieved := make([]float64, len(ps))
		backlogged := make([]bool, len(ps))
		for i, p := range ps {
			achieved[i], backlogged[i] = l.cpu[p.Name].Seconds(), l.backlogged[p.Name]
		}
		var bounded []bool
		mult, bounded = c.update(mult, entitled, achieved, backlogged)
		l.bounded = map[string]bool{}
		for i, p := range ps {
			if bounded[i] {
				l.bounded[p.Name] = true
			}
		}
		l.elapsed, l.cpu, l.backlogged = 0, map[string]time.Duration{}, map[string]bool{}
	}
	// A move is judged on each principal's proportion among those of both
	// this step and the last: the capacity left to the tenants changes
	// every period with load from outside and scales every entitlement
	// alike, which is no move, and a principal that comes or goes moves no
	// other's (a pod's pause process, waking once a minute, restarted its
	// pod's loop in the guest: docs/guest-node.md).
	var total, both, bothBefore float64
	for _, p := range ps {
		total += p.Entitled
		if prev, ok := l.Entitled[p.Name]; ok {
			both, bothBefore = both+p.Entitled, bothBefore+prev
		}
	}
	next := make(map[string]float64, len(ps))
	nextEntitled := make(map[string]float64, len(ps))
	for i, p := range ps {
		if mult[i] <= 0 {
			mult[i] = 1
		}
		if prev := l.Entitled[p.Name]; prev > 0 && both > 0 {
			was, now := prev/bothBefore, p.Entitled/both
			if math.Abs(now-was) > 0.1*was {
				mult[i] = 1
				delete(l.bounded, p.Name)
			}
		}
		proportion := 0.0
		if total > 0 {
			proportion = p.Entitled / total
		}
		next[p.Name], nextEntitled[p.Name] = mult[i], proportion
	}
	l.Mult, l.Entitled = next, nextEntitled
	return mult
}

// Bounded tells whether the principal's last correction was cut by the
// multiplier's range (Correction.Min, Max) while it was still off its
// entitlement by more than BoundMargin.
func (l *Loop) Bounded(name string) bool { return l.bounded[name] }
