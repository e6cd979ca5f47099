package controller

import (
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kubefairv1 "github.com/kubefair/kubefair/api/v1alpha1"
	"github.com/kubefair/kubefair/controllers/billing"
	"github.com/kubefair/kubefair/controllers/cost"
)

// TestModelBilledEqualsUsed drives the real controller through random
// interleavings of everything issue 16 names: reports deleted and written
// again, tenants deleted and created again under their name, agents
// restarting (cleanly, or crashing), the controller restarting (reports
// written meanwhile), tenant statuses wiped, every UsageRecord deleted,
// prices changing, a currency change attempted, and reports the ledger
// must refuse (CPU beyond the node, a tenant that does not exist, a tenant
// with no pod on the node, an old report written again, one from the
// future, CPUs above the Node's). Simulated agents know what each tenant
// really used, and at which price. It asserts that, per tenant (UID) and
// price, the bills never hold more than was used, and in the end hold
// exactly what was used minus the documented losses: the CPU of windows a
// report refused, and what a crashed agent had not reported.
//
// KUBEFAIR_MODEL_SEED and KUBEFAIR_MODEL_STEPS pick another run.
func TestModelBilledEqualsUsed(t *testing.T) {
	seed, steps := uint64(time.Now().UnixNano()), 60
	if s, err := strconv.ParseUint(os.Getenv("KUBEFAIR_MODEL_SEED"), 10, 64); err == nil {
		seed = s
	}
	if n, err := strconv.Atoi(os.Getenv("KUBEFAIR_MODEL_STEPS")); err == nil {
		steps = n
	}
	t.Logf("seed %d, %d steps (KUBEFAIR_MODEL_SEED=%d to run it again)", seed, steps, seed)
	m := newModel(t, seed)
	defer func() {
		if t.Failed() {
			t.Logf("the run's events:\n%s", strings.Join(m.events, "\n"))
		}
	}()
	for i := 0; i < steps; i++ {
		m.step(i)
		m.check()
	}
	m.finish()
}

// model is the simulated cluster around the real controller.
type model struct {
	t     *testing.T
	rng   *rand.Rand
	stop  func()
	down  bool
	nodes []*modelNode
	tier  *kubefairv1.PricingTier
	price int64 // micro-units, in force now
	quiet bool  // no CPU used (around a price change)
	// lastSecond is the second of the agents' last report.
	lastSecond time.Time
	events     []string
	// The truth, by "uid@price": CPU used, and lost as the documented
	// bounds allow (the nodes keep what is not counted yet).
	used, lost map[string]int64
	tenants    map[string]*kubefairv1.Tenant // by name, the current ones
	uids       []string                      // every tenant UID seen
}

type modelNode struct {
	agent   *fakeAgent
	tenants []string // names of the tenants with pods on it
	last    time.Time
	history []*kubefairv1.NodeShareReport
	untaken bool // its last report was written while the controller was down
	// pending is the CPU used since it was last counted, by tenant UID and
	// "uid@price"; reported is the part of it in the last report written.
	// crashed is a crashed run's CPU in its last report, written while the
	// controller was down: counted if the controller takes that report
	// before the next run's first replaces it.
	pending, reported, crashed usage
	crashedBoot                string
}

// usage is CPU by tenant UID, then "uid@price".
type usage map[string]map[string]int64

func (u usage) add(uid, k string, ns int64) {
	if u[uid] == nil {
		u[uid] = map[string]int64{}
	}
	u[uid][k] += ns
}

func (u usage) clone() usage {
	out := usage{}
	for uid, byKey := range u {
		for k, ns := range byKey {
			out.add(uid, k, ns)
		}
	}
	return out
}

