package agent

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/cpuset"
)

// TestExclusiveCPUs: a pod's containers hold CPUs alone where their cpusets
// share none with the pool that the other pods' containers all have.
func TestExclusiveCPUs(t *testing.T) {
	all, pool := cpuset.New(0, 1, 2, 3), cpuset.New(0, 1)
	for _, tc := range []struct {
		name   string
		pod    []cpuset.CPUSet
		others []cpuset.CPUSet
		want   cpuset.CPUSet
	}{
		{"static policy: two CPUs alone, the sandbox keeps the node's", []cpuset.CPUSet{all, cpuset.New(2, 3)}, []cpuset.CPUSet{all, pool, all, pool}, cpuset.New(2, 3)},
		{"two containers, a CPU each", []cpuset.CPUSet{cpuset.New(2), cpuset.New(3)}, []cpuset.CPUSet{pool}, cpuset.New(2, 3)},
		{"a sidecar in the pool beside an exclusive container", []cpuset.CPUSet{pool, cpuset.New(3)}, []cpuset.CPUSet{pool}, cpuset.New(3)},
		{"no CPU manager: every container may run everywhere", []cpuset.CPUSet{all, all}, []cpuset.CPUSet{all, all}, cpuset.New()},
		{"overlapping the pool is not exclusive", []cpuset.CPUSet{cpuset.New(1, 2)}, []cpuset.CPUSet{pool}, cpuset.New()},
		{"no other pod: the pool is unknown", []cpuset.CPUSet{cpuset.New(3)}, nil, cpuset.New()},
		{"other pods that disagree: the pool is unknown", []cpuset.CPUSet{cpuset.New(3)}, []cpuset.CPUSet{cpuset.New(0), cpuset.New(1)}, cpuset.New()},
		{"an empty cpuset holds nothing", []cpuset.CPUSet{cpuset.New()}, []cpuset.CPUSet{pool}, cpuset.New()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := exclusiveCPUs(tc.pod, tc.others); !got.Equals(tc.want) {
				t.Errorf("exclusive %s, want %s", got, tc.want)
			}
		})
	}
}

// TestMayHoldWholeCPUs: only a Guaranteed pod with a container requesting
// whole CPUs can get exclusive CPUs from kubelet.
func TestMayHoldWholeCPUs(t *testing.T) {
	res := func(cpu, mem string) corev1.ResourceList {
		return corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(mem)}
	}
	pod := func(qos corev1.PodQOSClass, containers ...corev1.ResourceRequirements) *corev1.Pod {
		p := &corev1.Pod{Status: corev1.PodStatus{QOSClass: qos}}
		for _, r := range containers {
			p.Spec.Containers = append(p.Spec.Containers, corev1.Container{Resources: r})
		}
		return p
	}
	whole := corev1.ResourceRequirements{Requests: res("2", "1Gi"), Limits: res("2", "1Gi")}
	half := corev1.ResourceRequirements{Requests: res("500m", "1Gi"), Limits: res("500m", "1Gi")}
	limitsOnly := corev1.ResourceRequirements{Limits: res("1", "1Gi")}
	burstable := corev1.ResourceRequirements{Requests: res("1", "1Gi"), Limits: res("2", "1Gi")}
	for _, tc := range []struct {
		name string
		pod  *corev1.Pod
		want bool
	}{
		{"Guaranteed with whole CPUs", pod(corev1.PodQOSGuaranteed, whole), true},
		{"Guaranteed, a sidecar with a fraction", pod(corev1.PodQOSGuaranteed, half, whole), true},
		{"Guaranteed with fractions only", pod(corev1.PodQOSGuaranteed, half), false},
		{"Burstable with whole CPUs", pod(corev1.PodQOSBurstable, burstable), false},
		{"no class published: limits alone make it Guaranteed", pod("", limitsOnly), true},
		{"no class published: requests below limits", pod("", burstable), false},
		{"no class published: no limits", pod("", corev1.ResourceRequirements{Requests: res("1", "1Gi")}), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := mayHoldWholeCPUs(tc.pod); got != tc.want {
				t.Errorf("mayHoldWholeCPUs = %v, want %v", got, tc.want)
			}
		})
	}
}
