// Package controllers holds kubefair's reconcilers: Tenants (weight, namespaces,
// the nodes' measurements and cost) and PricingTiers (who uses them).
package controllers

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	kubefairv1 "github.com/kubefair/kubefair/api/v1alpha1"
	"github.com/kubefair/kubefair/controllers/cost"
)

// TenantReconciler keeps a Tenant's status true to its spec, the tiers, the
// namespaces and what the nodes measured.
type TenantReconciler struct {
	client.Client
	Recorder events.EventRecorder
	Clock    clock.PassiveClock
}

// +kubebuilder:rbac:groups=kubefair.io,resources=tenants,verbs=get;list;watch
// +kubebuilder:rbac:groups=kubefair.io,resources=tenants/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=kubefair.io,resources=pricingtiers,verbs=get;list;watch
// +kubebuilder:rbac:groups=kubefair.io,resources=nodesharereports,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=namespaces,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=events,verbs=create;patch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// Reconcile computes the tenant's status from scratch and writes it only
// when it changed. Cost is accrued in the same write that records the
// consumed counters, so a conflict or a crash can never count twice.
func (r *TenantReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	log := logf.FromContext(ctx)
	var tenant kubefairv1.Tenant
	if err := r.Get(ctx, req.NamespacedName, &tenant); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}

	tier, err := r.tierOf(ctx, &tenant)
	if err != nil {
		return ctrl.Result{}, err
	}
	var tenants kubefairv1.TenantList
	if err := r.List(ctx, &tenants); err != nil {
		return ctrl.Result{}, fmt.Errorf("listing tenants: %w", err)
	}
	var namespaces corev1.NamespaceList
	if err := r.List(ctx, &namespaces); err != nil {
		return ctrl.Result{}, fmt.Errorf("listing namespaces: %w", err)
	}
	var reports kubefairv1.NodeShareReportList
	if err := r.List(ctx, &reports); err != nil {
		return ctrl.Result{}, fmt.Errorf("listing node share reports: %w", err)
	}

	resolvedTier := resolveTier(&tenant, tier)
	ns := resolveNamespaces(&tenant, tenants.Items, namespaces.Items)
	usage := aggregateReports(&tenant, reports.Items, resolvedTier.priceMicros >= 0)

	status := *tenant.Status.DeepCopy()
	status.ObservedGeneration = tenant.Generation
	status.EffectiveWeight = resolvedTier.weight
	status.Namespaces = ns.owned
	status.Nodes = usage.nodes
	status.EntitledShare = usage.entitled
	status.AchievedShare = usage.achieved
	if resolvedTier.priceMicros >= 0 {
		status.CPUNanoseconds += usage.addedNS
		total, err := cost.Total{Micros: status.CostMicros, Remainder: status.CostRemainder}.Add(usage.addedNS, resolvedTier.priceMicros)
		if err != nil {
			return ctrl.Result{}, fmt.Errorf("accruing cost: %w", err)
		}
		status.CostMicros, status.CostRemainder = total.Micros, total.Remainder
		status.Currency = resolvedTier.currency
	}
	status.CPUSeconds = cost.FormatCPUSeconds(status.CPUNanoseconds)
	status.Cost = cost.FormatMicros(status.CostMicros)
	setConditions(&status, tenant.Generation, resolvedTier, ns, usage, metav1.NewTime(r.Clock.Now()))

	if equality.Semantic.DeepEqual(tenant.Status, status) {
		return ctrl.Result{}, nil
	}
	r.recordTransitions(&tenant, &status, ns)
	tenant.Status = status
	if err := r.Status().Update(ctx, &tenant); err != nil {
		return ctrl.Result{}, ignoreLostRace(err)
	}
	log.V(1).Info("status updated", "weight", status.EffectiveWeight, "namespaces", len(status.Namespaces),
		"achieved", status.AchievedShare, "accruedNanoseconds", usage.addedNS)
	return ctrl.Result{}, nil
}

// ignoreLostRace drops the errors of a status write that lost a race: the
// object is gone, or the cache was behind the server (a conflict), in which
// case the newer version's watch event brings the object back and that
// attempt recomputes from fresh counters. Neither is worth an error log and
// a backoff.
func ignoreLostRace(err error) error {
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		return nil
	}
	return err
}

// tierOf returns the tenant's PricingTier, nil when spec.tier names none.
func (r *TenantReconciler) tierOf(ctx context.Context, t *kubefairv1.Tenant) (*kubefairv1.PricingTier, error) {
	if t.Spec.Tier == "" {
		return nil, nil
	}
	var tier kubefairv1.PricingTier
	if err := r.Get(ctx, types.NamespacedName{Name: t.Spec.Tier}, &tier); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("reading tier %q: %w", t.Spec.Tier, err)
	}
	return &tier, nil
}

// The actions of the tenant controller's events (events.k8s.io/v1 asks
// what was being done, beside why).
const (
	actionResolveTier     = "ResolveTier"
	actionClaimNamespaces = "ClaimNamespaces"
	actionMeasurePods     = "MeasurePods"
	actionAccrueCost      = "AccrueCost"
)

