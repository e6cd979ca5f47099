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
	"math"
	"path"
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
	"github.com/kubefair/kubefair/node-agent/discovery"
	"github.com/kubefair/kubefair/node-agent/enforce"
	"github.com/kubefair/kubefair/node-agent/fairness"
)

// Config is what the agent's flags set.
type Config struct {
	NodeName     string
	Period       time.Duration
	ReportPeriod time.Duration
	ProcRoot     string
	// CPUs of the node that the pods share.
	CPUs       int
	Correction fairness.Correction
}

// Agent runs the loop. Create it with New.
type Agent struct {
	cfg      Config
	log      logr.Logger
	hier     *cgroupfs.Hierarchy
	cgroups  *cgroupfs.Backend
	threads  enforce.Backend // optional: syscall or nice
	source   discovery.Source
	reader   client.Reader
	writer   client.Client
	bootID   string
	metrics  *Metrics
	lastStep time.Time

	pods     map[string]*podState // by pod cgroup
	mult     map[string]float64   // tenant → closed-loop multiplier
	entitled map[string]float64   // tenant → entitled share last period
	// What the correction learns from, accumulated over ≥ one period.
	corrTime       time.Duration
	corrCPU        map[string]time.Duration
	corrBacklogged map[string]bool
	cumulative     map[string]int64 // tenant → CPU ns since this boot
	window         map[string]*tenantWindow
	windowFrom     time.Time
	lastReport     time.Time
	drift          int64

	kick chan struct{}

	// Last is the most recent period's outcome (tests and metrics read it).
	Last Step
}

// podState is what the agent remembers about one pod cgroup between periods.
type podState struct {
	uid, cgroup string
	member      membership
	usage       uint64 // cpuacct counter at the last period
	threads     map[int]threadTimes
	processes   []enforce.Process // with their active threads, last period
	seen        bool              // has a previous measurement
}

// tenantWindow accumulates a tenant's figures between two reports.
type tenantWindow struct {
	cpu, wait         int64
	entitledTime      float64 // Σ entitled × period seconds
	backlogged        bool
	runnable, podsNow int32
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
}

// Step is one period's outcome.
type Step struct {
	Time    time.Time
	Window  time.Duration
	Tenants []TenantStep
	Plan    enforce.Plan
	Result  enforce.Result
}

// Options are the agent's collaborators.
type Options struct {
	Hierarchy *cgroupfs.Hierarchy
	Cgroups   *cgroupfs.Backend
	// Threads is the optional thread-level backend (syscall or nice).
	Threads enforce.Backend
	// Source discovers containers (containerd); nil walks the cgroup tree.
	Source discovery.Source
	// Reader serves Tenants and this node's Pods (an informer cache, so the
	// last known state survives an unreachable API server).
	Reader client.Reader
	// Writer writes this node's NodeShareReport.
	Writer  client.Client
	Metrics *Metrics
	Log     logr.Logger
}

// New makes an agent with a fresh boot id: cumulative counters start at
// zero for every run of the agent, and the controller knows it by the id.
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
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return &Agent{
		cfg: cfg, log: o.Log, hier: o.Hierarchy, cgroups: o.Cgroups, threads: o.Threads, source: o.Source,
		reader: o.Reader, writer: o.Writer, metrics: o.Metrics, bootID: hex.EncodeToString(b),
		kick: make(chan struct{}, 1), pods: map[string]*podState{}, mult: map[string]float64{}, entitled: map[string]float64{}, corrCPU: map[string]time.Duration{}, corrBacklogged: map[string]bool{}, cumulative: map[string]int64{}, window: map[string]*tenantWindow{},
	}, nil
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
	for {
		if _, err := a.Step(ctx, time.Now()); err != nil && ctx.Err() == nil {
			a.log.Error(err, "period failed; keeping the last weights")
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		case <-a.kick:
			time.Sleep(20 * time.Millisecond) // let a burst of changes land
		}
	}
}

