package controller

import (
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kubefairv1 "github.com/kubefair/kubefair/api/v1alpha1"
)

func TestTierResolutionAndUpdates(t *testing.T) {
	startManager(t)
	create(t, namespace("tier-ns", nil), tier("tier-gold", 400, "0.09"), tenantOnTier("tier-user", "tier-gold", "tier-ns"))
	eventually(t, "weight 400 from the tier, Ready", func() (bool, string) {
		tn := getTenant(t, "tier-user")
		return tn.Status.EffectiveWeight == 400 && condition(tn, kubefairv1.ConditionReady).Status == metav1.ConditionTrue &&
			condition(tn, kubefairv1.ConditionTierResolved).Reason == kubefairv1.ReasonTierFound &&
			tn.Status.ObservedGeneration == tn.Generation, describe(tn)
	})
	eventually(t, "the tier lists its tenant", func() (bool, string) {
		var pt kubefairv1.PricingTier
		_ = k8s.Get(ctx(), client.ObjectKey{Name: "tier-gold"}, &pt)
		return pt.Status.TenantCount == 1 && pt.Status.Tenants[0] == "tier-user", fmt.Sprint(pt.Status)
	})

	// A new weight on the tier reaches the tenant.
	var pt kubefairv1.PricingTier
	if err := k8s.Get(ctx(), client.ObjectKey{Name: "tier-gold"}, &pt); err != nil {
		t.Fatal(err)
	}
	pt.Spec.Weight = 800
	if err := k8s.Update(ctx(), &pt); err != nil {
		t.Fatal(err)
	}
	eventually(t, "weight 800 after the tier update", func() (bool, string) {
		tn := getTenant(t, "tier-user")
		return tn.Status.EffectiveWeight == 800, describe(tn)
	})

	// Switching the tenant to another tier moves it between the tiers' lists.
	create(t, tier("tier-silver", 200, "0.03"))
	tn := getTenant(t, "tier-user")
	tn.Spec.Tier = "tier-silver"
	if err := k8s.Update(ctx(), tn); err != nil {
		t.Fatal(err)
	}
	eventually(t, "weight 200 and the old tier empty", func() (bool, string) {
		tn := getTenant(t, "tier-user")
		var gold kubefairv1.PricingTier
		_ = k8s.Get(ctx(), client.ObjectKey{Name: "tier-gold"}, &gold)
		return tn.Status.EffectiveWeight == 200 && gold.Status.TenantCount == 0, describe(tn) + fmt.Sprint(gold.Status)
	})
}

func TestDeletedTierIsAConditionNotACrash(t *testing.T) {
	startManager(t)
	create(t, namespace("gone-ns", nil), tier("gone-tier", 300, "1"), tenantOnTier("gone-user", "gone-tier", "gone-ns"))
	eventually(t, "weight 300", func() (bool, string) {
		tn := getTenant(t, "gone-user")
		return tn.Status.EffectiveWeight == 300, describe(tn)
	})
	if err := k8s.Delete(ctx(), tier("gone-tier", 300, "1")); err != nil {
		t.Fatal(err)
	}
	eventually(t, "TierResolved=False TierNotFound, Ready=False, the last weight kept", func() (bool, string) {
		tn := getTenant(t, "gone-user")
		return condition(tn, kubefairv1.ConditionTierResolved).Reason == kubefairv1.ReasonTierNotFound &&
			condition(tn, kubefairv1.ConditionReady).Status == metav1.ConditionFalse &&
			condition(tn, kubefairv1.ConditionDegraded).Status == metav1.ConditionTrue &&
			tn.Status.EffectiveWeight == 300, describe(tn)
	})
	eventually(t, "a TierMissing warning event", func() (bool, string) {
		return hasEvent("gone-user", kubefairv1.EventTierMissing)
	})
	// The tier coming back heals the tenant.
	create(t, tier("gone-tier", 350, "1"))
	eventually(t, "Ready again with the new weight", func() (bool, string) {
		tn := getTenant(t, "gone-user")
		return tn.Status.EffectiveWeight == 350 && condition(tn, kubefairv1.ConditionReady).Status == metav1.ConditionTrue, describe(tn)
	})
}

