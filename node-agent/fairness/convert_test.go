package fairness

import "testing"

// TestConversions: kubelet's and runc's shares → cgroup v2 weight differ
// everywhere but at the ends, and kubelet's inverse round-trips.
func TestConversions(t *testing.T) {
	for _, tc := range []struct{ shares, kubelet, runc uint64 }{
		{2, 1, 1},
		{51, 2, 11}, // a 50m request
		{102, 4, 17},
		{1024, 39, 100},
		{2048, 79, 174},
		{262144, 10000, 10000},
	} {
		if got := CgroupV2WeightFromShares(tc.shares); got != tc.kubelet {
			t.Errorf("kubelet: %d shares → weight %d, want %d", tc.shares, got, tc.kubelet)
		}
		if got := RuncV2WeightFromShares(tc.shares); got != tc.runc {
			t.Errorf("runc: %d shares → weight %d, want %d", tc.shares, got, tc.runc)
		}
		if w := CgroupV2WeightFromShares(tc.shares); CgroupV2WeightFromShares(CgroupSharesFromV2Weight(w)) != w {
			t.Errorf("kubelet's round trip of weight %d is not stable", w)
		}
	}
}
