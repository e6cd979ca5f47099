package controllers

import (
	"context"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	kubefairv1 "github.com/kubefair/kubefair/api/v1alpha1"
	"github.com/kubefair/kubefair/controllers/billing"
)

// lostRaceRetry is how soon a reconcile whose write lost a race (the cache
// was behind the server) runs again, from fresh state.
const lostRaceRetry = 200 * time.Millisecond

// LedgerReconciler counts each node's NodeShareReport into the node's
// UsageRecords (controllers/billing decides; this reads and writes). Its
// requests are named after nodes.
type LedgerReconciler struct {
	client.Client
	// APIReader reads from the API server, not the cache: for the rare
	// reads that must not be behind (an archive to replace, the record an
	// open record deleted is continued from).
	APIReader client.Reader
	Facts     *clusterFacts
	Recorder  events.EventRecorder
	Clock     clock.PassiveClock
	Metrics   *billingMetrics
}

// +kubebuilder:rbac:groups=kubefair.io,resources=nodesharereports,verbs=get;list;watch;patch;delete
// +kubebuilder:rbac:groups=kubefair.io,resources=usagerecords,verbs=get;list;watch;create;update;patch
// +kubebuilder:rbac:groups=kubefair.io,resources=tenants,verbs=get;list;watch
// +kubebuilder:rbac:groups=kubefair.io,resources=pricingtiers,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=events,verbs=create;patch

// Reconcile counts the node's report: it reads the node's open record (or
// the closed one it continues from), the report and what the cluster says
// about the node and the report's tenants, lets billing.Accrue decide, and
// writes the archive of a period that ended, then the open record. A write
// that loses a race changes nothing and the reconcile runs again. A node
// that does not exist has its report deleted and its open record archived.
func (r *LedgerReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	node := req.Name
	var open *kubefairv1.UsageRecord
	var rec kubefairv1.UsageRecord
	switch err := r.Get(ctx, client.ObjectKey{Name: billing.OpenRecordName(node)}, &rec); {
	case err == nil:
		open = &rec
	case !apierrors.IsNotFound(err):
		return ctrl.Result{}, err
	}
	if open != nil && open.DeletionTimestamp != nil {
		return r.lostRace(r.archiveDeleted(ctx, open))
	}
	report := &kubefairv1.NodeShareReport{}
	switch err := r.Get(ctx, client.ObjectKey{Name: node}, report); {
	case apierrors.IsNotFound(err):
		report = nil
	case err != nil:
		return ctrl.Result{}, err
	}
	if report == nil && open == nil {
		return ctrl.Result{}, nil // nothing of the node's here
	}
	n, err := r.node(ctx, node)
	if err != nil {
		return ctrl.Result{}, err
	}
	if n == nil {
		return r.lostRace(r.nodeGone(ctx, node, report, open))
	}
	if report == nil {
		return ctrl.Result{}, nil // a report deleted bills nothing: its node's cursor is here
	}
	if err := r.adopt(ctx, report, n); err != nil {
		return r.lostRace(err)
	}
	var last *kubefairv1.UsageRecord
	if open == nil {
		if last, err = r.furthestClosed(ctx, node); err != nil {
			return ctrl.Result{}, err
		}
	}
	facts, tenants, err := r.factsOf(ctx, report, n)
	if err != nil {
		return ctrl.Result{}, err
	}
	res := billing.Accrue(open, last, report, facts)
	if res.Archive != nil {
		if err := r.writeArchive(ctx, res.Archive); err != nil {
			return r.lostRace(err)
		}
	}
	if w := res.Write; w != nil {
		if res.Create {
			err = r.Create(ctx, w)
		} else {
			err = r.Update(ctx, w)
		}
		if err != nil {
			return r.lostRace(err)
		}
		if err := r.releaseSuperseded(ctx, node, w); err != nil {
			return r.lostRace(err)
		}
	}
	if res.Write != nil || open == nil { // a write that happened, or a refusal with nowhere to note it
		r.Metrics.observe(node, res, res.CPU)
		r.announce(report, res, tenants)
	}
	return ctrl.Result{}, nil
}

