package controllers

import (
	"context"
	"fmt"

	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

// Options configure the reconcilers; the zero value is right for production.
type Options struct {
	// Clock stamps condition transitions; tests inject a fake one.
	Clock clock.PassiveClock
	// SkipMetrics leaves the Prometheus collector out (tests that start
	// several managers in one process).
	SkipMetrics bool
}

// Leader election holds a Lease in the controller's own namespace only.
// +kubebuilder:rbac:groups=coordination.k8s.io,resources=leases,verbs=get;list;watch;create;update;patch;delete,namespace=kubefair-system

// Setup wires every kubefair reconciler, index and metric into a manager.
// main and the integration tests both use it, so they run the same thing.
func Setup(ctx context.Context, mgr ctrl.Manager, opts Options) error {
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	if err := registerIndexes(ctx, mgr); err != nil {
		return fmt.Errorf("registering indexes: %w", err)
	}
	if err := (&TenantReconciler{
		Client:   mgr.GetClient(),
		Recorder: mgr.GetEventRecorder("kubefair-controller"),
		Clock:    opts.Clock,
	}).SetupWithManager(mgr); err != nil {
		return fmt.Errorf("setting up the tenant controller: %w", err)
	}
	if err := (&PricingTierReconciler{Client: mgr.GetClient()}).SetupWithManager(mgr); err != nil {
		return fmt.Errorf("setting up the pricing tier controller: %w", err)
	}
	if !opts.SkipMetrics {
		if err := metrics.Registry.Register(tenantCollector{reader: mgr.GetCache()}); err != nil {
			return fmt.Errorf("registering tenant metrics: %w", err)
		}
	}
	return nil
}
