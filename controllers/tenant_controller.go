// Package controllers holds kubefair's reconcilers: Tenants (weight, namespaces,
// the nodes' measurements and cost) and PricingTiers (who uses them).
package controllers

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	kubefairv1 "github.com/kubefair/kubefair/api/v1alpha1"
	"github.com/kubefair/kubefair/controllers/billing"
)

// TenantReconciler keeps a Tenant's status true to its spec, the tiers, the
// namespaces, what the nodes measure now and what the ledger billed, and
// holds a deleted tenant until its last CPU is recorded.
type TenantReconciler struct {
	client.Client
	// APIReader reads the tenant afresh when a status write conflicts.
	APIReader client.Reader
	Recorder  events.EventRecorder
	Clock     clock.PassiveClock
	// StatusPeriod spaces the reconciles the nodes' reports, usage records
	// and bills cause (throttle).
	StatusPeriod time.Duration
}

// +kubebuilder:rbac:groups=kubefair.io,resources=tenants,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=kubefair.io,resources=tenants/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=kubefair.io,resources=tenants/finalizers,verbs=update
// +kubebuilder:rbac:groups=kubefair.io,resources=pricingtiers,verbs=get;list;watch
// +kubebuilder:rbac:groups=kubefair.io,resources=nodesharereports,verbs=get;list;watch
// +kubebuilder:rbac:groups=kubefair.io,resources=usagerecords;tenantbills,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=namespaces,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=events,verbs=create;patch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// Reconcile computes the tenant's status from scratch and writes it when it
// changed, retrying a write that conflicts from a fresh read. A tenant keeps
// the final-bill finalizer until its nodes' final counters are recorded.
func (r *TenantReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	log := logf.FromContext(ctx)
	var tenant kubefairv1.Tenant
	if err := r.Get(ctx, req.NamespacedName, &tenant); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if tenant.DeletionTimestamp == nil && controllerutil.AddFinalizer(&tenant, kubefairv1.FinalizerFinalBill) {
		if err := r.Update(ctx, &tenant); err != nil {
			return ctrl.Result{RequeueAfter: lostRaceRetry}, ignoreLostRace(err)
		}
	}
	var result ctrl.Result
	first := true
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if !first { // the cache was behind: read the tenant afresh
			if err := r.APIReader.Get(ctx, req.NamespacedName, &tenant); err != nil {
				return err
			}
		}
		first = false
		var err error
		result, err = r.reconcileStatus(ctx, &tenant)
		return err
	})
	if apierrors.IsConflict(err) { // still behind after the retries: again, soon
		return ctrl.Result{RequeueAfter: lostRaceRetry}, nil
	}
	if err != nil {
		return ctrl.Result{}, ignoreLostRace(err)
	}
	if tenant.DeletionTimestamp != nil {
		return r.releaseWhenBilled(ctx, &tenant, result)
	}
	log.V(1).Info("reconciled", "weight", tenant.Status.EffectiveWeight, "achieved", tenant.Status.AchievedShare, "cpuSeconds", tenant.Status.CPUSeconds)
	return result, nil
}

// reconcileStatus computes the status and writes it if it changed; the
// result asks to be called again when a report goes stale or the billing
// period ends.
func (r *TenantReconciler) reconcileStatus(ctx context.Context, tenant *kubefairv1.Tenant) (ctrl.Result, error) {
	tier, err := r.tierOf(ctx, tenant)
	if err != nil {
		return ctrl.Result{}, err
	}
	// Lists read the cache in place (no copies: at 1000 nodes a tenant's
	// reconcile would otherwise copy a hundred reports and records, a
	// hundred tenants a period); nothing here writes to them.
	var tenants kubefairv1.TenantList
	if err := r.List(ctx, &tenants, client.UnsafeDisableDeepCopy); err != nil {
		return ctrl.Result{}, fmt.Errorf("listing tenants: %w", err)
	}
	var namespaces corev1.NamespaceList
	if err := r.List(ctx, &namespaces, client.UnsafeDisableDeepCopy); err != nil {
		return ctrl.Result{}, fmt.Errorf("listing namespaces: %w", err)
	}
	reports, err := r.reportsNaming(ctx, tenant)
	if err != nil {
		return ctrl.Result{}, err
	}
	var open kubefairv1.UsageRecordList
	if err := r.List(ctx, &open, client.MatchingFields{indexOpenRecordTenant: string(tenant.UID)}, client.UnsafeDisableDeepCopy); err != nil {
		return ctrl.Result{}, fmt.Errorf("listing usage records: %w", err)
	}
	now := r.Clock.Now()
	resolvedTier := resolveTier(tenant, tier)
	bill, err := r.billOf(ctx, tenant, billing.Period(now))
	if err != nil {
		return ctrl.Result{}, err
	}
	ns := resolveNamespaces(tenant, tenants.Items, namespaces.Items)
	if tenant.DeletionTimestamp != nil {
		ns = namespaceResult{} // a tenant being deleted gives its namespaces up
	}
	usage := aggregateReports(tenant, reports, now)
	billed := billingOf(tenant, resolvedTier.currency, bill, open.Items, now)

	status := *tenant.Status.DeepCopy()
	status.ObservedGeneration = tenant.Generation
	status.EffectiveWeight, status.LatencyClass = resolvedTier.weight, resolvedTier.latency
	status.Namespaces = ns.owned
	status.EntitledShare, status.AchievedShare, status.ReportingNodes = usage.entitled, usage.achieved, usage.reportingNodes
	status.Period, status.Bill, status.CPUSeconds, status.Cost, status.Currency = billed.period, billed.bill, billed.cpuSeconds, billed.cost, resolvedTier.currency
	setConditions(&status, tenant.Generation, resolvedTier, ns, usage, billed, overlappingWorkloads(tenant.Spec.Workloads), metav1.NewTime(now))

	result := ctrl.Result{RequeueAfter: nextPeriod(now).Sub(now)}
	if !usage.recheck.IsZero() {
		result.RequeueAfter = min(result.RequeueAfter, max(usage.recheck.Sub(now), time.Second))
	}
	if equality.Semantic.DeepEqual(tenant.Status, status) {
		return result, nil
	}
	r.recordTransitions(tenant, &status)
	tenant.Status = status
	return result, r.Status().Update(ctx, tenant)
}