// node is the Node named name, from the cache or, when the cache has none
// (a Node just created may not be in it yet), the API server; nil when
// there is none.
func (r *LedgerReconciler) node(ctx context.Context, name string) (*corev1.Node, error) {
	n, err := r.Facts.node(ctx, name)
	if n != nil || err != nil {
		return n, err
	}
	var live corev1.Node
	if err := r.APIReader.Get(ctx, client.ObjectKey{Name: name}, &live); err != nil {
		return nil, client.IgnoreNotFound(err)
	}
	return &live, nil
}

// nodeGone handles a node that does not exist (deleted, or never was):
// its report is refused with an event and deleted — the Node owns it, but
// an agent that outlives its Node writes it again, with no owner — and its
// open record is deleted, which archives it, cursor and all: the tenants
// it named stop showing the node, its bills can become final, and a node
// of that name that comes back continues from the archive.
func (r *LedgerReconciler) nodeGone(ctx context.Context, node string, report *kubefairv1.NodeShareReport, open *kubefairv1.UsageRecord) error {
	if report != nil {
		res := billing.Result{Reason: kubefairv1.ReasonUnknownNode,
			Message: fmt.Sprintf("no Node named %s exists (deleted, or never was): the report is deleted", node)}
		r.Metrics.observe(node, res, kubefairv1.NodeCPUTime{})
		r.announce(report, res, nil)
		err := r.Delete(ctx, report, client.Preconditions{UID: &report.UID, ResourceVersion: &report.ResourceVersion})
		if err != nil && !apierrors.IsNotFound(err) {
			return err // a conflict: written again since, and counted again
		}
	}
	if open != nil {
		return client.IgnoreNotFound(r.Delete(ctx, open))
	}
	return nil
}

// lostRace turns a write that lost a race into a quick retry, without an
// error log: the cache was behind the server.
func (r *LedgerReconciler) lostRace(err error) (ctrl.Result, error) {
	if apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err) || apierrors.IsNotFound(err) {
		return ctrl.Result{RequeueAfter: lostRaceRetry}, nil
	}
	return ctrl.Result{}, err
}

// adopt makes the Node the report's owner, so that the report goes with
// the Node (the agent keeps the owner when it rewrites the report).
func (r *LedgerReconciler) adopt(ctx context.Context, report *kubefairv1.NodeShareReport, n *corev1.Node) error {
	if n == nil || slices.ContainsFunc(report.OwnerReferences, func(o metav1.OwnerReference) bool { return o.UID == n.UID }) {
		return nil
	}
	patch := client.MergeFromWithOptions(report.DeepCopy(), client.MergeFromWithOptimisticLock{})
	report.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: n.Name, UID: n.UID}}
	return r.Patch(ctx, report, patch)
}

// furthestClosed is the node's closed record that counted furthest, read
// from the API server: the one an open record deleted is continued from.
func (r *LedgerReconciler) furthestClosed(ctx context.Context, node string) (*kubefairv1.UsageRecord, error) {
	var list kubefairv1.UsageRecordList
	if err := r.APIReader.List(ctx, &list, client.MatchingFields{"node": node}); err != nil {
		return nil, fmt.Errorf("listing node %s's usage records: %w", node, err)
	}
	var out *kubefairv1.UsageRecord
	for i := range list.Items {
		if c := &list.Items[i]; c.Closed && (out == nil || billing.Advances(c, out)) {
			out = c
		}
	}
	return out, nil
}

// writeArchive writes a period's closed record: created, or replacing one
// that counted less (read from the API server, so an archive is never
// replaced by an older one computed from a cache that is behind).
func (r *LedgerReconciler) writeArchive(ctx context.Context, a *kubefairv1.UsageRecord) error {
	err := r.Create(ctx, a)
	if !apierrors.IsAlreadyExists(err) {
		return err
	}
	var have kubefairv1.UsageRecord
	if err := r.APIReader.Get(ctx, client.ObjectKeyFromObject(a), &have); err != nil {
		return err
	}
	advances := billing.Advances(a, &have)
	holdsCursor := len(a.Finalizers) > 0 && !controllerutil.ContainsFinalizer(&have, kubefairv1.FinalizerLedgerCursor)
	if !advances && !holdsCursor {
		return nil
	}
	if advances {
		have.Cursor, have.Lines, have.CPU, have.Refusals, have.LastReport, have.Conditions = a.Cursor, a.Lines, a.CPU, a.Refusals, a.LastReport, a.Conditions
	}
	if holdsCursor {
		controllerutil.AddFinalizer(&have, kubefairv1.FinalizerLedgerCursor)
	}
	return r.Update(ctx, &have)
}

