// Command kubefair-sim prints the simulator's tables for the seeds'
// experiments, deterministically (docs/fairness.md shows its output).
package main

import (
	"fmt"

	"github.com/kubefair/kubefair/node-agent/fairness/sim"
)

func main() {
	fmt.Println("S0 (seed 000 §3.4): processes A, B, C with 1, 8, k threads on one CPU")
	fmt.Printf("%-5s %3s %7s %7s %7s %8s %9s %11s\n", "policy", "k", "A", "B", "C", "gap(pp)", "wait(s)", "turnaround")
	for _, p := range []struct {
		name   string
		policy sim.Policy
	}{{"None", sim.None}, {"TFPS", sim.TFPS}, {"TWRS", sim.TWRS}, {"PFS", sim.PFS}} {
		for k := 10; k <= 50; k += 10 {
			r := sim.S0(k, p.policy)
			fmt.Printf("%-6s %3d %6.1f%% %6.1f%% %6.1f%% %8.1f %9.2f %11.2f\n", p.name, k,
				100*r.Shares[0], 100*r.Shares[1], 100*r.Shares[2], r.GapPoints, r.AvgWaiting, r.AvgTurnaround)
		}
	}

	fmt.Println("\nVM weights (seed 000 table 5.3): two 6-thread VMs on 2 CPUs, PFS inside each")
	fmt.Printf("%-7s %9s %9s\n", "weights", "VM1", "expected")
	for n := 1; n <= 5; n++ {
		fmt.Printf("1:%-5d %8.1f%% %8.1f%%\n", n, 100*sim.VMShare(float64(n)), 100/float64(1+n))
	}

	fmt.Println("\nFig. 4.1 (seed 000 ch. 4): T1 (1024) vs 4 × 335 on 2 CPUs; GPS ratio 3.06")
	for _, shuttle := range []bool{false, true} {
		ratio, lag := sim.Fig41(shuttle, 0.1)
		fmt.Printf("shuttle=%-5v T1 / small thread = %.2f×, |T1 − GPS| after 20 s = %.2f s\n", shuttle, ratio, lag)
	}

	fmt.Println("\nSFS example 1 (seed 003 §2.1): weights 1:10 on 2 CPUs, then a third thread of weight 1")
	for _, readjust := range []bool{false, true} {
		cpu := sim.SFSExample1(readjust)
		fmt.Printf("readjust=%-5v CPU-seconds in the next second: T1 %.2f, T2 %.2f, T3 %.2f\n", readjust, cpu[0], cpu[1], cpu[2])
	}

	fmt.Println("\nSFS example 2 (seed 003 §4.3): T1 (20), 20 × weight 1, short threads (5, 300 ms each) on 2 CPUs; 4:4:1 asked")
	for _, surplus := range []bool{false, true} {
		sh := sim.SFSExample2(surplus)
		name := "SFQ"
		if surplus {
			name = "SFS"
		}
		fmt.Printf("%s: T1 %.1f%%, weight-1 threads %.1f%%, short threads %.1f%%\n", name, 100*sh[0], 100*sh[1], 100*sh[2])
	}
}