// enforcementChanged is true when an update changes what the agent
// enforces: a tenant's weight, namespaces, workloads or thread policy, or a
// pod's labels or node. The controller rewrites tenants' measured shares
// every report; those must not trigger steps.
func enforcementChanged(old, new any) bool {
	switch o := old.(type) {
	case *kubefairv1.Tenant:
		n, ok := new.(*kubefairv1.Tenant)
		return !ok || o.Status.EffectiveWeight != n.Status.EffectiveWeight ||
			!equality.Semantic.DeepEqual(o.Status.Namespaces, n.Status.Namespaces) ||
			!equality.Semantic.DeepEqual(o.Spec.Workloads, n.Spec.Workloads) || o.Spec.ThreadPolicy != n.Spec.ThreadPolicy
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

// podCgroups lists the pod cgroups on the node: from containerd when there
// is a source (a container's cgroup's parent is its pod's), else from the
// cgroup tree. A containerd that is away falls back to the tree.
func (a *Agent) podCgroups(ctx context.Context) (map[string]string, error) {
	out := map[string]string{} // cgroup → pod uid
	if a.source != nil {
		containers, err := a.source.Containers(ctx)
		if err == nil {
			for _, c := range containers {
				if c.PodUID != "" && c.Cgroup != "" {
					out[path.Dir(c.Cgroup)] = c.PodUID
				}
			}
			return out, nil
		}
		a.log.V(1).Info("container runtime unavailable, walking the cgroup tree", "error", err.Error())
	}
	pods, err := a.hier.Pods()
	if err != nil {
		return nil, err
	}
	for _, p := range pods {
		out[p.Path] = p.UID
	}
	return out, nil
}

// Step runs one period.
func (a *Agent) Step(ctx context.Context, now time.Time) (Step, error) {
	start := time.Now()
	dt := now.Sub(a.lastStep)
	if a.lastStep.IsZero() || dt <= 0 {
		dt = a.cfg.Period
	}
	a.lastStep = now

	cgroups, err := a.podCgroups(ctx)
	if err != nil {
		return Step{}, fmt.Errorf("discovering pods: %w", err)
	}
	var podList corev1.PodList
	if err := a.reader.List(ctx, &podList); err != nil {
		return Step{}, fmt.Errorf("listing pods: %w", err)
	}
	var tenants kubefairv1.TenantList
	if err := a.reader.List(ctx, &tenants); err != nil {
		return Step{}, fmt.Errorf("listing tenants: %w", err)
	}
	byUID := make(map[string]*corev1.Pod, len(podList.Items))
	for i := range podList.Items {
		p := &podList.Items[i]
		if p.Spec.NodeName == a.cfg.NodeName {
			byUID[string(p.UID)] = p
		}
	}

	// Classify and measure every pod cgroup that belongs to a tenant.
	type tenantAcc struct {
		step TenantStep
		pods []*podState
	}
	acc := map[string]*tenantAcc{}
	var leaving []enforce.Pod
	current := map[string]bool{}
	for cg, uid := range cgroups {
		pod := byUID[uid]
		var member membership
		ok := pod != nil
		if ok {
			member, ok = classify(pod, tenants.Items)
		}
		if !ok {
			if _, was := a.pods[cg]; was {
				leaving = append(leaving, enforce.Pod{Cgroup: cg, UID: uid})
			}
			continue
		}
		current[cg] = true
		ps := a.pods[cg]
		if ps == nil {
			ps = &podState{uid: uid, cgroup: cg}
			a.pods[cg] = ps
		}
		ps.member = member
		ta := acc[member.tenant]
		if ta == nil {
			ta = &tenantAcc{step: TenantStep{Name: member.tenant, Weight: member.weight}}
			acc[member.tenant] = ta
		}
		ta.pods = append(ta.pods, ps)
		ta.step.Pods++
		a.measure(ps, &ta.step)
	}
	for cg, ps := range a.pods {
		if !current[cg] {
			if _, stillThere := cgroups[cg]; !stillThere {
				delete(a.pods, cg) // the pod is gone: nothing to restore
				continue
			}
			leaving = append(leaving, enforce.Pod{Cgroup: cg, UID: ps.uid, Processes: ps.processes})
			delete(a.pods, cg)
		}
	}

	// Entitlements over the tenants with pods here, by the fairness model.
	names := make([]string, 0, len(acc))
	for n := range acc {
		names = append(names, n)
	}
	sort.Strings(names)
	principals := make([]fairness.Principal, len(names))
	achieved := make([]float64, len(names))
	backlogged := make([]bool, len(names))
	capacity := float64(a.cfg.CPUs) * dt.Seconds()
	for i, n := range names {
		s := &acc[n].step
		demand := (s.CPU + s.Wait).Seconds() / capacity
		if s.Threads == 0 && s.CPU == 0 { // no history yet: assume it wants everything
			demand, s.Threads = 1, max(1, s.Pods)
		}
		principals[i] = fairness.Principal{Weight: float64(s.Weight), Threads: s.Threads, Demand: math.Min(1, demand)}
		s.Achieved = s.CPU.Seconds() / capacity
		// Backlogged: its threads waited for CPU for more than 2 % of the period.
		s.Backlogged = s.Wait.Seconds() > 0.02*dt.Seconds()
		achieved[i], backlogged[i] = s.Achieved, s.Backlogged
	}
	entitled := fairness.EntitledShares(principals, a.cfg.CPUs)
	mult := make([]float64, len(names))
	moved := make([]bool, len(names))
	for i, n := range names {
		acc[n].step.Entitled = entitled[i]
		mult[i] = a.mult[n]
		prev := a.entitled[n]
		moved[i] = prev > 0 && math.Abs(entitled[i]-prev) > 0.1*prev
		a.entitled[n] = entitled[i]
	}
	// The correction learns from windows of at least one period: a kicked
	// step's short window only adds to the next full one.
	a.corrTime += dt
	for i, n := range names {
		a.corrCPU[n] += acc[n].step.CPU
		a.corrBacklogged[n] = a.corrBacklogged[n] || backlogged[i]
	}
	if a.corrTime >= a.cfg.Period {
		corrAchieved := make([]float64, len(names))
		corrBacklogged := make([]bool, len(names))
		for i, n := range names {
			corrAchieved[i] = a.corrCPU[n].Seconds() / (float64(a.cfg.CPUs) * a.corrTime.Seconds())
			corrBacklogged[i] = a.corrBacklogged[n]
		}
		mult = a.cfg.Correction.Update(mult, entitled, corrAchieved, corrBacklogged)
		a.corrTime, a.corrCPU, a.corrBacklogged = 0, map[string]time.Duration{}, map[string]bool{}
	}
	for i := range moved {
		// A multiplier is learnt for one configuration, and this period's
		// measurement belongs to the old one: when a tenant's entitlement
		// moves (a weight change, tenants or pods coming and going), start
		// again from the open-loop weight.
		if moved[i] {
			mult[i] = 1
		}
	}

	// Group weights: the entitled share times the correction; a tenant with
	// no demand this period keeps its plain weight share, so that it gets
	// its due at once when it wakes up.
	var weightSum float64
	for _, n := range names {
		weightSum += float64(acc[n].step.Weight)
	}
	plan := enforce.Plan{}
	var groupSum float64
	group := make([]float64, len(names))
	for i, n := range names {
		a.mult[n] = mult[i]
		acc[n].step.Multiplier = mult[i]
		share := entitled[i]
		if share <= 0 {
			share = float64(acc[n].step.Weight) / weightSum
		}
		group[i] = share * mult[i]
		groupSum += group[i]
	}
	managed := 0
	for _, n := range names {
		managed += len(acc[n].pods)
	}
	budget := 1024 * float64(managed) // pods average kubelet's 1 CPU = 1024
	for i, n := range names {
		for ps, w := range splitTenant(group[i]/groupSum, acc[n].pods) {
			shares := uint64(math.Round(w * budget))
			plan.Pods = append(plan.Pods, enforce.Pod{UID: ps.uid, Tenant: n, Cgroup: ps.cgroup,
				Shares: min(max(shares, fairness.MinShares), fairness.MaxShares), ThreadPolicy: ps.member.policy,
				Processes: append([]enforce.Process(nil), ps.processes...)})
		}
	}
	sort.Slice(plan.Pods, func(i, j int) bool { return plan.Pods[i].Cgroup < plan.Pods[j].Cgroup })

	var errs []error
	if len(leaving) > 0 {
		if err := a.cgroups.Restore(leaving); err != nil {
			errs = append(errs, err)
		}
		if a.threads != nil {
			errs = append(errs, a.threads.Restore(leaving))
		}
	}
	res, err := a.cgroups.Apply(plan)
	errs = append(errs, err)
	if a.threads != nil {
		tres, err := a.threads.Apply(plan)
		errs = append(errs, err)
		res.Writes += tres.Writes
		res.Drift += tres.Drift
		res.Vanished += tres.Vanished
		res.ApproxErrorPoints = tres.ApproxErrorPoints
	}
	a.drift += int64(res.Drift)

	step := Step{Time: now, Window: dt, Plan: plan, Result: res}
	for _, n := range names {
		step.Tenants = append(step.Tenants, acc[n].step)
	}
	a.Last = step
	a.accumulate(step)
	if a.metrics != nil {
		a.metrics.observe(step, time.Since(start))
	}
	if now.Sub(a.lastReport) >= a.cfg.ReportPeriod {
		if err := a.report(ctx, now); err != nil {
			errs = append(errs, fmt.Errorf("writing the node's report: %w", err))
		} else {
			a.lastReport = now
		}
	}
	return step, errors.Join(errs...)
}

// measure adds one pod's CPU, waiting time and active threads in the
// period to its tenant's step.
func (a *Agent) measure(ps *podState, s *TenantStep) {
	usage, err := a.hier.UsageNanoseconds(ps.cgroup)
	if err != nil {
		return // vanished mid-period
	}
	pids, _ := a.hier.Procs(ps.cgroup)
	threads := map[int]threadTimes{}
	owner := map[int]int{} // tid → pid
	for _, pid := range pids {
		for tid, tt := range readThreads(a.cfg.ProcRoot, pid) {
			threads[tid], owner[tid] = tt, pid
		}
	}
	// The pod's processes with the threads that ran or waited this period:
	// a thread policy divides a process's weight among those only.
	active := map[int][]int{}
	if ps.seen {
		if usage >= ps.usage {
			d := time.Duration(usage - ps.usage)
			s.CPU += d
			a.cumulative[ps.member.tenant] += int64(d)
		}
		for tid, now := range threads {
			before, ok := ps.threads[tid]
			if !ok {
				before = threadTimes{} // a new thread: all of its time is in this period
			}
			if now.run < before.run || now.wait < before.wait {
				continue
			}
			dRun, dWait := now.run-before.run, now.wait-before.wait
			s.Wait += time.Duration(dWait)
			if dRun+dWait > 0 {
				s.Threads++
				active[owner[tid]] = append(active[owner[tid]], tid)
			}
		}
	}
	ps.processes = ps.processes[:0]
	for _, pid := range pids {
		if tids := active[pid]; len(tids) > 0 {
			sort.Ints(tids)
			ps.processes = append(ps.processes, enforce.Process{PID: pid, Threads: tids})
		}
	}
	ps.usage, ps.threads, ps.seen = usage, threads, true
}

func (a *Agent) accumulate(step Step) {
	if a.windowFrom.IsZero() {
		a.windowFrom = step.Time.Add(-step.Window)
	}
	for _, t := range step.Tenants {
		w := a.window[t.Name]
		if w == nil {
			w = &tenantWindow{}
			a.window[t.Name] = w
		}
		w.cpu += int64(t.CPU)
		w.wait += int64(t.Wait)
		w.entitledTime += t.Entitled * step.Window.Seconds()
		w.backlogged = w.backlogged || t.Backlogged
		w.runnable, w.podsNow = int32(t.Threads), int32(t.Pods)
	}
}

// report writes this node's NodeShareReport from the figures accumulated
// since the last one. Counters are cumulative, so a failed write loses
// nothing: the next one carries it.
func (a *Agent) report(ctx context.Context, now time.Time) error {
	window := now.Sub(a.windowFrom)
	if window <= 0 || a.windowFrom.IsZero() {
		return nil
	}
	capacity := float64(a.cfg.CPUs) * window.Seconds()
	r := &kubefairv1.NodeShareReport{ObjectMeta: metav1.ObjectMeta{Name: a.cfg.NodeName}}
	err := a.writer.Get(ctx, client.ObjectKeyFromObject(r), r)
	exists := err == nil
	if err != nil && client.IgnoreNotFound(err) != nil {
		return err
	}
	r.Backend = kubefairv1.BackendCgroup
	if a.threads != nil {
		r.Backend = kubefairv1.Backend(a.threads.Name())
	}
	r.KernelABI = 0
	if k, ok := a.threads.(interface{ KernelABI() int }); ok {
		r.KernelABI = int32(k.KernelABI())
	}
	r.CPUs = int32(a.cfg.CPUs)
	r.Window = metav1.Duration{Duration: window.Round(time.Millisecond)}
	r.ObservedTime = metav1.NewTime(now)
	r.BootID = a.bootID
	r.DriftCorrections = a.drift
	r.Tenants = nil
	var entitled, achieved []float64
	var backlogged []bool
	names := make([]string, 0, len(a.cumulative))
	for n := range a.cumulative {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		share := kubefairv1.TenantShare{Name: n, CPUNanoseconds: a.cumulative[n]}
		if w := a.window[n]; w != nil {
			share.EntitledShare = round4(w.entitledTime / window.Seconds())
			share.AchievedShare = round4(float64(w.cpu) / 1e9 / capacity)
			share.WaitingFraction = round4(float64(w.wait) / 1e9 / capacity)
			share.Backlogged = w.backlogged
			share.RunnableThreads, share.Pods = w.runnable, w.podsNow
			entitled = append(entitled, share.EntitledShare)
			achieved = append(achieved, share.AchievedShare)
			backlogged = append(backlogged, share.Backlogged)
		}
		r.Tenants = append(r.Tenants, share)
	}
	r.FairnessErrorPoints = round4(fairness.MaxErrorPoints(entitled, achieved, backlogged))
	r.JainIndex = round4(fairness.JainIndex(entitled, achieved))
	if exists {
		err = a.writer.Update(ctx, r)
	} else {
		err = a.writer.Create(ctx, r)
	}
	if err != nil {
		return err
	}
	a.window, a.windowFrom = map[string]*tenantWindow{}, now
	return nil
}

func round4(v float64) float64 { return math.Round(v*1e4) / 1e4 }

// RestoreAll puts kubelet's values back on every pod kubefair changed
// (uninstall: the chart's preStop runs the agent with --restore-on-exit).
func (a *Agent) RestoreAll() error {
	err := a.cgroups.Restore(a.cgroups.Managed())
	if r, ok := a.threads.(interface{ RestoreAll() error }); ok {
		err = errors.Join(err, r.RestoreAll())
	}
	return err
}
