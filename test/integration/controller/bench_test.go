package controller

import (
	"context"
	"fmt"
	"math"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"text/tabwriter"
	"time"

	"github.com/go-logr/logr"
	dto "github.com/prometheus/client_model/go"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	kubefairv1 "github.com/kubefair/kubefair/api/v1alpha1"
	"github.com/kubefair/kubefair/controllers"
)

// The controller benchmark's cluster: 100 tenants, each node running pods
// of 10 of them, every node reporting once per the agents' default report
// period, the reports spread evenly over it.
const (
	benchTenants       = 100
	benchTenantsByNode = 10
	benchCPUs          = 8
	benchPeriod        = 10 * time.Second
	benchWarmup        = 2 // periods before measuring, at each scale
	benchPeriods       = 3 // periods measured
	benchJoinTimeout   = 5 * time.Minute
)

var benchScales = []int{10, 100, 1000}

// statusJitter is how much closer than a status period two writes of one
// tenant may reach an agent's watch: the API server's latency varies.
const statusJitter = time.Second

// BenchmarkController runs the real controller against a real API server
// (envtest) while a load generator writes the NodeShareReports of 10, 100
// and 1000 simulated nodes × 100 tenants at the agents' report period, and
// prints per scale: how long the nodes took to join (the ledger counting a
// report of each), the tenant and ledger reconcilers' latency (p50, p99),
// Tenant status writes per tenant per period, the Tenant events an agent's
// watch receives per period (agents watch every Tenant), API requests per
// second, and the reports left waiting for the ledger. It asserts the
// targets of issue 19 (p99 ≤ 1 s, at most one status write per tenant per
// period, an agent's watch traffic that does not grow with the nodes) and a
// ledger that keeps up. Runs once and takes about five minutes:
//
//	go test -run '^$' -bench Controller -benchtime 1x ./test/integration/controller/
func BenchmarkController(b *testing.B) {
	stop, err := api.RunController(logr.Discard(), 0) // the production status period: the agents' report period
	if err != nil {
		b.Fatal(err)
	}
	defer stop()
	l := newLoad(b)
	var rows []benchRow
	for _, nodes := range benchScales {
		l.grow(nodes)
		joined := l.join()
		row := l.measure()
		row.joined = joined
		rows = append(rows, row)
	}
	l.stop()

	w := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(w, "\ncontroller on envtest, %d tenants, %d per node, reports every %s (%d periods measured after %d):\n", benchTenants, benchTenantsByNode, benchPeriod, benchPeriods, benchWarmup)
	fmt.Fprintln(w, "NODES\tJOINED IN\tREPORTS/S\tLEDGER BACKLOG\tTENANT P50\tTENANT P99\tLEDGER P50\tLEDGER P99\tSTATUS WRITES/TENANT/PERIOD\tCLOSEST WRITES\tAGENT WATCH EVENTS/PERIOD\tAPI REQUESTS/S\t")
	for _, r := range rows {
		fmt.Fprintf(w, "%d\t%.0f s\t%.1f\t%d\t%s\t%s\t%s\t%s\t%.2f\t%.1f s\t%.0f\t%.0f\t\n", r.nodes, r.joined.Seconds(), r.reportsPerSecond, r.ledgerBacklog, ms(r.tenantP50), ms(r.tenantP99),
			ms(r.ledgerP50), ms(r.ledgerP99), r.statusWrites, r.closestWrites.Seconds(), r.watchEvents, r.requestsPerSecond)
	}
	w.Flush()
	first, last := rows[0], rows[len(rows)-1]
	b.ReportMetric(last.tenantP99.Seconds(), "tenant-p99-s")
	b.ReportMetric(last.statusWrites, "status-writes/tenant/period")
	b.ReportMetric(last.watchEvents, "agent-watch-events/period")
	for _, r := range rows {
		if r.tenantP99 > time.Second || r.ledgerP99 > time.Second {
			b.Errorf("%d nodes: p99 reconcile %s (tenant), %s (ledger), want ≤ 1 s", r.nodes, r.tenantP99, r.ledgerP99)
		}
		// The ledger counts reports as fast as they come, or billing falls
		// ever further behind: its queue would fill up to one per node.
		if r.ledgerBacklog > max(5, r.nodes/10) {
			b.Errorf("%d nodes: %d reports wait for the ledger", r.nodes, r.ledgerBacklog)
		}
		// At most one status write per tenant per period: successive writes
		// of a tenant a status period apart, less the watch's delivery
		// jitter. (The mean over the window may pass 1: a tenant written at
		// both of its ends has benchPeriods+1 writes in benchPeriods.)
		if r.closestWrites > 0 && r.closestWrites < controllers.DefaultStatusPeriod-statusJitter {
			b.Errorf("%d nodes: a tenant's status was written twice within %s, want at most once per %s", r.nodes, r.closestWrites, controllers.DefaultStatusPeriod)
		}
	}
	// At most one status write per tenant per period, whatever the nodes:
	// an agent's watch sees at most one event per tenant per period.
	if last.watchEvents > benchTenants {
		b.Errorf("an agent's watch receives %.0f Tenant events per period with %d nodes (%.0f with %d), want at most one per tenant (%d)",
			last.watchEvents, last.nodes, first.watchEvents, first.nodes, benchTenants)
	}
}

