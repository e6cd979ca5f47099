package agent

import (
	"context"
	"fmt"
	"math"
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kubefairv1 "github.com/kubefair/kubefair/api/v1alpha1"
	"github.com/kubefair/kubefair/node-agent/cgroupfs"
	"github.com/kubefair/kubefair/node-agent/fairness"
)

// reportWrite is a NodeShareReport on its way to the API server. The loop
// never waits for it: an API server that is slow or away must not hold up
// enforcement.
type reportWrite struct {
	done chan error
	at   time.Time
	// window and from are the figures the report covers, put back if the
	// write fails so that the next report covers them too.
	window map[string]*tenantWindow
	from   time.Time
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
		w.runnable, w.podsNow, w.sliced, w.latencyOff = int32(t.Threads), int32(t.Pods), int32(t.SlicedThreads), t.LatencyOff
		w.elevated, w.elevationOff = int32(t.ElevatedWorkloads), t.ElevationOff
		w.limit = 0
		if t.Limited {
			w.limit = t.Limit
		}
		w.weightRange = w.weightRange || t.WeightRange
		w.bounded = w.bounded || t.Bounded
		w.exclusive = int32(t.ExclusiveCPUs)
	}
}

// startReport builds this node's NodeShareReport from the figures
// accumulated since the last one and writes it in the background, within
// one report period. Counters are cumulative, so a failed write loses
// nothing: the next one carries it.
func (a *Agent) startReport(ctx context.Context, now time.Time) {
	if a.windowFrom.IsZero() || !now.After(a.windowFrom) {
		return
	}
	if err := a.saveLoops(); err != nil { // once a report period, API server or not
		a.log.Info("could not keep the closed loops' state", "error", err.Error())
	}
	r := a.buildReport(now)
	w := &reportWrite{done: make(chan error, 1), at: now, window: a.window, from: a.windowFrom}
	a.window, a.windowFrom, a.writing = map[string]*tenantWindow{}, now, w
	go func() {
		ctx, cancel := context.WithTimeout(ctx, a.cfg.ReportPeriod)
		defer cancel()
		w.done <- a.writeReport(ctx, r)
	}()
}

// finishReport collects the write in flight, if it has ended. A failed one
// gives its window back to the next report.
func (a *Agent) finishReport() error {
	w := a.writing
	if w == nil {
		return nil
	}
	var err error
	select {
	case err = <-w.done:
	default:
		return nil
	}
	a.writing = nil
	if err == nil {
		a.lastReport = w.at
		return nil
	}
	for name, older := range w.window {
		if newer := a.window[name]; newer != nil {
			older.cpu += newer.cpu
			older.wait += newer.wait
			older.entitledTime += newer.entitledTime
			older.backlogged = older.backlogged || newer.backlogged
			older.weightRange = older.weightRange || newer.weightRange
			older.bounded = older.bounded || newer.bounded
			older.limit, older.exclusive = newer.limit, newer.exclusive
			older.runnable, older.podsNow, older.sliced, older.latencyOff = newer.runnable, newer.podsNow, newer.sliced, newer.latencyOff
			older.elevated, older.elevationOff = newer.elevated, newer.elevationOff
		}
		a.window[name] = older
	}
	a.windowFrom = w.from
	return fmt.Errorf("writing the node's report: %w", err)
}

func (a *Agent) buildReport(now time.Time) *kubefairv1.NodeShareReport {
	window := now.Sub(a.windowFrom)
	capacity := float64(a.cfg.CPUs) * window.Seconds()
	r := &kubefairv1.NodeShareReport{ObjectMeta: metav1.ObjectMeta{Name: a.cfg.NodeName}}
	r.Backend = kubefairv1.Backend(a.node.finest().Name())
	r.KernelABI = int32(a.node.finest().KernelABI())
	r.CPUs = int32(a.cfg.CPUs)
	r.Window = metav1.Duration{Duration: window.Round(time.Millisecond)}
	r.ObservedTime = metav1.NewTime(now)
	r.BootID = a.bootID
	r.BootTime = &metav1.Time{Time: a.billed.bootTime}
	if a.billed.nodeOK {
		r.Node = &kubefairv1.NodeCPU{CPUNanoseconds: a.billed.node, PodsCPUNanoseconds: a.billed.pods}
	}
	r.DriftCorrections = a.drift
	r.NiceRoundingErrorPoints = round4(a.Last.Result.NiceRoundingErrorPoints)
	var entitled, achieved []float64
	var backlogged []bool
	for _, c := range a.billed.sorted() {
		share := kubefairv1.TenantShare{Name: c.name, UID: c.uid, CPUNanoseconds: c.ns, Final: !c.live}
		if w := a.window[c.name]; w != nil && c.live {
			share.EntitledShare = round4(w.entitledTime / window.Seconds())
			share.AchievedShare = round4(float64(w.cpu) / 1e9 / capacity)
			share.WaitingFraction = round4(float64(w.wait) / 1e9 / capacity)
			share.Backlogged = w.backlogged
			share.RunnableThreads, share.Pods, share.SlicedThreads, share.LatencyClassOff = w.runnable, w.podsNow, w.sliced, w.latencyOff
			share.ElevatedWorkloads, share.RequestElevationOff = w.elevated, w.elevationOff
			share.LimitedShare = round4(w.limit)
			share.Bound = w.bound(share)
			share.ExclusiveCPUs = w.exclusive
			entitled = append(entitled, share.EntitledShare)
			achieved = append(achieved, share.AchievedShare)
			backlogged = append(backlogged, share.Backlogged)
		}
		r.Tenants = append(r.Tenants, share)
	}
	r.Unmeasured = a.found.unmeasuredList()
	r.Conditions = append(append(append([]metav1.Condition(nil), a.found.conditions...), a.latency.conditions...), a.elevation.conditions...)
	r.FairnessErrorPoints = round4(fairness.MaxErrorPoints(entitled, achieved, backlogged))
	r.JainIndex = round4(fairness.JainIndex(entitled, achieved))
	return r
}

