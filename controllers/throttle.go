package controllers

import (
	"context"
	"sync"
	"time"

	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
)

// DefaultStatusPeriod is how often at most a tenant's status and bills
// follow the nodes' reports: the agents' default report period.
const DefaultStatusPeriod = 10 * time.Second

// throttle spaces the reconciles that the nodes' reports cause: a key's
// first event after a quiet period is reconciled at once, later ones at the
// end of the period, where one reconcile takes them all in. However many
// nodes report, a tenant's status and bills are then written at most once
// per period (and an agent watching Tenants sees as many events with 1000
// nodes as with one).
type throttle[K comparable] struct {
	period time.Duration

	mu sync.Mutex
	// slot is the time of each key's latest scheduled reconcile.
	slot map[K]time.Time
}

func newThrottle[K comparable](period time.Duration) *throttle[K] {
	return &throttle[K]{period: period, slot: map[K]time.Time{}}
}

// next says how long after now to reconcile key for an event at now. An
// event that finds a reconcile scheduled asks for it again at the same time
// rather than relying on it: the priority queue lets any immediate add of
// the key (another watch, a requeue) take the scheduled entry early, and
// this event would then wait for nothing.
func (t *throttle[K]) next(key K, now time.Time) (after time.Duration) {
	t.mu.Lock()
	defer t.mu.Unlock()
	last, seen := t.slot[key]
	switch {
	case !seen || !now.Before(last.Add(t.period)): // quiet for a period: now
		t.slot[key] = now
		t.forget(now)
		return 0
	case last.After(now): // one is scheduled: the same one
		return last.Sub(now)
	default: // one ran within the period: at its end
		t.slot[key] = last.Add(t.period)
		return last.Add(t.period).Sub(now)
	}
}

// forget drops keys quiet for a period (deleted tenants, past days), so the
// map holds only what changes.
func (t *throttle[K]) forget(now time.Time) {
	if len(t.slot) < 1024 {
		return
	}
	for k, s := range t.slot {
		if !now.Before(s.Add(t.period)) {
			delete(t.slot, k)
		}
	}
}

// handler enqueues what keys maps an event to, through the throttle.
func (t *throttle[K]) handler(keys func(context.Context, client.Object) []K) handler.TypedEventHandler[client.Object, K] {
	// Each key once per event, though an update maps both the old and the
	// new object.
	enqueue := func(ctx context.Context, q workqueue.TypedRateLimitingInterface[K], objs ...client.Object) {
		now, seen := time.Now(), map[K]bool{}
		for _, o := range objs {
			for _, k := range keys(ctx, o) {
				if seen[k] {
					continue
				}
				seen[k] = true
				q.AddAfter(k, t.next(k, now))
			}
		}
	}
	return handler.TypedFuncs[client.Object, K]{
		CreateFunc: func(ctx context.Context, e event.TypedCreateEvent[client.Object], q workqueue.TypedRateLimitingInterface[K]) {
			enqueue(ctx, q, e.Object)
		},
		UpdateFunc: func(ctx context.Context, e event.TypedUpdateEvent[client.Object], q workqueue.TypedRateLimitingInterface[K]) {
			enqueue(ctx, q, e.ObjectOld, e.ObjectNew)
		},
		DeleteFunc: func(ctx context.Context, e event.TypedDeleteEvent[client.Object], q workqueue.TypedRateLimitingInterface[K]) {
			enqueue(ctx, q, e.Object)
		},
		GenericFunc: func(ctx context.Context, e event.TypedGenericEvent[client.Object], q workqueue.TypedRateLimitingInterface[K]) {
			enqueue(ctx, q, e.Object)
		},
	}
}
