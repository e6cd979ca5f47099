package controllers

import (
	"reflect"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	kubefairv1 "github.com/kubefair/kubefair/api/v1alpha1"
)

// billedBy is what one node billed: lines of tier/currency/price/CPU-seconds.
func billedBy(node string, lines ...kubefairv1.BillLine) kubefairv1.BillSource {
	return kubefairv1.BillSource{Node: node, Lines: lines}
}

// lineAt is a line of CPU-seconds at a price.
func lineAt(tier, currency, price, seconds string) kubefairv1.BillLine {
	return kubefairv1.BillLine{Tier: tier, Currency: currency, PricePerCPUHour: price, CPUSeconds: seconds}
}

// priced is a bill's line with its cost.
func priced(tier, currency, price, seconds, cost string) kubefairv1.BillLine {
	l := lineAt(tier, currency, price, seconds)
	l.Cost = cost
	return l
}

// TestSumBillTable: a bill's lines are its sources' CPU summed per tier,
// currency and price over all nodes, each priced once and rounded down;
// its costs are summed per currency (unpriced CPU has none); what the bill
// held before is replaced; an unreadable figure is an error.
func TestSumBillTable(t *testing.T) {
	for _, tc := range []struct {
		name    string
		sources []kubefairv1.BillSource
		lines   []kubefairv1.BillLine
		costs   []kubefairv1.Amount
		seconds string
		nodes   int32
		err     string // part of the error, "" for none
	}{
		{name: "one node, one price", sources: []kubefairv1.BillSource{billedBy("n1", lineAt("gold", "EUR", "3.6", "3600.000000000"))},
			lines: []kubefairv1.BillLine{priced("gold", "EUR", "3.6", "3600.000000000", "3.600000")},
			costs: []kubefairv1.Amount{{Currency: "EUR", Amount: "3.600000"}}, seconds: "3600.000000000", nodes: 1},
		{name: "priced once over the nodes, then rounded down", sources: []kubefairv1.BillSource{
			billedBy("n1", lineAt("gold", "EUR", "1", "0.001800000")), billedBy("n2", lineAt("gold", "EUR", "1", "0.001800000"))},
			lines: []kubefairv1.BillLine{priced("gold", "EUR", "1", "0.003600000", "0.000001")},
			costs: []kubefairv1.Amount{{Currency: "EUR", Amount: "0.000001"}}, seconds: "0.003600000", nodes: 2},
		{name: "less than a millionth costs nothing", sources: []kubefairv1.BillSource{billedBy("n1", lineAt("gold", "EUR", "1", "0.003599999"))},
			lines: []kubefairv1.BillLine{priced("gold", "EUR", "1", "0.003599999", "0.000000")},
			costs: []kubefairv1.Amount{{Currency: "EUR", Amount: "0.000000"}}, seconds: "0.003599999", nodes: 1},
		{name: "a price change in the period: a line per price, one cost", sources: []kubefairv1.BillSource{
			billedBy("n1", lineAt("gold", "EUR", "2", "1800.000000000"), lineAt("gold", "EUR", "1", "3600.000000000")), billedBy("n2", lineAt("gold", "EUR", "2", "1800.000000000"))},
			lines: []kubefairv1.BillLine{priced("gold", "EUR", "1", "3600.000000000", "1.000000"), priced("gold", "EUR", "2", "3600.000000000", "2.000000")},
			costs: []kubefairv1.Amount{{Currency: "EUR", Amount: "3.000000"}}, seconds: "7200.000000000", nodes: 2},
		{name: "a tier in another currency: a cost per currency", sources: []kubefairv1.BillSource{
			billedBy("n1", lineAt("silver", "USD", "0.5", "7200.000000000")), billedBy("n2", lineAt("gold", "EUR", "1", "3600.000000000"))},
			lines: []kubefairv1.BillLine{priced("gold", "EUR", "1", "3600.000000000", "1.000000"), priced("silver", "USD", "0.5", "7200.000000000", "1.000000")},
			costs: []kubefairv1.Amount{{Currency: "EUR", Amount: "1.000000"}, {Currency: "USD", Amount: "1.000000"}}, seconds: "10800.000000000", nodes: 2},
		{name: "unpriced CPU is counted, not costed", sources: []kubefairv1.BillSource{
			billedBy("n1", lineAt("gold", "EUR", "1", "3600.000000000"), lineAt("", "", "0", "10.500000000"))},
			lines: []kubefairv1.BillLine{priced("", "", "0", "10.500000000", "0.000000"), priced("gold", "EUR", "1", "3600.000000000", "1.000000")},
			costs: []kubefairv1.Amount{{Currency: "EUR", Amount: "1.000000"}}, seconds: "3610.500000000", nodes: 1},
		{name: "a node that billed nothing still counts as a node", sources: []kubefairv1.BillSource{billedBy("n1")},
			seconds: "0.000000000", nodes: 1},
		{name: "no sources", seconds: "0.000000000", nodes: 0},
		{name: "unreadable CPU-seconds", sources: []kubefairv1.BillSource{billedBy("n1", lineAt("gold", "EUR", "1", "1.0000000001"))},
			err: "bill shop.2026-03-04.uid-shop: "},
		{name: "unreadable price", sources: []kubefairv1.BillSource{billedBy("n1", lineAt("gold", "EUR", "1e3", "1"))},
			err: "bill shop.2026-03-04.uid-shop: price \"1e3\""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := &kubefairv1.TenantBill{ObjectMeta: metav1.ObjectMeta{Name: "shop.2026-03-04.uid-shop"}, Sources: tc.sources,
				// what an earlier sum left, all to be replaced
				CPUSeconds: "99.000000000", Nodes: 9,
				Lines: []kubefairv1.BillLine{priced("old", "GBP", "9", "99.000000000", "0.247500")}, Costs: []kubefairv1.Amount{{Currency: "GBP", Amount: "0.247500"}}}
			err := sumBill(b)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want one containing %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if b.CPUSeconds != tc.seconds || b.Nodes != tc.nodes {
				t.Errorf("%s CPU-seconds over %d node(s), want %s over %d", b.CPUSeconds, b.Nodes, tc.seconds, tc.nodes)
			}
			if len(b.Lines)+len(tc.lines) > 0 && !reflect.DeepEqual(b.Lines, tc.lines) {
				t.Errorf("lines %+v, want %+v", b.Lines, tc.lines)
			}
			if len(b.Costs)+len(tc.costs) > 0 && !reflect.DeepEqual(b.Costs, tc.costs) {
				t.Errorf("costs %+v, want %+v", b.Costs, tc.costs)
			}
		})
	}
}
