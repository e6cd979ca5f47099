package controller

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/yaml"

	"github.com/kubefair/kubefair/test/harness/kubeapi"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kubefairv1 "github.com/kubefair/kubefair/api/v1alpha1"
)

// TestAPIServerRefusesBadObjects: every rule lives in the CRD schema, so the
// API server itself refuses bad input, with a message that says what to fix.
func TestAPIServerRefusesBadObjects(t *testing.T) {
	okSpec := func() kubefairv1.TenantSpec {
		return kubefairv1.TenantSpec{Weight: ptr.To[int32](100), Namespaces: []string{"team-a"}}
	}
	tenant := func(mut func(*kubefairv1.TenantSpec)) client.Object {
		s := okSpec()
		mut(&s)
		return &kubefairv1.Tenant{ObjectMeta: metav1.ObjectMeta{Name: "bad-tenant"}, Spec: s}
	}
	pricing := func(mut func(*kubefairv1.PricingTierSpec)) client.Object {
		s := kubefairv1.PricingTierSpec{Weight: 100, PricePerCPUHour: "0.05", Currency: "USD"}
		mut(&s)
		return &kubefairv1.PricingTier{ObjectMeta: metav1.ObjectMeta{Name: "bad-tier"}, Spec: s}
	}
	workload := func(name string, weight int32) kubefairv1.Workload {
		return kubefairv1.Workload{Name: name, Weight: weight, PodSelector: kubefairv1.LabelSelector{MatchLabels: map[string]kubefairv1.LabelValue{"app": kubefairv1.LabelValue(name)}}}
	}
	selector := func(exprs ...kubefairv1.LabelSelectorRequirement) *kubefairv1.LabelSelector {
		return &kubefairv1.LabelSelector{MatchExpressions: exprs}
	}
	req := func(key string, op metav1.LabelSelectorOperator, values ...kubefairv1.LabelValue) kubefairv1.LabelSelectorRequirement {
		return kubefairv1.LabelSelectorRequirement{Key: key, Operator: op, Values: values}
	}
	report := func(mut func(*kubefairv1.NodeShareReport)) client.Object {
		r := &kubefairv1.NodeShareReport{ObjectMeta: metav1.ObjectMeta{Name: "bad-node"},
			Backend: kubefairv1.BackendCgroup, CPUs: 2, BootID: "b", Window: metav1.Duration{}, ObservedTime: metav1.Now()}
		mut(r)
		return r
	}

	for _, tc := range []struct {
		name string
		obj  client.Object
		want string // part of the API server's message
	}{
		{"tier and weight both set", tenant(func(s *kubefairv1.TenantSpec) { s.Tier = "gold" }), "exactly one of spec.tier and spec.weight"},
		{"neither tier nor weight", tenant(func(s *kubefairv1.TenantSpec) { s.Weight = nil }), "exactly one of spec.tier and spec.weight"},
		{"tenant weight 0", tenant(func(s *kubefairv1.TenantSpec) { s.Weight = ptr.To[int32](0) }), "spec.weight"},
		{"tenant weight above 10000", tenant(func(s *kubefairv1.TenantSpec) { s.Weight = ptr.To[int32](10001) }), "spec.weight"},
		{"no namespaces and no selector", tenant(func(s *kubefairv1.TenantSpec) { s.Namespaces = nil }), "at least one of spec.namespaces or spec.namespaceSelector"},
		{"namespace not a DNS label", tenant(func(s *kubefairv1.TenantSpec) { s.Namespaces = []string{"Team_A"} }), "namespaces must be DNS labels"},
		{"unknown thread policy", tenant(func(s *kubefairv1.TenantSpec) { s.ThreadPolicy = "Fastest" }), "spec.threadPolicy"},
		{"workload weight 0", tenant(func(s *kubefairv1.TenantSpec) { s.Workloads = []kubefairv1.Workload{workload("vm-a", 0)} }), "spec.workloads[0].weight"},
		{"workload weight above 10000", tenant(func(s *kubefairv1.TenantSpec) { s.Workloads = []kubefairv1.Workload{workload("vm-a", 20000)} }), "spec.workloads[0].weight"},
		{"duplicate workload names", tenant(func(s *kubefairv1.TenantSpec) {
			s.Workloads = []kubefairv1.Workload{workload("vm-a", 1), workload("vm-a", 3)}
		}), "workload names must be unique"},
		{"workload name not a DNS label", tenant(func(s *kubefairv1.TenantSpec) { s.Workloads = []kubefairv1.Workload{workload("VM A", 1)} }), "workload name must be a DNS label"},
		{"negative price", pricing(func(s *kubefairv1.PricingTierSpec) { s.PricePerCPUHour = "-0.05" }), "pricePerCPUHour must be a decimal from 0 to 999999.999999"},
		{"price not a decimal", pricing(func(s *kubefairv1.PricingTierSpec) { s.PricePerCPUHour = "cheap" }), "pricePerCPUHour must be a decimal from 0 to 999999.999999"},
		{"price with 7 fraction digits", pricing(func(s *kubefairv1.PricingTierSpec) { s.PricePerCPUHour = "0.0000001" }), "pricePerCPUHour must be a decimal from 0 to 999999.999999"},
		{"price of a million", pricing(func(s *kubefairv1.PricingTierSpec) { s.PricePerCPUHour = "1000000" }), "pricePerCPUHour must be a decimal from 0 to 999999.999999"},
		{"the price that overflowed totals", pricing(func(s *kubefairv1.PricingTierSpec) { s.PricePerCPUHour = "999999999999.999999" }), "pricePerCPUHour"},
		{"lower-case currency", pricing(func(s *kubefairv1.PricingTierSpec) { s.Currency = "usd" }), "currency must be an ISO 4217 code"},
		{"tier weight 0", pricing(func(s *kubefairv1.PricingTierSpec) { s.Weight = 0 }), "spec.weight"},
		{"unknown latency class", pricing(func(s *kubefairv1.PricingTierSpec) { s.LatencyClass = "realtime" }), "spec.latencyClass"},
		{"report with unknown backend", report(func(r *kubefairv1.NodeShareReport) { r.Backend = "ebpf" }), "backend"},
		{"report with no CPUs", report(func(r *kubefairv1.NodeShareReport) { r.CPUs = 0 }), "cpus"},
		{"report with negative counter", report(func(r *kubefairv1.NodeShareReport) {
			r.Tenants = []kubefairv1.TenantShare{{Name: "a", UID: "u", CPUNanoseconds: -1}}
		}), "cpuNanoseconds"},
		{"report naming a tenant without its UID", report(func(r *kubefairv1.NodeShareReport) {
			r.Tenants = []kubefairv1.TenantShare{{Name: "a", CPUNanoseconds: 1}}
		}), "uid"},
		{"report with more CPUs than any node", report(func(r *kubefairv1.NodeShareReport) { r.CPUs = 100001 }), "cpus"},

		// Namespaces a tenant cannot have.
		{"empty namespace selector", tenant(func(s *kubefairv1.TenantSpec) { s.NamespaceSelector = &kubefairv1.LabelSelector{} }),
			"namespaceSelector must not be empty: an empty selector matches every namespace"},
		{"empty namespace selector beside names", tenant(func(s *kubefairv1.TenantSpec) {
			s.NamespaceSelector = &kubefairv1.LabelSelector{MatchExpressions: []kubefairv1.LabelSelectorRequirement{}}
		}), "namespaceSelector must not be empty"},
		{"kube-system by name", tenant(func(s *kubefairv1.TenantSpec) { s.Namespaces = []string{"kube-system"} }),
			"namespace kube-system cannot belong to a tenant"},
		{"kubefair's own namespace by name", tenant(func(s *kubefairv1.TenantSpec) { s.Namespaces = []string{"team-a", "kubefair-system"} }),
			"namespace kubefair-system cannot belong to a tenant"},
		{"kube-node-lease by name", tenant(func(s *kubefairv1.TenantSpec) { s.Namespaces = []string{"kube-node-lease"} }),
			"namespace kube-node-lease cannot belong to a tenant"},
		{"kube-public selected by its name label", tenant(func(s *kubefairv1.TenantSpec) {
			s.NamespaceSelector = &kubefairv1.LabelSelector{MatchLabels: map[string]kubefairv1.LabelValue{"kubernetes.io/metadata.name": "kube-public"}}
		}), "namespaceSelector selects namespace kube-public by name, which cannot belong to a tenant"},
		{"kube-system among In values of the name label", tenant(func(s *kubefairv1.TenantSpec) {
			s.NamespaceSelector = selector(req("kubernetes.io/metadata.name", metav1.LabelSelectorOpIn, "team-b", "kube-system"))
		}), "namespaceSelector selects kube-system, kube-public, kube-node-lease or kubefair-system by name"},

		// Label selectors Kubernetes could not use.
		{"unknown operator in a namespace selector", tenant(func(s *kubefairv1.TenantSpec) {
			s.NamespaceSelector = selector(req("team", "Gt", "1"))
		}), `spec.namespaceSelector.matchExpressions[0].operator: Unsupported value: "Gt"`},
		{"unknown operator in a pod selector", tenant(func(s *kubefairv1.TenantSpec) {
			s.Workloads = []kubefairv1.Workload{{Name: "vm-a", Weight: 1, PodSelector: *selector(req("app", "Equals", "vm-a"))}}
		}), `spec.workloads[0].podSelector.matchExpressions[0].operator: Unsupported value: "Equals"`},
		{"In without values", tenant(func(s *kubefairv1.TenantSpec) { s.NamespaceSelector = selector(req("team", metav1.LabelSelectorOpIn)) }),
			"operator In needs at least one value"},
		{"NotIn without values in a pod selector", tenant(func(s *kubefairv1.TenantSpec) {
			s.Workloads = []kubefairv1.Workload{{Name: "vm-a", Weight: 1, PodSelector: *selector(req("app", metav1.LabelSelectorOpNotIn))}}
		}), "operator NotIn needs at least one value"},
		{"Exists with values", tenant(func(s *kubefairv1.TenantSpec) {
			s.NamespaceSelector = selector(req("team", metav1.LabelSelectorOpExists, "a"))
		}), "operator Exists takes no values"},
		{"DoesNotExist with values", tenant(func(s *kubefairv1.TenantSpec) {
			s.NamespaceSelector = selector(req("team", metav1.LabelSelectorOpExists), req("legacy", metav1.LabelSelectorOpDoesNotExist, "yes"))
		}), "operator DoesNotExist takes no values"},
		{"label key not a label key", tenant(func(s *kubefairv1.TenantSpec) {
			s.NamespaceSelector = selector(req("team name", metav1.LabelSelectorOpExists))
		}), "key must be a label key"},
		{"label value too long", tenant(func(s *kubefairv1.TenantSpec) {
			s.NamespaceSelector = &kubefairv1.LabelSelector{MatchLabels: map[string]kubefairv1.LabelValue{"team": kubefairv1.LabelValue(strings.Repeat("a", 64))}}
		}), "spec.namespaceSelector.matchLabels.team: Too long"},
		{"matchLabels key too long", tenant(func(s *kubefairv1.TenantSpec) {
			s.NamespaceSelector = &kubefairv1.LabelSelector{MatchLabels: map[string]kubefairv1.LabelValue{strings.Repeat("k", 318): "a"}}
		}), "matchLabels keys must be label keys"},
		{"17 match expressions", tenant(func(s *kubefairv1.TenantSpec) {
			s.NamespaceSelector = selector()
			for i := range 17 {
				s.NamespaceSelector.MatchExpressions = append(s.NamespaceSelector.MatchExpressions, req(fmt.Sprintf("k%d", i), metav1.LabelSelectorOpExists))
			}
		}), "spec.namespaceSelector.matchExpressions: Too many: 17: must have at most 16 items"},

		// Bounds.
		{"report naming a tenant by a name no Tenant can have", report(func(r *kubefairv1.NodeShareReport) {
			r.Tenants = []kubefairv1.TenantShare{{Name: strings.Repeat("a", 254), UID: "u"}}
		}), "tenants[0].name: Too long"},
		{"bill with a UID no Tenant can have", &kubefairv1.TenantBill{ObjectMeta: metav1.ObjectMeta{Name: "bad-bill"},
			Tenant: "a", TenantUID: strings.Repeat("u", 65), Period: "2026-11-25", CPUSeconds: "0"}, "tenantUID: Too long"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := k8s.Create(ctx(), tc.obj)
			if err == nil {
				_ = k8s.Delete(ctx(), tc.obj)
				t.Fatalf("the API server accepted %s", tc.name)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("refused with %q, want a message containing %q", err, tc.want)
			}
			t.Logf("refused: %v", err)
		})
	}
}

