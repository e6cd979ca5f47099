package fairness

import "math"

// Correction closes the loop between what the fairness model entitles each
// principal to and what it achieved. Open-loop group weights fall short on
// few CPUs (per-CPU run queues and load balancing do not realise weights
// exactly: 4–5 points at 1:2..1:5 on two CPUs), so each principal carries a
// multiplier on its entitled share that a period's measurement nudges:
//
//	m ← clamp(m · exp(Gain · max(-1, (entitled − achieved) / entitled)), Min, Max)
//
// The error is a fraction of the entitlement, not a log ratio, so the loop
// holds each principal's mean share: the corrections add up to how far the
// multiplier moved, so a period's excess is paid back in the next ones.
// Log ratios held the geometric mean, which sits below the mean by about
// half the windows' variance, and so gave principals whose windows swing
// more (a single pod's threads moved between two CPUs) part of steady
// ones' shares. An overshoot counts as at most twice the entitlement: one
// noisy window moves a multiplier down by no more than exp(-Gain).
//
// Achieved shares are normalised over the backlogged principals first, so
// load from outside the managed principals (which takes from all of them
// alike) does not wind the multipliers up. Only backlogged principals are
// corrected: one that does not want its share has nothing to correct; then
// the multipliers are unwound (Correction.unwind).
type Correction struct {
	// Gain in (0, 1]: 1 corrects the whole measured error in one period,
	// smaller values trade speed for stability against noisy windows.
	Gain float64
	// Min and Max bound a multiplier (anti-windup).
	Min, Max float64
}

// DefaultCorrection removes most of a steady error in three to four periods
// while damping the noise of one-second windows; a change of configuration
// restarts from the open-loop weights, which are already close.
var DefaultCorrection = Correction{Gain: 0.4, Min: 0.125, Max: 8}

// Update returns the multipliers for the next period. mult may be shorter
// than entitled (new principals start at 1).
func (c Correction) Update(mult, entitled, achieved []float64, backlogged []bool) []float64 {
	next, _ := c.update(mult, entitled, achieved, backlogged)
	return next
}

// BoundMargin is how far off its entitlement a principal whose correction
// the multiplier's range cut must be for the bound to count (Loop.Bounded):
// a fraction of what the backlogged principals share together — for
// tenants, about a point of the node.
const BoundMargin = 0.01

// update is Update, also telling which principals the range cut while
// they were more than BoundMargin off their entitlement: the bound, not
// the loop, then decides their share.
func (c Correction) update(mult, entitled, achieved []float64, backlogged []bool) (next []float64, bounded []bool) {
	next = make([]float64, len(entitled))
	bounded = make([]bool, len(entitled))
	var sumE, sumA float64
	for i := range entitled {
		next[i] = 1
		if i < len(mult) && mult[i] > 0 && !math.IsInf(mult[i], 0) && !math.IsNaN(mult[i]) {
			next[i] = mult[i]
		}
		if i < len(backlogged) && backlogged[i] && i < len(achieved) && entitled[i] > 0 {
			sumE += entitled[i]
			sumA += achieved[i]
		}
	}
	if !(sumA > 0) || !(sumE > 0) {
		return next, bounded
	}
	for i := range entitled {
		if i >= len(backlogged) || !backlogged[i] || i >= len(achieved) || !(entitled[i] > 0) {
			continue
		}
		normalised := achieved[i] / sumA * sumE
		off := math.Abs(entitled[i]-normalised) > BoundMargin*sumE
		if !(normalised > 0) {
			next[i] = c.Max // starved: push as hard as allowed
			bounded[i] = off
			continue
		}
		want := next[i] * math.Exp(c.Gain*math.Max(-1, (entitled[i]-normalised)/entitled[i]))
		next[i] = math.Min(c.Max, math.Max(c.Min, want))
		bounded[i] = off && next[i] != want
	}
	c.unwind(next)
	return next, bounded
}

// unwind divides every multiplier by their geometric mean when it is above
// 1, as far as none goes below Min. Only their ratios set the shares, and
// noise moves them together until the one that needs the most correction
// sits on Max, short of its share (with log-ratio corrections, whose mean
// over shares normalised to add up to the entitlements is never below
// zero, the latency suite's web tenant, with its class and elevation, sat
// on 8 while the others, needing none, had drifted to 3–5). It never
// raises them: where one sits on Min, the others rising is what still
// corrects it.
func (c Correction) unwind(mult []float64) {
	if len(mult) == 0 {
		return
	}
	var sumLog float64
	least := math.Inf(1)
	for _, m := range mult {
		sumLog += math.Log(m)
		least = math.Min(least, m)
	}
	f := math.Min(math.Exp(sumLog/float64(len(mult))), least/c.Min)
	if !(f > 1) {
		return
	}
	for i := range mult {
		mult[i] /= f
	}
}
