// Command burner keeps CPUs busy: it runs -threads OS threads that spin until
// it is killed or -duration passes. Tests and images use it as a greedy,
// backlogged workload whose CPU use the kernel accounts per thread.
package main

import (
	"flag"
	"fmt"
	"os"
	"os/signal"
	"runtime"
	"syscall"
	"time"
)

func main() {
	threads := flag.Int("threads", 1, "spinning threads to run (each locked to its own OS thread)")
	duration := flag.Duration("duration", 0, "exit after this long; 0 runs until SIGTERM/SIGINT")
	flag.Parse()
	if *threads < 1 {
		fmt.Fprintln(os.Stderr, "burner: -threads must be at least 1")
		os.Exit(2)
	}
	// Leave room for the Go runtime's own threads; the spinners do not
	// allocate or call into the runtime.
	runtime.GOMAXPROCS(*threads + 1)
	for i := 0; i < *threads; i++ {
		go spin()
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