// TestDefaults: what an experienced user leaves out is filled in.
func TestDefaults(t *testing.T) {
	tn := &kubefairv1.Tenant{ObjectMeta: metav1.ObjectMeta{Name: "defaults"},
		Spec: kubefairv1.TenantSpec{Weight: ptr.To[int32](5), Namespaces: []string{"defaults"}}}
	pt := &kubefairv1.PricingTier{ObjectMeta: metav1.ObjectMeta{Name: "defaults"},
		Spec: kubefairv1.PricingTierSpec{Weight: 5, PricePerCPUHour: "1"}}
	create(t, tn, pt)
	if tn.Spec.ThreadPolicy != kubefairv1.ThreadPolicyPFS {
		t.Errorf("threadPolicy defaulted to %q, want PFS", tn.Spec.ThreadPolicy)
	}
	if pt.Spec.Currency != "USD" {
		t.Errorf("currency defaulted to %q, want USD", pt.Spec.Currency)
	}
}

// TestSamplesAreValid: the samples in config/samples are accepted as they are.
func TestSamplesAreValid(t *testing.T) {
	files, _ := filepath.Glob(filepath.Join(kubeapi.RepoRoot(), "config", "samples", "*.yaml"))
	if len(files) == 0 {
		t.Fatal("no samples in config/samples")
	}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		dec := yaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
		for {
			u := &unstructured.Unstructured{}
			if err := dec.Decode(&u.Object); err != nil {
				if errors.Is(err, io.EOF) {
					break
				}
				t.Fatalf("%s: %v", f, err)
			}
			if err := k8s.Create(ctx(), u, client.DryRunAll); err != nil {
				t.Errorf("%s: %s %s refused: %v", filepath.Base(f), u.GetKind(), u.GetName(), err)
			}
		}
	}
}

