package fairness

import (
	"math"
	"testing"
	"time"
)

// TestElevateFollowsTable1: the levels and delays of seed 002's Table 1,
// by load per CPU and by source; the decay of a level per delay; no
// elevation at a light load.
func TestElevateFollowsTable1(t *testing.T) {
	ms := time.Millisecond
	cases := []struct {
		name           string
		from           Elevation
		local, network bool
		load           float64
		dt             time.Duration
		want           Elevation
	}{
		{"light load: none", Elevation{}, true, true, 0.5, time.Second, Elevation{}},
		{"light load drops an elevation at once", Elevation{Level: 4, Left: time.Second}, false, false, 0.5, time.Second, Elevation{}},
		{"load 1.2, local", Elevation{}, true, false, 1.2, time.Second, Elevation{Level: 1, Left: 200 * ms}},
		{"load 1.2, network: none", Elevation{}, false, true, 1.2, time.Second, Elevation{}},
		{"load 3, network", Elevation{}, false, true, 3, time.Second, Elevation{Level: 2, Left: 400 * ms}},
		{"load 3, both: the higher", Elevation{}, true, true, 3, time.Second, Elevation{Level: 4, Left: 400 * ms}},
		{"heaviest load, local", Elevation{}, true, false, 10, time.Second, Elevation{Level: 15, Left: 600 * ms}},
		{"heaviest load, network", Elevation{}, false, true, 10, time.Second, Elevation{Level: 5, Left: 600 * ms}},
		{"decays a level per delay", Elevation{Level: 5, Left: 600 * ms}, false, false, 10, time.Second, Elevation{Level: 4, Left: 200 * ms}},
		{"decays over two periods", Elevation{Level: 4, Left: 200 * ms}, false, false, 10, time.Second, Elevation{Level: 2, Left: 400 * ms}},
		{"decays to none", Elevation{Level: 1, Left: 100 * ms}, false, false, 10, time.Second, Elevation{}},
		{"a request renews the delay", Elevation{Level: 5, Left: 100 * ms}, false, true, 10, time.Second, Elevation{Level: 5, Left: 600 * ms}},
		{"a lower raise keeps a higher level", Elevation{Level: 15, Left: 600 * ms}, false, true, 10, 100 * ms, Elevation{Level: 15, Left: 500 * ms}},
	}
	for _, c := range cases {
		if got := Elevate(c.from, c.local, c.network, c.load, c.dt); got != c.want {
			t.Errorf("%s: Elevate(%+v) = %+v, want %+v", c.name, c.from, got, c.want)
		}
	}
}

func TestElevationMultiplier(t *testing.T) {
	for level, want := range map[int]float64{0: 1, 1: 1.25, 5: 3.0517578125, 15: math.Pow(1.25, 15)} {
		if got := (Elevation{Level: level}).Multiplier(); math.Abs(got-want) > 1e-9 {
			t.Errorf("level %d: multiplier %v, want %v", level, got, want)
		}
	}
}
