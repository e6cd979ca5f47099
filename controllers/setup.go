package controllers

import (
	"context"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

// Options configure the reconcilers; the zero value is right for production.
type Options struct {
	// Clock stamps condition transitions; tests inject a fake one.
	Clock clock.PassiveClock
	// SkipMetrics leaves the Prometheus collectors out (tests that start
	// several managers in one process).
	SkipMetrics bool
	// Registry takes the Prometheus collectors instead of
	// controller-runtime's (a test that reads them).
	Registry prometheus.Registerer
	// StatusPeriod is how often at most the nodes' reports rewrite a
	// tenant's status and bills (default DefaultStatusPeriod).
	StatusPeriod time.Duration
}

// Leader election holds a Lease in the controller's own namespace only.
// +kubebuilder:rbac:groups=coordination.k8s.io,resources=leases,verbs=get;list;watch;create;update;patch;delete,namespace=kubefair-system

// Setup wires every kubefair reconciler, index and metric into a manager.
// main and the integration tests both use it, so they run the same thing.
func Setup(ctx context.Context, mgr ctrl.Manager, opts Options) error {
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	if opts.StatusPeriod <= 0 {
		opts.StatusPeriod = DefaultStatusPeriod
	}
	if err := registerIndexes(ctx, mgr); err != nil {
		return fmt.Errorf("registering indexes: %w", err)
	}
	var bm *billingMetrics
	if reg := opts.Registry; reg != nil || !opts.SkipMetrics {
		if reg == nil {
			reg = metrics.Registry
		}
		if err := reg.Register(tenantCollector{reader: mgr.GetCache()}); err != nil {
			return fmt.Errorf("registering tenant metrics: %w", err)
		}
		var err error
		if bm, err = newBillingMetrics(reg); err != nil {
			return fmt.Errorf("registering billing metrics: %w", err)
		}
	}
	facts, err := newClusterFacts(ctx, mgr, opts.Clock)
	if err != nil {
		return err
	}
	recorder := mgr.GetEventRecorder("kubefair-controller")
	if err := (&TenantReconciler{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Recorder: recorder, Clock: opts.Clock, StatusPeriod: opts.StatusPeriod}).SetupWithManager(mgr); err != nil {
		return fmt.Errorf("setting up the tenant controller: %w", err)
	}
	if err := (&PricingTierReconciler{Client: mgr.GetClient()}).SetupWithManager(mgr); err != nil {
		return fmt.Errorf("setting up the pricing tier controller: %w", err)
	}
	if err := (&LedgerReconciler{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Facts: facts, Recorder: recorder, Clock: opts.Clock, Metrics: bm}).SetupWithManager(mgr); err != nil {
		return fmt.Errorf("setting up the ledger controller: %w", err)
	}
	if err := (&BillReconciler{Client: mgr.GetClient(), Period: opts.StatusPeriod}).SetupWithManager(mgr); err != nil {
		return fmt.Errorf("setting up the bill controller: %w", err)
	}
	return nil
}
