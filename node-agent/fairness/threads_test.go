package fairness

import (
	"math"
	"testing"
)

func TestProcessTargets(t *testing.T) {
	for _, c := range []struct {
		name     string
		policy   ThreadPolicy
		runnable []float64
		want     []float64 // as proportions; nil: no split
	}{
		{"PFS: equal parts whatever the threads", PFS, []float64{1, 8, 50}, []float64{1. / 3, 1. / 3, 1. / 3}},
		{"PFS: one process", PFS, []float64{7}, []float64{1}},
		// N = 59: 1×58, 8×51, 50×9 (000 eq. 3.3 in one run queue).
		{"TWRS: n(N-n)", TWRS, []float64{1, 8, 50}, []float64{58. / 916, 408. / 916, 450. / 916}},
		{"TWRS: equal processes", TWRS, []float64{3, 3}, []float64{0.5, 0.5}},
		{"TWRS: a process alone keeps its weight", TWRS, []float64{5}, []float64{1}},
		{"None: no split", None, []float64{1, 8}, nil},
		{"TFPS: no split", TFPS, []float64{1, 8}, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := ProcessTargets(c.policy, c.runnable)
			if c.want == nil {
				if got != nil {
					t.Fatalf("got %v, want no split", got)
				}
				return
			}
			var sum float64
			for _, v := range got {
				sum += v
			}
			for i := range c.want {
				if math.Abs(got[i]/sum-c.want[i]) > 1e-9 {
					t.Fatalf("process %d: %.4f of the pod, want %.4f (all: %v)", i, got[i]/sum, c.want[i], got)
				}
			}
		})
	}
}
