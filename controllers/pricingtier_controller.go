package controllers

import (
	"context"
	"fmt"
	"sort"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	kubefairv1 "github.com/kubefair/kubefair/api/v1alpha1"
)

// PricingTierReconciler records which tenants use each tier.
type PricingTierReconciler struct {
	client.Client
}

// +kubebuilder:rbac:groups=kubefair.io,resources=pricingtiers,verbs=get;list;watch
// +kubebuilder:rbac:groups=kubefair.io,resources=pricingtiers/status,verbs=get;update;patch

func (r *PricingTierReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var tier kubefairv1.PricingTier
	if err := r.Get(ctx, req.NamespacedName, &tier); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	var users kubefairv1.TenantList
	if err := r.List(ctx, &users, client.MatchingFields{indexTier: tier.Name}); err != nil {
		return ctrl.Result{}, fmt.Errorf("listing tenants of tier %q: %w", tier.Name, err)
	}
	status := kubefairv1.PricingTierStatus{ObservedGeneration: tier.Generation}
	for _, t := range users.Items {
		status.Tenants = append(status.Tenants, t.Name)
	}
	sort.Strings(status.Tenants)
	status.TenantCount = int32(len(status.Tenants))
	if equality.Semantic.DeepEqual(tier.Status, status) {
		return ctrl.Result{}, nil
	}
	tier.Status = status
	return ctrl.Result{}, ignoreLostRace(r.Status().Update(ctx, &tier))
}

// SetupWithManager requeues a tier when a tenant starts or stops using it
// (an update maps both the old and the new tenant object).
func (r *PricingTierReconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		Named("pricingtier").
		For(&kubefairv1.PricingTier{}).
		Watches(&kubefairv1.Tenant{}, handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
			if tier := o.(*kubefairv1.Tenant).Spec.Tier; tier != "" {
				return []reconcile.Request{{NamespacedName: types.NamespacedName{Name: tier}}}
			}
			return nil
		})).
		Complete(r)
}
