// Package agent is the node agent's loop: each period it finds the pods on
// this node, classifies them into tenants, measures what each tenant used
// and waited, computes entitlements with the fairness model, corrects them
// in a closed loop, hands a plan to the enforcement backends, and now and
// then writes this node's NodeShareReport.
package agent

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"math"
	"path"
	"slices"
	"sort"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kubefairv1 "github.com/kubefair/kubefair/api/v1alpha1"
	"github.com/kubefair/kubefair/node-agent/cgroupfs"
	"github.com/kubefair/kubefair/node-agent/enforce"
	"github.com/kubefair/kubefair/node-agent/fairness"
)

// Config is what the agent's flags set.
type Config struct {
	NodeName string
	// PodUID is the agent's own pod ("": not known), whose weight a
	// restore puts back last (cgroup.Backend.RestoreAll).
	PodUID       string
	Period       time.Duration
	ReportPeriod time.Duration
	// CgroupRoot is where the host's cgroup filesystem is mounted;
	// KubeletCgroupRoot and CgroupDriver are kubelet's cgroupRoot and
	// cgroupDriver ("auto": whichever layout the node has).
	CgroupRoot, KubeletCgroupRoot, CgroupDriver string
	// ProcRoot is where the host's /proc is.
	ProcRoot string
	// Backend chooses the thread-level enforcement beside the pod cgroup
	// weights: auto, cgroup (none), syscall or nice.
	Backend string
	// ContainerdAddress is containerd's socket, to discover containers
	// ("" walks the cgroup tree), in ContainerdNamespace ("k8s.io").
	ContainerdAddress, ContainerdNamespace string
	// CPUs of the node that the pods share.
	CPUs       int
	Correction fairness.Correction
	// StateDir keeps kubelet's original weights and what the closed loops
	// learnt across restarts; "" keeps them in memory only.
	StateDir string
	// Slices are the scheduler slices of the latency classes (0 or none:
	// the kernel's), given when LatencyClasses is set.
	Slices         map[kubefairv1.LatencyClass]time.Duration
	LatencyClasses bool
	// RequestElevation counts the requests that reach the pods of tenants
	// asking for request-based elevation (eBPF) and elevates the receiving
	// workloads inside their tenants.
	RequestElevation bool
}

// Agent runs the loop. Create it with New.
type Agent struct {
	cfg       Config
	log       logr.Logger
	node      *node
	reader    client.Reader
	writer    client.Client
	bootID    string
	metrics   *Metrics
	lastStep  time.Time
	found     podsFound
	latency   latencyState
	elevation elevation
	// weightsAreRequests: kubelet reports pod cgroup weights as the pods'
	// CPU requests, so the plan may not scale them (enforce.Plan.Rescale).
	weightsAreRequests bool

	pods map[string]*podState // by pod cgroup
	// loops are the closed loops' state: over the tenants, and over each
	// tenant's workloads.
	loops fairness.Loops
	// nodeUsage is the node's CPU counter at the last step (0: unknown).
	nodeUsage  uint64
	nodeReadAt time.Time
	billed     billingCounters // what the reports bill: cumulative counters since this boot
	window     map[string]*tenantWindow
	windowFrom time.Time
	lastReport time.Time
	writing    *reportWrite // the report being written, if any
	drift      int64

	kick     chan struct{}
	procs    procReader
	sweepAge int // periods, for procs.sweep
	// owner (thread → process), active (process → threads that ran or
	// waited) and spent (process → those threads' times, for a thread
	// backend) are measure's scratch, cleared for each pod: a thousand
	// threads a period need not be a thousand map entries to collect.
	owner  map[int]int
	active map[int][]int
	spent  map[int]processTimes
	// The pod cgroups last discovered, discovered again when a pod on the
	// node has none known, when a pod cgroup vanishes, and every
	// discoveryRefreshPeriods periods.
	discovered map[string]*podRef
	relist     bool
	sinceList  int

	// Last is the most recent period's outcome (tests and metrics read it).
	Last Step
}

// podState is what the agent remembers about one pod cgroup between periods.
type podState struct {
	uid, cgroup string
	member      membership
	usage       uint64    // cpuacct counter at the last period
	readAt      time.Time // when usage was read
	threads     map[int]threadTimes
	spare       map[int]threadTimes // the map before threads, filled again next period
	processes   []enforce.Process   // with their active threads, last period
	// allThreads are every thread of the pod, idle ones too, read this
	// period for a latency class's slice (none otherwise).
	allThreads []int
	seen       bool // has a previous measurement
	// The pod's figures in the last step, for its workload's closed loop;
	// limit is the most of the node it would have used (1 before it was
	// measured).
	cpu        time.Duration
	backlogged bool
	limit      float64
	// cpuLimit is the CPUs the pod's CPU limits (CFS quota) let it use, 0
	// for none; read with its process list.
	cpuLimit float64
	// fromStart: the pod started after this run of the agent began
	// counting, so its first read counts all its CPU (none of it was billed
	// before).
	fromStart bool
	// stall is the pod's cpu.pressure total at the last period (stallSeen:
	// the kernel has one).
	stall     uint64
	stallSeen bool
	// pids are the containers' processes, read again with the threads
	// once procsRefreshPeriods busy periods old (pidsAge counts them).
	pids    []int
	pidsAge int
	// The threads' figures at their last read (see threadsRefreshPeriods):
	// when, the pod's CPU that period, its threads that ran or waited,
	// their wait per second (schedstat), and how many busy periods ago;
	// threadsCurrent: nothing ran since.
	threadsReadAt  time.Time
	threadsCPU     time.Duration
	running        int
	waitRate       float64
	threadsAge     int
	threadsCurrent bool
	// exclusive is the CPUs the pod's containers hold alone (kubelet's
	// static CPU manager; exclusive.go), read again every
	// discoveryRefreshPeriods periods (cpusAge counts them); weighed: the
	// pod was in the last plan.
	exclusive int
	cpusAge   int
	weighed   bool
}