func newModel(t *testing.T, seed uint64) *model {
	m := &model{t: t, rng: rand.New(rand.NewPCG(seed, 16)), used: map[string]int64{}, lost: map[string]int64{},
		tenants: map[string]*kubefairv1.Tenant{}, price: 3_600_000}
	m.stop = startManager(t)
	m.tier = tier("model-tier", 100, "3.6")
	create(t, namespace("model-a", nil), namespace("model-b", nil), namespace("model-c", nil), m.tier,
		tenantOnTier("model-a", "model-tier", "model-a"),
		&kubefairv1.Tenant{ObjectMeta: metav1.ObjectMeta{Name: "model-b"}, Spec: kubefairv1.TenantSpec{Weight: ptr.To[int32](100), Namespaces: []string{"model-b"}}},
		tenantOnTier("model-c", "model-tier", "model-c"))
	for _, name := range []string{"model-a", "model-b", "model-c"} {
		m.tenants[name] = getTenant(t, name)
		m.uids = append(m.uids, string(m.tenants[name].UID))
	}
	now := time.Now()
	for i, cpus := range []int32{2, 4} {
		name := fmt.Sprintf("model-n%d", i+1)
		n := &modelNode{agent: newNode(t, name, cpus, now), tenants: []string{"model-a", "model-b"}, last: now, pending: usage{}}
		if i == 1 {
			n.tenants = append(n.tenants, "model-c") // model-c runs on n2 only
		}
		for _, tn := range n.tenants {
			podOn(t, tn, "pod-"+name, name)
		}
		m.nodes = append(m.nodes, n)
	}
	return m
}

func (m *model) note(format string, args ...any) {
	m.events = append(m.events, fmt.Sprintf(format, args...))
}

func (m *model) key(uid string) string {
	if m.tenants["model-b"] != nil && uid == string(m.tenants["model-b"].UID) {
		return uid + "@0" // spec.weight: unpriced
	}
	return fmt.Sprintf("%s@%d", uid, m.price)
}

// use runs the node's tenants for the real time since the last call: each
// uses a random part of the node's CPUs (together at most 80 %).
func (m *model) use(n *modelNode) {
	now := time.Now()
	dt := now.Sub(n.last)
	n.last = now
	if m.quiet {
		return
	}
	for _, name := range n.tenants {
		tn := m.tenants[name]
		if tn == nil || n.agent.final[string(tn.UID)] {
			continue
		}
		ns := int64(float64(dt) * float64(n.agent.cpus) * 0.8 * m.rng.Float64() / float64(len(n.tenants)))
		uid, k := string(tn.UID), m.key(string(tn.UID))
		n.agent.use(tn, ns)
		m.used[k] += ns
		n.pending.add(uid, k, ns)
	}
}

// lose counts CPU as lost.
func (m *model) lose(u usage, uid string) {
	for k, ns := range u[uid] {
		m.lost[k] += ns
	}
	delete(u, uid)
}

// write writes a report and, with the controller up, waits until the
// node's ledger took it (counted, or refused), then settles the truth: a
// tenant refused loses the CPU since it was last counted. Every report
// the agents write is observed in a second of its own, so the ledger's
// last report tells which one it took.
func (m *model) write(n *modelNode, r *kubefairv1.NodeShareReport) {
	m.t.Helper()
	putReport(m.t, r)
	n.history = append(n.history, r.DeepCopy())
	n.untaken, n.reported = m.down, n.pending.clone()
	if n.crashed != nil && r.BootID != n.crashedBoot { // a new run's report replaced the crashed run's
		for uid := range n.crashed {
			m.lose(n.crashed, uid)
		}
		n.crashed = nil
	}
	if !m.down {
		m.settle(n.pending, m.taken(n, r))
		n.reported = usage{} // settled: billed or lost
	}
}

// taken waits until the node's ledger took a report, and returns the
// node's open record then.
func (m *model) taken(n *modelNode, r *kubefairv1.NodeShareReport) *kubefairv1.UsageRecord {
	m.t.Helper()
	var u kubefairv1.UsageRecord
	eventually(m.t, fmt.Sprintf("node %s's report at %s taken", n.agent.node, r.ObservedTime.Format(time.TimeOnly)), func() (bool, string) {
		if err := k8s.Get(ctx(), client.ObjectKey{Name: billing.OpenRecordName(n.agent.node)}, &u); err != nil {
			return false, err.Error()
		}
		l := u.LastReport
		return l != nil && l.BootID == r.BootID && l.ObservedTime.Equal(&r.ObservedTime), fmt.Sprintf("last report %+v", l)
	})
	return &u
}

