package agent

import (
	"errors"
	"fmt"
	"time"

	"github.com/go-logr/logr"

	kubefairv1 "github.com/kubefair/kubefair/api/v1alpha1"

	"github.com/kubefair/kubefair/node-agent/cgroupfs"
	"github.com/kubefair/kubefair/node-agent/discovery"
	"github.com/kubefair/kubefair/node-agent/enforce"
	"github.com/kubefair/kubefair/node-agent/enforce/cgroup"
	"github.com/kubefair/kubefair/node-agent/enforce/slices"
	"github.com/kubefair/kubefair/node-agent/enforce/threads"
)

// node is what the agent reads and writes on its node: kubelet's cgroup
// tree, the enforcement backends from coarse to fine (pod cgroups first,
// then threads), and where containers are discovered.
type node struct {
	hier     *cgroupfs.Hierarchy
	backends []enforce.Backend
	// source discovers containers (containerd); nil walks the cgroup tree.
	source   discovery.Source
	procRoot string
	threads  threads.Kind // "" when no thread backend runs
	// slices gives the latency classes' threads their slices, with
	// classSlice; nil when the classes are off (slicesOff says why).
	slices     *slices.Backend
	classSlice map[kubefairv1.LatencyClass]time.Duration
	slicesOff  error
}

// openNode finds kubelet's cgroup tree as the config describes it and
// opens the backends --backend asks for, with what a previous run left
// in the state directory. Discovery is connected by the agent (discover):
// a one-shot restore needs none.
func openNode(cfg Config, log logr.Logger) (*node, error) {
	hier, err := cgroupfs.Detect(cfg.CgroupRoot)
	if err != nil {
		return nil, err
	}
	driver, err := cgroupfs.ParseDriver(cfg.CgroupDriver)
	if err != nil {
		return nil, err
	}
	if hier, err = hier.ForKubelet(driver, cfg.KubeletCgroupRoot); err != nil {
		return nil, err
	}
	cgroups, err := cgroup.NewBackend(hier, cfg.StateDir)
	if err != nil {
		return nil, err
	}
	n := &node{hier: hier, backends: []enforce.Backend{cgroups}, procRoot: cfg.ProcRoot}
	cgroups.SetOwn(n.ownPod(cfg.PodUID, log))
	th, err := chooseThreads(cfg.Backend, cfg.ProcRoot, cfg.CPUs, log)
	if err != nil {
		return nil, err
	}
	if th != nil {
		n.backends = append(n.backends, th)
		n.threads = threads.Kind(th.Name())
	}
	n.openSlices(cfg, log)
	return n, nil
}

// errClassesOff: the agent runs with --latency-classes=false.
var errClassesOff = errors.New("the agent runs with --latency-classes=false (the chart's agent.latencyClasses.enabled)")

// openSlices adds the slices backend, last (it weighs nothing), when the
// config gives the classes slices and the kernel has custom slices.
func (n *node) openSlices(cfg Config, log logr.Logger) {
	n.classSlice = cfg.Slices
	if !cfg.LatencyClasses {
		n.slicesOff = errClassesOff
		return
	}
	b, err := slices.New(cfg.ProcRoot)
	if err != nil {
		n.slicesOff = err
		log.Info("latency classes off: every thread keeps the kernel's slice", "reason", err.Error())
		return
	}
	n.slices = b
	n.backends = append(n.backends, b)
}

// sliceOf is the slice of a latency class on this node, 0 for none (or
// when the classes are off).
func (n *node) sliceOf(c kubefairv1.LatencyClass) time.Duration {
	if n.slices == nil {
		return 0
	}
	return n.classSlice[c]
}