// discoveryRefreshPeriods is how many periods a discovery is kept when
// nothing says it changed: containerd's list carries every container's
// full OCI spec (decoding it each second was a fifth of the agent's CPU
// time at 100 pods), and the tree walk reads a directory per pod.
const discoveryRefreshPeriods = 10

// procsRefreshPeriods is how many busy periods a pod's process list is
// kept before its containers' cgroup.procs are read again (with the
// pod's threads, its only reader, and its CPU limit), when the agent sets
// pod weights only. A container's processes seldom change, and
// cgroup.procs is the dearest file the agent reads (the kernel builds and
// sorts a pid list for it, reached by a path walk each time). A new
// process's threads are therefore counted from the pod's first thread read
// after this many periods (its CPU time counts at once through the pod's
// cgroup). With a thread backend the list is read every period: a thread
// weight must never land on a process that took over a recycled pid.
const procsRefreshPeriods = 10

// threadsRefreshPeriods is how many busy periods a pod's thread figures
// (which threads ran or waited, and their waits) may be kept while its CPU
// holds steady, when the agent sets pod weights only. Reading each
// thread's schedstat every period was most of the agent's CPU time (about
// 9 µs a thread, 0.9 % of a CPU at 100 pods); a pod whose CPU moves by
// more than an eighth (or 1 % of a CPU) has its threads read at once, so
// the closed loop sees a change of demand in the period it happens. With
// the process lists read alongside, this refresh is most of what a busy,
// steady pod costs the agent (docs/agent.md, the benchmark): hence ten
// periods, not fewer.
const threadsRefreshPeriods = 10

// tenantWindow accumulates a tenant's figures between two reports.
type tenantWindow struct {
	cpu, wait         int64
	entitledTime      float64 // Σ entitled × period seconds
	backlogged        bool
	runnable, podsNow int32
	sliced            int32 // threads with the class's slice, last step
	latencyOff        bool  // its class not applied, last step
	elevated          int32 // workloads elevated for requests, last step
	elevationOff      bool  // its request-based elevation not applied, last step
	// limit is the tenant's CPU-limit share when its limits kept it below
	// its entitlement in the window's last step, else 0.
	limit float64
	// weightRange, bounded: some step of the window hit a bound
	// (TenantStep).
	weightRange, bounded bool
	// exclusive is the tenant's exclusive CPUs in the window's last step.
	exclusive int32
}

// TenantStep is one tenant's figures for one period.
type TenantStep struct {
	Name               string
	Weight             int32
	Pods, Threads      int
	CPU, Wait          time.Duration
	Entitled, Achieved float64
	Backlogged         bool
	Multiplier         float64
	// Limit is the most of the node its pods' CPU limits let the tenant
	// use (0: some pod has none); Limited is set when that is below what
	// its weight would entitle it to, the rest going to the others.
	Limit   float64
	Limited bool
	// Bounded: the closed loop's range (fairness.Correction) cut its
	// correction while it was still off its entitlement; WeightRange:
	// some of its pods' weights were clamped to the cgroup weight range.
	Bounded, WeightRange bool
	// ExclusiveCPUs are the CPUs kubelet's static CPU manager gives the
	// tenant's pods alone: those pods are outside the allocation and the
	// figures above (their CPU time is billed).
	ExclusiveCPUs int
	// Latency is the tenant's latency class; SlicedThreads its threads
	// holding the class's slice after the step; LatencyOff is set when the
	// node does not apply a class with a slice (the report's LatencyClasses
	// condition says why).
	Latency       kubefairv1.LatencyClass
	SlicedThreads int
	LatencyOff    bool
	// Elevate: the tenant asks for request-based elevation;
	// ElevatedWorkloads are its workloads elevated in the step;
	// ElevationOff is set when the node does not apply it (the report's
	// RequestElevation condition says why).
	Elevate           bool
	ElevatedWorkloads int
	ElevationOff      bool
}

// Step is one period's outcome.
type Step struct {
	Time    time.Time
	Window  time.Duration
	Tenants []TenantStep
	Plan    enforce.Plan
	Result  enforce.Result
	// PodCgroupsFound tells whether the node's running pods' cgroups were
	// found; UnmeasuredPods counts the running pods without one (of
	// RunningPods), Unmeasured those of each tenant.
	PodCgroupsFound metav1.Condition
	Unmeasured      map[string]int32
	UnmeasuredPods  int
	RunningPods     int
}

