package controller

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/go-logr/logr/testr"

	kubefairv1 "github.com/kubefair/kubefair/api/v1alpha1"
	"github.com/kubefair/kubefair/controllers"
	"github.com/kubefair/kubefair/internal/metricsauth"
	"github.com/kubefair/kubefair/test/harness/scrape"
)

// TestMetricsCountWhatTheLedgerWrites: the billing counters add exactly
// what the ledger bills and refuses.
func TestMetricsCountWhatTheLedgerWrites(t *testing.T) {
	reg := prometheus.NewRegistry()
	mgr, err := ctrl.NewManager(api.Config, ctrl.Options{Logger: testr.New(t).V(1), Scheme: scheme.Scheme,
		Metrics: metricsserver.Options{BindAddress: "0"}, Controller: config.Controller{SkipNameValidation: ptr.To(true)}})
	if err != nil {
		t.Fatal(err)
	}
	c, cancel := context.WithCancel(context.Background())
	if err := controllers.Setup(c, mgr, controllers.Options{Registry: reg}); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- mgr.Start(c) }()
	t.Cleanup(func() { cancel(); <-done })

	create(t, namespace("metrics-ns", nil), tier("metrics-tier", 100, "3.6"), tenantOnTier("metrics", "metrics-tier", "metrics-ns"))
	tn := getTenant(t, "metrics")
	base := yesterdayNoon()
	n1 := newNode(t, "metrics-n1", 2, base.Add(-20*time.Second))
	podOn(t, "metrics-ns", "p", "metrics-n1")
	n1.use(tn, 10*second)
	n1.write(base)
	wantAccepted(t, "metrics-n1", kubefairv1.ReasonBilled, base)
	r := n1.report(base.Add(10 * time.Second))
	r.CPUs = 16
	putReport(t, r)
	wantAccepted(t, "metrics-n1", kubefairv1.ReasonCPUsAboveCapacity, base.Add(10*time.Second))
	value := func(name string, labels map[string]string) float64 {
		families, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range families {
			if f.GetName() != name {
				continue
			}
		metric:
			for _, m := range f.GetMetric() {
				for _, l := range m.GetLabel() {
					if v, ok := labels[l.GetName()]; ok && v != l.GetValue() {
						continue metric
					}
				}
				return m.GetCounter().GetValue()
			}
		}
		return -1
	}
	eventually(t, "the counters", func() (bool, string) {
		cpu := value("kubefair_tenant_cpu_seconds_total", map[string]string{"tenant": "metrics"})
		money := value("kubefair_tenant_cost_total", map[string]string{"tenant": "metrics", "currency": "EUR"})
		refused := value("kubefair_reports_refused_total", map[string]string{"node": "metrics-n1", "reason": kubefairv1.ReasonCPUsAboveCapacity})
		capacity := value("kubefair_node_cpu_seconds_total", map[string]string{"node": "metrics-n1", "part": "capacity"})
		return cpu == 10 && money == 0.01 && refused == 1 && capacity == 40, fmt.Sprintf("cpu %v cost %v refused %v capacity %v", cpu, money, refused, capacity)
	})
}

// TestMetricsOnlyToAGrantedIdentity: the controller's metrics server as its
// main sets it up serves only callers the API server authenticates and
// allows to get /metrics.
func TestMetricsOnlyToAGrantedIdentity(t *testing.T) {
	addr := scrape.FreeAddress(t)
	mgr, err := ctrl.NewManager(api.Config, ctrl.Options{Logger: testr.New(t).V(1), Scheme: scheme.Scheme,
		Metrics:    metricsserver.Options{BindAddress: addr, SecureServing: true, FilterProvider: metricsauth.FilterProvider},
		Controller: config.Controller{SkipNameValidation: ptr.To(true)}})
	if err != nil {
		t.Fatal(err)
	}
	c, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(c) }()
	t.Cleanup(func() { cancel(); <-done })

	granted, stranger, err := scrape.Identities(ctx(), k8s, "metrics")
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, "the metrics served to a granted identity alone", func() (bool, string) {
		err := scrape.Guarded(ctx(), "https://"+addr+"/metrics", granted, stranger, "controller_runtime_")
		return err == nil, fmt.Sprint(err)
	})
}
