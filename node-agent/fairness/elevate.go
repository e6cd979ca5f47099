package fairness

import (
	"math"
	"time"
)

// Elevation is request-based elevation of one workload inside its tenant
// (seed 002, RBPE): a workload whose processes received requests is
// raised by some nice levels, more the heavier the node's load, and drops
// a level each delay after its last request. Its pods' parts are
// multiplied by ElevationStep per level, on top of its tenant's split
// (WorkloadSnapshot.Elevation): the tenant's other pods keep their weight,
// and the tenants' closed loop holds the tenant's share of the node on what
// it uses, so neither its share nor its bill moves.
type Elevation struct {
	Level int           // nice levels above the workload's weight
	Left  time.Duration // until the level drops by one
}

// ElevationStep is what a nice level multiplies a weight by (the kernel's
// sched_prio_to_weight table: about 1.25 a level).
const ElevationStep = 1.25

// elevationSteps is seed 002's Table 1: up to a load (the kernel's 1-minute
// load average, avenrun/2048, here per CPU), the nice levels a request
// from a UNIX socket and from a network socket raises the receiver by, and
// how long each level lasts.
var elevationSteps = []struct {
	load           float64
	local, network int
	delay          time.Duration
}{
	{1600.0 / 2048, 0, 0, 0},
	{3000.0 / 2048, 1, 0, 200 * time.Millisecond},
	{5000.0 / 2048, 2, 1, 300 * time.Millisecond},
	{8000.0 / 2048, 4, 2, 400 * time.Millisecond},
	{12000.0 / 2048, 6, 3, 500 * time.Millisecond},
	{16000.0 / 2048, 7, 4, 600 * time.Millisecond},
	{math.Inf(1), 15, 5, 600 * time.Millisecond},
}

// MaxElevation is the most levels a workload is raised by.
const MaxElevation = 15

// Elevate is one period of dt for a workload: its elevation decays at the
// delay the load gives (at no load at once), then a period in which it
// received requests from UNIX (local) or network sockets raises it to the
// level the load gives, if that is higher, for a full delay.
func Elevate(e Elevation, local, network bool, loadPerCPU float64, dt time.Duration) Elevation {
	step := elevationSteps[0]
	for _, s := range elevationSteps {
		step = s
		if loadPerCPU <= s.load {
			break
		}
	}
	for e.Level > 0 && dt > 0 {
		if step.delay == 0 {
			e = Elevation{}
			break
		}
		if e.Left > dt {
			e.Left -= dt
			break
		}
		dt -= e.Left
		e.Level--
		e.Left = step.delay
	}
	raise := 0
	if local {
		raise = step.local
	}
	if network {
		raise = max(raise, step.network)
	}
	switch {
	case raise > 0 && raise >= e.Level:
		return Elevation{Level: raise, Left: step.delay}
	case e.Level == 0:
		return Elevation{}
	}
	return e
}

// Multiplier is what the elevation multiplies the workload's weight by.
func (e Elevation) Multiplier() float64 {
	return math.Pow(ElevationStep, float64(min(e.Level, MaxElevation)))
}
