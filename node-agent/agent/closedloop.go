package agent

import (
	"math"
	"time"

	"github.com/kubefair/kubefair/node-agent/fairness"
)

// closedLoop is the closed-loop correction of one level of the hierarchy:
// the tenants on the node, or the workloads inside one tenant. Each
// principal carries a multiplier on its entitled share that the measured
// CPU nudges (fairness.Correction). It learns only from windows of at least
// one period — a kicked step's short window adds to the next full one — and
// starts a principal again from the open-loop weight when its entitlement
// moves, because what it learnt belongs to the old configuration.
type closedLoop struct {
	correction fairness.Correction
	mult       map[string]float64
	entitled   map[string]float64 // proportion of the total, last step
	// Accumulated since the last update.
	elapsed    time.Duration
	cpu        map[string]time.Duration
	backlogged map[string]bool
}

func newClosedLoop(c fairness.Correction) *closedLoop {
	l := &closedLoop{correction: c, mult: map[string]float64{}, entitled: map[string]float64{}}
	l.reset()
	return l
}

func (l *closedLoop) reset() {
	l.elapsed, l.cpu, l.backlogged = 0, map[string]time.Duration{}, map[string]bool{}
}

// measured is one principal's figures for one step.
type measured struct {
	name       string
	entitled   float64 // any common scale: the loop compares proportions
	cpu        time.Duration
	backlogged bool
}

// step adds one step of dt and returns each principal's multiplier, in
// input order. Principals absent from ps are forgotten.
func (l *closedLoop) step(ps []measured, dt, period time.Duration) []float64 {
	l.elapsed += dt
	mult := make([]float64, len(ps))
	entitled := make([]float64, len(ps))
	for i, p := range ps {
		l.cpu[p.name] += p.cpu
		l.backlogged[p.name] = l.backlogged[p.name] || p.backlogged
		mult[i], entitled[i] = l.mult[p.name], p.entitled
	}
	if l.elapsed >= period {
		// Correction.Update normalises achieved over the backlogged
		// principals, so CPU time serves as "achieved" directly.
		achieved := make([]float64, len(ps))
		backlogged := make([]bool, len(ps))
		for i, p := range ps {
			achieved[i], backlogged[i] = l.cpu[p.name].Seconds(), l.backlogged[p.name]
		}
		mult = l.correction.Update(mult, entitled, achieved, backlogged)
		l.reset()
	}
	// A move is judged on each principal's proportion of the total: the
	// capacity left to the tenants changes every period with load from
	// outside and scales every entitlement alike, which is no move.
	var total float64
	for _, p := range ps {
		total += p.entitled
	}
	next := make(map[string]float64, len(ps))
	nextEntitled := make(map[string]float64, len(ps))
	for i, p := range ps {
		if mult[i] <= 0 {
			mult[i] = 1
		}
		proportion := 0.0
		if total > 0 {
			proportion = p.entitled / total
		}
		if prev := l.entitled[p.name]; prev > 0 && math.Abs(proportion-prev) > 0.1*prev {
			mult[i] = 1
		}
		next[p.name], nextEntitled[p.name] = mult[i], proportion
	}
	l.mult, l.entitled = next, nextEntitled
	return mult
}