// archiveDeleted archives an open record being deleted, with the cursor
// and its finalizer, and lets the open record go: the node's next report
// continues from the archive.
func (r *LedgerReconciler) archiveDeleted(ctx context.Context, open *kubefairv1.UsageRecord) error {
	if err := r.writeArchive(ctx, billing.Archive(open)); err != nil {
		return err
	}
	if controllerutil.RemoveFinalizer(open, kubefairv1.FinalizerLedgerCursor) {
		return r.Update(ctx, open)
	}
	return nil
}

// releaseSuperseded lets closed records that held the node's cursor go once
// the open record counts further.
func (r *LedgerReconciler) releaseSuperseded(ctx context.Context, node string, open *kubefairv1.UsageRecord) error {
	var list kubefairv1.UsageRecordList
	if err := r.List(ctx, &list, client.MatchingFields{indexRecordNode: node}); err != nil {
		return err
	}
	for i := range list.Items {
		c := &list.Items[i]
		if c.Closed && controllerutil.ContainsFinalizer(c, kubefairv1.FinalizerLedgerCursor) && !billing.Advances(c, open) {
			controllerutil.RemoveFinalizer(c, kubefairv1.FinalizerLedgerCursor)
			if err := r.Update(ctx, c); err != nil {
				return err
			}
		}
	}
	return nil
}

// factsOf reads what billing checks a report against: the Node's CPUs,
// and for each tenant it names that exists, its tier's prices and when it
// last had a pod on the node.
func (r *LedgerReconciler) factsOf(ctx context.Context, report *kubefairv1.NodeShareReport, n *corev1.Node) (billing.Facts, map[string]*kubefairv1.Tenant, error) {
	f := billing.Facts{Now: r.Clock.Now(), Tenants: map[string]billing.Tenant{}}
	if n != nil {
		f.NodeMilliCPU = n.Status.Capacity.Cpu().MilliValue()
	}
	// Read from the cache in place (a report a node every period): nothing
	// here writes to them.
	var namespaces corev1.NamespaceList
	if err := r.List(ctx, &namespaces, client.UnsafeDisableDeepCopy); err != nil {
		return f, nil, fmt.Errorf("listing namespaces: %w", err)
	}
	tenants := map[string]*kubefairv1.Tenant{}
	for _, s := range report.Tenants {
		var list kubefairv1.TenantList
		if err := r.List(ctx, &list, client.MatchingFields{indexUID: s.UID}, client.UnsafeDisableDeepCopy); err != nil {
			return f, nil, fmt.Errorf("finding tenant %s: %w", s.UID, err)
		}
		if len(list.Items) == 0 {
			continue
		}
		t := &list.Items[0]
		tenants[s.UID] = t
		bt := billing.Tenant{Name: t.Name, Tier: t.Spec.Tier}
		if t.Spec.Tier != "" {
			var tier kubefairv1.PricingTier
			switch err := r.Get(ctx, types.NamespacedName{Name: t.Spec.Tier}, &tier); {
			case err == nil:
				bt.Currency, bt.Prices = tier.Spec.Currency, priceTimeline(&tier)
			case !apierrors.IsNotFound(err):
				return f, nil, fmt.Errorf("reading tier %q: %w", t.Spec.Tier, err)
			}
		}
		// The namespaces the tenant claims (by spec, so that a status wiped
		// does not refuse its CPU) and owns.
		claimed, _ := claimedNamespaces(t, namespaces.Items)
		if claimed == nil {
			claimed = map[string]bool{}
		}
		for _, ns := range t.Status.Namespaces {
			claimed[ns] = true
		}
		bt.LastPod = r.Facts.pods.lastPod(report.Name, claimed)
		if bt.LastPod.IsZero() { // never seen there: ask the API server (a pod just started may not be in the cache yet)
			running, err := r.podsOnNode(ctx, report.Name, claimed)
			if err != nil {
				return f, nil, err
			}
			if running {
				bt.LastPod = f.Now
			}
		}
		f.Tenants[s.UID] = bt
	}
	return f, tenants, nil
}