type benchRow struct {
	nodes                                      int
	reportsPerSecond, requestsPerSecond        float64
	ledgerBacklog                              int
	joined                                     time.Duration
	tenantP50, tenantP99, ledgerP50, ledgerP99 time.Duration
	statusWrites, watchEvents                  float64
	// closestWrites is the shortest time between two successive status
	// writes of one tenant (0: no tenant was written twice).
	closestWrites time.Duration
}

func ms(d time.Duration) string { return fmt.Sprintf("%.0f ms", float64(d)/float64(time.Millisecond)) }

// load is the simulated cluster: nodes whose agents report on a schedule.
type load struct {
	b       *testing.B
	tenants []*kubefairv1.Tenant
	boot    time.Time

	mu    sync.Mutex
	nodes []*benchNode
	// reports counts the reports written.
	reports atomic.Int64
	done    chan struct{}
	wg      sync.WaitGroup
}

type benchNode struct {
	name    string
	tenants []*kubefairv1.Tenant
	used    []int64 // cumulative CPU of each of tenants
	report  *kubefairv1.NodeShareReport
}

func newLoad(b *testing.B) *load {
	l := &load{b: b, boot: time.Now(), done: make(chan struct{})}
	c := context.Background()
	for _, t := range []*kubefairv1.PricingTier{tier("bench-gold", 400, "0.9"), tier("bench-silver", 200, "0.4"), tier("bench-bronze", 100, "0.1")} {
		if err := k8s.Create(c, t); err != nil {
			b.Fatal(err)
		}
	}
	tiers := []string{"bench-gold", "bench-silver", "bench-bronze"}
	for i := range benchTenants {
		name := fmt.Sprintf("bench-t%03d", i)
		tn := tenantOnTier(name, tiers[i%len(tiers)], name)
		if err := k8s.Create(c, namespace(name, nil)); err != nil {
			b.Fatal(err)
		}
		if err := k8s.Create(c, tn); err != nil {
			b.Fatal(err)
		}
		l.tenants = append(l.tenants, tn)
	}
	l.wg.Add(1)
	go l.run()
	return l
}

// grow adds nodes, with a pod of each of their tenants, up to n.
func (l *load) grow(n int) {
	c := context.Background()
	l.mu.Lock()
	have := len(l.nodes)
	l.mu.Unlock()
	var added []*benchNode
	var errs sync.Map
	var wg sync.WaitGroup
	next := make(chan int)
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				name := fmt.Sprintf("bench-n%04d", i)
				if _, err := api.CreateNode(c, name, benchCPUs); err != nil {
					errs.Store(name, err)
					continue
				}
				for j := range benchTenantsByNode {
					tn := l.tenants[(i*benchTenantsByNode+j)%benchTenants]
					p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: tn.Name, Name: name},
						Spec: corev1.PodSpec{NodeName: name, Containers: []corev1.Container{{Name: "c", Image: "none"}}}}
					if err := k8s.Create(c, p); err != nil {
						errs.Store(name+"/"+tn.Name, err)
					}
				}
			}
		}()
	}
	for i := have; i < n; i++ {
		bn := &benchNode{name: fmt.Sprintf("bench-n%04d", i), used: make([]int64, benchTenantsByNode)}
		for j := range benchTenantsByNode {
			bn.tenants = append(bn.tenants, l.tenants[(i*benchTenantsByNode+j)%benchTenants])
		}
		added = append(added, bn)
		next <- i
	}
	close(next)
	wg.Wait()
	errs.Range(func(k, v any) bool { l.b.Fatalf("creating %s: %v", k, v); return false })
	l.mu.Lock()
	l.nodes = append(l.nodes, added...)
	l.mu.Unlock()
}

