package controllers

import (
	"context"
	"fmt"
	"sort"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	kubefairv1 "github.com/kubefair/kubefair/api/v1alpha1"
	"github.com/kubefair/kubefair/controllers/cost"
)

// PricingTierReconciler records which tenants use each tier, and the
// tier's prices over time.
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
	if len(status.Tenants) > maxTierTenants {
		status.Tenants = status.Tenants[:maxTierTenants]
	}
	for _, p := range priceTimeline(&tier) {
		status.Prices = append(status.Prices, kubefairv1.PriceChange{PricePerCPUHour: cost.FormatPrice(p.Micros), Since: metav1.NewTime(p.Since)})
	}
	if n := len(status.Prices); n > maxPrices {
		status.Prices = status.Prices[n-maxPrices:]
	}
	if equality.Semantic.DeepEqual(tier.Status, status) {
		return ctrl.Result{}, nil
	}
	tier.Status = status
	if err := r.Status().Update(ctx, &tier); apierrors.IsConflict(err) {
		return ctrl.Result{RequeueAfter: lostRaceRetry}, nil
	} else if err != nil {
		return ctrl.Result{}, ignoreLostRace(err)
	}
	return ctrl.Result{}, nil
}

// maxTierTenants is how many tenant names a tier's status lists (its
// maxItems in the CRD); tenantCount counts them all.
const maxTierTenants = 1024

// maxPrices is how many prices a tier's status keeps: CPU not yet billed
// is at most a few report windows old, far younger than 32 price changes.
const maxPrices = 32

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