// podsOnNode tells, from the API server, whether a pod of one of the
// namespaces is bound to the node.
func (r *LedgerReconciler) podsOnNode(ctx context.Context, node string, namespaces map[string]bool) (bool, error) {
	var pods metav1.PartialObjectMetadataList
	pods.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("PodList"))
	if err := r.APIReader.List(ctx, &pods, client.MatchingFields{"spec.nodeName": node}); err != nil {
		return false, fmt.Errorf("listing node %s's pods: %w", node, err)
	}
	for _, p := range pods.Items {
		if namespaces[p.Namespace] {
			return true, nil
		}
	}
	return false, nil
}

// actionBillReport is what the ledger was doing when it emits an event.
const actionBillReport = "BillReport"

// announce emits events for what a report could not bill, and for an
// agent that restarted.
func (r *LedgerReconciler) announce(report *kubefairv1.NodeShareReport, res billing.Result, tenants map[string]*kubefairv1.Tenant) {
	if res.RetiredBoot != "" {
		r.Recorder.Eventf(report, nil, corev1.EventTypeNormal, kubefairv1.EventCounterReset, actionBillReport,
			"the agent on node %s restarted (run %s replaced %s): its counters start from zero, and nothing is billed twice", report.Name, report.BootID, res.RetiredBoot)
	}
	if res.Reason != "" {
		r.Recorder.Eventf(report, nil, corev1.EventTypeWarning, kubefairv1.EventReportRefused, actionBillReport, "%s: %s; nothing in it was billed", res.Reason, res.Message)
	}
	for _, t := range res.Refused {
		if res.Reason == "" {
			r.Recorder.Eventf(report, nil, corev1.EventTypeWarning, kubefairv1.EventReportRefused, actionBillReport, "%s: %s", t.Reason, t.Message)
		}
		if tn := tenants[t.UID]; tn != nil {
			r.Recorder.Eventf(tn, report, corev1.EventTypeWarning, kubefairv1.EventReportRefused, actionBillReport,
				"node %s's report was not billed for this tenant: %s: %s", report.Name, t.Reason, t.Message)
		}
	}
}

// ledgerWorkers is how many nodes' reports are counted at once.
const ledgerWorkers = 8

// SetupWithManager counts a report when it changes, and again when its
// Node appears, goes, or changes its CPUs, or its open record is deleted.
func (r *LedgerReconciler) SetupWithManager(mgr ctrl.Manager) error {
	nodeChanged := predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
		o, n := e.ObjectOld.(*corev1.Node), e.ObjectNew.(*corev1.Node)
		return !o.Status.Capacity.Cpu().Equal(*n.Status.Capacity.Cpu())
	}}
	byName := handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
		return []reconcile.Request{{NamespacedName: types.NamespacedName{Name: o.GetName()}}}
	})
	return ctrl.NewControllerManagedBy(mgr).
		Named("ledger").
		// Each node's ledger is its own (its report, its records): nodes are
		// counted in parallel, so that a report's API round trips do not
		// hold up the other nodes' (1000 nodes write 100 reports a second).
		WithOptions(controller.Options{MaxConcurrentReconciles: ledgerWorkers}).
		For(&kubefairv1.NodeShareReport{}, builder.WithPredicates(predicate.ResourceVersionChangedPredicate{})).
		Watches(&kubefairv1.UsageRecord{}, handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
			if u := o.(*kubefairv1.UsageRecord); !u.Closed && u.DeletionTimestamp != nil {
				return []reconcile.Request{{NamespacedName: types.NamespacedName{Name: u.Node}}}
			}
			return nil
		})).
		WatchesRawSource(source.Kind(r.Facts.cache, client.Object(&corev1.Node{}), byName, nodeChanged)).
		Complete(r)
}
