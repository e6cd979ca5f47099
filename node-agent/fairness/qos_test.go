package fairness

import (
	"math"
	"testing"
)

// realised is what each pod gets from weights w in kubelet's tree: GPS
// down the two levels with the pods' limits, as the CPU scheduler does.
func realised(t QoSTree, w QoSWeights) []float64 {
	tree := QoSTree{Classes: w.Classes}
	for i, p := range t.Pods {
		p.Kubelet = w.Pods[i]
		tree.Pods = append(tree.Pods, p)
	}
	return StockShares(tree)
}

func TestFlatten(t *testing.T) {
	const (
		bu, be = 0, 1
		g      = -1
	)
	// kubelet's weights on cgroup v1: 100m → 102 shares, 1 CPU → 1024,
	// BestEffort pods 2, the BestEffort QoS cgroup 2, the Burstable one the
	// sum of its pods'.
	for _, tc := range []struct {
		name string
		tree QoSTree
		// want is each pod's share when all are backlogged up to their
		// limits; tenants' pods first by their parts, the others at least
		// their stock share.
		want []float64
	}{{
		name: "Burstable tenants 1:2 beside a Burstable pod of no tenant",
		tree: QoSTree{Classes: []float64{306, 2}, Pods: []QoSPod{
			{Class: bu, Kubelet: 102, Part: 1}, {Class: bu, Kubelet: 102, Part: 2}, {Class: bu, Kubelet: 102}}},
		want: []float64{2.0 / 9, 4.0 / 9, 1.0 / 3},
	}, {
		name: "a BestEffort tenant beside Burstable ones (the issue's 0.2 % against 25 %)",
		tree: QoSTree{Classes: []float64{306, 2}, Pods: []QoSPod{
			{Class: bu, Kubelet: 102, Part: 1}, {Class: bu, Kubelet: 102, Part: 1}, {Class: bu, Kubelet: 102, Part: 1},
			{Class: be, Kubelet: 2, Part: 3}}},
		want: []float64{1.0 / 6, 1.0 / 6, 1.0 / 6, 1.0 / 2},
	}, {
		name: "BestEffort tenants only",
		tree: QoSTree{Classes: []float64{2, 2}, Pods: []QoSPod{
			{Class: be, Kubelet: 2, Part: 1}, {Class: be, Kubelet: 2, Part: 4}}},
		want: []float64{0.2, 0.8},
	}, {
		name: "every class in one tenant and in others, a pod of no tenant",
		tree: QoSTree{Classes: []float64{204, 2}, Pods: []QoSPod{
			{Class: g, Kubelet: 1024, Part: 1}, {Class: be, Kubelet: 2, Part: 1}, // one tenant, two classes
			{Class: bu, Kubelet: 102, Part: 2}, // another
			{Class: be, Kubelet: 2, Part: 2},   // a third
			{Class: bu, Kubelet: 102}}},        // no tenant: 102 of 1230 in stock
		want: func() []float64 {
			o := 102.0 / 1230
			r := (1 - o) / 6
			return []float64{r, r, 2 * r, 2 * r, o}
		}(),
	}, {
		name: "a Guaranteed tenant capped: the pod of no tenant keeps what stock hands it",
		// In stock the Guaranteed pod would weigh 1024/1332 but can use
		// half of the node; its rest goes to the QoS cgroups by weight,
		// almost all to Burstable, a third of that to the pod of no tenant.
		tree: QoSTree{Classes: []float64{306, 2}, Pods: []QoSPod{
			{Class: g, Kubelet: 1024, Part: 1, Limit: 0.5},
			{Class: bu, Kubelet: 102, Part: 1}, {Class: bu, Kubelet: 102, Part: 1},
			{Class: be, Kubelet: 2, Part: 1},
			{Class: bu, Kubelet: 102}}},
		want: nil, // checked against StockShares below
	}, {
		name: "extreme parts 1:10000",
		tree: QoSTree{Classes: []float64{204, 2}, Pods: []QoSPod{
			{Class: bu, Kubelet: 102, Part: 1}, {Class: bu, Kubelet: 102, Part: 10000}}},
		want: []float64{1.0 / 10001, 10000.0 / 10001},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			for i, p := range tc.tree.Pods {
				if p.Part > 0 && p.Limit == 0 {
					tc.tree.Pods[i].Limit = 1 // backlogged
				}
			}
			w := Flatten(tc.tree)
			got := realised(tc.tree, w)
			stock := StockShares(tc.tree)
			for i, p := range tc.tree.Pods {
				if tc.want != nil && math.Abs(got[i]-tc.want[i]) > 1e-6 {
					t.Errorf("pod %d gets %.4f, want %.4f (weights %v)", i, got[i], tc.want[i], w)
				}
				if p.Part <= 0 && got[i] < stock[i]-1e-9 {
					t.Errorf("pod %d of no tenant gets %.4f, less than stock's %.4f", i, got[i], stock[i])
				}
			}
			// The tenants' pods share what is left to them by their parts,
			// as far as their limits let them.
			var left, parts float64
			for i, p := range tc.tree.Pods {
				if p.Part > 0 {
					left += got[i]
					parts += p.Part
				}
			}
			for i, p := range tc.tree.Pods {
				if p.Part > 0 && got[i] < p.Limit-1e-9 && got[i] < left*p.Part/parts-1e-6 {
					t.Errorf("tenant pod %d gets %.4f of the tenants' %.4f, want its part %.4f", i, got[i], left, left*p.Part/parts)
				}
			}
			// Each level keeps kubelet's sum of weights.
			sum := func(pods []float64, classes []float64, class int) float64 {
				s := 0.0
				for i, p := range tc.tree.Pods {
					if p.Class == class {
						s += pods[i]
					}
				}
				if class < 0 {
					for c, v := range classes {
						for _, p := range tc.tree.Pods {
							if p.Class == c {
								s += v
								break
							}
						}
					}
				}
				return s
			}
			kubelet := make([]float64, len(tc.tree.Pods))
			for i, p := range tc.tree.Pods {
				kubelet[i] = p.Kubelet
			}
			for class := -1; class < len(tc.tree.Classes); class++ {
				if a, b := sum(w.Pods, w.Classes, class), sum(kubelet, tc.tree.Classes, class); math.Abs(a-b) > 1e-6*b {
					t.Errorf("level %d weighs %.3f, kubelet's %.3f", class, a, b)
				}
			}
		})
	}
}

// TestFlattenWithoutTenants leaves kubelet's tree as it is.
func TestFlattenWithoutTenants(t *testing.T) {
	tree := QoSTree{Classes: []float64{204, 2}, Pods: []QoSPod{{Class: 0, Kubelet: 102}, {Class: -1, Kubelet: 1024}, {Class: 1, Kubelet: 2}}}
	w := Flatten(tree)
	for i, p := range tree.Pods {
		if w.Pods[i] != p.Kubelet {
			t.Errorf("pod %d: %v, want kubelet's %v", i, w.Pods[i], p.Kubelet)
		}
	}
	if w.Classes[0] != 204 || w.Classes[1] != 2 {
		t.Errorf("classes %v", w.Classes)
	}
}
