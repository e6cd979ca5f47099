package agent

import (
	"context"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/client"

	kubefairv1 "github.com/kubefair/kubefair/api/v1alpha1"
	"github.com/kubefair/kubefair/controllers/cost"
)

// billed is what a tenant's TenantBills hold over every billing period:
// CPU in nanoseconds, and cost in millionths of currency.
func billed(t testing.TB, k8s client.Client, tn *kubefairv1.Tenant, currency string) (ns, micros int64) {
	t.Helper()
	var bills kubefairv1.TenantBillList
	if err := k8s.List(context.Background(), &bills, client.MatchingFields{"tenantUID": string(tn.UID)}); err != nil {
		t.Fatal(err)
	}
	for _, b := range bills.Items {
		v, err := cost.ParseSeconds(b.CPUSeconds)
		if err != nil {
			t.Fatal(err)
		}
		ns += v.Int64()
		for _, c := range b.Costs {
			if m, err := cost.ParseMicros(c.Amount); err == nil && c.Currency == currency {
				micros += m.Int64()
			}
		}
	}
	return ns, micros
}