// reportsNaming are the reports with the tenant's share or its unmeasured
// pods, from the cache in place.
func (r *TenantReconciler) reportsNaming(ctx context.Context, t *kubefairv1.Tenant) ([]kubefairv1.NodeShareReport, error) {
	var out []kubefairv1.NodeShareReport
	seen := map[string]bool{}
	for _, key := range []string{"uid/" + string(t.UID), "name/" + t.Name} {
		var list kubefairv1.NodeShareReportList
		if err := r.List(ctx, &list, client.MatchingFields{indexReportTenant: key}, client.UnsafeDisableDeepCopy); err != nil {
			return nil, fmt.Errorf("listing node share reports: %w", err)
		}
		for _, rep := range list.Items {
			if !seen[rep.Name] {
				seen[rep.Name] = true
				out = append(out, rep)
			}
		}
	}
	return out, nil
}

// billOf is the tenant's TenantBill of a period, nil when it has none yet.
func (r *TenantReconciler) billOf(ctx context.Context, t *kubefairv1.Tenant, period string) (*kubefairv1.TenantBill, error) {
	var bill kubefairv1.TenantBill
	if err := r.Get(ctx, client.ObjectKey{Name: billing.BillName(t.Name, string(t.UID), period)}, &bill); err != nil {
		return nil, client.IgnoreNotFound(err)
	}
	return &bill, nil
}

// releaseWhenBilled lets a deleted tenant go once its nodes' final counters
// are recorded (or they stopped reporting), or after finalUsageTimeout.
func (r *TenantReconciler) releaseWhenBilled(ctx context.Context, t *kubefairv1.Tenant, result ctrl.Result) (ctrl.Result, error) {
	c := meta.FindStatusCondition(t.Status.Conditions, kubefairv1.ConditionBilled)
	waiting := c != nil && c.Reason == kubefairv1.ReasonAwaitingFinalUsage
	timedOut := r.Clock.Now().After(t.DeletionTimestamp.Add(finalUsageTimeout))
	if waiting && !timedOut {
		return ctrl.Result{RequeueAfter: 5 * time.Second}, nil
	}
	if !controllerutil.RemoveFinalizer(t, kubefairv1.FinalizerFinalBill) {
		return ctrl.Result{}, nil
	}
	if waiting {
		r.Recorder.Eventf(t, nil, corev1.EventTypeWarning, kubefairv1.EventFinalBill, actionFinalBill, "let go after %s without the final counters: %s", finalUsageTimeout, c.Message)
	} else {
		r.Recorder.Eventf(t, nil, corev1.EventTypeNormal, kubefairv1.EventFinalBill, actionFinalBill,
			"its last CPU is recorded: %s CPU-seconds in %s so far; its bills stay (kubectl get tenantbills --field-selector tenantUID=%s)", t.Status.CPUSeconds, t.Status.Period, t.UID)
	}
	return ctrl.Result{}, ignoreLostRace(r.Update(ctx, t))
}

// nextPeriod is when the billing period that holds now ends.
func nextPeriod(now time.Time) time.Time {
	y, m, d := now.UTC().Date()
	return time.Date(y, m, d+1, 0, 0, 0, 0, time.UTC)
}

