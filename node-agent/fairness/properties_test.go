package fairness

import (
	"math"
	"math/rand/v2"
	"testing"
)

// randomPrincipals is a deterministic mix of greedy and modest principals.
func randomPrincipals(r *rand.Rand, n int) []Principal {
	ps := make([]Principal, n)
	for i := range ps {
		ps[i] = Principal{Weight: float64(1 + r.IntN(10000)), Threads: r.IntN(60), Demand: 1}
		if r.IntN(3) == 0 {
			ps[i].Demand = r.Float64()
		}
	}
	return ps
}

func capOf(p Principal, cpus int) float64 {
	return math.Min(float64(min(p.Threads, cpus))/float64(cpus), p.Demand)
}

// Properties of entitled shares (docs/design.md §Fairness model, level 1), over many
// random cases: they sum to at most 1, nobody exceeds its feasibility cap
// or demand, the sum is work-conserving, shares do not change when every
// weight is scaled, and more weight never means a smaller share.
func TestEntitledSharesProperties(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for c := 0; c < 2000; c++ {
		cpus := 1 + r.IntN(8)
		ps := randomPrincipals(r, 1+r.IntN(8))
		s := EntitledShares(ps, cpus)
		var sum, caps float64
		for i, p := range ps {
			sum += s[i]
			caps += capOf(p, cpus)
			if s[i] > capOf(p, cpus)+1e-9 {
				t.Fatalf("case %d: principal %d gets %.4f above its cap %.4f (%+v, %d CPUs)", c, i, s[i], capOf(p, cpus), p, cpus)
			}
		}
		if sum > 1+1e-9 {
			t.Fatalf("case %d: shares sum to %.6f", c, sum)
		}
		if want := math.Min(1, caps); math.Abs(sum-want) > 1e-6 {
			t.Fatalf("case %d: not work-conserving: sum %.6f, want %.6f", c, sum, want)
		}
		scaled := append([]Principal(nil), ps...)
		for i := range scaled {
			scaled[i].Weight *= 7
		}
		for i, v := range EntitledShares(scaled, cpus) {
			if math.Abs(v-s[i]) > 1e-9 {
				t.Fatalf("case %d: scaling every weight changed share %d: %.6f → %.6f", c, i, s[i], v)
			}
		}
		k := r.IntN(len(ps))
		heavier := append([]Principal(nil), ps...)
		heavier[k].Weight *= 2
		if got := EntitledShares(heavier, cpus)[k]; got < s[k]-1e-9 {
			t.Fatalf("case %d: doubling principal %d's weight lowered its share %.6f → %.6f", c, k, s[k], got)
		}
	}
}

// Readjustment changes only infeasible weights, and leaves every weight
// feasible (003 §2.1: w_i / Σw ≤ 1/P).
func TestReadjustProperties(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for c := 0; c < 2000; c++ {
		cpus := 1 + r.IntN(8)
		w := make([]float64, 1+r.IntN(10))
		var sum float64
		for i := range w {
			w[i] = float64(1 + r.IntN(10000))
			if r.IntN(4) == 0 {
				w[i] *= 50
			}
			sum += w[i]
		}
		adj := Readjust(w, cpus)
		var adjSum float64
		for _, v := range adj {
			adjSum += v
		}
		for i := range w {
			feasible := w[i]/sum <= 1/float64(cpus)+1e-12
			if feasible && adj[i] != w[i] && len(w) > cpus {
				// a feasible weight may only change if it was among the
				// heaviest that the recursion caps; it never grows
				if adj[i] > w[i] {
					t.Fatalf("case %d: feasible weight %d grew %.1f → %.1f", c, i, w[i], adj[i])
				}
			}
			if adj[i] > w[i]+1e-9 {
				t.Fatalf("case %d: readjustment raised weight %d", c, i)
			}
			if !(adj[i] > 0) {
				t.Fatalf("case %d: readjustment took weight %d from %.1f to %v (%d weights, %d CPUs)", c, i, w[i], adj[i], len(w), cpus)
			}
			if len(w) >= cpus && adj[i]/adjSum > 1/float64(cpus)+1e-9 {
				t.Fatalf("case %d: weight %d still infeasible after readjustment: %.4f > 1/%d", c, i, adj[i]/adjSum, cpus)
			}
		}
	}
}

// FuzzEntitledShares: no panic, no NaN, no negative or infinite share, for
// 0..100000 threads and weights 1..10000 (the seed corpus runs in go test).
func FuzzEntitledShares(f *testing.F) {
	f.Add(uint16(1), uint32(0), uint16(1), uint32(100000), uint16(10000), uint32(1), uint8(2), 1.0, 0.5)
	f.Add(uint16(10000), uint32(50), uint16(1), uint32(1), uint16(5000), uint32(8), uint8(1), 0.0, 1.0)
	f.Add(uint16(0), uint32(0), uint16(0), uint32(0), uint16(0), uint32(0), uint8(0), -1.0, 2.0)
	f.Fuzz(func(t *testing.T, w1 uint16, t1 uint32, w2 uint16, t2 uint32, w3 uint16, t3 uint32, cpus uint8, d1, d2 float64) {
		ps := []Principal{
			{Weight: float64(w1 % 10001), Threads: int(t1 % 100001), Demand: d1},
			{Weight: float64(w2 % 10001), Threads: int(t2 % 100001), Demand: d2},
			{Weight: float64(w3 % 10001), Threads: int(t3 % 100001), Demand: 1},
		}
		for _, s := range EntitledShares(ps, int(cpus)) {
			if math.IsNaN(s) || math.IsInf(s, 0) || s < 0 || s > 1+1e-9 {
				t.Fatalf("share %v for %+v on %d CPUs", s, ps, cpus)
			}
		}
		for _, w := range Readjust([]float64{float64(w1), float64(w2), float64(w3)}, int(cpus)) {
			if math.IsNaN(w) || math.IsInf(w, 0) || w < 0 {
				t.Fatalf("readjusted weight %v", w)
			}
		}
		for _, n := range []int{int(t1 % 100001), int(t2 % 100001)} {
			for _, w := range []float64{PFSThreadWeight(float64(w1), n), TFPSThreadWeight(float64(w2), n, int(cpus))} {
				if math.IsNaN(w) || math.IsInf(w, 0) || w < 0 {
					t.Fatalf("thread weight %v for %d threads", w, n)
				}
			}
		}
	})
}