// writeReport creates or replaces this node's report.
func (a *Agent) writeReport(ctx context.Context, r *kubefairv1.NodeShareReport) error {
	var existing kubefairv1.NodeShareReport
	err := a.writer.Get(ctx, client.ObjectKeyFromObject(r), &existing)
	switch {
	case client.IgnoreNotFound(err) != nil:
		return err
	case err != nil:
		return a.writer.Create(ctx, r)
	}
	r.ObjectMeta = existing.ObjectMeta
	return a.writer.Update(ctx, r)
}

func round4(v float64) float64 { return math.Round(v*1e4) / 1e4 }

// FinalReport writes the node's report once more, synchronously, after
// the loop has stopped (the agent is exiting): the CPU counted since the
// last report is billed before the next run starts from zero.
func (a *Agent) FinalReport(ctx context.Context) error {
	if w := a.writing; w != nil { // the write in flight ends within its report period
		select {
		case err := <-w.done:
			a.writing = nil
			if err != nil {
				a.window, a.windowFrom = w.window, w.from
			}
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	if a.windowFrom.IsZero() || !a.lastStep.After(a.windowFrom) {
		return nil
	}
	return a.writeReport(ctx, a.buildReport(a.lastStep))
}

// billingCounters are what the agent's reports bill: per tenant UID the
// CPU its pods used since this run of the agent began counting (its first
// step), and the node's own counters over the same time, for the
// controller's reconciliation. A tenant's counter is final once the
// tenant is being deleted or gone (its pods are no longer counted); it is
// dropped when the tenant is gone from the API, which the controller
// allows only once it recorded the final counter.
type billingCounters struct {
	bootTime time.Time
	tenants  map[string]*tenantCounter // by tenant UID
	// counted are the pods whose CPU this run counts, by pod UID: a pod
	// that leaves a tenant and comes back is not counted from its start
	// twice.
	counted map[string]bool
	// node and pods are the node's and all pods' CPU since bootTime;
	// nodeOK once both were read twice.
	node, pods         int64
	lastNode, lastPods uint64
	nodeOK             bool
}

type tenantCounter struct {
	uid, name string
	ns        int64
	live      bool // the tenant exists and is not being deleted
}

func newBillingCounters() billingCounters {
	return billingCounters{tenants: map[string]*tenantCounter{}, counted: map[string]bool{}}
}

// begin starts a step: the first one starts the counters; every one
// notes which tenants are live, and drops the counters of tenants gone.
func (b *billingCounters) begin(now time.Time, tenants []kubefairv1.Tenant) {
	if b.bootTime.IsZero() {
		b.bootTime = now
	}
	exists := map[string]bool{}
	for _, t := range tenants {
		exists[string(t.UID)] = true
		if c := b.tenants[string(t.UID)]; c != nil {
			c.live = t.DeletionTimestamp == nil
		}
	}
	for uid := range b.tenants {
		if !exists[uid] {
			delete(b.tenants, uid)
		}
	}
}

// newPod tells whether a pod the agent has not counted in this run
// started after the run began counting: then its first read counts all of
// its CPU (start times are in seconds). A pod already running when the
// agent started is counted from its first read: what it used before was
// the previous run's to report.
func (b *billingCounters) newPod(p *corev1.Pod) bool {
	uid := string(p.UID)
	if b.counted[uid] {
		return false
	}
	b.counted[uid] = true
	return p.Status.StartTime != nil && !p.Status.StartTime.Before(&metav1.Time{Time: b.bootTime.Truncate(time.Second)})
}

func (b *billingCounters) podGone(uid string) { delete(b.counted, uid) }

func (b *billingCounters) add(m membership, ns int64) {
	c := b.tenants[m.uid]
	if c == nil {
		c = &tenantCounter{uid: m.uid, name: m.tenant, live: true}
		b.tenants[m.uid] = c
	}
	c.ns += ns
}

// countNode adds what the node and its pods used since the last step.
func (b *billingCounters) countNode(h *cgroupfs.Hierarchy) {
	node, errNode := h.NodeUsageNanoseconds()
	pods, errPods := h.PodsUsageNanoseconds()
	if errNode != nil || errPods != nil {
		return
	}
	if b.lastNode != 0 && node >= b.lastNode && pods >= b.lastPods {
		b.node += int64(node - b.lastNode)
		b.pods += int64(pods - b.lastPods)
		b.nodeOK = true
	}
	b.lastNode, b.lastPods = node, pods
}

// sorted are the counters by tenant name, then UID.
func (b *billingCounters) sorted() []*tenantCounter {
	out := make([]*tenantCounter, 0, len(b.tenants))
	for _, c := range b.tenants {
		out = append(out, c)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].name != out[j].name {
			return out[i].name < out[j].name
		}
		return out[i].uid < out[j].uid
	})
	return out
}

// bound is the bound the tenant's weight hit in the window, when it was
// backlogged and more than fairness.BoundMargin of the node off its
// entitlement: a bound that costs less is not worth a condition.
func (w *tenantWindow) bound(share kubefairv1.TenantShare) kubefairv1.WeightBound {
	if !share.Backlogged || math.Abs(share.AchievedShare-share.EntitledShare) <= fairness.BoundMargin {
		return ""
	}
	switch {
	case w.weightRange:
		return kubefairv1.BoundWeightRange
	case w.bounded:
		return kubefairv1.BoundCorrection
	}
	return ""
}
