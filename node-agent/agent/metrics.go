package agent

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kubefair/kubefair/node-agent/fairness"
)

// Metrics are the agent's Prometheus series.
type Metrics struct {
	entitled, achieved *prometheus.GaugeVec
	errorPoints        prometheus.Gauge
	niceRounding       prometheus.Gauge
	writes, drift      prometheus.Counter
	burstableRepairs   prometheus.Counter
	unmeasured         prometheus.Gauge
	running            prometheus.Gauge
	loop               prometheus.Histogram
}

// NewMetrics registers the agent's series with reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		entitled: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "kubefair_agent_tenant_entitled_share",
			Help: "Share of this node's CPUs the tenant is entitled to in the last period (0..1)."}, []string{"tenant"}),
		achieved: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "kubefair_agent_tenant_achieved_share",
			Help: "Share of this node's CPUs the tenant used in the last period (0..1)."}, []string{"tenant"}),
		errorPoints: prometheus.NewGauge(prometheus.GaugeOpts{Name: "kubefair_agent_fairness_error_points",
			Help: "Largest |achieved - entitled| over backlogged tenants in the last period, in percentage points."}),
		niceRounding: prometheus.NewGauge(prometheus.GaugeOpts{Name: "kubefair_agent_nice_rounding_error_points",
			Help: "Largest error between a pod's processes' shares that rounding thread weights to nice levels caused in the last period (the nice backend), in percentage points."}),
		writes: prometheus.NewCounter(prometheus.CounterOpts{Name: "kubefair_agent_writes_total",
			Help: "Weights written because they differed from the plan."}),
		drift: prometheus.NewCounter(prometheus.CounterOpts{Name: "kubefair_agent_drift_total",
			Help: "Weights found changed by someone else and put back."}),
		burstableRepairs: prometheus.NewCounter(prometheus.CounterOpts{Name: "kubefair_agent_burstable_repairs_total",
			Help: "Times kubelet's start-up weight of the Burstable QoS cgroup was replaced by the sum of its pods' weights."}),
		unmeasured: prometheus.NewGauge(prometheus.GaugeOpts{Name: "kubefair_agent_unmeasured_pods",
			Help: "Running pods of this node whose cgroups the agent cannot find (neither enforced nor measured); see the report's PodCgroupsFound condition."}),
		running: prometheus.NewGauge(prometheus.GaugeOpts{Name: "kubefair_agent_running_pods",
			Help: "Running pods the API places on this node."}),
		loop: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "kubefair_agent_loop_seconds",
			Help: "Time one period of the agent's loop took.", Buckets: prometheus.ExponentialBuckets(0.0005, 2, 14)}),
	}
	reg.MustRegister(m.entitled, m.achieved, m.errorPoints, m.niceRounding, m.writes, m.drift, m.burstableRepairs, m.unmeasured, m.running, m.loop)
	return m
}

func (m *Metrics) observe(s Step, took time.Duration) {
	m.entitled.Reset()
	m.achieved.Reset()
	var e, a []float64
	var b []bool
	for _, t := range s.Tenants {
		m.entitled.WithLabelValues(t.Name).Set(t.Entitled)
		m.achieved.WithLabelValues(t.Name).Set(t.Achieved)
		e, a, b = append(e, t.Entitled), append(a, t.Achieved), append(b, t.Backlogged)
	}
	m.errorPoints.Set(fairness.MaxErrorPoints(e, a, b))
	m.niceRounding.Set(s.Result.NiceRoundingErrorPoints)
	m.writes.Add(float64(s.Result.Writes))
	m.drift.Add(float64(s.Result.Drift))
	m.unmeasured.Set(float64(s.UnmeasuredPods))
	m.running.Set(float64(s.RunningPods))
	if s.Result.RepairedBurstable {
		m.burstableRepairs.Inc()
	}
	m.loop.Observe(took.Seconds())
}
