package controllers

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kubefairv1 "github.com/kubefair/kubefair/api/v1alpha1"
	"github.com/kubefair/kubefair/controllers/cost"
)

// clusterFacts is what reports are checked against: each Node's CPU
// capacity, and where tenants' pods ran. Nodes and Pods come through a
// cache of their own, trimmed to those fields, so the controller does not
// hold every Pod and Node of the cluster in full.
type clusterFacts struct {
	cache cache.Cache
	pods  *podPresence
}

// +kubebuilder:rbac:groups="",resources=nodes,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=pods,verbs=get;list;watch

func newClusterFacts(ctx context.Context, mgr ctrl.Manager, clk clock.PassiveClock) (*clusterFacts, error) {
	c, err := cache.New(mgr.GetConfig(), cache.Options{
		HTTPClient: mgr.GetHTTPClient(), Scheme: mgr.GetScheme(), Mapper: mgr.GetRESTMapper(),
		ByObject: map[client.Object]cache.ByObject{
			&corev1.Pod{}:  {Transform: trimPod},
			&corev1.Node{}: {Transform: trimNode},
		},
	})
	if err != nil {
		return nil, fmt.Errorf("creating the nodes and pods cache: %w", err)
	}
	if err := mgr.Add(c); err != nil {
		return nil, err
	}
	f := &clusterFacts{cache: c, pods: &podPresence{clock: clk, live: map[string]podPlace{}, count: map[podPlace]int{}, gone: map[podPlace]time.Time{}}}
	inf, err := c.GetInformer(ctx, &corev1.Pod{})
	if err != nil {
		return nil, err
	}
	if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(o any) { f.pods.seen(o, false) },
		UpdateFunc: func(_, o any) { f.pods.seen(o, false) },
		DeleteFunc: func(o any) { f.pods.seen(o, true) },
	}); err != nil {
		return nil, err
	}
	return f, nil
}

// node is the Node named name, nil when there is none.
func (f *clusterFacts) node(ctx context.Context, name string) (*corev1.Node, error) {
	var n corev1.Node
	if err := f.cache.Get(ctx, client.ObjectKey{Name: name}, &n); err != nil {
		return nil, client.IgnoreNotFound(err)
	}
	return &n, nil
}

// trimPod keeps what billing needs of a Pod: where it runs.
func trimPod(o any) (any, error) {
	p, ok := o.(*corev1.Pod)
	if !ok {
		return o, nil
	}
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: p.Name, Namespace: p.Namespace, UID: p.UID, ResourceVersion: p.ResourceVersion},
		Spec: corev1.PodSpec{NodeName: p.Spec.NodeName}}, nil
}

// trimNode keeps what billing needs of a Node: its CPU capacity.
func trimNode(o any) (any, error) {
	n, ok := o.(*corev1.Node)
	if !ok {
		return o, nil
	}
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n.Name, UID: n.UID, ResourceVersion: n.ResourceVersion},
		Status: corev1.NodeStatus{Capacity: corev1.ResourceList{corev1.ResourceCPU: n.Status.Capacity[corev1.ResourceCPU]}}}, nil
}

// podPlace is a namespace on a node.
type podPlace struct{ node, namespace string }

// podPresence tracks, per node and namespace, how many pods run there now
// and when the last one went: a tenant's CPU on a node is believed only if
// it had a pod there during the window. It starts from the pods that exist
// when the controller starts (pods deleted while it was down are not
// known).
type podPresence struct {
	clock clock.PassiveClock
	mu    sync.Mutex
	live  map[string]podPlace // by pod UID
	count map[podPlace]int
	gone  map[podPlace]time.Time
}

func (p *podPresence) seen(o any, deleted bool) {
	if d, ok := o.(toolscache.DeletedFinalStateUnknown); ok {
		o, deleted = d.Obj, true
	}
	pod, ok := o.(*corev1.Pod)
	if !ok {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	uid := string(pod.UID)
	if old, ok := p.live[uid]; ok { // moved (bound to a node) or gone
		p.count[old]--
		if p.count[old] <= 0 {
			delete(p.count, old)
			p.gone[old] = p.clock.Now()
		}
		delete(p.live, uid)
	}
	if deleted || pod.Spec.NodeName == "" {
		return
	}
	at := podPlace{node: pod.Spec.NodeName, namespace: pod.Namespace}
	p.live[uid] = at
	p.count[at]++
}

// lastPod is the last time one of namespaces had a pod on node: now when
// one has, zero when none ever had one the controller saw.
func (p *podPresence) lastPod(node string, namespaces map[string]bool) time.Time {
	p.mu.Lock()
	defer p.mu.Unlock()
	var last time.Time
	for ns := range namespaces {
		at := podPlace{node: node, namespace: ns}
		if p.count[at] > 0 {
			return p.clock.Now()
		}
		if g := p.gone[at]; g.After(last) {
			last = g
		}
	}
	return last
}

// priceTimeline is a tier's prices over time, oldest first: what its
// status recorded, then the price in its spec since the API server
// accepted it. Empty when the spec's price cannot be read (the CRD
// refuses such prices; an older object may hold one).
func priceTimeline(tier *kubefairv1.PricingTier) []cost.Price {
	var out []cost.Price
	for _, p := range tier.Status.Prices {
		if micros, err := cost.ParsePrice(p.PricePerCPUHour); err == nil {
			out = append(out, cost.Price{Micros: micros, Since: p.Since.Time})
		}
	}
	spec, err := cost.ParsePrice(tier.Spec.PricePerCPUHour)
	if err != nil {
		return nil
	}
	if len(out) == 0 || out[len(out)-1].Micros != spec {
		since := priceSetAt(tier)
		if len(out) > 0 && since.Before(out[len(out)-1].Since) {
			since = out[len(out)-1].Since
		}
		out = append(out, cost.Price{Micros: spec, Since: since})
	}
	return out
}

// priceSetAt is when the API server accepted the tier's current price: the
// time of the latest managedFields entry that owns spec.pricePerCPUHour
// (the server stamps it, to the second, when that manager changes a field
// it owns), else the tier's creation.
func priceSetAt(tier *kubefairv1.PricingTier) time.Time {
	at := tier.CreationTimestamp.Time
	for _, m := range tier.ManagedFields {
		if m.Subresource != "" || m.Time == nil || m.FieldsV1 == nil {
			continue
		}
		var fields map[string]map[string]any
		if json.Unmarshal(m.FieldsV1.Raw, &fields) != nil {
			continue
		}
		if _, owns := fields["f:spec"]["f:pricePerCPUHour"]; owns && m.Time.After(at) {
			at = m.Time.Time
		}
	}
	return at
}
