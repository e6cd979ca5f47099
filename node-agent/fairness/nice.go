package fairness

import "math"

// PrioToWeight is the kernel's sched_prio_to_weight table: the load weight
// of nice −20 … 19 (kernel/sched/core.c), about 1.25× from one level to the
// next, nice 0 = 1024.
var PrioToWeight = [40]float64{
	88761, 71755, 56483, 46273, 36291,
	29154, 23254, 18705, 14949, 11916,
	9548, 7620, 6100, 4904, 3906,
	3121, 2501, 1991, 1586, 1277,
	1024, 820, 655, 526, 423,
	335, 272, 215, 172, 137,
	110, 87, 70, 56, 45,
	36, 29, 23, 18, 15,
}

// NearestNice is the nice level whose weight is closest to weight (on a log
// scale, as the table is geometric), and that level's weight. Weights beyond
// the table's ends map to −20 or 19.
func NearestNice(weight float64) (nice int, got float64) {
	if !(weight > 0) {
		return 19, PrioToWeight[39]
	}
	best, bestErr := 0, math.Inf(1)
	for i, w := range PrioToWeight {
		if e := math.Abs(math.Log(w / weight)); e < bestErr {
			best, bestErr = i, e
		}
	}
	return best - 20, PrioToWeight[best]
}

// NiceShareErrorPoints is the largest error, in percentage points of the
// group's CPU, that rounding each member's weight to a nice level causes:
// members get Σ rounded weights shares instead of the exact ones.
func NiceShareErrorPoints(exact, rounded []float64) float64 {
	var se, sr float64
	for i := range exact {
		se += exact[i]
		sr += rounded[i]
	}
	if se <= 0 || sr <= 0 {
		return 0
	}
	worst := 0.0
	for i := range exact {
		worst = math.Max(worst, 100*math.Abs(exact[i]/se-rounded[i]/sr))
	}
	return worst
}
