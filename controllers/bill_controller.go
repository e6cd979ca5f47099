package controllers

import (
	"context"
	"fmt"
	"math/big"
	"slices"
	"sort"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	kubefairv1 "github.com/kubefair/kubefair/api/v1alpha1"
	"github.com/kubefair/kubefair/controllers/billing"
	"github.com/kubefair/kubefair/controllers/cost"
)

// billKey names a TenantBill by what identifies it: a tenant UID and a
// billing period.
type billKey struct{ UID, Period string }

// BillReconciler keeps each tenant's TenantBill of each period equal to
// the sum of the period's UsageRecords. A bill keeps, per node, the record
// that counted furthest it has seen, so deleting UsageRecords never takes
// anything off a bill.
type BillReconciler struct {
	client.Client
	// Period spaces the recomputations the usage records cause (throttle):
	// a bill follows the nodes' reports at most once per period.
	Period time.Duration
}

// +kubebuilder:rbac:groups=kubefair.io,resources=tenantbills,verbs=get;list;watch;create;update;patch
// +kubebuilder:rbac:groups=kubefair.io,resources=usagerecords,verbs=get;list;watch

func (r *BillReconciler) Reconcile(ctx context.Context, key billKey) (ctrl.Result, error) {
	var records kubefairv1.UsageRecordList
	if err := r.List(ctx, &records, client.MatchingFields{indexRecordPeriod: key.Period}); err != nil {
		return ctrl.Result{}, err
	}
	// The record that counted furthest per node.
	furthest := map[string]*kubefairv1.UsageRecord{}
	for i := range records.Items {
		u := &records.Items[i]
		if f := furthest[u.Node]; f == nil || billing.Advances(u, f) {
			furthest[u.Node] = u
		}
	}
	name, sources, final := "", map[string]kubefairv1.BillSource{}, true
	for node, u := range furthest {
		src := kubefairv1.BillSource{Node: node, Sequence: u.Cursor.Sequence}
		var tenant string
		if tenant, src.Lines = billLines(u, key.UID); len(src.Lines) > 0 {
			name = tenant
			sources[node] = src
			final = final && u.Closed
		}
	}
	if name == "" {
		return ctrl.Result{}, nil // no record of the period bills the tenant (any more): the bill stays as it is
	}

	var bill kubefairv1.TenantBill
	bill.Name = billing.BillName(name, key.UID, key.Period)
	err := r.Get(ctx, client.ObjectKeyFromObject(&bill), &bill)
	if client.IgnoreNotFound(err) != nil {
		return ctrl.Result{}, err
	}
	exists := err == nil
	next := bill.DeepCopy()
	next.Tenant, next.TenantUID, next.Period = name, key.UID, key.Period
	for _, have := range next.Sources { // what a node billed stays, unless its record counted further
		if s, ok := sources[have.Node]; !ok || s.Sequence < have.Sequence {
			sources[have.Node] = have
		}
	}
	next.Sources = next.Sources[:0:0]
	for _, s := range sources {
		next.Sources = append(next.Sources, s)
	}
	sort.Slice(next.Sources, func(i, j int) bool { return next.Sources[i].Node < next.Sources[j].Node })
	if err := sumBill(next); err != nil {
		return ctrl.Result{}, err
	}
	next.Final = final
	if exists && equality.Semantic.DeepEqual(bill, *next) {
		return ctrl.Result{}, nil
	}
	if exists {
		err = r.Update(ctx, next)
	} else {
		err = r.Create(ctx, next)
	}
	if apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err) {
		return ctrl.Result{RequeueAfter: lostRaceRetry}, nil
	}
	return ctrl.Result{}, err
}

// billLines are record u's lines of the tenant uid as a bill holds them,
// and the tenant's name on them ("" when there are none).
func billLines(u *kubefairv1.UsageRecord, uid string) (name string, lines []kubefairv1.BillLine) {
	for _, l := range u.Lines {
		if l.TenantUID == uid {
			name = l.Tenant
			lines = append(lines, kubefairv1.BillLine{Tier: l.Tier, Currency: l.Currency, PricePerCPUHour: l.PricePerCPUHour,
				CPUSeconds: cost.FormatSeconds(big.NewInt(l.CPUNanoseconds))})
		}
	}
	return name, lines
}

// sumBill fills a bill's lines, CPU-seconds and costs from its sources:
// the CPU at each price over all nodes, priced once and rounded down.
func sumBill(b *kubefairv1.TenantBill) error {
	type price struct{ tier, currency, price string }
	ns := map[price]*big.Int{}
	for _, s := range b.Sources {
		for _, l := range s.Lines {
			v, err := cost.ParseSeconds(l.CPUSeconds)
			if err != nil {
				return fmt.Errorf("bill %s: %w", b.Name, err)
			}
			k := price{l.Tier, l.Currency, l.PricePerCPUHour}
			if ns[k] == nil {
				ns[k] = new(big.Int)
			}
			ns[k].Add(ns[k], v)
		}
	}
	total, costs := new(big.Int), map[string]*big.Int{}
	b.Lines = b.Lines[:0:0]
	for k, v := range ns {
		micros, err := cost.ParsePrice(k.price)
		if err != nil {
			return fmt.Errorf("bill %s: %w", b.Name, err)
		}
		c := cost.Cost(v, micros)
		b.Lines = append(b.Lines, kubefairv1.BillLine{Tier: k.tier, Currency: k.currency, PricePerCPUHour: k.price,
			CPUSeconds: cost.FormatSeconds(v), Cost: cost.FormatMicros(c)})
		total.Add(total, v)
		if k.currency != "" {
			if costs[k.currency] == nil {
				costs[k.currency] = new(big.Int)
			}
			costs[k.currency].Add(costs[k.currency], c)
		}
	}
	sort.Slice(b.Lines, func(i, j int) bool {
		x, y := b.Lines[i], b.Lines[j]
		return x.Tier+"/"+x.Currency+"/"+x.PricePerCPUHour < y.Tier+"/"+y.Currency+"/"+y.PricePerCPUHour
	})
	b.CPUSeconds = cost.FormatSeconds(total)
	b.Costs = b.Costs[:0:0]
	for c, v := range costs {
		b.Costs = append(b.Costs, kubefairv1.Amount{Currency: c, Amount: cost.FormatMicros(v)})
	}
	sort.Slice(b.Costs, func(i, j int) bool { return b.Costs[i].Currency < b.Costs[j].Currency })
	b.Nodes = int32(len(b.Sources))
	return nil
}

// SetupWithManager recomputes the bills of a usage record's tenants and
// period when the record changes.
func (r *BillReconciler) SetupWithManager(mgr ctrl.Manager) error {
	return builder.TypedControllerManagedBy[billKey](mgr).
		Named("tenantbill").
		Watches(&kubefairv1.UsageRecord{}, newThrottle[billKey](r.Period).handler(func(_ context.Context, o client.Object) []billKey {
			u := o.(*kubefairv1.UsageRecord)
			var keys []billKey
			for _, l := range u.Lines {
				if k := (billKey{UID: l.TenantUID, Period: u.Period}); !slices.Contains(keys, k) {
					keys = append(keys, k)
				}
			}
			return keys
		})).
		WithLogConstructor(func(k *billKey) logr.Logger {
			l := mgr.GetLogger().WithValues("controller", "tenantbill")
			if k != nil {
				l = l.WithValues("tenantUID", k.UID, "period", k.Period)
			}
			return l
		}).
		Complete(reconcile.TypedFunc[billKey](r.Reconcile))
}
