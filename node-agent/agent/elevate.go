package agent

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/go-logr/logr"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	kubefairv1 "github.com/kubefair/kubefair/api/v1alpha1"
	"github.com/kubefair/kubefair/node-agent/fairness"
	"github.com/kubefair/kubefair/node-agent/requests"
)

// elevation is request-based elevation on the node (docs/agent.md,
// "Request-based elevation"): the eBPF counter of the requests that reach
// the processes of tenants asking for it, each workload's elevation
// (fairness.Elevate), and the report's RequestElevation condition.
type elevation struct {
	counter *requests.Counter // nil when off; off says why
	off     error
	// failed is why the last period elevated nothing although the
	// counter is on (watching or reading failed): it fails closed.
	failed  error
	loadavg string // the kernel's load average file
	cpus    int
	// workloads are the elevations, by tenant and workload; watching the
	// processes the counter watches.
	workloads  map[string]fairness.Elevation
	watching   []int
	conditions []metav1.Condition
}

// errElevationOff: the agent runs with --request-elevation=false.
var errElevationOff = errors.New("the agent runs with --request-elevation=false (the chart's agent.requestElevation.enabled)")

// openElevation loads the request counter when the config asks for it; a
// node where it cannot load runs without, and its reports say why.
func openElevation(cfg Config, log logr.Logger) elevation {
	e := elevation{loadavg: filepath.Join(cfg.ProcRoot, "loadavg"), cpus: cfg.CPUs, workloads: map[string]fairness.Elevation{}}
	if !cfg.RequestElevation {
		e.off = errElevationOff
		return e
	}
	c, err := requests.Open()
	if err != nil {
		e.off = fmt.Errorf("no eBPF request counter: %w", err)
		log.Info("request-based elevation off: no workload is elevated", "reason", e.off.Error())
		return e
	}
	e.counter = c
	return e
}

// close detaches the counter.
func (e *elevation) close() {
	if e.counter != nil {
		_ = e.counter.Close()
		e.counter = nil
	}
}

// elevate is one period of request-based elevation, between snapshot and
// allocation: the processes of tenants asking for it are watched; a
// workload whose processes received requests over the period is elevated
// (fairness.Elevate), its pods' parts multiplied on top of its tenant's
// split. Tenants not asking, and every tenant when the counter is off, keep
// their workloads' weights; a node where no tenant asks does nothing more
// each period than look.
func (e *elevation) elevate(snap *snapshot) {
	if e.counter == nil {
		return
	}
	var pids []int
	for _, tp := range snap.tenants {
		if tp.step.Elevate {
			for _, ps := range tp.pods {
				pids = append(pids, ps.pids...)
			}
		}
	}
	slices.Sort(pids)
	pids = slices.Compact(pids)
	var watchErr error
	if e.failed != nil || !slices.Equal(pids, e.watching) { // a failed watch is tried again
		watchErr, e.watching = e.counter.Watch(pids), pids
	}
	if len(pids) == 0 {
		e.failed = watchErr
		clear(e.workloads)
		return
	}
	counts, err := e.counter.Take()
	if e.failed = errors.Join(watchErr, err); e.failed != nil {
		return
	}
	load := e.loadPerCPU()
	seen := map[string]bool{}
	for i, tp := range snap.tenants {
		if !tp.step.Elevate {
			continue
		}
		ws := snap.model.Tenants[i].Workloads
		for k, group := range tp.workloads {
			var local, network bool
			for _, ps := range group {
				for _, pid := range ps.pids {
					c := counts[pid]
					local, network = local || c.Local > 0, network || c.Network > 0
				}
			}
			key := tp.step.Name + "/" + ws[k].Name
			seen[key] = true
			el := fairness.Elevate(e.workloads[key], local, network, load, snap.model.Window)
			if el.Level == 0 {
				delete(e.workloads, key)
				continue
			}
			e.workloads[key] = el
			ws[k].Elevation = el.Multiplier()
			tp.step.ElevatedWorkloads++
		}
	}
	for key := range e.workloads {
		if !seen[key] {
			delete(e.workloads, key)
		}
	}
}

// loadPerCPU is the kernel's 1-minute load average over the node's CPUs,
// as seed 002's Table 1 reads it (0 when unreadable: no elevation).
func (e *elevation) loadPerCPU() float64 {
	b, err := os.ReadFile(e.loadavg)
	if err != nil {
		return 0
	}
	f, _, _ := strings.Cut(string(b), " ")
	load, err := strconv.ParseFloat(f, 64)
	if err != nil {
		return 0
	}
	return load / float64(max(1, e.cpus))
}

// update sets the report's RequestElevation condition while a tenant on
// the node asks for elevation, and marks those tenants when it is off.
func (e *elevation) update(step *Step, now time.Time) {
	var asking []*TenantStep
	var names []string
	elevated := 0
	for i := range step.Tenants {
		if t := &step.Tenants[i]; t.Elevate {
			asking = append(asking, t)
			names = append(names, t.Name)
			elevated += t.ElevatedWorkloads
		}
	}
	off := setTenantsCondition(&e.conditions, kubefairv1.ConditionRequestElevation, names, now, func(who string) (metav1.ConditionStatus, string, string) {
		switch {
		case e.off == errElevationOff:
			return metav1.ConditionFalse, kubefairv1.ReasonRequestElevationOff, fmt.Sprintf("%s: %v; their workloads keep their weights", who, e.off)
		case e.counter == nil || e.off != nil || e.failed != nil:
			why := errors.Join(e.off, e.failed)
			if why == nil {
				why = errors.New("no request counter")
			}
			return metav1.ConditionFalse, kubefairv1.ReasonNoRequestCounter, fmt.Sprintf("%s: %v; their workloads keep their weights", who, why)
		}
		return metav1.ConditionTrue, kubefairv1.ReasonCountingRequests, fmt.Sprintf("%s: %d process(es) watched, %d workload(s) elevated", who, len(e.watching), elevated)
	})
	for _, t := range asking {
		t.ElevationOff = off
	}
}