// now is a time for the agents' next report: in a second of its own.
func (m *model) now() time.Time {
	for time.Now().Truncate(time.Second).Equal(m.lastSecond) {
		time.Sleep(time.Now().Truncate(time.Second).Add(time.Second).Sub(time.Now()) + 10*time.Millisecond)
	}
	m.lastSecond = time.Now().Truncate(time.Second)
	return time.Now()
}

// settle applies a report's outcome to the CPU it carried: billed, or
// lost when refused.
func (m *model) settle(pending usage, u *kubefairv1.UsageRecord) {
	if u.LastReport == nil || u.LastReport.Reason == kubefairv1.ReasonStaleReport || u.LastReport.Reason == kubefairv1.ReasonFutureReport {
		return
	}
	refused := map[string]bool{}
	for _, rt := range u.LastReport.Refused {
		refused[rt.UID] = true
	}
	for uid := range pending {
		if refused[uid] {
			m.lose(pending, uid)
		} else {
			delete(pending, uid)
		}
	}
}

func (m *model) report(n *modelNode) {
	at := m.now()
	m.use(n)
	m.write(n, n.agent.report(at))
}

// everyEvent is one draw of each of step's events, shuffled into a run's
// first steps so that every run has each at least once.
var everyEvent = []int{0, 35, 40, 45, 49, 54, 59, 63, 67, 71, 75, 79, 83, 86, 89}

func (m *model) step(i int) {
	n := m.nodes[m.rng.IntN(len(m.nodes))]
	node := n.agent.node
	if i == 0 {
		m.rng.Shuffle(len(everyEvent), func(a, b int) { everyEvent[a], everyEvent[b] = everyEvent[b], everyEvent[a] })
	}
	ev := m.rng.IntN(100)
	if i < len(everyEvent) {
		ev = everyEvent[i]
	}
	switch {
	case ev < 35:
		m.note("%d: %s reports", i, node)
		m.report(n)
	case ev < 40:
		m.note("%d: %s's report deleted, then written again", i, node)
		if err := k8s.Delete(ctx(), &kubefairv1.NodeShareReport{ObjectMeta: metav1.ObjectMeta{Name: node}}); err != nil && !apierrors.IsNotFound(err) {
			m.t.Fatal(err)
		}
		time.Sleep(200 * time.Millisecond)
		m.report(n)
	case ev < 45 && !m.down: // (with the controller down, see the crash: its last report may never be counted)
		m.note("%d: %s's agent restarts cleanly", i, node)
		m.report(n)
		n.agent.restart(fmt.Sprintf("%s-run-from-step-%d", node, i), time.Now()) // (unlike the first run's name)
		n.last = time.Now()
	case ev < 49:
		m.note("%d: %s's agent crashes", i, node)
		m.use(n)
		for uid, byKey := range n.pending { // what it had not reported is lost
			for k, ns := range byKey {
				m.lost[k] += ns - n.reported[uid][k]
			}
		}
		n.pending = usage{}
		if m.down && n.untaken && n.crashed == nil { // its last report is not counted yet (and is the node's report still)
			n.crashed, n.crashedBoot = n.reported, n.agent.boot
		}
		n.reported = usage{}
		n.agent.restart(fmt.Sprintf("%s-run-from-step-%d", node, i), time.Now()) // (unlike the first run's name)
		n.last = time.Now()
	case ev < 54 && !m.down:
		m.note("%d: the controller stops; the agents report on", i)
		m.stop()
		m.down = true
		for _, o := range m.nodes {
			m.report(o)
		}
	case ev < 59:
		m.note("%d: a tenant's status wiped", i)
		tn := getTenant(m.t, "model-a")
		tn.Status = kubefairv1.TenantStatus{}
		if err := k8s.Status().Update(ctx(), tn); err != nil && !apierrors.IsConflict(err) {
			m.t.Fatal(err)
		}
	case ev < 63 && !m.down:
		m.note("%d: tenant model-a deleted and created again", i)
		m.recreate("model-a")
	case ev < 67 && !m.down:
		m.note("%d: every UsageRecord deleted", i)
		if err := k8s.DeleteAllOf(ctx(), &kubefairv1.UsageRecord{}); err != nil {
			m.t.Fatal(err)
		}
		time.Sleep(300 * time.Millisecond)
		for _, o := range m.nodes { // (the ledger takes its next reports from the archives)
			m.report(o)
		}
	case ev < 71 && !m.down:
		m.note("%d: a new price", i)
		m.changePrice()
	case ev < 75:
		m.note("%d: %s reports CPU beyond the node", i, node)
		at := m.now()
		m.use(n)
		r := n.agent.report(at)
		r.Tenants[0].CPUNanoseconds += 1000 * second
		m.write(n, r)
	case ev < 79:
		m.note("%d: %s reports a tenant that does not exist, and one with no pod there", i, node)
		at := m.now()
		m.use(n)
		r := n.agent.report(at)
		r.Tenants = append(r.Tenants, kubefairv1.TenantShare{Name: "ghost", UID: "ghost-" + strconv.Itoa(i), CPUNanoseconds: second})
		if c := m.tenants["model-c"]; node == "model-n1" && c != nil {
			r.Tenants = append(r.Tenants, kubefairv1.TenantShare{Name: c.Name, UID: string(c.UID), CPUNanoseconds: second})
		}
		m.write(n, r)
	case ev < 83 && len(n.history) > 1:
		m.note("%d: %s's old report written again", i, node)
		m.write(n, n.history[m.rng.IntN(len(n.history)-1)].DeepCopy())
		m.report(n) // the agent's next report puts its own back
	case ev < 86:
		m.note("%d: %s reports from an hour ahead", i, node)
		m.write(n, n.agent.report(m.now().Add(time.Hour)))
		m.report(n)
	case ev < 89:
		m.note("%d: %s reports more CPUs than it has", i, node)
		at := m.now()
		m.use(n)
		r := n.agent.report(at)
		r.CPUs = 64
		m.write(n, r)
	default:
		if m.down {
			m.note("%d: the controller starts again", i)
			m.start()
		} else {
			m.note("%d: %s does not report", i, node)
			m.use(n)
		}
	}
}

