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
