package agent

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"time"

	"github.com/kubefair/kubefair/node-agent/fairness"
)

// closedLoop is the closed-loop correction of one level of the hierarchy:
// the tenants on the node, or the workloads inside one tenant. Each
// principal carries a multiplier on its entitled share that the measured
// CPU nudges (fairness.Correction). It learns only from windows of at least
// one period — a kicked step's short window adds to the next full one — and
// starts a principal again from the open-loop weight when its entitlement
// moves, because what it learnt belongs to the old configuration.
type closedLoop struct {
	correction fairness.Correction
	mult       map[string]float64
	entitled   map[string]float64 // proportion of the total, last step
	// Accumulated since the last update.
	elapsed    time.Duration
	cpu        map[string]time.Duration
	backlogged map[string]bool
}

func newClosedLoop(c fairness.Correction) *closedLoop {
	l := &closedLoop{correction: c, mult: map[string]float64{}, entitled: map[string]float64{}}
	l.reset()
	return l
}

func (l *closedLoop) reset() {
	l.elapsed, l.cpu, l.backlogged = 0, map[string]time.Duration{}, map[string]bool{}
}

// measured is one principal's figures for one step.
type measured struct {
	name       string
	entitled   float64 // any common scale: the loop compares proportions
	cpu        time.Duration
	backlogged bool
}

// step adds one step of dt and returns each principal's multiplier, in
// input order. Principals absent from ps are forgotten.
func (l *closedLoop) step(ps []measured, dt, period time.Duration) []float64 {
	l.elapsed += dt
	mult := make([]float64, len(ps))
	entitled := make([]float64, len(ps))
	for i, p := range ps {
		l.cpu[p.name] += p.cpu
		l.backlogged[p.name] = l.backlogged[p.name] || p.backlogged
		mult[i], entitled[i] = l.mult[p.name], p.entitled
	}
	if l.elapsed >= period {
		// Correction.Update normalises achieved over the backlogged
		// principals, so CPU time serves as "achieved" directly.
		achieved := make([]float64, len(ps))
		backlogged := make([]bool, len(ps))
		for i, p := range ps {
			achieved[i], backlogged[i] = l.cpu[p.name].Seconds(), l.backlogged[p.name]
		}
		mult = l.correction.Update(mult, entitled, achieved, backlogged)
		l.reset()
	}
	// A move is judged on each principal's proportion of the total: the
	// capacity left to the tenants changes every period with load from
	// outside and scales every entitlement alike, which is no move.
	var total float64
	for _, p := range ps {
		total += p.entitled
	}
	next := make(map[string]float64, len(ps))
	nextEntitled := make(map[string]float64, len(ps))
	for i, p := range ps {
		if mult[i] <= 0 {
			mult[i] = 1
		}
		proportion := 0.0
		if total > 0 {
			proportion = p.entitled / total
		}
		if prev := l.entitled[p.name]; prev > 0 && math.Abs(proportion-prev) > 0.1*prev {
			mult[i] = 1
		}
		next[p.name], nextEntitled[p.name] = mult[i], proportion
	}
	l.mult, l.entitled = next, nextEntitled
	return mult
}

// learnt is what a closed loop has learnt, as kept on disk.
type learnt struct {
	Mult     map[string]float64 `json:"mult"`
	Entitled map[string]float64 `json:"entitled"`
}

func (l *closedLoop) learnt() learnt { return learnt{Mult: l.mult, Entitled: l.entitled} }

func (l *closedLoop) resume(s learnt) {
	if s.Mult != nil && s.Entitled != nil {
		l.mult, l.entitled = s.Mult, s.Entitled
	}
}

// loopState is every closed loop of the agent, kept in the state directory
// so that a restarted agent (an update, an evicted or deleted pod) resumes
// with what it had learnt instead of the open-loop weights: the loops still
// start over for any principal whose entitlement has moved meanwhile.
type loopState struct {
	Tenants   learnt            `json:"tenants"`
	Workloads map[string]learnt `json:"workloads"`
}

const loopStateFile = "closed-loop.json"

func (a *Agent) saveLoops() error {
	if a.cfg.StateDir == "" {
		return nil
	}
	st := loopState{Tenants: a.tenantLoop.learnt(), Workloads: map[string]learnt{}}
	for n, l := range a.workloadLoops {
		st.Workloads[n] = l.learnt()
	}
	data, err := json.Marshal(st)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(a.cfg.StateDir, 0o700); err != nil {
		return err
	}
	tmp := filepath.Join(a.cfg.StateDir, loopStateFile+".tmp")
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, filepath.Join(a.cfg.StateDir, loopStateFile))
}

// loadLoops resumes the loops a previous run saved; a missing or unreadable
// file starts them afresh (it is a cache, not a record).
func (a *Agent) loadLoops() {
	if a.cfg.StateDir == "" {
		return
	}
	data, err := os.ReadFile(filepath.Join(a.cfg.StateDir, loopStateFile))
	if err != nil {
		return
	}
	var st loopState
	if err := json.Unmarshal(data, &st); err != nil {
		a.log.Info("ignoring an unreadable closed-loop state", "error", err.Error())
		return
	}
	a.tenantLoop.resume(st.Tenants)
	for n, s := range st.Workloads {
		l := newClosedLoop(a.cfg.Correction)
		l.resume(s)
		a.workloadLoops[n] = l
	}
}
