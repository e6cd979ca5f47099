package controllers

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	clocktesting "k8s.io/utils/clock/testing"

	kubefairv1 "github.com/kubefair/kubefair/api/v1alpha1"
	"github.com/kubefair/kubefair/controllers/cost"
)

var factsT0 = time.Date(2026, 3, 4, 10, 0, 0, 0, time.UTC)

// tierCreated is a tier created at factsT0 with a price in its spec and
// the prices its status recorded (price, since, ...).
func tierCreated(spec string, managed []metav1.ManagedFieldsEntry, recorded ...any) *kubefairv1.PricingTier {
	tier := &kubefairv1.PricingTier{ObjectMeta: metav1.ObjectMeta{Name: "gold", CreationTimestamp: metav1.NewTime(factsT0), ManagedFields: managed},
		Spec: kubefairv1.PricingTierSpec{Weight: 1, PricePerCPUHour: spec, Currency: "EUR"}}
	for i := 0; i+1 < len(recorded); i += 2 {
		tier.Status.Prices = append(tier.Status.Prices, kubefairv1.PriceChange{PricePerCPUHour: recorded[i].(string), Since: metav1.NewTime(recorded[i+1].(time.Time))})
	}
	return tier
}

// managedAt is a managedFields entry of manager, stamped at, owning the
// given fields of spec (e.g. "f:pricePerCPUHour").
func managedAt(manager string, at time.Time, subresource string, fields ...string) metav1.ManagedFieldsEntry {
	raw := `{"f:metadata":{"f:labels":{}},"f:spec":{`
	for i, f := range fields {
		if i > 0 {
			raw += ","
		}
		raw += `"` + f + `":{}`
	}
	raw += "}}"
	return metav1.ManagedFieldsEntry{Manager: manager, Operation: metav1.ManagedFieldsOperationUpdate, Time: &metav1.Time{Time: at},
		FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: []byte(raw)}, Subresource: subresource}
}

// TestPriceSetAtTable: the current price was set by the latest write that
// owns spec.pricePerCPUHour, else at the tier's creation; status writes,
// other fields' owners and unreadable entries do not count.
func TestPriceSetAtTable(t *testing.T) {
	t1, t2, t3 := factsT0.Add(time.Hour), factsT0.Add(2*time.Hour), factsT0.Add(3*time.Hour)
	noTime := managedAt("kubectl", t1, "", "f:pricePerCPUHour")
	noTime.Time = nil
	noFields := managedAt("kubectl", t1, "", "f:pricePerCPUHour")
	noFields.FieldsV1 = nil
	garbled := managedAt("kubectl", t1, "", "f:pricePerCPUHour")
	garbled.FieldsV1.Raw = []byte(`{"f:spec":`)
	for _, tc := range []struct {
		name    string
		managed []metav1.ManagedFieldsEntry
		want    time.Time
	}{
		{name: "no managed fields: the creation", want: factsT0},
		{name: "the owner of the price", managed: []metav1.ManagedFieldsEntry{managedAt("kubectl", t1, "", "f:weight", "f:pricePerCPUHour")}, want: t1},
		{name: "the latest of two owners", managed: []metav1.ManagedFieldsEntry{
			managedAt("helm", t2, "", "f:pricePerCPUHour"), managedAt("kubectl", t1, "", "f:pricePerCPUHour")}, want: t2},
		{name: "a manager of other fields does not count", managed: []metav1.ManagedFieldsEntry{
			managedAt("kubectl", t1, "", "f:pricePerCPUHour"), managedAt("ops", t3, "", "f:weight", "f:currency")}, want: t1},
		{name: "a status write does not count", managed: []metav1.ManagedFieldsEntry{
			managedAt("kubectl", t1, "", "f:pricePerCPUHour"), managedAt("controller", t3, "status", "f:pricePerCPUHour")}, want: t1},
		{name: "a stamp before the creation does not count", managed: []metav1.ManagedFieldsEntry{managedAt("kubectl", factsT0.Add(-time.Hour), "", "f:pricePerCPUHour")},
			want: factsT0},
		{name: "entries without a time or fields, or unreadable, do not count", managed: []metav1.ManagedFieldsEntry{noTime, noFields, garbled}, want: factsT0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := priceSetAt(tierCreated("1", tc.managed)); !got.Equal(tc.want) {
				t.Errorf("priceSetAt = %s, want %s", got, tc.want)
			}
		})
	}
}