// start starts the controller again: it counts each node's report as it
// is now (the last written while it was down), then the agents report on.
func (m *model) start() {
	m.stop = startManager(m.t)
	m.down = false
	for _, n := range m.nodes {
		if n.untaken {
			pending := n.pending
			if n.crashed != nil { // the crashed run's last report
				pending = n.crashed
			}
			m.settle(pending, m.taken(n, n.history[len(n.history)-1]))
			n.untaken, n.crashed = false, nil
		}
		m.report(n)
	}
}

// recreate deletes a tenant (its agents stop counting it and report its
// counter final; the controller lets it go once they are recorded) and
// creates it again under its name: another UID, counted from zero.
func (m *model) recreate(name string) {
	old := m.tenants[name]
	if err := k8s.Delete(ctx(), old); err != nil {
		m.t.Fatal(err)
	}
	for _, n := range m.nodes {
		at := m.now()
		m.use(n)
		if _, ok := n.agent.counters[string(old.UID)]; ok {
			n.agent.final[string(old.UID)] = true
		}
		m.write(n, n.agent.report(at))
	}
	eventually(m.t, "tenant "+name+" gone", func() (bool, string) {
		err := k8s.Get(ctx(), client.ObjectKey{Name: name}, &kubefairv1.Tenant{})
		return apierrors.IsNotFound(err), fmt.Sprint(err)
	})
	m.tenants[name] = nil
	create(m.t, tenantOnTier(name, "model-tier", name))
	m.tenants[name] = getTenant(m.t, name)
	m.uids = append(m.uids, string(m.tenants[name].UID))
}

