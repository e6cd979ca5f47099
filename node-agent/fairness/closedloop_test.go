package fairness

import (
	"math"
	"testing"
)

// plant is a toy node that realises weights imperfectly: each principal gets
// its weight's share distorted by a fixed bias, as on two CPUs.
func plant(weights, bias []float64) []float64 {
	out := make([]float64, len(weights))
	var sum float64
	for i, w := range weights {
		out[i] = w * bias[i]
		sum += out[i]
	}
	for i := range out {
		out[i] /= sum
	}
	return out
}

func TestCorrectionConvergesOnABiasedPlant(t *testing.T) {
	entitled := []float64{1.0 / 7, 2.0 / 7, 4.0 / 7}
	bias := []float64{0.8, 1.0, 1.15} // open loop misses by several points
	backlogged := []bool{true, true, true}
	mult := []float64{}
	var errPoints float64
	for period := 0; period < 6; period++ {
		w := make([]float64, 3)
		for i := range w {
			m := 1.0
			if i < len(mult) {
				m = mult[i]
			}
			w[i] = entitled[i] * m
		}
		achieved := plant(w, bias)
		errPoints = MaxErrorPoints(entitled, achieved, backlogged)
		if period == 0 && errPoints < 2 {
			t.Fatalf("the plant is too kind: open-loop error %.2f points", errPoints)
		}
		mult = DefaultCorrection.Update(mult, entitled, achieved, backlogged)
	}
	if errPoints > 0.5 {
		t.Fatalf("after 6 periods the error is still %.2f points (multipliers %v)", errPoints, mult)
	}
}

func TestCorrectionIgnoresOutsideLoadAndIdlePrincipals(t *testing.T) {
	entitled := []float64{0.5, 0.5}
	// Both got 40 %: someone outside took 20 %, equally from both; no correction.
	got := DefaultCorrection.Update([]float64{1, 1}, entitled, []float64{0.4, 0.4}, []bool{true, true})
	if math.Abs(got[0]-1) > 1e-12 || math.Abs(got[1]-1) > 1e-12 {
		t.Fatalf("outside load changed multipliers: %v", got)
	}
	// A principal that is not backlogged keeps its multiplier.
	got = DefaultCorrection.Update([]float64{1.5, 1}, entitled, []float64{0.1, 0.6}, []bool{false, true})
	if got[0] != 1.5 || got[1] != 1 {
		t.Fatalf("idle principal corrected: %v", got)
	}
	// Bounds hold, and garbage in gives sane multipliers out.
	got = DefaultCorrection.Update([]float64{math.NaN(), math.Inf(1)}, []float64{0.5, 0.5}, []float64{0, 0.8}, []bool{true, true})
	for _, m := range got {
		if !(m >= DefaultCorrection.Min && m <= DefaultCorrection.Max) {
			t.Fatalf("multiplier out of bounds: %v", got)
		}
	}
}