// Options are the agent's collaborators.
type Options struct {
	// Reader serves Tenants and this node's Pods (an informer cache, so the
	// last known state survives an unreachable API server).
	Reader client.Reader
	// Writer writes this node's NodeShareReport.
	Writer  client.Client
	Metrics *Metrics
	Log     logr.Logger
}

// New makes an agent on this node as the config describes it (kubelet's
// cgroup tree, the backends, discovery) with a fresh boot id: cumulative
// counters start at zero for every run of the agent, and the controller
// knows it by the id. The agent's main, the embedded demo and the
// integration suite all make it here.
func New(cfg Config, o Options) (*Agent, error) {
	if cfg.NodeName == "" {
		return nil, errors.New("agent: a node name is required (--node-name or $NODE_NAME)")
	}
	if cfg.CPUs < 1 || cfg.Period <= 0 || cfg.ReportPeriod <= 0 {
		return nil, fmt.Errorf("agent: bad config %+v", cfg)
	}
	if cfg.Correction == (fairness.Correction{}) {
		cfg.Correction = fairness.DefaultCorrection
	}
	n, err := openNode(cfg, o.Log)
	if err == nil {
		err = n.discover(cfg)
	}
	if err != nil {
		return nil, err
	}
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	a := &Agent{
		cfg: cfg, log: o.Log, node: n,
		reader: o.Reader, writer: o.Writer, metrics: o.Metrics, bootID: hex.EncodeToString(b),
		kick: make(chan struct{}, 1), procs: procReader{root: cfg.ProcRoot}, owner: map[int]int{}, active: map[int][]int{}, spent: map[int]processTimes{}, relist: true, pods: map[string]*podState{}, billed: newBillingCounters(), window: map[string]*tenantWindow{},
	}
	a.elevation = openElevation(cfg, o.Log)
	a.loadLoops()
	return a, nil
}

// BootID identifies this run of the agent in its reports.
func (a *Agent) BootID() string { return a.bootID }

// Run steps every period until ctx ends, and at once when a Tenant or a
// Pod changes (Kick), so a new weight or pod does not wait for the next
// tick. A failing period is logged and the next one tries again: the last
// weights stay in the kernel meanwhile.
func (a *Agent) Run(ctx context.Context) error {
	t := time.NewTicker(a.cfg.Period)
	defer t.Stop()
	defer a.elevation.close()
	for {
		started := time.Now()
		if _, err := a.Step(ctx, started); err != nil && ctx.Err() == nil {
			a.log.Error(err, "period failed; keeping the last weights")
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		case <-a.kick:
			// Let a burst of changes land; a storm of them (pod labels
			// rewritten in a loop by whoever may edit pods) gets no more
			// than KicksPerPeriod steps a period, not a busy loop.
			wait := max(20*time.Millisecond, time.Until(started.Add(a.cfg.Period/KicksPerPeriod)))
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(wait):
			}
		}
	}
}

// KicksPerPeriod bounds the steps that changes in the API trigger between
// two periodic ones.
const KicksPerPeriod = 5

// enforcementChanged is true when an update changes what the agent
// enforces: a tenant's weight, namespaces, workloads, thread policy or
// latency class, or a
// pod's labels or node. The controller rewrites tenants' measured shares
// every report; those must not trigger steps.
func enforcementChanged(old, new any) bool {
	switch o := old.(type) {
	case *kubefairv1.Tenant:
		n, ok := new.(*kubefairv1.Tenant)
		return !ok || o.Status.EffectiveWeight != n.Status.EffectiveWeight ||
			!equality.Semantic.DeepEqual(o.Status.Namespaces, n.Status.Namespaces) ||
			!equality.Semantic.DeepEqual(o.Spec.Workloads, n.Spec.Workloads) || o.Spec.ThreadPolicy != n.Spec.ThreadPolicy ||
			o.Status.LatencyClass != n.Status.LatencyClass || o.Spec.RequestElevation != n.Spec.RequestElevation
	case *corev1.Pod:
		n, ok := new.(*corev1.Pod)
		return !ok || !equality.Semantic.DeepEqual(o.Labels, n.Labels) || o.Spec.NodeName != n.Spec.NodeName
	}
	return true
}

// Kick asks for a step now; kicks while one is pending coalesce.
func (a *Agent) Kick() {
	select {
	case a.kick <- struct{}{}:
	default:
	}
}

// KickOnChanges makes changes to Tenants and this node's Pods in the
// cache trigger a step.
func (a *Agent) KickOnChanges(ctx context.Context, c cache.Cache) error {
	for _, obj := range []client.Object{&kubefairv1.Tenant{}, &corev1.Pod{}} {
		inf, err := c.GetInformer(ctx, obj)
		if err != nil {
			return err
		}
		kick := func(any) { a.Kick() }
		if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
			AddFunc: kick, DeleteFunc: kick,
			UpdateFunc: func(old, new any) {
				if enforcementChanged(old, new) {
					a.Kick()
				}
			},
		}); err != nil {
			return err
		}
	}
	return nil
}

// podRef is one pod cgroup on the node and its containers' cgroups.
type podRef struct {
	uid        string
	containers []string
}

