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

// 000 §4.2.2 worked by hand: loads 1024 and 4 × 335 = 1340 (eq. 4.1), so
// Load_avg = 1182 and Load_imbal = min(min(1340, 1182), 1182 − 1024) = 158
// (eq. 4.2), below 335/2 = 167.5 (eq. 4.3).
func TestImbalanceFig41ByHand(t *testing.T) {
	cases := []struct {
		name                  string
		busiest, avg, k, want float64
	}{
		{"fig. 4.1", 1340, 1182, 1024, 158},
		{"everything on the busiest queue", 2364, 1182, 0, 1182},
		{"queue k above the average pulls nothing", 1340, 1182, 1300, -118},
	}
	for _, c := range cases {
		if got := Imbalance(c.busiest, c.avg, c.k); math.Abs(got-c.want) > 1e-9 {
			t.Errorf("%s: Load_imbal = %v, want %v", c.name, got, c.want)
		}
	}
	if got := MigrationThreshold(335); got != 167.5 {
		t.Errorf("threshold for a 335 thread = %v, want 167.5", got)
	}
}

// The balancer decides fig. 4.1's placement: from CFS's placement on
// arrival or with every thread on CPU 0, it ends with T1 alone and, the
// imbalance being too small, T1 runs about 4× a small thread instead of
// 3.06×; the shuttle balancer moves T1 towards 3.06× and its lag behind
// GPS shrinks (000 §4.4, fig. 4.4-4.5).
func TestFig41EmergesFromTheBalancerAndTheShuttleMovesT1TowardsGPS(t *testing.T) {
	for _, start := range []Fig41Start{OnArrival, AllOnCPU0} {
		cfs, shuttle := Fig41(start, false), Fig41(start, true)
		for i := 1; i < 5; i++ {
			if cfs.Queues[i] == cfs.Queues[0] || cfs.Queues[i] != cfs.Queues[1] {
				t.Fatalf("%v: CFS left the threads on queues %v, want T1 alone", start, cfs.Queues)
			}
		}
		if math.Abs(cfs.Ratio-4) > 0.05 {
			t.Errorf("%v: without the shuttle T1 runs %.2f× a small thread, want ~4×", start, cfs.Ratio)
		}
		lagCFS, lagShuttle := cfs.Lag[len(cfs.Lag)-1], shuttle.Lag[len(shuttle.Lag)-1]
		if !(math.Abs(shuttle.Ratio-Fig41GPSRatio) < math.Abs(cfs.Ratio-Fig41GPSRatio)/4) || !(math.Abs(lagShuttle) < math.Abs(lagCFS)/4) {
			t.Errorf("%v: the shuttle leaves T1 at %.2f× (lag %.2f s), want close to 3.06× (CFS: %.2f×, lag %.2f s)", start, shuttle.Ratio, lagShuttle, cfs.Ratio, lagCFS)
		}
		// CFS alone leaves T1's lag growing: about 0.134 s per second.
		if want := -20 * (1 - 2*1024.0/2364); math.Abs(lagCFS-want) > 0.1 {
			t.Errorf("%v: T1's lag after 20 s = %.3f s, want ≈ %.3f", start, lagCFS, want)
		}
	}
	if r := Fig41(OnArrival, false); r.Migrations != 0 {
		t.Errorf("CFS's placement on arrival is already fig. 4.1's, yet the balancer moved %d threads", r.Migrations)
	}
}

// Eq. 4.3 is "≥": one thread of weight w against two of w on 2 CPUs gives
// Load_imbal = (2w − w)/2 = w/2, exactly the threshold, so CFS migrates;
// 1024 against 3 × 1024 gives 1024 ≥ 512 and one thread moves, leaving
// 2048 : 2048.
func TestBalancerMigratesAtTheThreshold(t *testing.T) {
	for _, c := range []struct {
		name     string
		onCPU1   int
		wantMove int
		want     [2]int // threads per queue after the first period
	}{
		{"1 vs 2 (imbalance = threshold)", 2, 1, [2]int{2, 1}},
		{"1 vs 3", 3, 1, [2]int{2, 2}},
	} {
		s := &Sim{CPUs: 2, Balance: 0.1}
		s.Threads = append(s.Threads, &Thread{Weight: 1024, CPU: 0, Work: math.Inf(1)})
		for i := 0; i < c.onCPU1; i++ {
			s.Threads = append(s.Threads, &Thread{Process: i + 1, Weight: 1024, CPU: 1, Work: math.Inf(1)})
		}
		if err := s.Run(0.1+Tick, Tick); err != nil {
			t.Fatal(err)
		}
		var got [2]int
		for _, th := range s.Threads {
			got[th.CPU]++
		}
		if s.Migrations != c.wantMove || got != c.want {
			t.Errorf("%s: %d migrations, queues %v; want %d, %v", c.name, s.Migrations, got, c.wantMove, c.want)
		}
	}
}