// TestPriceTimelineTable: a tier's prices are those its status recorded
// (unreadable ones skipped), then the spec's price when it differs from
// the last one, since it was set but never before the last one; nothing
// when the spec's price is unreadable.
func TestPriceTimelineTable(t *testing.T) {
	t1, t2, t3 := factsT0.Add(time.Hour), factsT0.Add(2*time.Hour), factsT0.Add(3*time.Hour)
	setAt := func(at time.Time) []metav1.ManagedFieldsEntry {
		return []metav1.ManagedFieldsEntry{managedAt("kubectl", at, "", "f:pricePerCPUHour")}
	}
	for _, tc := range []struct {
		name string
		tier *kubefairv1.PricingTier
		want []cost.Price
	}{
		{name: "a new tier: its price since its creation", tier: tierCreated("0.045", nil),
			want: []cost.Price{{Micros: 45000, Since: factsT0}}},
		{name: "recorded and current: unchanged", tier: tierCreated("2", setAt(t1), "1", factsT0, "2", t1),
			want: []cost.Price{{Micros: 1_000_000, Since: factsT0}, {Micros: 2_000_000, Since: t1}}},
		{name: "the same price in another form is no change", tier: tierCreated("1.5", setAt(t2), "1.50", t1),
			want: []cost.Price{{Micros: 1_500_000, Since: t1}}},
		{name: "a new price from when it was set", tier: tierCreated("2", setAt(t2), "1", factsT0),
			want: []cost.Price{{Micros: 1_000_000, Since: factsT0}, {Micros: 2_000_000, Since: t2}}},
		{name: "back to an earlier price", tier: tierCreated("1", setAt(t3), "1", factsT0, "2", t1),
			want: []cost.Price{{Micros: 1_000_000, Since: factsT0}, {Micros: 2_000_000, Since: t1}, {Micros: 1_000_000, Since: t3}}},
		{name: "never before the last recorded price", tier: tierCreated("2", setAt(t1), "1", t2),
			want: []cost.Price{{Micros: 1_000_000, Since: t2}, {Micros: 2_000_000, Since: t2}}},
		{name: "an unreadable recorded price is skipped", tier: tierCreated("1", setAt(t1), "abc", factsT0, "1", t1),
			want: []cost.Price{{Micros: 1_000_000, Since: t1}}},
		{name: "an unreadable spec price: none at all", tier: tierCreated("1e3", setAt(t2), "1", factsT0), want: nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := priceTimeline(tc.tier)
			if len(got) != len(tc.want) {
				t.Fatalf("prices %v, want %v", got, tc.want)
			}
			for i := range got {
				if got[i].Micros != tc.want[i].Micros || !got[i].Since.Equal(tc.want[i].Since) {
					t.Errorf("price %d: %d since %s, want %d since %s", i, got[i].Micros, got[i].Since, tc.want[i].Micros, tc.want[i].Since)
				}
			}
		})
	}
}

// podEvent is what the pod informer delivers, at a time after factsT0.
type podEvent struct {
	at        time.Duration
	uid       string
	namespace string
	node      string
	deleted   bool
	tombstone bool // delivered as DeletedFinalStateUnknown
}

// podQuery asks lastPod of a node and namespaces; want is after factsT0,
// never for the zero time.
type podQuery struct {
	node       string
	namespaces []string
	want       time.Duration
	never      bool
}

