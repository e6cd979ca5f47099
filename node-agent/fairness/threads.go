package fairness

// ThreadPolicy says how the threads of a process share the process's weight
// (docs/design.md §Fairness model, level 3).
type ThreadPolicy string

const (
	// TWRS readjusts a thread's weight by the threads on its CPU's run queue
	// (000 eq. 3.3, 001 eq. 4).
	TWRS ThreadPolicy = "TWRS"
	// PFS divides the process weight among its threads (000 §3.3.2).
	PFS ThreadPolicy = "PFS"
	// TFPS scales the weight by online CPUs / threads (000 §3.3.3).
	TFPS ThreadPolicy = "TFPS"
	// None leaves every thread at the process weight (stock behaviour).
	None ThreadPolicy = "None"
)

// Nice0Weight is the kernel's load weight of a nice-0 task.
const Nice0Weight = 1024

// PFSThreadWeight is a thread's weight when a process of weight w with
// threads runnable threads is process-fair: w / threads.
func PFSThreadWeight(w float64, threads int) float64 {
	if threads <= 0 {
		return 0
	}
	return w / float64(threads)
}

// TFPSThreadWeight is w × (cpus / threads), never more than w.
func TFPSThreadWeight(w float64, threads, cpus int) float64 {
	if threads <= 0 || cpus <= 0 {
		return 0
	}
	if threads <= cpus {
		return w
	}
	return w * float64(cpus) / float64(threads)
}

// ProcessTargets is each process's part of its pod's CPU under the policy,
// by how many threads of each were runnable on average (any common scale;
// nil when the policy sets thread weights but no split between processes:
// None, TFPS). PFS: equal parts. TWRS: eq. 3.3 with the pod's threads as
// one run queue — thread weight w × (N − n), so a process of n threads gets
// n × (N − n); a process alone keeps its weight. On several CPUs the load
// balancer's placement moves processes off these parts (a process of one
// thread cannot be split across CPUs): the thread backend's per-process
// loop holds them there.
func ProcessTargets(policy ThreadPolicy, runnable []float64) []float64 {
	if policy != PFS && policy != TWRS {
		return nil
	}
	var total float64
	for _, n := range runnable {
		total += n
	}
	out := make([]float64, len(runnable))
	for i, n := range runnable {
		out[i] = 1
		if policy == TWRS && total-n > 0 && n > 0 {
			out[i] = n * (total - n)
		}
	}
	return out
}