// changePrice sets a new price with a quiet time around it, so that every
// CPU-second was used wholly before or after the change (the split of a
// window across a change is unit-tested); a change of currency is refused.
func (m *model) changePrice() {
	m.quiet = true
	for _, n := range m.nodes {
		m.use(n) // (nothing: quiet)
		m.report(n)
	}
	time.Sleep(1100 * time.Millisecond) // price times are kept to the second
	var pt kubefairv1.PricingTier
	if err := k8s.Get(ctx(), client.ObjectKey{Name: "model-tier"}, &pt); err != nil {
		m.t.Fatal(err)
	}
	m.price = int64(1+m.rng.IntN(999_999)) * 1000
	pt.Spec.PricePerCPUHour = cost.FormatPrice(m.price)
	if err := k8s.Update(ctx(), &pt); err != nil {
		m.t.Fatal(err)
	}
	pt.Spec.Currency = "USD"
	if err := k8s.Update(ctx(), &pt); err == nil {
		m.t.Fatal("the API server let a tier change its currency")
	}
	time.Sleep(1100 * time.Millisecond)
	for _, n := range m.nodes {
		m.use(n)
		m.report(n)
	}
	m.quiet = false
}

// billedByPrice is what the bills hold, by "uid@price".
func (m *model) billedByPrice() map[string]int64 {
	m.t.Helper()
	out := map[string]int64{}
	for _, uid := range m.uids {
		_, _, bills := billed(m.t, uid)
		for _, b := range bills {
			for _, l := range b.Lines {
				ns, err := cost.ParseSeconds(l.CPUSeconds)
				p, perr := cost.ParsePrice(l.PricePerCPUHour)
				if err != nil || perr != nil {
					m.t.Fatalf("bill %s: %v %v", b.Name, err, perr)
				}
				out[fmt.Sprintf("%s@%d", uid, p)] += ns.Int64()
				if want := cost.FormatMicros(cost.Cost(ns, p)); l.Currency != "" && l.Cost != want {
					m.t.Fatalf("bill %s prices %s CPU-s at %s as %s, want %s", b.Name, l.CPUSeconds, l.PricePerCPUHour, l.Cost, want)
				}
			}
		}
	}
	return out
}

// check: no tenant was billed, at any price, more than it used; and what
// it was billed is exactly what it used, less the documented losses, less
// what its nodes have not reported yet.
func (m *model) check() {
	m.t.Helper()
	if m.down {
		return
	}
	eventually(m.t, "the bills to hold what was used, less what was lost and what is not reported yet", func() (bool, string) {
		got := m.billedByPrice()
		for k, b := range got {
			if b > m.used[k] {
				m.t.Fatalf("%s billed %d ns but used %d", k, b, m.used[k])
			}
		}
		var diffs []string
		for k, u := range m.used {
			var pending int64
			for _, n := range m.nodes {
				for _, u := range []usage{n.pending, n.crashed} {
					for _, byKey := range u {
						pending += byKey[k]
					}
				}
			}
			if want := u - m.lost[k] - pending; got[k] != want {
				diffs = append(diffs, fmt.Sprintf("%s billed %d, used %d, lost %d, not reported %d", k, got[k], u, m.lost[k], pending))
			}
		}
		return len(diffs) == 0, strings.Join(diffs, "; ")
	})
}

// finish brings the controller up, has every agent report, and checks the
// bills hold exactly what was used minus the documented losses.
func (m *model) finish() {
	m.t.Helper()
	if m.down {
		m.start()
	}
	for _, n := range m.nodes {
		m.report(n)
	}
	eventually(m.t, "the bills to hold what was used, less the refused windows and crashes", func() (bool, string) {
		got := m.billedByPrice()
		var diffs []string
		for k, u := range m.used {
			if want := u - m.lost[k]; got[k] != want {
				diffs = append(diffs, fmt.Sprintf("%s billed %d, used %d, lost %d", k, got[k], u, m.lost[k]))
			}
		}
		return len(diffs) == 0, strings.Join(diffs, "; ")
	})
	var total, lost int64
	for k, u := range m.used {
		total += u
		lost += m.lost[k]
	}
	m.t.Logf("billed %.3f CPU-s of %.3f used; %.3f lost to refused reports and crashed agents, as documented", float64(total-lost)/1e9, float64(total)/1e9, float64(lost)/1e9)
	m.stop()
}
