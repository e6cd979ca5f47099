package agent

import (
	"github.com/kubefair/kubefair/node-agent/fairness"
	"github.com/kubefair/kubefair/node-agent/internal/statedir"
)

// The closed loops' state (fairness.Loops) is kept in the state directory
// so that a restarted agent (an update, an evicted or deleted pod) resumes
// with what it had learnt instead of the open-loop weights: the loops still
// start over for any principal whose entitlement has moved meanwhile.
const loopStateFile = "closed-loop.json"

func (a *Agent) saveLoops() error {
	return statedir.Dir(a.cfg.StateDir).Save(loopStateFile, a.loops)
}

// loadLoops resumes the loops a previous run saved; a missing or unreadable
// file starts them afresh (it is a cache, not a record).
func (a *Agent) loadLoops() {
	var st fairness.Loops
	if _, err := statedir.Dir(a.cfg.StateDir).Load(loopStateFile, &st); err != nil {
		a.log.Info("ignoring an unreadable closed-loop state", "error", err.Error())
		return
	}
	a.loops = st
}
