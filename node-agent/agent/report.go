package agent

import (
	"context"
	"fmt"
	"math"
	"sort"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kubefairv1 "github.com/kubefair/kubefair/api/v1alpha1"
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
		w.runnable, w.podsNow = int32(t.Threads), int32(t.Pods)
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
			older.runnable, older.podsNow = newer.runnable, newer.podsNow
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
	r.Backend = kubefairv1.BackendCgroup
	if a.threads != nil {
		r.Backend = kubefairv1.Backend(a.threads.Name())
	}
	if k, ok := a.threads.(interface{ KernelABI() int }); ok {
		r.KernelABI = int32(k.KernelABI())
	}
	r.CPUs = int32(a.cfg.CPUs)
	r.Window = metav1.Duration{Duration: window.Round(time.Millisecond)}
	r.ObservedTime = metav1.NewTime(now)
	r.BootID = a.bootID
	r.DriftCorrections = a.drift
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
	r.Unmeasured = a.found.unmeasuredList()
	r.Conditions = append([]metav1.Condition(nil), a.found.conditions...)
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