// TestPodPresenceTable: lastPod is now while one of the namespaces has a
// pod on the node, else when the last one went, else zero.
func TestPodPresenceTable(t *testing.T) {
	const now = time.Hour // when the queries are asked
	for _, tc := range []struct {
		name    string
		events  []podEvent
		queries []podQuery
	}{
		{name: "never seen", queries: []podQuery{{node: "n1", namespaces: []string{"a"}, never: true}}},
		{name: "running: now", events: []podEvent{{uid: "p1", namespace: "a", node: "n1"}},
			queries: []podQuery{{node: "n1", namespaces: []string{"a"}, want: now}}},
		{name: "deleted: when it went", events: []podEvent{{uid: "p1", namespace: "a", node: "n1"}, {at: 5 * time.Minute, uid: "p1", namespace: "a", node: "n1", deleted: true}},
			queries: []podQuery{{node: "n1", namespaces: []string{"a"}, want: 5 * time.Minute}}},
		{name: "a tombstone is a deletion", events: []podEvent{{uid: "p1", namespace: "a", node: "n1"}, {at: 6 * time.Minute, uid: "p1", namespace: "a", node: "n1", tombstone: true}},
			queries: []podQuery{{node: "n1", namespaces: []string{"a"}, want: 6 * time.Minute}}},
		{name: "only its node and namespace", events: []podEvent{{uid: "p1", namespace: "a", node: "n1"}},
			queries: []podQuery{{node: "n2", namespaces: []string{"a"}, never: true}, {node: "n1", namespaces: []string{"b"}, never: true}}},
		{name: "an unscheduled pod is on no node", events: []podEvent{{uid: "p1", namespace: "a"}},
			queries: []podQuery{{node: "n1", namespaces: []string{"a"}, never: true}, {node: "", namespaces: []string{"a"}, never: true}}},
		{name: "bound to a node later", events: []podEvent{{uid: "p1", namespace: "a"}, {at: time.Minute, uid: "p1", namespace: "a", node: "n1"}},
			queries: []podQuery{{node: "n1", namespaces: []string{"a"}, want: now}}},
		{name: "one of two pods left", events: []podEvent{{uid: "p1", namespace: "a", node: "n1"}, {uid: "p2", namespace: "a", node: "n1"},
			{at: 5 * time.Minute, uid: "p1", namespace: "a", node: "n1", deleted: true}},
			queries: []podQuery{{node: "n1", namespaces: []string{"a"}, want: now}}},
		{name: "the latest of several namespaces", events: []podEvent{
			{uid: "p1", namespace: "a", node: "n1"}, {uid: "p2", namespace: "b", node: "n1"}, {uid: "p3", namespace: "c", node: "n1"},
			{at: 3 * time.Minute, uid: "p1", namespace: "a", node: "n1", deleted: true}, {at: 7 * time.Minute, uid: "p2", namespace: "b", node: "n1", deleted: true}},
			queries: []podQuery{
				{node: "n1", namespaces: []string{"a", "b"}, want: 7 * time.Minute},
				{node: "n1", namespaces: []string{"a"}, want: 3 * time.Minute},
				{node: "n1", namespaces: []string{"a", "c"}, want: now},
				{node: "n1", namespaces: nil, never: true}}},
		{name: "a deletion of a pod never seen changes nothing", events: []podEvent{{uid: "p1", namespace: "a", node: "n1"},
			{at: 2 * time.Minute, uid: "p9", namespace: "a", node: "n1", deleted: true}},
			queries: []podQuery{{node: "n1", namespaces: []string{"a"}, want: now}}},
		{name: "a pod added again after it went", events: []podEvent{{uid: "p1", namespace: "a", node: "n1"},
			{at: 2 * time.Minute, uid: "p1", namespace: "a", node: "n1", deleted: true}, {at: 4 * time.Minute, uid: "p2", namespace: "a", node: "n1"}},
			queries: []podQuery{{node: "n1", namespaces: []string{"a"}, want: now}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clk := clocktesting.NewFakePassiveClock(factsT0)
			p := &podPresence{clock: clk, live: map[string]podPlace{}, count: map[podPlace]int{}, gone: map[podPlace]time.Time{}}
			p.seen("not a pod", false) // ignored
			for _, e := range tc.events {
				clk.SetTime(factsT0.Add(e.at))
				var o any = &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: e.uid, Namespace: e.namespace, UID: types.UID(e.uid)}, Spec: corev1.PodSpec{NodeName: e.node}}
				if e.tombstone {
					o = toolscache.DeletedFinalStateUnknown{Key: e.namespace + "/" + e.uid, Obj: o}
				}
				p.seen(o, e.deleted)
			}
			clk.SetTime(factsT0.Add(now))
			for _, q := range tc.queries {
				set := map[string]bool{}
				for _, ns := range q.namespaces {
					set[ns] = true
				}
				got := p.lastPod(q.node, set)
				switch {
				case q.never && !got.IsZero():
					t.Errorf("lastPod(%s, %v) = %s, want never", q.node, q.namespaces, got)
				case !q.never && !got.Equal(factsT0.Add(q.want)):
					t.Errorf("lastPod(%s, %v) = %s, want %s", q.node, q.namespaces, got, factsT0.Add(q.want))
				}
			}
			for at, n := range p.count {
				if n <= 0 {
					t.Errorf("count[%v] = %d: a place without pods is kept", at, n)
				}
			}
			if live := len(p.live); live != countPods(p.count) {
				t.Errorf("%d live pods, counted %d", live, countPods(p.count))
			}
		})
	}
}

func countPods(count map[podPlace]int) int {
	n := 0
	for _, c := range count {
		n += c
	}
	return n
}