// ignoreLostRace drops the error of a write whose object is gone.
func ignoreLostRace(err error) error {
	if apierrors.IsNotFound(err) {
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
	actionSplitWorkloads  = "SplitWorkloads"
	actionEntitle         = "Entitle"
	actionFinalBill       = "RecordFinalBill"
)

// recordTransitions emits an event when the tenant enters a state a user
// must act on; steady states emit nothing.
func (r *TenantReconciler) recordTransitions(t *kubefairv1.Tenant, next *kubefairv1.TenantStatus) {
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
		case c.Type == kubefairv1.ConditionDegraded && c.Reason == kubefairv1.ReasonCPULimited && !was(c.Type, c.Reason):
			r.Recorder.Eventf(t, nil, corev1.EventTypeWarning, kubefairv1.EventCPULimited, actionEntitle, "%s", c.Message)
		case c.Type == kubefairv1.ConditionDegraded && c.Reason == kubefairv1.ReasonExclusiveCPUs && !was(c.Type, c.Reason):
			r.Recorder.Eventf(t, nil, corev1.EventTypeWarning, kubefairv1.EventExclusiveCPUs, actionEntitle, "%s", c.Message)
		case c.Type == kubefairv1.ConditionDegraded && c.Reason == kubefairv1.ReasonWeightBound && !was(c.Type, c.Reason):
			r.Recorder.Eventf(t, nil, corev1.EventTypeWarning, kubefairv1.EventWeightBound, actionEntitle, "%s", c.Message)
		case c.Type == kubefairv1.ConditionDegraded && c.Reason == kubefairv1.ReasonWorkloadsOverlap && !was(c.Type, c.Reason):
			r.Recorder.Eventf(t, nil, corev1.EventTypeWarning, kubefairv1.EventWorkloadsOverlap, actionSplitWorkloads, "%s", c.Message)
		}
	}
}

// SetupWithManager watches Tenants and maps tier, namespace, report and
// other-tenant changes to exactly the tenants they affect.
func (r *TenantReconciler) SetupWithManager(mgr ctrl.Manager) error {
	// What the nodes' reports cause comes at most once per status period;
	// what a user changes, at once.
	reports := newThrottle[reconcile.Request](r.StatusPeriod)
	return ctrl.NewControllerManagedBy(mgr).
		Named("tenant").
		For(&kubefairv1.Tenant{}, builder.WithPredicates(predicate.Or(predicate.GenerationChangedPredicate{}, predicate.LabelChangedPredicate{},
			predicate.AnnotationChangedPredicate{}, deletionStarted{}, statusWiped{}))).
		Watches(&kubefairv1.Tenant{}, handler.EnqueueRequestsFromMapFunc(r.tenantsSharingNamespaces)).
		Watches(&kubefairv1.PricingTier{}, handler.EnqueueRequestsFromMapFunc(r.tenantsOfTier)).
		Watches(&corev1.Namespace{}, handler.EnqueueRequestsFromMapFunc(r.tenantsOfNamespace)).
		Watches(&kubefairv1.NodeShareReport{}, reports.handler(r.tenantsOfReport)).
		Watches(&kubefairv1.UsageRecord{}, reports.handler(r.tenantsOfRecord)).
		Watches(&kubefairv1.TenantBill{}, reports.handler(func(_ context.Context, o client.Object) []reconcile.Request {
			return []reconcile.Request{{NamespacedName: types.NamespacedName{Name: o.(*kubefairv1.TenantBill).Tenant}}}
		})).
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

// tenantsOfReport: the tenants a report names (an update maps the old and
// the new report, so tenants it no longer names recompute too).
func (r *TenantReconciler) tenantsOfReport(_ context.Context, o client.Object) []reconcile.Request {
	report := o.(*kubefairv1.NodeShareReport)
	names := map[string]bool{}
	for _, s := range report.Tenants {
		names[s.Name] = true
	}
	for _, u := range report.Unmeasured {
		names[u.Tenant] = true
	}
	return requests(names)
}

// tenantsOfRecord: the tenants an open usage record names (charge lines,
// the cursor's final counters, refusals).
func (r *TenantReconciler) tenantsOfRecord(ctx context.Context, o client.Object) []reconcile.Request {
	names := map[string]bool{}
	for _, uid := range openRecordTenants(o.(*kubefairv1.UsageRecord)) {
		r.byIndex(ctx, indexUID, uid, names)
	}
	return requests(names)
}

// deletionStarted passes the update that marks a tenant for deletion.
type deletionStarted struct{ predicate.Funcs }

func (deletionStarted) Update(e event.UpdateEvent) bool {
	return e.ObjectOld.GetDeletionTimestamp() == nil && e.ObjectNew.GetDeletionTimestamp() != nil
}

// statusWiped passes an update that emptied the status (a restore, a
// hand edit): it is recomputed from the cluster and the ledger at once.
type statusWiped struct{ predicate.Funcs }

func (statusWiped) Update(e event.UpdateEvent) bool {
	return e.ObjectNew.(*kubefairv1.Tenant).Status.ObservedGeneration == 0 && e.ObjectOld.(*kubefairv1.Tenant).Status.ObservedGeneration != 0
}