func hasEvent(tenant, reason string) (bool, string) {
	var events corev1.EventList
	if err := k8s.List(ctx(), &events); err != nil {
		return false, err.Error()
	}
	var seen []string
	for _, e := range events.Items {
		if e.InvolvedObject.Name == tenant && e.InvolvedObject.Kind == "Tenant" {
			if e.Reason == reason {
				return true, ""
			}
			seen = append(seen, e.Reason)
		}
	}
	return false, fmt.Sprintf("events for %s: %v", tenant, seen)
}

func TestNamespaceSelectorAndLabelChanges(t *testing.T) {
	startManager(t)
	create(t,
		namespace("sel-a", map[string]string{"team": "blue"}),
		namespace("sel-b", map[string]string{"team": "red"}),
		&kubefairv1.Tenant{ObjectMeta: metav1.ObjectMeta{Name: "sel-blue"}, Spec: kubefairv1.TenantSpec{
			Weight: ptrTo(100), Namespaces: []string{"sel-named"},
			NamespaceSelector: &kubefairv1.LabelSelector{MatchLabels: map[string]kubefairv1.LabelValue{"team": "blue"}}}})
	wantNamespaces := func(want ...string) {
		t.Helper()
		eventually(t, fmt.Sprintf("namespaces %v", want), func() (bool, string) {
			tn := getTenant(t, "sel-blue")
			return fmt.Sprint(tn.Status.Namespaces) == fmt.Sprint(want), describe(tn)
		})
	}
	wantNamespaces("sel-a") // sel-named does not exist yet
	create(t, namespace("sel-named", nil))
	wantNamespaces("sel-a", "sel-named")

	var b corev1.Namespace
	if err := k8s.Get(ctx(), client.ObjectKey{Name: "sel-b"}, &b); err != nil {
		t.Fatal(err)
	}
	b.Labels["team"] = "blue"
	if err := k8s.Update(ctx(), &b); err != nil {
		t.Fatal(err)
	}
	wantNamespaces("sel-a", "sel-b", "sel-named")

	var a corev1.Namespace
	if err := k8s.Get(ctx(), client.ObjectKey{Name: "sel-a"}, &a); err != nil {
		t.Fatal(err)
	}
	delete(a.Labels, "team")
	if err := k8s.Update(ctx(), &a); err != nil {
		t.Fatal(err)
	}
	wantNamespaces("sel-b", "sel-named")
}

func TestOverlappingTenants(t *testing.T) {
	startManager(t)
	create(t, namespace("shared-ns", nil), namespace("own-ns", nil))
	first := &kubefairv1.Tenant{ObjectMeta: metav1.ObjectMeta{Name: "overlap-first"},
		Spec: kubefairv1.TenantSpec{Weight: ptrTo(100), Namespaces: []string{"shared-ns"}}}
	create(t, first)
	time.Sleep(1100 * time.Millisecond) // creation timestamps have one-second resolution
	second := &kubefairv1.Tenant{ObjectMeta: metav1.ObjectMeta{Name: "overlap-second"},
		Spec: kubefairv1.TenantSpec{Weight: ptrTo(100), Namespaces: []string{"shared-ns", "own-ns"}}}
	create(t, second)

	eventually(t, "the older tenant keeps shared-ns, both carry the conflict", func() (bool, string) {
		f, s := getTenant(t, "overlap-first"), getTenant(t, "overlap-second")
		return fmt.Sprint(f.Status.Namespaces) == "[shared-ns]" && fmt.Sprint(s.Status.Namespaces) == "[own-ns]" &&
				condition(f, kubefairv1.ConditionDegraded).Reason == kubefairv1.ReasonNamespaceConflict &&
				condition(s, kubefairv1.ConditionDegraded).Reason == kubefairv1.ReasonNamespaceConflict,
			describe(f) + " | " + describe(s)
	})
	eventually(t, "a NamespaceConflict event on the loser", func() (bool, string) {
		return hasEvent("overlap-second", kubefairv1.EventNamespaceConflict)
	})

	// The winner letting go ends the conflict for both.
	if err := k8s.Delete(ctx(), first); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the second tenant gets shared-ns and the conflict clears", func() (bool, string) {
		s := getTenant(t, "overlap-second")
		return fmt.Sprint(s.Status.Namespaces) == "[own-ns shared-ns]" &&
			condition(s, kubefairv1.ConditionDegraded).Status == metav1.ConditionFalse, describe(s)
	})
}

func ptrTo(v int32) *int32 { return &v }
