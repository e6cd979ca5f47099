// Command kubefair-sim prints the simulator's tables for the seeds'
// experiments, deterministically (docs/fairness.md shows its output).
package main

import (
	"bufio"
	"fmt"
	"io"
	"math"
	"os"

	"github.com/kubefair/kubefair/research/sim"
)

func main() {
	w := bufio.NewWriter(os.Stdout)
	report(w)
	if err := w.Flush(); err != nil {
		fmt.Fprintln(os.Stderr, "kubefair-sim:", err)
		os.Exit(1)
	}
}

// report prints every table; the same build prints the same bytes.
func report(w io.Writer) {
	s0(w)
	vmWeights(w)
	fig41(w)
	sfsExample1(w)
	sfsExample2(w)
}

func s0(w io.Writer) {
	fmt.Fprintln(w, "S0 (seed 000 §3.4): processes A, B, C with 1, 8, k threads on one CPU")
	fmt.Fprintf(w, "%-5s %3s %7s %7s %7s %8s %9s %11s\n", "policy", "k", "A", "B", "C", "gap(pp)", "wait(s)", "turnaround")
	for _, p := range []struct {
		name   string
		policy sim.Policy
	}{{"None", sim.None}, {"TFPS", sim.TFPS}, {"TWRS", sim.TWRS}, {"PFS", sim.PFS}} {
		for k := 10; k <= 50; k += 10 {
			r := sim.S0(k, p.policy)
			fmt.Fprintf(w, "%-6s %3d %6.1f%% %6.1f%% %6.1f%% %8.1f %9.2f %11.2f\n", p.name, k,
				100*r.Shares[0], 100*r.Shares[1], 100*r.Shares[2], r.GapPoints, r.AvgWaiting, r.AvgTurnaround)
		}
	}
}

func vmWeights(w io.Writer) {
	fmt.Fprintln(w, "\nVM weights (seed 000 table 5.3): two 6-thread VMs on 2 CPUs, PFS inside each")
	fmt.Fprintf(w, "%-7s %9s %9s\n", "weights", "VM1", "expected")
	for n := 1; n <= 5; n++ {
		fmt.Fprintf(w, "1:%-5d %8.1f%% %8.1f%%\n", n, 100*sim.VMShare(float64(n)), 100/float64(1+n))
	}
}