// ownPod is the agent's own pod cgroup, found by its UID ("": unknown).
func (n *node) ownPod(podUID string, log logr.Logger) string {
	if podUID == "" {
		return ""
	}
	pods, err := n.hier.Pods()
	if err != nil {
		return "" // no kubelet layout (yet): nothing of kubefair's to restore either
	}
	for _, p := range pods {
		if p.UID == podUID {
			return p.Path
		}
	}
	log.Info("the agent's own pod cgroup is not in kubelet's tree: a restore leaves it for last only once found", "pod", podUID)
	return ""
}

// discover connects the node to containerd, where the config names it.
func (n *node) discover(cfg Config) error {
	if cfg.ContainerdAddress == "" {
		return nil
	}
	ns := cfg.ContainerdNamespace
	if ns == "" {
		ns = "k8s.io"
	}
	var err error
	n.source, err = discovery.NewContainerd(cfg.ContainerdAddress, ns, n.hier)
	return err
}

// chooseThreads picks the thread-level backend for --backend; nil means
// pod cgroup weights only.
func chooseThreads(backend, procRoot string, cpus int, log logr.Logger) (*threads.Backend, error) {
	switch backend {
	case "cgroup":
		return nil, nil
	case "auto", "":
		b, err := threads.New(procRoot, cpus)
		if err != nil { // no patched kernel, or a seccomp profile that refuses the calls
			log.Info("thread weights off: pod cgroup weights only", "reason", err.Error())
			return nil, nil
		}
		return b, nil
	case "syscall":
		b, err := threads.New(procRoot, cpus)
		if err != nil {
			return nil, fmt.Errorf("--backend syscall: %w; run the patched kernel or use --backend nice or cgroup", err)
		}
		return b, nil
	case "nice":
		return threads.NewNice(procRoot, cpus), nil
	}
	return nil, fmt.Errorf("--backend %q: want auto, cgroup, syscall or nice", backend)
}

// Restore puts kubelet's weights back on every pod a previous agent
// changed, from the state directory (`kubefair-agent --restore`), and
// returns how many pod cgroups it restored. A fresh process does not know
// which threads an earlier one weighed or sliced, so every thread of those
// pods gets its default weight and slice back — before the cgroups, whose
// list is forgotten once restored.
func Restore(cfg Config, log logr.Logger) (int, error) {
	n, err := openNode(cfg, log)
	if err != nil {
		return 0, err
	}
	cgroups := n.backends[0].(*cgroup.Backend)
	pods := cgroups.Managed()
	var errs []error
	var pids []int
	if n.threads != "" || n.slices != nil {
		for _, p := range pods {
			procs, _ := n.hier.Procs(p.Cgroup)
			pids = append(pids, procs...)
		}
	}
	if n.threads != "" {
		errs = append(errs, threads.ResetProcesses(n.procRoot, n.threads, pids))
	}
	if n.slices != nil {
		errs = append(errs, slices.ResetThreads(n.procRoot, pids))
	}
	errs = append(errs, cgroups.Restore(pods))
	return len(pods), errors.Join(errs...)
}

// apply hands the plan to every backend, coarse to fine; restore first
// gives the pods that left their tenant their defaults back.
func (n *node) apply(plan enforce.Plan, leaving []enforce.Pod) (enforce.Result, error) {
	var res enforce.Result
	var errs []error
	if len(leaving) > 0 {
		for _, b := range n.backends {
			errs = append(errs, b.Restore(leaving))
		}
	}
	for _, b := range n.backends {
		r, err := b.Apply(plan)
		res.Add(r)
		errs = append(errs, err)
	}
	return res, errors.Join(errs...)
}

// restoreAll puts back every value every backend changed.
func (n *node) restoreAll() error {
	var errs []error
	for _, b := range n.backends {
		errs = append(errs, b.RestoreAll())
	}
	return errors.Join(errs...)
}

// finest is the backend that weighs the finest level: what the node's
// report names (the slices backend, last when it runs, weighs nothing).
func (n *node) finest() enforce.Backend {
	if n.slices != nil {
		return n.backends[len(n.backends)-2]
	}
	return n.backends[len(n.backends)-1]
}