// recordTransitions emits an event when the tenant enters a state a user
// must act on; steady states emit nothing.
func (r *TenantReconciler) recordTransitions(t *kubefairv1.Tenant, next *kubefairv1.TenantStatus, ns namespaceResult) {
	was := func(typ, reason string) bool {
		for _, c := range t.Status.Conditions {
			if c.Type == typ && c.Reason == reason {
				return true
			}
		}
		return false
	}
	for _, c := range next.Conditions {
		switch {
		case c.Type == kubefairv1.ConditionTierResolved && c.Reason == kubefairv1.ReasonTierNotFound && c.Status == metav1.ConditionFalse && !was(c.Type, c.Reason):
			r.Recorder.Eventf(t, nil, corev1.EventTypeWarning, kubefairv1.EventTierMissing, actionResolveTier, "%s", c.Message)
		case c.Type == kubefairv1.ConditionDegraded && c.Reason == kubefairv1.ReasonNamespaceConflict && !was(c.Type, c.Reason):
			r.Recorder.Eventf(t, nil, corev1.EventTypeWarning, kubefairv1.EventNamespaceConflict, actionClaimNamespaces, "%s", c.Message)
		case c.Type == kubefairv1.ConditionDegraded && c.Reason == kubefairv1.ReasonPodsUnmeasured && !was(c.Type, c.Reason):
			r.Recorder.Eventf(t, nil, corev1.EventTypeWarning, kubefairv1.EventPodsUnmeasured, actionMeasurePods, "%s", c.Message)
		}
	}
	for i, n := range next.Nodes {
		if i < len(t.Status.Nodes) && t.Status.Nodes[i].Node == n.Node && len(n.Counters) > 0 && len(t.Status.Nodes[i].Counters) > 0 &&
			n.Counters[len(n.Counters)-1].BootID != t.Status.Nodes[i].Counters[len(t.Status.Nodes[i].Counters)-1].BootID {
			r.Recorder.Eventf(t, nil, corev1.EventTypeNormal, kubefairv1.EventCounterReset, actionAccrueCost,
				"the agent on node %s restarted (boot %s); its counter is consumed from zero, nothing is counted twice", n.Node, n.Counters[len(n.Counters)-1].BootID)
		}
	}
}

// SetupWithManager watches Tenants and maps tier, namespace, report and
// other-tenant changes to exactly the tenants they affect.
func (r *TenantReconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		Named("tenant").
		For(&kubefairv1.Tenant{}, builder.WithPredicates(predicate.Or(predicate.GenerationChangedPredicate{}, predicate.LabelChangedPredicate{}))).
		Watches(&kubefairv1.Tenant{}, handler.EnqueueRequestsFromMapFunc(r.tenantsSharingNamespaces)).
		Watches(&kubefairv1.PricingTier{}, handler.EnqueueRequestsFromMapFunc(r.tenantsOfTier)).
		Watches(&corev1.Namespace{}, handler.EnqueueRequestsFromMapFunc(r.tenantsOfNamespace)).
		Watches(&kubefairv1.NodeShareReport{}, handler.EnqueueRequestsFromMapFunc(r.tenantsOfReport)).
		Complete(r)
}

func (r *TenantReconciler) byIndex(ctx context.Context, index, value string, into map[string]bool) {
	var list kubefairv1.TenantList
	if err := r.List(ctx, &list, client.MatchingFields{index: value}); err != nil {
		logf.FromContext(ctx).Error(err, "listing tenants by index", "index", index, "value", value)
		return
	}
	for _, t := range list.Items {
		into[t.Name] = true
	}
}

func requests(names map[string]bool) []reconcile.Request {
	out := make([]reconcile.Request, 0, len(names))
	for n := range names {
		out = append(out, reconcile.Request{NamespacedName: types.NamespacedName{Name: n}})
	}
	return out
}

// tenantsSharingNamespaces: a tenant that claims, drops or changes a
// namespace can change who wins it, so its rivals recompute too.
func (r *TenantReconciler) tenantsSharingNamespaces(ctx context.Context, o client.Object) []reconcile.Request {
	t := o.(*kubefairv1.Tenant)
	names := map[string]bool{}
	for _, ns := range append(append([]string{}, t.Spec.Namespaces...), t.Status.Namespaces...) {
		r.byIndex(ctx, indexNamespace, ns, names)
	}
	if t.Spec.NamespaceSelector != nil { // a selector can reach any namespace
		var namespaces corev1.NamespaceList
		if err := r.List(ctx, &namespaces); err == nil {
			if claimed, err := claimedNamespaces(t, namespaces.Items); err == nil {
				for ns := range claimed {
					r.byIndex(ctx, indexNamespace, ns, names)
				}
			}
		}
	}
	delete(names, t.Name)
	return requests(names)
}

func (r *TenantReconciler) tenantsOfTier(ctx context.Context, o client.Object) []reconcile.Request {
	names := map[string]bool{}
	r.byIndex(ctx, indexTier, o.GetName(), names)
	return requests(names)
}

// tenantsOfNamespace: tenants naming it, owning it, or whose selector
// matches its current labels (a label change arrives as old and new object).
func (r *TenantReconciler) tenantsOfNamespace(ctx context.Context, o client.Object) []reconcile.Request {
	ns := o.(*corev1.Namespace)
	names := map[string]bool{}
	r.byIndex(ctx, indexNamespace, ns.Name, names)
	var all kubefairv1.TenantList
	if err := r.List(ctx, &all); err == nil {
		for i := range all.Items {
			t := &all.Items[i]
			if t.Spec.NamespaceSelector == nil {
				continue
			}
			if claimed, err := claimedNamespaces(t, []corev1.Namespace{*ns}); err == nil && claimed[ns.Name] {
				names[t.Name] = true
			}
		}
	}
	return requests(names)
}

// tenantsOfReport: tenants the report names, and tenants that had an entry
// for the node (the report dropped them or was deleted).
func (r *TenantReconciler) tenantsOfReport(ctx context.Context, o client.Object) []reconcile.Request {
	report := o.(*kubefairv1.NodeShareReport)
	names := map[string]bool{}
	for _, s := range report.Tenants {
		names[s.Name] = true
	}
	for _, u := range report.Unmeasured {
		names[u.Tenant] = true
	}
	r.byIndex(ctx, indexNode, report.Name, names)
	return requests(names)
}
