package controllers

import (
	"context"
	"math/big"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	kubefairv1 "github.com/kubefair/kubefair/api/v1alpha1"
	"github.com/kubefair/kubefair/controllers/billing"
	"github.com/kubefair/kubefair/controllers/cost"
)

var (
	entitledDesc = prometheus.NewDesc("kubefair_tenant_entitled_share",
		"Share of the CPUs of the nodes running the tenant that the fairness model entitles it to (0..1).", []string{"tenant"}, nil)
	achievedDesc = prometheus.NewDesc("kubefair_tenant_achieved_share",
		"Share of the CPUs of the nodes running the tenant that it used in the last window (0..1).", []string{"tenant"}, nil)
)

// tenantCollector exports each Tenant's shares as read from the cache at
// scrape time, so the gauges always match `kubectl get tenants` and a
// deleted tenant's series disappear with it.
type tenantCollector struct {
	reader client.Reader
}

func (c tenantCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- entitledDesc
	ch <- achievedDesc
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

// billingMetrics are counters the ledger adds to as it writes: each
// increment is exactly what one UsageRecord write billed or refused, so
// rate() and increase() over them are the ledger's, across controller
// restarts (a restart is a counter reset).
type billingMetrics struct {
	cpuSeconds *prometheus.CounterVec
	cost       *prometheus.CounterVec
	refused    *prometheus.CounterVec
	nodeCPU    *prometheus.CounterVec
}

func newBillingMetrics(reg prometheus.Registerer) (*billingMetrics, error) {
	m := &billingMetrics{
		cpuSeconds: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "kubefair_tenant_cpu_seconds_total",
			Help: "CPU-seconds billed to the tenant (by name; a tenant created again continues the series)."}, []string{"tenant"}),
		cost: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "kubefair_tenant_cost_total",
			Help: "Cost billed to the tenant, in the currency of its tier's price."}, []string{"tenant", "currency"}),
		refused: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "kubefair_reports_refused_total",
			Help: "Node reports, or tenants' counters in them, refused and not billed, by reason."}, []string{"node", "reason"}),
		nodeCPU: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "kubefair_node_cpu_seconds_total",
			Help: "A node's CPU time over accepted report windows, split: tenants (billed), other_pods, system, idle; they add up to capacity."},
			[]string{"node", "part"}),
	}
	for _, c := range []prometheus.Collector{m.cpuSeconds, m.cost, m.refused, m.nodeCPU} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// observe adds what one ledger write billed and refused.
func (m *billingMetrics) observe(node string, res billing.Result, split kubefairv1.NodeCPUTime) {
	if m == nil {
		return
	}
	for _, c := range res.Billed {
		m.cpuSeconds.WithLabelValues(c.Tenant).Add(float64(c.Nanoseconds) / 1e9)
		if c.Currency != "" {
			v, _ := new(big.Rat).SetFrac(c.CostMicros, big.NewInt(cost.MicrosPerUnit)).Float64()
			m.cost.WithLabelValues(c.Tenant, c.Currency).Add(v)
		}
	}
	if res.Reason != "" {
		m.refused.WithLabelValues(node, res.Reason).Inc()
	} else {
		for _, t := range res.Refused {
			m.refused.WithLabelValues(node, t.Reason).Inc()
		}
	}
	for part, ns := range map[string]int64{"capacity": split.CapacityNanoseconds, "tenants": split.TenantsNanoseconds,
		"other_pods": split.OtherPodsNanoseconds, "system": split.SystemNanoseconds, "idle": split.IdleNanoseconds} {
		if ns > 0 { // a counter only grows; a part a few ms below zero is left out
			m.nodeCPU.WithLabelValues(node, part).Add(float64(ns) / 1e9)
		}
	}
}
