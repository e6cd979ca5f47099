// Package enforce defines the one interface every enforcement backend
// implements. The agent's loop computes a Plan each period and hands it to
// its backends in order; a backend owns every write at its level and
// nothing else. The backends are peers below this folder: cgroup (pod
// cgroup weights, on every node) and threads (thread weights through the
// patched kernel's system call, or nice levels as an approximation).
package enforce

import (
	"iter"
	"time"

	"github.com/kubefair/kubefair/node-agent/fairness"
)

// Process is one process inside a pod.
type Process struct {
	PID int
	// Threads are the thread ids seen in /proc/<pid>/task this period.
	Threads []int
	// CPU and Wait are its threads' run and wait time in the period (from
	// schedstat, scaled to Plan.Window): what a thread backend's
	// per-process loop measures.
	CPU, Wait time.Duration
	// Busy is the run + wait of those of its threads that were runnable
	// for at least half the period (scaled alike): the threads that compete
	// all along, without the helpers that wake for moments (a Go
	// runtime's), whose waits grow with the load on the CPUs.
	Busy time.Duration
}

// Pod is one pod as the agent enforces it.
type Pod struct {
	UID    string
	Tenant string
	// Cgroup is the pod's cgroup relative to the agent's cgroup root,
	// e.g. "kubepods/burstable/pod<uid>".
	Cgroup string
	// Weight is the pod's part of the node-level weight of all the
	// tenants' pods (any common scale; > 0). The cgroup backend gives
	// those pods together what kubelet gave them, split by these parts,
	// and realises it through kubelet's QoS hierarchy
	// (fairness.Flatten).
	Weight float64
	// Limit is the most of the node the pod can use (0..1; 1 when not yet
	// measured):
	// what stock Kubernetes would leave of its share to others, which the
	// pods of no tenant keep (fairness.StockShares).
	Limit        float64
	ThreadPolicy fairness.ThreadPolicy
	// Slice is the scheduler slice of the tenant's latency class for every
	// thread of the pod (the slices backend); 0 leaves the kernel's.
	// Threads are then all the pod's threads, idle ones too, when they were
	// read this period (not when the pod did not run).
	Slice     time.Duration
	Threads   []int
	Processes []Process
}

// Plan is everything a backend must make true this period.
type Plan struct {
	Pods []Pod
	// Others are the node's pod cgroups that belong to no tenant: they
	// share the QoS hierarchy with Pods and keep their stock share.
	Others []string
	// Rescale lets the cgroup backend multiply the weights of a QoS
	// cgroup's pods by one factor for resolution. It is false where kubelet
	// reports each pod cgroup's weight as that pod's CPU request
	// (status.resources; the scheduler then counts the larger of it and the
	// spec), so that kubefair's weights never look like more requested CPU
	// than the pods' own requests add up to.
	Rescale bool
	// Window is the period just measured, Period the agent's period: a
	// backend's closed loop learns from at least one.
	Window, Period time.Duration
}

// Cgroups are every pod cgroup of the node: the tenants' and the others.
func (p Plan) Cgroups() iter.Seq[string] {
	return func(yield func(string) bool) {
		for _, pod := range p.Pods {
			if !yield(pod.Cgroup) {
				return
			}
		}
		for _, cg := range p.Others {
			if !yield(cg) {
				return
			}
		}
	}
}

// Result tells the loop what a backend did, for metrics and the report.
type Result struct {
	// Writes counts values written because they differed from the plan.
	Writes int
	// Drift counts values found changed by someone else since our last write.
	Drift int
	// Vanished counts pods, processes or threads that disappeared mid-apply;
	// they are not errors.
	Vanished int
	// NiceRoundingErrorPoints is the largest error between a pod's
	// processes' shares, in percentage points, that rounding thread weights
	// to nice levels causes (the nice backend; the report's field of the
	// same name).
	NiceRoundingErrorPoints float64
	// Clamped are the planned pods' cgroups whose weight the native range
	// cut (cpu.shares 2–262144, cpu.weight 1–10000): their tenants'
	// weights are not realised exactly there.
	Clamped []string
	// RepairedBurstable: the backend undid kubelet's start-up weight of the
	// Burstable QoS cgroup (the cgroup backend).
	RepairedBurstable bool
	// Sliced counts, by tenant, the threads holding their latency class's
	// slice; SlicesRefused the threads whose slice the kernel refused
	// (the slices backend).
	Sliced        map[string]int
	SlicesRefused int
}

// Add counts another backend's result into r.
func (r *Result) Add(o Result) {
	r.Writes += o.Writes
	r.Drift += o.Drift
	r.Vanished += o.Vanished
	r.NiceRoundingErrorPoints = max(r.NiceRoundingErrorPoints, o.NiceRoundingErrorPoints)
	r.Clamped = append(r.Clamped, o.Clamped...)
	r.RepairedBurstable = r.RepairedBurstable || o.RepairedBurstable
	for t, n := range o.Sliced {
		if r.Sliced == nil {
			r.Sliced = map[string]int{}
		}
		r.Sliced[t] += n
	}
	r.SlicesRefused += o.SlicesRefused
}

// Backend applies one level of a Plan.
type Backend interface {
	// Name is what the NodeShareReport shows: "cgroup", "syscall" or "nice".
	Name() string
	// KernelABI is the version of kubefair's kernel ABI the backend uses,
	// 0 when it uses none.
	KernelABI() int
	// Apply makes the plan true, writing only what differs. It must survive
	// pods, processes and threads vanishing while it runs.
	Apply(plan Plan) (Result, error)
	// Restore puts back the values that were there before kubefair touched
	// these pods (kubelet's shares, default thread weights).
	Restore(pods []Pod) error
	// RestoreAll puts back every value the backend changed and still
	// holds (when the agent stops: an uninstall or an update).
	RestoreAll() error
}
