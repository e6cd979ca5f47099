package sim

import (
	"math"
	"testing"
)

// The seeds' qualitative results, as the issue states them.

func TestS0TWRSNarrowsTheGapAndPFSEqualisesProcesses(t *testing.T) {
	for _, k := range []int{10, 30, 50} {
		none, twrs, pfs := S0(k, None), S0(k, TWRS), S0(k, PFS)
		if !(twrs.GapPoints < none.GapPoints-10) {
			t.Errorf("k=%d: TWRS gap %.1f pp does not narrow stock's %.1f pp", k, twrs.GapPoints, none.GapPoints)
		}
		for p, s := range pfs.Shares {
			if math.Abs(s-1.0/3) > 0.005 {
				t.Errorf("k=%d: PFS gives process %d %.1f%%, want 33.3%%", k, p, 100*s)
			}
		}
		// Stock: threads compete one by one, so shares follow thread counts.
		if want := 1 / float64(9+k); math.Abs(none.Shares[0]-want) > 0.005 {
			t.Errorf("k=%d: stock A = %.1f%%, want 1/(9+k) = %.1f%%", k, 100*none.Shares[0], 100*want)
		}
	}
	// 000 eq. 3.3 worked by hand for k=50: A's one thread weighs 58, B's
	// eight 51 each, C's fifty 9 each: A = 58/916 = 6.3 % — TWRS is not
	// process-fair for three processes, and this is what the formula gives.
	if a := S0(50, TWRS).Shares[0]; math.Abs(a-58.0/916) > 0.003 {
		t.Errorf("TWRS k=50: A = %.2f%%, want 58/916 = 6.33%%", 100*a)
	}
}

func TestVMWeightsTable53(t *testing.T) {
	for n := 1; n <= 5; n++ {
		if got, want := VMShare(float64(n)), 1/float64(1+n); math.Abs(got-want) > 0.005 {
			t.Errorf("1:%d: VM1 gets %.1f%%, want %.1f%%", n, 100*got, 100*want)
		}
	}
}

func TestFig41ShuttleMovesT1TowardsGPS(t *testing.T) {
	without, lagWithout := Fig41(false, 0.1)
	with, lagWith := Fig41(true, 0.1)
	if math.Abs(without-4) > 0.05 {
		t.Errorf("without the shuttle T1 runs %.2f× a small thread, want 4×", without)
	}
	if !(math.Abs(with-3.06) < math.Abs(without-3.06)/4) || !(lagWith < lagWithout/4) {
		t.Errorf("the shuttle leaves T1 at %.2f× (lag %.2f s), want close to 3.06× (from %.2f×, lag %.2f s)", with, lagWith, without, lagWithout)
	}
}

func TestSFSExample1ReadjustmentEndsStarvation(t *testing.T) {
	starved := SFSExample1(false)
	fair := SFSExample1(true)
	if starved[0] > 0.1 {
		t.Errorf("without readjustment T1 still got %.2f CPU-s; the example starves it", starved[0])
	}
	want := [3]float64{0.5, 1, 0.5} // 1:2:1 of 2 CPUs
	for i := range want {
		if math.Abs(fair[i]-want[i]) > 0.02 {
			t.Errorf("with readjustment thread %d got %.2f CPU-s, want %.2f (1:2:1)", i+1, fair[i], want[i])
		}
	}
}

func TestSFSExample2SurplusKeepsTheShortJobsProportion(t *testing.T) {
	sfq, sfs := SFSExample2(false), SFSExample2(true)
	// 4:4:1 → 44.4 %, 44.4 %, 11.1 %.
	want := [3]float64{4.0 / 9, 4.0 / 9, 1.0 / 9}
	for i := range want {
		if math.Abs(sfs[i]-want[i]) > 0.03 {
			t.Errorf("SFS: group %d gets %.1f%%, want %.1f%% (4:4:1)", i, 100*sfs[i], 100*want[i])
		}
	}
	// The paper measured SFQ giving each group about a third; this
	// simulator's SFQ does not reproduce that (docs/fairness.md), so the
	// figure is reported, not asserted.
	t.Logf("SFQ: %.1f%% / %.1f%% / %.1f%%; SFS: %.1f%% / %.1f%% / %.1f%%", 100*sfq[0], 100*sfq[1], 100*sfq[2], 100*sfs[0], 100*sfs[1], 100*sfs[2])
}

// BenchmarkS0 times one S0 run of each policy at k=50.
func BenchmarkS0(b *testing.B) {
	for i := 0; i < b.N; i++ {
		for _, p := range []Policy{None, TWRS, PFS} {
			S0(50, p)
		}
	}
}
