package controllers

import (
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	kubefairv1 "github.com/kubefair/kubefair/api/v1alpha1"
)

// TestUnmeasuredPods: a node whose agent cannot find some of a tenant's
// pods makes the tenant Degraded (and not Enforced when no node enforces
// it), keeps a node entry so that the node's next report reaches the
// tenant, and bills nothing for those pods.
func TestUnmeasuredPods(t *testing.T) {
	notFound := metav1.Condition{Type: kubefairv1.ConditionPodCgroupsFound, Status: metav1.ConditionFalse, Reason: kubefairv1.ReasonLayoutNotFound,
		Message: "no kubelet pod cgroups: none of /sys/fs/cgroup/kubepods.slice exists"}
	measured := kubefairv1.NodeShareReport{ObjectMeta: metav1.ObjectMeta{Name: "good"}, CPUs: 2, BootID: "b1",
		Tenants: []kubefairv1.TenantShare{{Name: "shop", EntitledShare: 0.5, AchievedShare: 0.5, CPUNanoseconds: 10}}}
	blind := kubefairv1.NodeShareReport{ObjectMeta: metav1.ObjectMeta{Name: "blind"}, CPUs: 2, BootID: "b2",
		Unmeasured: []kubefairv1.UnmeasuredPods{{Tenant: "shop", Pods: 3}}, Conditions: []metav1.Condition{notFound}}
	for _, tc := range []struct {
		name            string
		reports         []kubefairv1.NodeShareReport
		enforced        metav1.ConditionStatus
		enforcedReason  string
		degradedReason  string
		nodes           int
		billed          int64
		messageContains string
	}{
		{name: "all measured", reports: []kubefairv1.NodeShareReport{measured}, enforced: metav1.ConditionTrue, enforcedReason: kubefairv1.ReasonReported,
			degradedReason: kubefairv1.ReasonAsExpected, nodes: 1, billed: 10},
		{name: "one node blind", reports: []kubefairv1.NodeShareReport{measured, blind}, enforced: metav1.ConditionTrue, enforcedReason: kubefairv1.ReasonReported,
			degradedReason: kubefairv1.ReasonPodsUnmeasured, nodes: 2, billed: 10, messageContains: "node blind runs 3 pod(s)"},
		{name: "only a blind node", reports: []kubefairv1.NodeShareReport{blind}, enforced: metav1.ConditionFalse, enforcedReason: kubefairv1.ReasonPodsUnmeasured,
			degradedReason: kubefairv1.ReasonPodsUnmeasured, nodes: 1, messageContains: "LayoutNotFound: no kubelet pod cgroups"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tenant := &kubefairv1.Tenant{ObjectMeta: metav1.ObjectMeta{Name: "shop", Generation: 1}}
			usage := aggregateReports(tenant, tc.reports, true)
			if len(usage.nodes) != tc.nodes {
				t.Fatalf("%d node entries, want %d: %+v", len(usage.nodes), tc.nodes, usage.nodes)
			}
			if usage.addedNS != tc.billed {
				t.Errorf("billed %d ns, want %d", usage.addedNS, tc.billed)
			}
			for _, n := range usage.nodes {
				if n.Node == "blind" && (n.UnmeasuredPods != 3 || len(n.Counters) != 0 || n.CPUSeconds != "") {
					t.Errorf("blind node's entry %+v: want 3 unmeasured pods and nothing billed", n)
				}
			}
			st := &kubefairv1.TenantStatus{}
			tier := resolveTier(tenant, nil)
			tier.condition.Status = metav1.ConditionTrue
			setConditions(st, 1, tier, namespaceResult{owned: []string{"shop"}}, usage, metav1.NewTime(time.Now()))
			enforced := meta.FindStatusCondition(st.Conditions, kubefairv1.ConditionEnforced)
			degraded := meta.FindStatusCondition(st.Conditions, kubefairv1.ConditionDegraded)
			if enforced.Status != tc.enforced || enforced.Reason != tc.enforcedReason {
				t.Errorf("Enforced = %s/%s, want %s/%s", enforced.Status, enforced.Reason, tc.enforced, tc.enforcedReason)
			}
			if degraded.Reason != tc.degradedReason || !strings.Contains(degraded.Message, tc.messageContains) {
				t.Errorf("Degraded = %s: %q, want %s containing %q", degraded.Reason, degraded.Message, tc.degradedReason, tc.messageContains)
			}
		})
	}
}
