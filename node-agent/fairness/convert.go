package fairness

import "math"

// CgroupV2WeightFromShares converts cgroup v1 cpu.shares (2..262144) to a
// cgroup v2 cpu.weight (1..10000) the way kubelet does:
// 1 + ((shares − 2) × 9999) / 262142, for pod and QoS cgroups.
// containerd/cgroups and runc ≥ 1.3.2 (RuncV2WeightFromShares) map
// differently, which is why kubefair reads every weight back from disk
// and converts only to sum requests as kubelet does.
func CgroupV2WeightFromShares(shares uint64) uint64 {
	shares = clamp(shares, MinShares, MaxShares)
	return 1 + ((shares-2)*9999)/262142
}

// CgroupSharesFromV2Weight is the inverse of CgroupV2WeightFromShares,
// rounded up so that the round trip shares → weight → shares → weight is
// stable.
func CgroupSharesFromV2Weight(weight uint64) uint64 {
	weight = clamp(weight, MinWeight, MaxWeight)
	return 2 + ((weight-1)*262142+9998)/9999
}

// Ranges of the cgroup files.
const (
	MinShares = 2
	MaxShares = 262144
	MinWeight = 1
	MaxWeight = 10000
)

func clamp(v, lo, hi uint64) uint64 {
	return min(max(v, lo), hi)
}

// RuncV2WeightFromShares is runc's conversion (1.3.2 and later, through
// github.com/opencontainers/cgroups) of a container's cpu.shares to cgroup
// v2's cpu.weight: a quadratic in log2(shares) that maps 2 → 1,
// 1024 → 100 (v2's default) and 262144 → 10000. kubelet's conversion of a
// pod's shares is the linear CgroupV2WeightFromShares, so on cgroup v2 a
// pod and its one container weigh differently; kubefair only writes pods,
// and reads every value it needs back from the cgroup.
func RuncV2WeightFromShares(shares uint64) uint64 {
	switch {
	case shares == 0:
		return 0 // unset
	case shares <= MinShares:
		return MinWeight
	case shares >= MaxShares:
		return MaxWeight
	}
	l := math.Log2(float64(shares))
	return uint64(math.Ceil(math.Pow(10, (l*l+125*l)/612-7.0/34)))
}
