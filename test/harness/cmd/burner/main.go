// Command burner keeps CPUs busy: it runs -threads OS threads that spin until
// it is killed or -duration passes. Tests and images use it as a greedy,
// backlogged workload whose CPU use the kernel accounts per thread. With
// -duty below 1 each thread spins only that fraction of every -cycle and
// sleeps the rest: a lightly busy workload with many threads. (A process
// with nothing but its spinning threads is test/harness/cmd/spinner's.)
package main

import (
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"os/signal"
	"runtime"
	"syscall"
	"time"
)

func main() {
	threads := flag.Int("threads", 1, "spinning threads to run (each locked to its own OS thread)")
	duration := flag.Duration("duration", 0, "exit after this long; 0 runs until SIGTERM/SIGINT")
	duty := flag.Float64("duty", 1, "fraction of each cycle a thread spins (0 < duty ≤ 1; 1 spins without pause)")
	cycle := flag.Duration("cycle", 100*time.Millisecond, "length of one spin-and-sleep cycle when -duty is below 1")
	flag.Parse()
	if *threads < 1 || *duty <= 0 || *duty > 1 || *cycle <= 0 {
		fmt.Fprintln(os.Stderr, "burner: want -threads ≥ 1, 0 < -duty ≤ 1 and -cycle > 0")
		os.Exit(2)
	}
	// Leave room for the Go runtime's own threads; the spinners do not
	// allocate or call into the runtime.
	if *duty == 1 {
		runtime.GOMAXPROCS(*threads + 1)
	} else {
		runtime.GOMAXPROCS(1) // the spinners seldom run at once
	}
	for i := 0; i < *threads; i++ {
		if *duty == 1 {
			go spin()
		} else {
			go spinSometimes(time.Duration(*duty*float64(*cycle)), *cycle)
		}
	}
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
	if *duration > 0 {
		select {
		case <-stop:
		case <-time.After(*duration):
		}
		return
	}
	<-stop
}

// spin holds one OS thread busy forever.
func spin() {
	runtime.LockOSThread()
	x := uint64(1)
	for {
		x = x*6364136223846793005 + 1442695040888963407
		if x == 0 {
			fmt.Print("")
		}
	}
}

// spinSometimes holds one OS thread busy for busy out of every cycle, at a
// random phase: threads of unrelated workloads do not wake in step.
func spinSometimes(busy, cycle time.Duration) {
	runtime.LockOSThread()
	time.Sleep(rand.N(cycle))
	x := uint64(1)
	for {
		start := time.Now()
		for time.Since(start) < busy {
			x = x*6364136223846793005 + 1442695040888963407
		}
		if x == 0 {
			fmt.Print("")
		}
		time.Sleep(cycle - time.Since(start))
	}
}
