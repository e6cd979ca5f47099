package fairness

import (
	"math"
	"testing"
)

func near(a, b float64) bool { return math.Abs(a-b) < 1e-9 }

func TestDivide(t *testing.T) {
	greedy := func(w float64, threads int) Principal { return Principal{Weight: w, Threads: threads, Demand: 1} }
	cases := []struct {
		name string
		ps   []Principal
		cpus int
		want []float64
	}{
		{"equal weights share equally", []Principal{greedy(1, 4), greedy(1, 4)}, 2, []float64{0.5, 0.5}},
		{"1:2:4 by weight", []Principal{greedy(1, 8), greedy(2, 8), greedy(4, 8)}, 2, []float64{1. / 7, 2. / 7, 4. / 7}},
		// 003 §1.2: a 1-thread principal cannot use more than one of two CPUs.
		{"single thread capped at one CPU", []Principal{greedy(10, 1), greedy(1, 4)}, 2, []float64{0.5, 0.5}},
		{"demand below share gives the rest away", []Principal{{Weight: 1, Threads: 4, Demand: 0.1}, greedy(1, 4)}, 2, []float64{0.1, 0.9}},
		{"idle principal gets nothing", []Principal{{Weight: 5, Threads: 0, Demand: 1}, greedy(1, 1)}, 2, []float64{0, 0.5}},
	}
	for _, c := range cases {
		got := EntitledShares(c.ps, c.cpus)
		for i := range got {
			if !near(got[i], c.want[i]) {
				t.Errorf("%s: share[%d] = %v, want %v", c.name, i, got[i], c.want[i])
			}
		}
	}
}

// 003 §1.2 example 1: weights 1:10 on two CPUs are infeasible; with a third
// thread of weight 1 readjustment gives 2:1:1 (the heavy thread one CPU).
func TestReadjustSFSExample1(t *testing.T) {
	got := Readjust([]float64{1, 10, 1}, 2)
	want := []float64{1, 2, 1}
	for i := range want {
		if !near(got[i], want[i]) {
			t.Fatalf("Readjust = %v, want %v", got, want)
		}
	}
	if got := Readjust([]float64{1, 10}, 2); !near(got[1], 1) {
		t.Fatalf("Readjust(1,10) = %v, want [1 1]", got)
	}
	// Fewer threads than CPUs: each has a CPU of its own. A lone thread keeps
	// its weight; of two on four CPUs the heavier is brought to the other's.
	if got := Readjust([]float64{10}, 2); !near(got[0], 10) {
		t.Fatalf("Readjust(10) on 2 CPUs = %v, want [10]", got)
	}
	if got := Readjust([]float64{10, 1}, 4); !near(got[0], 1) || !near(got[1], 1) {
		t.Fatalf("Readjust(10,1) on 4 CPUs = %v, want [1 1]", got)
	}
}

func TestCgroupV2Weight(t *testing.T) {
	for _, c := range []struct{ shares, weight uint64 }{{2, 1}, {1024, 39}, {2048, 79}, {262144, 10000}} {
		if got := CgroupV2WeightFromShares(c.shares); got != c.weight {
			t.Errorf("weight(%d) = %d, want %d", c.shares, got, c.weight)
		}
		if back := CgroupV2WeightFromShares(CgroupSharesFromV2Weight(c.weight)); back != c.weight {
			t.Errorf("round trip of weight %d = %d", c.weight, back)
		}
	}
}