// A CPU whose run queue is empty pulls a waiting thread at once (000 §2.8),
// before the first balancing period.
func TestIdleCPUPullsAWaitingThread(t *testing.T) {
	s := &Sim{CPUs: 2, Balance: 1}
	for i := 0; i < 2; i++ {
		s.Threads = append(s.Threads, &Thread{Process: i, Weight: 1024, Work: math.Inf(1)})
	}
	if err := s.Run(0.5, Tick); err != nil {
		t.Fatal(err)
	}
	if s.Threads[0].CPU == s.Threads[1].CPU || math.Abs(s.Threads[0].Service-0.5) > 1e-9 || math.Abs(s.Threads[1].Service-0.5) > 1e-9 {
		t.Errorf("queues %d, %d and service %.3f, %.3f s; want one thread per CPU, 0.5 s each", s.Threads[0].CPU, s.Threads[1].CPU, s.Threads[0].Service, s.Threads[1].Service)
	}
}

// The shuttle goes to the light queue for one period and comes back for the
// next (000 §4.4).
func TestShuttleAlternatesEveryPeriod(t *testing.T) {
	s := &Sim{CPUs: 2, Place: true, Balance: 0.1, Shuttle: true}
	for i := 0; i < 5; i++ {
		w := 335.0
		if i == 0 {
			w = 1024
		}
		s.Threads = append(s.Threads, &Thread{Process: i, Weight: w, Work: math.Inf(1)})
	}
	want := []int{1, 0, 1, 0, 1, 0} // T2's queue after each period
	for p, q := range want {
		if err := s.Run(0.1*float64(p+1)+Tick/2, Tick); err != nil {
			t.Fatal(err)
		}
		if got := s.Threads[1].CPU; got != q {
			t.Fatalf("after period %d the shuttle T2 is on queue %d, want %d", p+1, got, q)
		}
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

// 003 §4.3: with the paper's 200-ms quanta SFQ gives the three groups about
// the same share although 4:4:1 was asked, and SFS gives the short jobs
// less than SFQ does. With 1-ms quanta both keep 4:4:1. SFS at 200 ms does
// not reach 4:4:1 here (docs/fairness.md says why); that is reported, not
// asserted.
func TestSFSExample2ShortJobs(t *testing.T) {
	want := [3]float64{4.0 / 9, 4.0 / 9, 1.0 / 9}
	for _, surplus := range []bool{false, true} {
		fine := SFSExample2(surplus, 0.001)
		for i := range want {
			if math.Abs(fine[i]-want[i]) > 0.015 {
				t.Errorf("surplus=%v, 1-ms quanta: group %d gets %.1f%%, want %.1f%% (4:4:1)", surplus, i, 100*fine[i], 100*want[i])
			}
		}
	}
	sfq, sfs := SFSExample2(false, SFSQuantum), SFSExample2(true, SFSQuantum)
	for i, s := range sfq {
		if s < 0.25 || s > 0.42 {
			t.Errorf("SFQ, 200-ms quanta: group %d gets %.1f%%, want about a third", i, 100*s)
		}
	}
	if !(sfs[2] < sfq[2]-0.05) {
		t.Errorf("SFS gives the short jobs %.1f%%, SFQ %.1f%%: want SFS clearly below", 100*sfs[2], 100*sfq[2])
	}
	t.Logf("200-ms quanta: SFQ %.1f / %.1f / %.1f %%, SFS %.1f / %.1f / %.1f %%", 100*sfq[0], 100*sfq[1], 100*sfq[2], 100*sfs[0], 100*sfs[1], 100*sfs[2])
}

// The simulator's cost per scenario (go test -bench . ./research/sim/).

func BenchmarkS0(b *testing.B) {
	for b.Loop() {
		for _, p := range []Policy{None, TWRS, PFS} {
			S0(50, p)
		}
	}
}

func BenchmarkFig41Shuttle(b *testing.B) {
	for b.Loop() {
		Fig41(AllOnCPU0, true)
	}
}

func BenchmarkSFSExample2(b *testing.B) {
	for b.Loop() {
		SFSExample2(true, SFSQuantum)
	}
}

// BenchmarkStep10000Threads is one 1-ms step of 10 000 threads on 8 CPUs
// with per-CPU queues, balancing and TWRS.
func BenchmarkStep10000Threads(b *testing.B) {
	s := &Sim{CPUs: 8, Balance: Tick, Place: true, Policy: TWRS}
	for i := 0; i < 10000; i++ {
		s.Threads = append(s.Threads, &Thread{Process: i % 37, Weight: float64(1 + i%10000), Work: math.Inf(1)})
	}
	if err := s.Validate(); err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		s.Step(Tick)
	}
}
