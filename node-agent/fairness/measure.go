package fairness

import "math"

// MaxErrorPoints is the largest |achieved − entitled| in percentage points
// over the principals that were backlogged; the others are not counted.
func MaxErrorPoints(entitled, achieved []float64, backlogged []bool) float64 {
	worst := 0.0
	for i := range entitled {
		if i < len(backlogged) && backlogged[i] && i < len(achieved) {
			worst = math.Max(worst, math.Abs(achieved[i]-entitled[i])*100)
		}
	}
	return worst
}

// JainIndex is Jain's fairness index over x_i = achieved_i / entitled_i:
// (Σx)² / (n Σx²), 1 when every principal got exactly its entitlement.
// Principals with no entitlement are left out; with none left it is 1.
func JainIndex(entitled, achieved []float64) float64 {
	var sum, sumSq float64
	n := 0
	for i := range entitled {
		if entitled[i] <= 0 || i >= len(achieved) {
			continue
		}
		x := achieved[i] / entitled[i]
		sum += x
		sumSq += x * x
		n++
	}
	if n == 0 || sumSq == 0 {
		return 1
	}
	return sum * sum / (float64(n) * sumSq)
}
