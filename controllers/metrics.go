package controllers

import (
	"context"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	kubefairv1 "github.com/kubefair/kubefair/api/v1alpha1"
	"github.com/kubefair/kubefair/controllers/cost"
)

var (
	entitledDesc = prometheus.NewDesc("kubefair_tenant_entitled_share",
		"Share of the CPUs of the nodes running the tenant that the fairness model entitles it to (0..1).", []string{"tenant"}, nil)
	achievedDesc = prometheus.NewDesc("kubefair_tenant_achieved_share",
		"Share of the CPUs of the nodes running the tenant that it used in the last window (0..1).", []string{"tenant"}, nil)
	cpuSecondsDesc = prometheus.NewDesc("kubefair_tenant_cpu_seconds_total",
		"CPU-seconds accrued for the tenant over all nodes.", []string{"tenant"}, nil)
	costDesc = prometheus.NewDesc("kubefair_tenant_cost_total",
		"Cost accrued for the tenant at its tier's price.", []string{"tenant", "currency"}, nil)
)

// tenantCollector exports each Tenant's status as read from the cache at
// scrape time, so the metrics always match `kubectl get tenants` and a
// deleted tenant's series disappear with it.
type tenantCollector struct {
	reader client.Reader
}

func (c tenantCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- entitledDesc
	ch <- achievedDesc
	ch <- cpuSecondsDesc
	ch <- costDesc
}

func (c tenantCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var tenants kubefairv1.TenantList
	if err := c.reader.List(ctx, &tenants); err != nil {
		logf.Log.WithName("metrics").Error(err, "listing tenants for metrics")
		return
	}
	for _, t := range tenants.Items {
		s := t.Status
		if v, ok := parsePercent(s.EntitledShare); ok {
			ch <- prometheus.MustNewConstMetric(entitledDesc, prometheus.GaugeValue, v, t.Name)
		}
		if v, ok := parsePercent(s.AchievedShare); ok {
			ch <- prometheus.MustNewConstMetric(achievedDesc, prometheus.GaugeValue, v, t.Name)
		}
		ch <- prometheus.MustNewConstMetric(cpuSecondsDesc, prometheus.CounterValue, float64(s.CPUNanoseconds)/1e9, t.Name)
		ch <- prometheus.MustNewConstMetric(costDesc, prometheus.CounterValue, float64(s.CostMicros)/cost.MicrosPerUnit, t.Name, s.Currency)
	}
}

// parsePercent reads "33.3%" back as 0.333.
func parsePercent(s string) (float64, bool) {
	v, err := strconv.ParseFloat(strings.TrimSuffix(s, "%"), 64)
	if err != nil || !strings.HasSuffix(s, "%") {
		return 0, false
	}
	return v / 100, true
}