// TestValidationAcceptsSelectors: what the selector rules leave alone — every
// operator used as Kubernetes means it, and the name label used to keep the
// cluster's namespaces out.
func TestValidationAcceptsSelectors(t *testing.T) {
	sel := kubefairv1.LabelSelector{
		MatchLabels: map[string]kubefairv1.LabelValue{"team": "blue", "example.com/tier": ""},
		MatchExpressions: []kubefairv1.LabelSelectorRequirement{
			{Key: "kubernetes.io/metadata.name", Operator: metav1.LabelSelectorOpNotIn, Values: []kubefairv1.LabelValue{"kube-system", "kubefair-system"}},
			{Key: "env", Operator: metav1.LabelSelectorOpIn, Values: []kubefairv1.LabelValue{"prod", "staging"}},
			{Key: "owner", Operator: metav1.LabelSelectorOpExists},
			{Key: "legacy", Operator: metav1.LabelSelectorOpDoesNotExist},
		},
	}
	tn := &kubefairv1.Tenant{ObjectMeta: metav1.ObjectMeta{Name: "selectors-accepted"}, Spec: kubefairv1.TenantSpec{
		Weight: ptr.To[int32](100), NamespaceSelector: &sel,
		Workloads: []kubefairv1.Workload{{Name: "vm-a", Weight: 1, PodSelector: sel}, {Name: "rest", Weight: 1}}}}
	if err := k8s.Create(ctx(), tn, client.DryRunAll); err != nil {
		t.Fatalf("refused: %v", err)
	}
}
