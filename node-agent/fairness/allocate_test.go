package fairness

import (
	"math"
	"testing"
	"time"
)

// TestAllocate: one period's allocation from a snapshot, with fresh loops
// (multipliers 1): entitlements, CPU limits, the spare rule, extreme
// weights and the split over workloads and pods. How the parts are then
// realised through kubelet's QoS classes is Flatten's (qos_test.go).
func TestAllocate(t *testing.T) {
	busy := func(name string, weight float64, threads int, pods ...int) TenantSnapshot {
		t := TenantSnapshot{Name: name, Weight: weight, Threads: threads, Demand: 1, Backlogged: true}
		if len(pods) == 0 {
			pods = []int{1}
		}
		for i, n := range pods {
			t.Workloads = append(t.Workloads, WorkloadSnapshot{Name: string(rune('a' + i)), Weight: 100, Pods: n})
		}
		return t
	}
	cases := []struct {
		name     string
		left     float64
		tenants  []TenantSnapshot
		entitled []float64
		limited  []bool
		parts    [][]float64 // per tenant, per workload: each pod's part
		spare    bool
		elevated float64 // what elevation adds to the parts' sum of 1
	}{
		{name: "equal weights", left: 1,
			tenants:  []TenantSnapshot{busy("a", 100, 4), busy("b", 100, 4)},
			entitled: []float64{0.5, 0.5}, parts: [][]float64{{0.5}, {0.5}}},
		{name: "weights 1:2:4 of what is left to the tenants", left: 0.7,
			tenants:  []TenantSnapshot{busy("a", 100, 4), busy("b", 200, 4), busy("c", 400, 4)},
			entitled: []float64{0.1, 0.2, 0.4}, parts: [][]float64{{1.0 / 7}, {2.0 / 7}, {4.0 / 7}}},
		{name: "extreme weights 1:10000 are kept exactly", left: 1,
			tenants:  []TenantSnapshot{busy("small", 1, 4), busy("large", 10000, 4)},
			entitled: []float64{1.0 / 10001, 10000.0 / 10001}, parts: [][]float64{{1.0 / 10001}, {10000.0 / 10001}}},
		{name: "one thread uses at most one of two CPUs (SFS readjustment)", left: 1,
			tenants:  []TenantSnapshot{busy("one", 400, 1), busy("many", 100, 8)},
			entitled: []float64{0.5, 0.5}, parts: [][]float64{{0.5}, {0.5}}},
		{name: "CPU limits cap a tenant below its weight: the rest to the others", left: 1,
			tenants:  []TenantSnapshot{func() TenantSnapshot { t := busy("capped", 300, 4); t.Limit = 0.25; return t }(), busy("free", 100, 4)},
			entitled: []float64{0.25, 0.75}, limited: []bool{true, false}, parts: [][]float64{{0.25}, {0.75}}},
		{name: "CPU limits above the entitlement limit nothing", left: 1,
			tenants:  []TenantSnapshot{func() TenantSnapshot { t := busy("roomy", 100, 4); t.Limit = 0.9; return t }(), busy("free", 100, 4)},
			entitled: []float64{0.5, 0.5}, limited: []bool{false, false}, parts: [][]float64{{0.5}, {0.5}}},
		{name: "CPU to spare: plain weight shares, whatever the demands", left: 1,
			tenants: []TenantSnapshot{
				{Name: "a", Weight: 100, Threads: 1, Demand: 0.1, Workloads: []WorkloadSnapshot{{Name: "a", Weight: 100, Pods: 1}}},
				{Name: "b", Weight: 300, Threads: 1, Demand: 0.2, Workloads: []WorkloadSnapshot{{Name: "b", Weight: 100, Pods: 1}}}},
			entitled: []float64{0.1, 0.2}, parts: [][]float64{{0.25}, {0.75}}, spare: true},
		{name: "an idle tenant keeps its weight share, ready for when it wakes", left: 1,
			tenants: []TenantSnapshot{busy("busy", 100, 4),
				{Name: "idle", Weight: 100, Threads: 0, Workloads: []WorkloadSnapshot{{Name: "x", Weight: 100, Pods: 1}}}},
			entitled: []float64{1, 0}, parts: [][]float64{{2.0 / 3}, {1.0 / 3}}},
		{name: "workloads by weight, a workload's pods equally", left: 1,
			tenants: []TenantSnapshot{
				{Name: "vms", Weight: 100, Threads: 8, Demand: 1, Backlogged: true, Declared: true, Workloads: []WorkloadSnapshot{
					{Name: "large", Weight: 300, Pods: 2}, {Name: "small", Weight: 100, Pods: 1}}},
				busy("plain", 100, 4, 1, 1, 1, 1)},
			entitled: []float64{0.5, 0.5}, parts: [][]float64{{0.375 / 2, 0.125}, {0.125, 0.125, 0.125, 0.125}}},
		{name: "an elevated workload's pods get the elevation on top, the rest keep their parts", left: 1,
			tenants: []TenantSnapshot{
				func() TenantSnapshot {
					t := busy("web", 100, 5, 1, 1)
					t.Workloads[0].Elevation = 4 // the server; its indexer keeps its part
					return t
				}(),
				busy("jobs", 100, 4)},
			entitled: []float64{0.5, 0.5}, parts: [][]float64{{4 * 0.25, 0.25}, {0.5}}, elevated: 3 * 0.25},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := Snapshot{CPUs: 2, Left: tc.left, Window: time.Second, Period: time.Second, Tenants: tc.tenants}
			got := Allocate(s, DefaultCorrection, &Loops{})
			if got.Spare != tc.spare {
				t.Errorf("spare %v, want %v", got.Spare, tc.spare)
			}
			var sum float64
			for i, a := range got.Tenants {
				if math.Abs(a.Entitled-tc.entitled[i]) > 1e-9 {
					t.Errorf("%s entitled %.6f, want %.6f", tc.tenants[i].Name, a.Entitled, tc.entitled[i])
				}
				if tc.limited != nil && a.Limited != tc.limited[i] {
					t.Errorf("%s limited %v, want %v", tc.tenants[i].Name, a.Limited, tc.limited[i])
				}
				if a.Multiplier != 1 || a.Bounded {
					t.Errorf("%s: a first period corrected (×%v, bounded %v)", tc.tenants[i].Name, a.Multiplier, a.Bounded)
				}
				for k, p := range a.PodParts {
					if math.Abs(p-tc.parts[i][k]) > 1e-9 {
						t.Errorf("%s workload %d: each pod's part %.6f, want %.6f", tc.tenants[i].Name, k, p, tc.parts[i][k])
					}
					sum += p * float64(tc.tenants[i].Workloads[k].Pods)
				}
			}
			if math.Abs(sum-1-tc.elevated) > 1e-9 {
				t.Errorf("the pods' parts add up to %v, want %v", sum, 1+tc.elevated)
			}
		})
	}
}