// podCgroups lists the pod cgroups on the node with their containers,
// from the last discovery: it runs again when a pod on the node has none
// known, when a pod cgroup vanishes, and every discoveryRefreshPeriods
// periods (listing every pod's containers each second was most of the
// agent's directory reads).
func (a *Agent) podCgroups(ctx context.Context) (map[string]*podRef, error) {
	if !a.relist && a.sinceList < discoveryRefreshPeriods {
		a.sinceList++
		return a.discovered, nil
	}
	out, complete, err := a.discover(ctx)
	if err != nil {
		return nil, err
	}
	a.discovered, a.relist, a.sinceList = out, !complete, 1
	return out, nil
}

// discover lists the pod cgroups: from containerd when there is a source
// (a container's cgroup's parent is its pod's), else from the cgroup tree.
// It is not complete when containerd was away (the tree stood in) or the
// tree has no kubepods yet: the next period looks again.
func (a *Agent) discover(ctx context.Context) (map[string]*podRef, bool, error) {
	out := map[string]*podRef{} // by pod cgroup
	if a.node.source != nil {
		containers, err := a.node.source.Containers(ctx)
		if err == nil {
			for _, c := range containers {
				if c.PodUID == "" || c.Cgroup == "" {
					continue
				}
				pod := path.Dir(c.Cgroup)
				if out[pod] == nil {
					out[pod] = &podRef{uid: c.PodUID}
				}
				out[pod].containers = append(out[pod].containers, c.Cgroup)
			}
			return out, true, nil
		}
		a.log.V(1).Info("container runtime unavailable, walking the cgroup tree", "error", err.Error())
	}
	pods, err := a.node.hier.Pods()
	var notFound *cgroupfs.LayoutNotFoundError
	if errors.As(err, &notFound) {
		return out, false, nil // none to enforce; the PodCgroupsFound condition says why
	}
	if err != nil {
		return nil, false, err
	}
	for _, p := range pods {
		ref := &podRef{uid: p.UID, containers: []string{p.Path}} // kubelet leaves the pod's own cgroup empty; read it anyway
		for _, c := range p.Containers {
			ref.containers = append(ref.containers, p.Path+"/"+c)
		}
		out[p.Path] = ref
	}
	return out, a.node.source == nil, nil
}

// Step runs one period: snapshot → allocate → apply → account
// (docs/design.md §The agent loop).
func (a *Agent) Step(ctx context.Context, now time.Time) (Step, error) {
	start := time.Now()
	snap, err := a.snapshot(ctx, now)
	if err != nil {
		return Step{}, err
	}
	a.elevation.elevate(snap)
	alloc := fairness.Allocate(snap.model, a.cfg.Correction, &a.loops)
	plan := a.plan(snap, alloc)
	res, err := a.apply(snap, plan)
	step := Step{Time: now, Window: snap.model.Window, Plan: plan, Result: res,
		PodCgroupsFound: snap.found, Unmeasured: a.found.unmeasured, UnmeasuredPods: a.found.count, RunningPods: a.found.total}
	for _, t := range snap.tenants {
		t.step.SlicedThreads = res.Sliced[t.step.Name]
		if x := snap.exclusive[t.step.Name]; x != nil {
			t.step.ExclusiveCPUs = x.ExclusiveCPUs
			delete(snap.exclusive, t.step.Name)
		}
		step.Tenants = append(step.Tenants, t.step)
	}
	for _, name := range slices.Sorted(maps.Keys(snap.exclusive)) { // tenants with exclusive pods only
		step.Tenants = append(step.Tenants, *snap.exclusive[name])
	}
	a.latency.update(a.node, &step, now)
	a.elevation.update(&step, now)
	return step, errors.Join(err, a.account(ctx, step, time.Since(start)))
}

// snapshot is what one period finds on the node: every pod cgroup, the
// tenants' pods classified and measured, the model's input.
type snapshot struct {
	model   fairness.Snapshot
	tenants []*tenantPods // in model.Tenants' order
	cgroups map[string]*podRef
	// leaving are the pods kubefair weighed that left their tenant (or
	// the shared pool).
	leaving []enforce.Pod
	found   metav1.Condition
	// exclusive are the tenants whose pods hold exclusive CPUs, with how
	// many.
	exclusive map[string]*TenantStep
}

// tenantPods is one tenant's pods on the node, by workload in the model's
// order, and its figures for the step.
type tenantPods struct {
	step      TenantStep
	pods      []*podState
	workloads [][]*podState
}