func fig41(w io.Writer) {
	fmt.Fprintf(w, "\nFig. 4.1 (seed 000 §4.2.2, §4.4): T1 (1024) and T2..T5 (335) on 2 CPUs for 20 s, load balancing every %.0f ms\n", 1000*sim.Fig41Balance)
	type run struct {
		name    string
		start   sim.Fig41Start
		shuttle bool
		r       sim.Fig41Result
	}
	var runs []run
	for _, shuttle := range []bool{false, true} {
		for _, start := range []sim.Fig41Start{sim.OnArrival, sim.AllOnCPU0} {
			name := "CFS"
			if shuttle {
				name = "CFS+shuttle"
			}
			runs = append(runs, run{name, start, shuttle, sim.Fig41(start, shuttle)})
		}
	}
	// The balancer's own figures where CFS left the threads (eq. 4.1-4.3).
	loads := runs[0].r.Loads
	busiest, light := math.Max(loads[0], loads[1]), math.Min(loads[0], loads[1])
	avg := (loads[0] + loads[1]) / 2
	fmt.Fprintf(w, "CFS's check (eq. 4.1-4.3) where the balancer left them: loads %.0f and %.0f, Load_avg %.0f, Load_imbal %.0f < 335/2 = %.1f: no migration\n",
		light, busiest, avg, sim.Imbalance(busiest, avg, light), sim.MigrationThreshold(335))
	fmt.Fprintf(w, "%-11s %-12s %-9s %5s %8s %13s %8s %8s %13s\n", "balancer", "start", "queues", "moves", "T1 CPU", "small CPU", "T1/small", "T1 err", "small err")
	for _, r := range runs {
		lo, hi := math.Inf(1), math.Inf(-1)
		loErr, hiErr := math.Inf(1), math.Inf(-1)
		for i := 1; i < 5; i++ {
			lo, hi = math.Min(lo, r.r.Service[i]), math.Max(hi, r.r.Service[i])
			e := pctError(r.r.Service[i], r.r.Ideal[i])
			loErr, hiErr = math.Min(loErr, e), math.Max(hiErr, e)
		}
		fmt.Fprintf(w, "%-11s %-12s %-9s %5d %7.2fs %5.2f-%5.2fs %7.2f× %+7.1f%% %+5.1f..%+5.1f%%\n", r.name, r.start, queues(r.r.Queues), r.r.Migrations,
			r.r.Service[0], lo, hi, r.r.Ratio, pctError(r.r.Service[0], r.r.Ideal[0]), loErr, hiErr)
	}
	fmt.Fprintf(w, "%-11s %-12s %-9s %5s %7.2fs %13s %7.2f×\n", "GPS", "", "", "", runs[0].r.Ideal[0], fmt.Sprintf("%.2fs", runs[0].r.Ideal[1]), sim.Fig41GPSRatio)
	fmt.Fprintln(w, "T1's lag behind GPS, GPS − T1's CPU in seconds (fig. 4.4; negative: T1 ran ahead)")
	fmt.Fprintf(w, "%-11s %-12s", "balancer", "start")
	for _, at := range sim.LagTimes {
		fmt.Fprintf(w, " %7s", fmt.Sprintf("%gs", at))
	}
	fmt.Fprintln(w)
	for _, r := range runs {
		fmt.Fprintf(w, "%-11s %-12s", r.name, r.start)
		for _, l := range r.r.Lag {
			fmt.Fprintf(w, " %+7.3f", l)
		}
		fmt.Fprintln(w)
	}
}

// pctError is fig. 4.5's percentage error against GPS.
func pctError(got, ideal float64) float64 { return 100 * (got - ideal) / ideal }

func queues(q [5]int) string {
	var b []byte
	for _, c := range q {
		b = append(b, byte('0'+c))
	}
	return string(b)
}

func sfsExample1(w io.Writer) {
	fmt.Fprintln(w, "\nSFS example 1 (seed 003 §1.2, §4.2): weights 1:10 on 2 CPUs, then a third thread of weight 1")
	for _, readjust := range []bool{false, true} {
		cpu := sim.SFSExample1(readjust)
		fmt.Fprintf(w, "readjust=%-5v CPU-seconds in the next second: T1 %.2f, T2 %.2f, T3 %.2f\n", readjust, cpu[0], cpu[1], cpu[2])
	}
}

func sfsExample2(w io.Writer) {
	fmt.Fprintln(w, "\nSFS example 2 (seed 003 §4.3): T1 (20), 20 × weight 1, short threads (5; 300 ms of CPU each, one after another)")
	fmt.Fprintln(w, "on 2 CPUs for 60 s, weights readjusted; 20:20:5 asks for 44.4 / 44.4 / 11.1 %")
	fmt.Fprintf(w, "%-8s %-4s %7s %9s %7s\n", "quantum", "", "T1", "weight-1", "short")
	for _, q := range []float64{0.001, 0.01, 0.1, sim.SFSQuantum} {
		for _, surplus := range []bool{false, true} {
			sh := sim.SFSExample2(surplus, q)
			name := "SFQ"
			if surplus {
				name = "SFS"
			}
			note := ""
			if q == sim.SFSQuantum {
				note = "  (the paper's quantum)"
			}
			fmt.Fprintf(w, "%-8s %-4s %6.1f%% %8.1f%% %6.1f%%%s\n", fmt.Sprintf("%g ms", 1000*q), name, 100*sh[0], 100*sh[1], 100*sh[2], note)
		}
	}
}