// run writes each node's report once per period, node i at offset
// i/len(nodes) of it, from a few writers as agents would in parallel.
func (l *load) run() {
	defer l.wg.Done()
	work := make(chan *benchNode, 64)
	var writers sync.WaitGroup
	for range 16 { // (each mostly waits for the API server)
		writers.Add(1)
		go func() {
			defer writers.Done()
			for n := range work {
				l.write(n)
			}
		}()
	}
	defer func() { close(work); writers.Wait() }()
	start := time.Now()
	for {
		l.mu.Lock()
		nodes := l.nodes
		l.mu.Unlock()
		period := time.Since(start) / benchPeriod
		for i, n := range nodes {
			at := start.Add(period*benchPeriod + benchPeriod*time.Duration(i)/time.Duration(len(nodes)))
			select {
			case <-l.done:
				return
			case <-time.After(time.Until(at)):
			}
			work <- n
		}
		select {
		case <-l.done:
			return
		case <-time.After(time.Until(start.Add((period + 1) * benchPeriod))):
		}
	}
}

// write writes a node's report: every tenant there busy, together 80 % of
// the node's CPUs since the last report.
func (l *load) write(n *benchNode) {
	c := context.Background()
	now := time.Now()
	r := &kubefairv1.NodeShareReport{ObjectMeta: metav1.ObjectMeta{Name: n.name}, Backend: kubefairv1.BackendCgroup, CPUs: benchCPUs,
		BootID: n.name + "-boot", BootTime: &metav1.Time{Time: l.boot}, ObservedTime: metav1.NewTime(now), Window: metav1.Duration{Duration: benchPeriod}}
	share := 1.0 / benchTenantsByNode
	for j, tn := range n.tenants {
		n.used[j] += int64(float64(benchPeriod) * benchCPUs * 0.8 * share)
		r.Tenants = append(r.Tenants, kubefairv1.TenantShare{Name: tn.Name, UID: string(tn.UID), CPUNanoseconds: n.used[j],
			EntitledShare: share, AchievedShare: share * (0.98 + 0.04*float64((now.UnixNano()/int64(time.Millisecond)+int64(j))%10)/10),
			Backlogged: true, Pods: 1, RunnableThreads: 4})
	}
	var err error
	if n.report == nil {
		err = k8s.Create(c, r)
	} else {
		r.ObjectMeta = n.report.ObjectMeta
		if err = k8s.Update(c, r); apierrors.IsConflict(err) { // (the ledger made the Node its owner)
			var have kubefairv1.NodeShareReport
			if err = k8s.Get(c, client.ObjectKey{Name: n.name}, &have); err == nil {
				r.ObjectMeta = have.ObjectMeta
				err = k8s.Update(c, r)
			}
		}
	}
	if err != nil {
		l.b.Errorf("writing %s's report: %v", n.name, err)
		return
	}
	n.report = r
	l.reports.Add(1)
}

func (l *load) stop() { close(l.done); l.wg.Wait() }

// join waits until the ledger has counted a report of every node (each has
// an open usage record) and returns how long that took after the nodes
// were added. A node's first report costs the ledger more than the next
// ones (the Node made the report's owner, the node's records read from the
// API server, its open record created), so nodes that join at once are a
// burst of their own, measured here apart from the steady state.
func (l *load) join() time.Duration {
	start := time.Now()
	for {
		var records kubefairv1.UsageRecordList
		if err := k8s.List(context.Background(), &records); err != nil {
			l.b.Fatal(err)
		}
		open := 0
		for i := range records.Items {
			if !records.Items[i].Closed {
				open++
			}
		}
		if open >= len(l.nodes) {
			return time.Since(start)
		}
		if time.Since(start) > benchJoinTimeout {
			l.b.Fatalf("%d nodes: after %s the ledger has counted a report of %d", len(l.nodes), benchJoinTimeout, open)
		}
		time.Sleep(2 * time.Second)
	}
}