// snapshot lists the node's pod cgroups, Pods and Tenants, classifies and
// measures every tenant's pod, and reads the CPU left to the tenants.
func (a *Agent) snapshot(ctx context.Context, now time.Time) (*snapshot, error) {
	dt := now.Sub(a.lastStep)
	if a.lastStep.IsZero() || dt <= 0 {
		dt = a.cfg.Period
	}
	a.lastStep = now

	cgroups, err := a.podCgroups(ctx)
	if err != nil {
		return nil, fmt.Errorf("discovering pods: %w", err)
	}
	byUID, tenants, found, err := a.listNode(ctx, cgroups, now)
	if err != nil {
		return nil, err
	}

	// Classify and measure every pod cgroup that belongs to a tenant.
	snap := &snapshot{cgroups: cgroups, found: found, exclusive: map[string]*TenantStep{}}
	acc := map[string]*tenantPods{}
	current := map[string]bool{}
	pool := sharedPool{hier: a.node.hier, cgroups: cgroups, pods: byUID}
	for cg, ref := range cgroups {
		uid := ref.uid
		pod := byUID[uid]
		var member membership
		ok := pod != nil
		if ok {
			member, ok = classify(pod, tenants)
		}
		if !ok {
			if _, was := a.pods[cg]; was {
				snap.leaving = append(snap.leaving, enforce.Pod{Cgroup: cg, UID: uid})
			}
			continue
		}
		current[cg] = true
		ps := a.pods[cg]
		if ps == nil {
			ps = &podState{uid: uid, cgroup: cg, fromStart: a.billed.newPod(pod)}
			a.pods[cg] = ps
		}
		ps.member = member
		if pool.exclusive(ps, pod, ref.containers) > 0 {
			// Outside the allocation, billed (measure) all the same.
			if ps.weighed {
				snap.leaving = append(snap.leaving, enforce.Pod{Cgroup: cg, UID: uid, Processes: ps.processes})
			}
			ps.weighed = false
			x := snap.exclusive[member.tenant]
			if x == nil {
				x = &TenantStep{Name: member.tenant, Weight: member.weight}
				snap.exclusive[member.tenant] = x
			}
			x.ExclusiveCPUs += ps.exclusive
			a.measure(ps, ref.containers, &TenantStep{}, dt)
			continue
		}
		ps.weighed = true
		tp := acc[member.tenant]
		if tp == nil {
			tp = &tenantPods{step: TenantStep{Name: member.tenant, Weight: member.weight, Latency: member.latency, Elevate: member.elevate}}
			acc[member.tenant] = tp
		}
		tp.pods = append(tp.pods, ps)
		tp.step.Pods++
		a.measure(ps, ref.containers, &tp.step, dt)
	}
	for cg, ps := range a.pods {
		if !current[cg] {
			if _, stillThere := cgroups[cg]; !stillThere {
				delete(a.pods, cg) // the pod is gone: nothing to restore
				a.billed.podGone(ps.uid)
				continue
			}
			snap.leaving = append(snap.leaving, enforce.Pod{Cgroup: cg, UID: ps.uid, Processes: ps.processes})
			delete(a.pods, cg)
		}
	}

	// The model's input: each tenant's demand, limit and workloads, and
	// the CPU time left to the tenants.
	names := slices.Sorted(maps.Keys(acc))
	snap.model = fairness.Snapshot{CPUs: a.cfg.CPUs, Window: dt, Period: a.cfg.Period, Tenants: make([]fairness.TenantSnapshot, len(names))}
	capacity := float64(a.cfg.CPUs) * dt.Seconds()
	var tenantsCPU time.Duration
	for i, n := range names {
		tp := acc[n]
		s := &tp.step
		demand := (s.CPU + s.Wait).Seconds() / capacity
		if s.Threads == 0 && s.CPU == 0 { // no history yet: assume it wants everything
			demand, s.Threads = 1, max(1, s.Pods)
		}
		s.Limit = cpuLimitShare(tp.pods, a.cfg.CPUs)
		s.Achieved = s.CPU.Seconds() / capacity
		s.Backlogged = fairness.Backlogged(s.Wait, dt)
		tenantsCPU += s.CPU
		snap.model.Tenants[i] = fairness.TenantSnapshot{Name: n, Weight: float64(s.Weight), Threads: s.Threads, Demand: demand,
			Limit: s.Limit, CPU: s.CPU, Backlogged: s.Backlogged, Declared: tp.pods[0].member.declared}
		snap.model.Tenants[i].Workloads, tp.workloads = byWorkload(tp.pods)
		snap.tenants = append(snap.tenants, tp)
	}
	snap.model.Left = a.leftToTenants(tenantsCPU, dt)
	a.billed.countNode(a.node.hier)
	return snap, nil
}

