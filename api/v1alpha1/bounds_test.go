package v1alpha1_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/yaml"

	kubefairv1 "github.com/kubefair/kubefair/api/v1alpha1"
)

// crds reads the generated CRDs, by plural name.
func crds(t *testing.T) map[string]*apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("..", "..", "config", "crd", "bases", "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no CRDs in config/crd/bases: %v", err)
	}
	out := map[string]*apiextensionsv1.CustomResourceDefinition{}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var crd apiextensionsv1.CustomResourceDefinition
		if err := yaml.Unmarshal(data, &crd); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		out[crd.Spec.Names.Plural] = &crd
	}
	return out
}

// unbounded are the strings that have no maxLength, and why.
var unbounded = map[string]string{
	".apiVersion": "checked by the API server",
	".kind":       "checked by the API server",
	// metav1.Duration: controller-gen cannot put markers on it.
	"nodesharereports.window": "a metav1.Duration",
}

// TestCRDsAreBounded: every list has maxItems, every map maxProperties and
// every string maxLength (or an enum, or the date-time format), so that
// CEL rules have a finite cost and nothing is unboundedly large.
func TestCRDsAreBounded(t *testing.T) {
	for plural, crd := range crds(t) {
		for _, v := range crd.Spec.Versions {
			var walk func(path string, s *apiextensionsv1.JSONSchemaProps)
			walk = func(path string, s *apiextensionsv1.JSONSchemaProps) {
				switch s.Type {
				case "array":
					if s.MaxItems == nil {
						t.Errorf("%s%s: a list without maxItems", plural, path)
					}
					if s.Items != nil && s.Items.Schema != nil {
						walk(path+"[]", s.Items.Schema)
					}
				case "string":
					_, why := unbounded[path]
					_, whyKind := unbounded[plural+path]
					if s.MaxLength == nil && len(s.Enum) == 0 && s.Format != "date-time" && !why && !whyKind {
						t.Errorf("%s%s: a string without maxLength", plural, path)
					}
				case "object":
					if s.AdditionalProperties != nil && s.AdditionalProperties.Schema != nil {
						if s.MaxProperties == nil {
							t.Errorf("%s%s: a map without maxProperties", plural, path)
						}
						walk(path+"{}", s.AdditionalProperties.Schema)
					}
					for name, p := range s.Properties {
						if path == "" && name == "metadata" {
							continue
						}
						walk(path+"."+name, &p)
					}
				}
			}
			walk("", v.Schema.OpenAPIV3Schema)
		}
	}
}

// maxRequestBytes is the most the API server takes in one request (its
// default --max-request-bytes is 3 MiB; etcd's default limit is lower).
const maxRequestBytes = 3 << 20

// TestLedgerListBoundsNeverBind: the lists the controller writes in
// UsageRecords and TenantBills grow with the data (tenants, prices, nodes),
// not with anything the controller caps. Their maxItems is set where even
// the smallest item the controller writes would overflow the API server's
// request limit first, so the bound never refuses a write that could
// otherwise be stored.
func TestLedgerListBoundsNeverBind(t *testing.T) {
	at := metav1.NewTime(time.Date(2026, 11, 25, 0, 0, 0, 0, time.UTC))
	line := kubefairv1.BillLine{PricePerCPUHour: "0", CPUSeconds: "0.000000001"}
	smallest := map[string]any{
		// A counter is always stamped: with the report's observedTime, or
		// the start of its window.
		"usagerecords.cursor.tenants":     kubefairv1.TenantCounter{UID: "u", At: at},
		"usagerecords.lines":              kubefairv1.ChargeLine{TenantUID: "u", Tenant: "t", PricePerCPUHour: "0", Cost: "0.000000", From: at, To: at},
		"usagerecords.lastReport.refused": kubefairv1.RefusedTenant{UID: "u", Reason: kubefairv1.ReasonStaleReport, Message: "x"},
		"tenantbills.lines":               line,
		"tenantbills.sources":             kubefairv1.BillSource{Node: "n", Lines: []kubefairv1.BillLine{line}},
		"tenantbills.sources[].lines":     line,
	}
	all := crds(t)
	for path, item := range smallest {
		plural, rest, _ := strings.Cut(path, ".")
		s := all[plural].Spec.Versions[0].Schema.OpenAPIV3Schema
		for _, name := range strings.Split(rest, ".") {
			if n, ok := strings.CutSuffix(name, "[]"); ok {
				p := s.Properties[n]
				s = p.Items.Schema
				continue
			}
			p, ok := s.Properties[name]
			if !ok {
				t.Fatalf("%s: no field %q", path, name)
			}
			s = &p
		}
		b, err := json.Marshal(item)
		if err != nil {
			t.Fatal(err)
		}
		size := int64(len(b) + 1) // and a comma
		if s.MaxItems == nil || *s.MaxItems*size < maxRequestBytes {
			t.Errorf("%s: maxItems %v × %d bytes (%s) fits in %d bytes: the bound could refuse a write", path, s.MaxItems, size, b, maxRequestBytes)
		}
	}
	// The codes a currency can have: one cost each.
	if costs := all["tenantbills"].Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["costs"]; costs.MaxItems == nil || *costs.MaxItems < 26*26*26 {
		t.Errorf("tenantbills.costs: maxItems %v, want at least 26³", costs.MaxItems)
	}
}