// measure lets the load run benchWarmup periods at the current scale, then
// measures benchPeriods.
func (l *load) measure() benchRow {
	time.Sleep(benchWarmup * benchPeriod)
	c, cancel := context.WithCancel(context.Background())
	defer cancel()
	var tenants kubefairv1.TenantList
	if err := k8s.List(c, &tenants); err != nil {
		l.b.Fatal(err)
	}
	// What an agent's cache receives: every Tenant event.
	wc, err := client.NewWithWatch(api.Config, client.Options{Scheme: k8s.Scheme()})
	if err != nil {
		l.b.Fatal(err)
	}
	w, err := wc.Watch(c, &kubefairv1.TenantList{}, &client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: tenants.ResourceVersion}})
	if err != nil {
		l.b.Fatal(err)
	}
	defer w.Stop()
	var events atomic.Int64
	var mu sync.Mutex
	written := map[string][]time.Time{} // each tenant's writes, as the watch saw them
	go func() {
		for e := range w.ResultChan() {
			if e.Type == watch.Modified || e.Type == watch.Added {
				events.Add(1)
				if t, ok := e.Object.(*kubefairv1.Tenant); ok {
					mu.Lock()
					written[t.Name] = append(written[t.Name], time.Now())
					mu.Unlock()
				}
			}
		}
	}()
	tenantBefore, ledgerBefore := reconcileHistogram(l.b, "tenant"), reconcileHistogram(l.b, "ledger")
	requestsBefore, reportsBefore := apiRequests(l.b), l.reports.Load()
	start := time.Now()
	time.Sleep(benchPeriods * benchPeriod)
	elapsed := time.Since(start).Seconds()
	tenantAfter, ledgerAfter := reconcileHistogram(l.b, "tenant"), reconcileHistogram(l.b, "ledger")
	row := benchRow{nodes: len(l.nodes),
		reportsPerSecond:  float64(l.reports.Load()-reportsBefore) / elapsed,
		requestsPerSecond: (apiRequests(l.b) - requestsBefore) / elapsed,
		watchEvents:       float64(events.Load()) / benchPeriods,
	}
	row.statusWrites = row.watchEvents / benchTenants
	mu.Lock()
	for _, at := range written {
		for i := 1; i < len(at); i++ {
			if gap := at[i].Sub(at[i-1]); row.closestWrites == 0 || gap < row.closestWrites {
				row.closestWrites = gap
			}
		}
	}
	mu.Unlock()
	row.ledgerBacklog = queueDepth(l.b, "ledger")
	row.tenantP50, row.tenantP99 = quantile(tenantBefore, tenantAfter, 0.5), quantile(tenantBefore, tenantAfter, 0.99)
	row.ledgerP50, row.ledgerP99 = quantile(ledgerBefore, ledgerAfter, 0.5), quantile(ledgerBefore, ledgerAfter, 0.99)
	return row
}

// reconcileHistogram is controller-runtime's histogram of a controller's
// reconcile times: cumulative counts by upper bound.
func reconcileHistogram(b *testing.B, controller string) map[float64]uint64 {
	families, err := crmetrics.Registry.Gather()
	if err != nil {
		b.Fatal(err)
	}
	out := map[float64]uint64{}
	for _, f := range families {
		if f.GetName() != "controller_runtime_reconcile_time_seconds" {
			continue
		}
		for _, m := range f.GetMetric() {
			if label(m, "controller") != controller {
				continue
			}
			for _, bk := range m.GetHistogram().GetBucket() {
				out[bk.GetUpperBound()] += bk.GetCumulativeCount()
			}
			out[math.Inf(1)] += m.GetHistogram().GetSampleCount()
		}
	}
	return out
}

// queueDepth is how many keys wait in a controller's work queue.
func queueDepth(b *testing.B, controller string) int {
	families, err := crmetrics.Registry.Gather()
	if err != nil {
		b.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() == "workqueue_depth" {
			for _, m := range f.GetMetric() {
				if label(m, "name") == controller {
					return int(m.GetGauge().GetValue())
				}
			}
		}
	}
	return 0
}

func label(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

// quantile is the upper bound of the bucket holding quantile q of the
// reconciles between two readings of a histogram.
func quantile(before, after map[float64]uint64, q float64) time.Duration {
	var bounds []float64
	for ub := range after {
		bounds = append(bounds, ub)
	}
	sort.Float64s(bounds)
	total := after[math.Inf(1)] - before[math.Inf(1)]
	if total == 0 {
		return 0
	}
	for _, ub := range bounds {
		if float64(after[ub]-before[ub]) >= q*float64(total) {
			if math.IsInf(ub, 1) {
				return time.Duration(math.MaxInt64)
			}
			return time.Duration(ub * float64(time.Second))
		}
	}
	return time.Duration(math.MaxInt64)
}

// apiRequests is the API server's count of requests served so far.
func apiRequests(b *testing.B) float64 {
	cs, err := kubernetes.NewForConfig(api.Config)
	if err != nil {
		b.Fatal(err)
	}
	body, err := cs.RESTClient().Get().AbsPath("/metrics").DoRaw(context.Background())
	if err != nil {
		b.Fatalf("the API server's metrics: %v", err)
	}
	var total float64
	for _, line := range strings.Split(string(body), "\n") {
		if strings.HasPrefix(line, "apiserver_request_total{") {
			f := strings.Fields(line)
			v, err := strconv.ParseFloat(f[len(f)-1], 64)
			if err == nil {
				total += v
			}
		}
	}
	return total
}