// listNode reads this node's Pods and the Tenants from the cache, starts
// the billing period's tenants, notes whether kubelet publishes pod
// weights as requests, and checks that every running pod has a cgroup.
// Tenants being deleted are left out.
func (a *Agent) listNode(ctx context.Context, cgroups map[string]*podRef, now time.Time) (map[string]*corev1.Pod, []kubefairv1.Tenant, metav1.Condition, error) {
	// The cache's own objects, not copies (a copy of every pod a period is
	// most of what a period allocates): read here, never changed.
	var podList corev1.PodList
	if err := a.reader.List(ctx, &podList, client.UnsafeDisableDeepCopy); err != nil {
		return nil, nil, metav1.Condition{}, fmt.Errorf("listing pods: %w", err)
	}
	var tenants kubefairv1.TenantList
	if err := a.reader.List(ctx, &tenants, client.UnsafeDisableDeepCopy); err != nil {
		return nil, nil, metav1.Condition{}, fmt.Errorf("listing tenants: %w", err)
	}
	// A tenant being deleted is no longer enforced nor billed: its pods go
	// back to kubelet's weights, and its counter is final.
	a.billed.begin(now, tenants.Items)
	tenants.Items = slices.DeleteFunc(tenants.Items, func(t kubefairv1.Tenant) bool { return t.DeletionTimestamp != nil })
	byUID := make(map[string]*corev1.Pod, len(podList.Items))
	discovered := make(map[string]bool, len(cgroups))
	for _, ref := range cgroups {
		discovered[ref.uid] = true
	}
	running := map[string]*corev1.Pod{}
	// kubelet ≥ 1.36 (InPlacePodLevelResourcesVerticalScaling) reports a
	// running pod's cgroup weight back as its CPU request in
	// status.resources, and the scheduler counts the larger of that and the
	// spec: then the weights must not be scaled up for resolution.
	weightsAreRequests := false
	for i := range podList.Items {
		p := &podList.Items[i]
		if p.Spec.NodeName != a.cfg.NodeName {
			continue
		}
		byUID[string(p.UID)] = p
		if !discovered[string(p.UID)] && p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed {
			a.relist = true // a pod whose containers are not (yet) known: discover again
		}
		if p.Status.Phase == corev1.PodRunning {
			running[string(p.UID)] = p
			if p.Status.Resources != nil && !p.Status.Resources.Requests.Cpu().IsZero() {
				weightsAreRequests = true
			}
		}
	}
	if weightsAreRequests != a.weightsAreRequests || a.Last.Time.IsZero() {
		if weightsAreRequests {
			a.log.Info("kubelet reports pod cgroup weights as the pods' CPU requests (status.resources): weights are not scaled up for resolution")
		} else {
			a.log.Info("kubelet does not report pod cgroup weights as requests: weights may be scaled up for resolution")
		}
		a.weightsAreRequests = weightsAreRequests
	}
	found, news := a.found.update(a.node.hier, running, discovered, func(p *corev1.Pod) (string, bool) {
		m, ok := classify(p, tenants.Items)
		return m.tenant, ok
	}, now)
	if news && found.Status == metav1.ConditionTrue {
		a.log.Info("found the pods' cgroups", "reason", found.Reason, "message", found.Message)
	} else if news {
		a.log.Error(errors.New(found.Message), "pods without a cgroup the agent can find: not enforced, not measured", "reason", found.Reason)
	}
	return byUID, tenants.Items, found, nil
}

// plan turns the allocation into what the backends make true: each
// tenant's pod at its part, the pods of no tenant named beside them.
func (a *Agent) plan(snap *snapshot, alloc fairness.Allocation) enforce.Plan {
	plan := enforce.Plan{Rescale: !a.weightsAreRequests, Window: snap.model.Window, Period: snap.model.Period}
	tenantCgroups := map[string]bool{}
	for i, tp := range snap.tenants {
		t := alloc.Tenants[i]
		s := &tp.step
		s.Entitled, s.Limited, s.Multiplier, s.Bounded = t.Entitled, t.Limited, t.Multiplier, t.Bounded
		for k, pods := range tp.workloads {
			for _, ps := range pods {
				plan.Pods = append(plan.Pods, enforce.Pod{UID: ps.uid, Tenant: s.Name, Cgroup: ps.cgroup,
					Weight: t.PodParts[k], Limit: ps.limit, ThreadPolicy: ps.member.policy, Slice: a.node.sliceOf(ps.member.latency), Threads: slices.Clone(ps.allThreads),
					Processes: append([]enforce.Process(nil), ps.processes...)})
				tenantCgroups[ps.cgroup] = true
			}
		}
	}
	sort.Slice(plan.Pods, func(i, j int) bool { return plan.Pods[i].Cgroup < plan.Pods[j].Cgroup })
	for cg := range snap.cgroups {
		if !tenantCgroups[cg] {
			plan.Others = append(plan.Others, cg)
		}
	}
	slices.Sort(plan.Others)
	return plan
}

// apply restores the pods that left their tenant and hands the plan to
// the backends; a tenant whose pods' weights the cgroup range cut is
// marked (TenantStep.WeightRange).
func (a *Agent) apply(snap *snapshot, plan enforce.Plan) (enforce.Result, error) {
	res, err := a.node.apply(plan, snap.leaving)
	if len(res.Clamped) > 0 {
		byName := make(map[string]*TenantStep, len(snap.tenants))
		for _, tp := range snap.tenants {
			byName[tp.step.Name] = &tp.step
		}
		tenantOf := make(map[string]string, len(plan.Pods))
		for _, p := range plan.Pods {
			tenantOf[p.Cgroup] = p.Tenant
		}
		for _, cg := range res.Clamped {
			byName[tenantOf[cg]].WeightRange = true
		}
	}
	if res.RepairedBurstable {
		a.log.Info("kubelet left the Burstable QoS cgroup at its start-up weight; wrote the sum of its pods' weights, as kubelet will at its next QoS update")
	}
	a.drift += int64(res.Drift)
	// A pod's threads are read at least once every threadsRefreshPeriods
	// busy periods, its CPU limit mostly as often: files read between two
	// sweeps stay open.
	if a.sweepAge++; a.sweepAge%threadsRefreshPeriods == 0 {
		a.procs.sweep()
		a.node.hier.Sweep()
	}
	return res, err
}

// account feeds the step to metrics and the report window, and writes the
// report when one is due.
func (a *Agent) account(ctx context.Context, step Step, took time.Duration) error {
	a.Last = step
	a.accumulate(step)
	if a.metrics != nil {
		a.metrics.observe(step, took)
	}
	err := a.finishReport()
	if a.writing == nil && step.Time.Sub(a.lastReport) >= a.cfg.ReportPeriod {
		a.startReport(ctx, step.Time)
	}
	return err
}