// TestAllocateBounds: the closed loop corrects a tenant within its range
// (1/8–8) and says when the range, not the loop, decides the share: a
// tenant starved whatever its weight is Bounded; a 1:10000 tenant whose
// tiny share is measured at twice its entitlement is pushed to the bottom
// of the range but not Bounded — a hundredth of a point is not off.
func TestAllocateBounds(t *testing.T) {
	run := func(cpu func(name string) time.Duration, tenants ...TenantSnapshot) TenantAllocation {
		loops := &Loops{}
		var a Allocation
		for range 30 {
			for i := range tenants {
				tenants[i].CPU = cpu(tenants[i].Name)
			}
			a = Allocate(Snapshot{CPUs: 2, Left: 1, Window: time.Second, Period: time.Second, Tenants: tenants}, DefaultCorrection, loops)
		}
		return a.Tenants[0]
	}
	one := []WorkloadSnapshot{{Name: "a", Weight: 100, Pods: 1}}
	starved := run(func(n string) time.Duration {
		if n == "starved" {
			return 0
		}
		return 2 * time.Second
	}, TenantSnapshot{Name: "starved", Weight: 100, Threads: 4, Demand: 1, Backlogged: true, Workloads: one},
		TenantSnapshot{Name: "other", Weight: 100, Threads: 4, Demand: 1, Backlogged: true, Workloads: one})
	if starved.Multiplier != DefaultCorrection.Max || !starved.Bounded {
		t.Errorf("a starved tenant: ×%v bounded %v, want ×%v and bounded", starved.Multiplier, starved.Bounded, DefaultCorrection.Max)
	}

	// 1:10000, the small tenant measured at 2 parts in 10001.
	small := run(func(n string) time.Duration {
		if n == "small" {
			return 2 * time.Second * 2 / 10001
		}
		return 2 * time.Second * 9999 / 10001
	}, TenantSnapshot{Name: "small", Weight: 1, Threads: 1, Demand: 1, Backlogged: true, Workloads: one},
		TenantSnapshot{Name: "large", Weight: 10000, Threads: 4, Demand: 1, Backlogged: true, Workloads: one})
	if small.Multiplier != DefaultCorrection.Min || small.Bounded {
		t.Errorf("1:10000 at twice its tiny entitlement: ×%v bounded %v, want ×%v and not bounded", small.Multiplier, small.Bounded, DefaultCorrection.Min)
	}

	// A tenant 10 points short for ever: the loop pushes it to 8 and says so.
	short := run(func(n string) time.Duration {
		if n == "short" {
			return 800 * time.Millisecond
		}
		return 1200 * time.Millisecond
	}, TenantSnapshot{Name: "short", Weight: 100, Threads: 4, Demand: 1, Backlogged: true, Workloads: one},
		TenantSnapshot{Name: "other", Weight: 100, Threads: 4, Demand: 1, Backlogged: true, Workloads: one})
	if short.Multiplier != DefaultCorrection.Max || !short.Bounded {
		t.Errorf("a tenant short by 10 points: ×%v bounded %v, want ×%v and bounded", short.Multiplier, short.Bounded, DefaultCorrection.Max)
	}
}

// TestAllocateForgetsLeavers: the workloads' loops of a tenant that left
// or stopped declaring workloads are dropped.
func TestAllocateForgetsLeavers(t *testing.T) {
	loops := &Loops{}
	vms := TenantSnapshot{Name: "vms", Weight: 100, Threads: 2, Demand: 1, Backlogged: true, Declared: true,
		Workloads: []WorkloadSnapshot{{Name: "large", Weight: 300, Pods: 1, CPU: time.Second, Backlogged: true}, {Name: "small", Weight: 100, Pods: 1, CPU: time.Second, Backlogged: true}}}
	Allocate(Snapshot{CPUs: 2, Left: 1, Window: time.Second, Period: time.Second, Tenants: []TenantSnapshot{vms}}, DefaultCorrection, loops)
	if l := loops.Workloads["vms"]; l == nil || !(l.Mult["large"] > 1) {
		t.Fatalf("the workloads' loop did not correct large (3:1 measured 1:1): %+v", l)
	}
	Allocate(Snapshot{CPUs: 2, Left: 1, Window: time.Second, Period: time.Second}, DefaultCorrection, loops)
	if len(loops.Workloads) != 0 || len(loops.Tenants.Mult) != 0 {
		t.Fatalf("loops of a tenant that left are kept: %+v", loops)
	}
}