// cpuLimitShare is the most of the node pods' CPU limits let them use
// together, or 0 when one of them has no limit.
func cpuLimitShare(pods []*podState, cpus int) float64 {
	var sum float64
	for _, ps := range pods {
		if ps.cpuLimit <= 0 {
			return 0
		}
		sum += ps.cpuLimit
	}
	return min(1, sum/float64(cpus))
}

// leftToTenants is the fraction of the node's CPU time in the step that
// went to the tenants or to nobody: 1 minus what the node spent on
// everything else, from the node's own CPU counter. It is 1 when the
// counter cannot be read.
func (a *Agent) leftToTenants(tenantsCPU, dt time.Duration) float64 {
	usage, err := a.node.hier.NodeUsageNanoseconds()
	readAt := time.Now()
	prev, prevAt := a.nodeUsage, a.nodeReadAt
	a.nodeUsage, a.nodeReadAt = usage, readAt
	if err != nil || prev == 0 || usage < prev || !readAt.After(prevAt) || dt <= 0 {
		return 1
	}
	// The node's CPU rate over its own read interval, like the pods'.
	node := float64(usage-prev) / 1e9 / readAt.Sub(prevAt).Seconds()
	others := node - tenantsCPU.Seconds()/dt.Seconds() // CPUs
	return math.Min(1, math.Max(0, 1-others/float64(a.cfg.CPUs)))
}

// measure adds one pod's CPU, waiting time and active threads in the
// period to its tenant's step.
func (a *Agent) measure(ps *podState, containers []string, s *TenantStep, dt time.Duration) {
	usage, err := a.node.hier.UsageNanoseconds(ps.cgroup)
	if err != nil {
		a.relist = true // vanished: the last discovery is out of date
		return
	}
	// Shares compare tenants over the same window: a pod's CPU is its rate
	// over the interval between its own two reads, times the step's dt, so
	// a step that is itself slow (an agent short of CPU) does not skew them.
	readAt := time.Now()
	scale := 1.0
	if ps.seen {
		scale = toPeriod(dt, readAt.Sub(ps.readAt), 0.25)
	}
	ps.readAt = readAt
	if ps.seen && usage == ps.usage {
		// No thread of the pod ran: none is active, and none waited long
		// enough to matter (a runnable thread starved for a whole period
		// shows its wait when it next runs, as the counters are
		// cumulative). Skipping /proc keeps an idle node cheap.
		ps.processes, ps.allThreads = ps.processes[:0], ps.allThreads[:0]
		ps.cpu, ps.backlogged, ps.limit = 0, false, 0
		if ps.threadsCurrent {
			ps.threadsReadAt = readAt // the threads' figures still hold: nothing ran
		}
		ps.threadsAge = threadsRefreshPeriods // read them when it runs again
		return
	}
	ps.pidsAge++
	ps.cpu, ps.backlogged = 0, false
	// Waiting is the pod's CPU pressure stall time where the kernel keeps
	// it (cgroup v2 with PSI: the time some thread of the pod was runnable
	// and waiting, threads that exited meanwhile included), else the sum of
	// its threads' waits from schedstat.
	var wait time.Duration
	stall, psi, _ := a.node.hier.WaitNanoseconds(ps.cgroup)
	if psi && ps.seen && ps.stallSeen && stall >= ps.stall {
		wait = time.Duration(float64(stall-ps.stall) * scale)
	}
	ps.stall, ps.stallSeen = stall, psi
	if !ps.seen && ps.fromStart {
		a.billed.add(ps.member, int64(usage)) // all of a new pod's CPU
	}
	if ps.seen && usage >= ps.usage {
		d := time.Duration(usage - ps.usage)
		ps.cpu = time.Duration(float64(d) * scale)
		s.CPU += ps.cpu
		a.billed.add(ps.member, int64(d)) // billing: the exact counter
	}
	if a.threadsSteady(ps, dt) {
		// The threads that ran or waited, and their waits, as last read.
		ps.threadsAge++
		ps.threadsCurrent = false
		if !psi {
			wait += time.Duration(ps.waitRate * float64(dt))
		}
	} else {
		if a.threadsEveryPeriod(ps) || len(ps.pids) == 0 || ps.pidsAge >= procsRefreshPeriods {
			ps.pids = ps.pids[:0]
			for _, c := range containers {
				ps.pids, _ = a.node.hier.AppendProcs(ps.pids, c)
			}
			ps.cpuLimit, _ = a.node.hier.CPULimit(ps.cgroup) // an unreadable quota counts as none
			ps.pidsAge = 0
		}
		threadWait := a.readThreads(ps, readAt, dt)
		if !psi {
			wait += threadWait
		}
	}
	s.Threads += ps.running
	s.Wait += wait
	ps.backlogged = fairness.Backlogged(wait, dt)
	// The most of the node it would have used: its CPU and waiting, at
	// most a CPU per thread that ran or waited.
	ps.limit = 1
	if ps.seen && dt > 0 {
		ps.limit = min(1, float64(ps.running)/float64(a.cfg.CPUs), (ps.cpu+wait).Seconds()/(float64(a.cfg.CPUs)*dt.Seconds()))
	}
	if ps.cpuLimit > 0 {
		ps.limit = min(ps.limit, ps.cpuLimit/float64(a.cfg.CPUs))
	}
	ps.usage, ps.seen = usage, true
}

// toPeriod scales counters read over the interval since to the period
// dt, within [floor, 4]; 1 when either is not positive.
func toPeriod(dt, since time.Duration, floor float64) float64 {
	if dt <= 0 || since <= 0 {
		return 1
	}
	return min(4, max(floor, float64(dt)/float64(since)))
}

// threadsSteady tells whether the pod's thread figures of the last read
// may stand for this period (threadsRefreshPeriods): pod weights only, read
// within that many periods, and the pod's CPU near what it was then.
func (a *Agent) threadsSteady(ps *podState, dt time.Duration) bool {
	if a.threadsEveryPeriod(ps) || !ps.seen || ps.threadsAge+1 >= threadsRefreshPeriods {
		return false
	}
	moved := ps.cpu - ps.threadsCPU
	return max(moved, -moved) <= max(ps.threadsCPU/8, dt/100)
}

// threadsEveryPeriod: the pod's processes and threads are read every busy
// period, for a thread backend's weights or a latency class's slice.
func (a *Agent) threadsEveryPeriod(ps *podState) bool {
	return a.node.threads != "" || a.node.sliceOf(ps.member.latency) != 0
}

// readThreads reads the pod's threads' scheduler times, keeps the
// processes with the threads that ran or waited since the last read (a
// thread policy divides a process's weight among those only), and returns
// their waits over that time, scaled to the period dt.
func (a *Agent) readThreads(ps *podState, readAt time.Time, dt time.Duration) time.Duration {
	threads := ps.spare
	if threads == nil {
		threads = make(map[int]threadTimes, len(ps.threads))
	}
	clear(threads)
	owner, active := a.owner, a.active // tid → pid, pid → tids
	clear(owner)
	clear(active)
	for _, pid := range ps.pids {
		a.procs.readThreads(pid, func(tid int, tt threadTimes) {
			threads[tid], owner[tid] = tt, pid
		})
	}
	// The threads' counters cover the time since their last read, which
	// may be several periods (or fewer, in a step an API change brought).
	scale := 1.0
	if ps.seen {
		scale = toPeriod(dt, readAt.Sub(ps.threadsReadAt), 0.25/threadsRefreshPeriods)
	}
	var wait time.Duration
	ps.running = 0
	spent := a.spent
	clear(spent)
	perProcess := a.node.threads != "" // only a thread backend's loop uses them
	half := uint64(readAt.Sub(ps.threadsReadAt) / 2)
	if ps.seen {
		for tid, now := range threads {
			before, ok := ps.threads[tid]
			if !ok {
				before = threadTimes{} // a new thread: all of its time is since the last read
			}
			if now.run < before.run || now.wait < before.wait {
				continue
			}
			dRun, dWait := now.run-before.run, now.wait-before.wait
			wait += time.Duration(float64(dWait) * scale)
			if dRun+dWait > 0 {
				ps.running++
				active[owner[tid]] = append(active[owner[tid]], tid)
				if perProcess {
					sum := spent[owner[tid]]
					sum.run, sum.wait = sum.run+dRun, sum.wait+dWait
					if dRun+dWait >= half {
						sum.busy += dRun + dWait
					}
					spent[owner[tid]] = sum
				}
			}
		}
	}
	ps.allThreads = ps.allThreads[:0]
	if a.node.sliceOf(ps.member.latency) != 0 {
		for tid := range threads {
			ps.allThreads = append(ps.allThreads, tid)
		}
	}
	ps.processes = ps.processes[:0]
	for _, pid := range ps.pids {
		if tids := active[pid]; len(tids) > 0 {
			sort.Ints(tids)
			sum := spent[pid]
			ps.processes = append(ps.processes, enforce.Process{PID: pid, Threads: tids,
				CPU: time.Duration(float64(sum.run) * scale), Wait: time.Duration(float64(sum.wait) * scale),
				Busy: time.Duration(float64(sum.busy) * scale)})
		}
	}
	ps.threads, ps.spare = threads, ps.threads
	ps.threadsReadAt, ps.threadsCPU, ps.threadsAge, ps.threadsCurrent = readAt, ps.cpu, 0, true
	ps.waitRate = 0
	if dt > 0 {
		ps.waitRate = float64(wait) / float64(dt)
	}
	return wait
}

// RestoreAll puts kubelet's values back on every pod kubefair changed
// (the agent's --restore-on-exit, after Run has returned).
func (a *Agent) RestoreAll() error { return a.node.restoreAll() }

// Backends are the agent's enforcement backends, coarse to fine (tests
// read what they hold).
func (a *Agent) Backends() []enforce.Backend { return a.node.backends }

// BackendNames name the backends and the cgroup version, for the log.
func (a *Agent) BackendNames() string {
	names := fmt.Sprintf("cgroup v%d", a.node.hier.Mode)
	for _, b := range a.node.backends[1:] {
		names += ", " + b.Name()
	}
	return names
}
