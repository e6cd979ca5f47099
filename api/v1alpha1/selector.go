package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// LabelSelector is metav1.LabelSelector with bounds the API server checks:
// at most 32 matchLabels and 16 matchExpressions, label values of at most
// 63 characters, and only the operators In, NotIn, Exists and DoesNotExist.
// The bounds keep the CRDs' CEL rules within the API server's cost budget,
// and a selector they refuse is one Kubernetes could not use anyway. The
// requirements of matchLabels and matchExpressions are ANDed; an empty
// selector matches everything.
// +structType=atomic
// +kubebuilder:validation:XValidation:rule="!has(self.matchLabels) || self.matchLabels.all(k, size(k) > 0 && size(k) <= 317)",message="matchLabels keys must be label keys: 1 to 317 characters (an optional DNS prefix of up to 253 and '/', then a name of up to 63)"
type LabelSelector struct {
	// MatchLabels selects by label value: each key must have this value.
	// +kubebuilder:validation:MaxProperties=32
	// +optional
	MatchLabels map[string]LabelValue `json:"matchLabels,omitempty"`
	// MatchExpressions are requirements on labels.
	// +kubebuilder:validation:MaxItems=16
	// +listType=atomic
	// +optional
	MatchExpressions []LabelSelectorRequirement `json:"matchExpressions,omitempty"`
}

// LabelValue is a label value: at most 63 characters, alphanumerics with
// '-', '_' or '.' inside, or empty.
// +kubebuilder:validation:MaxLength=63
// +kubebuilder:validation:Pattern=`^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$`
type LabelValue string

// LabelSelectorRequirement is a requirement on one label: In and NotIn need
// values, Exists and DoesNotExist take none.
// +kubebuilder:validation:XValidation:rule="!(self.operator in ['In', 'NotIn']) || (has(self.values) && size(self.values) > 0)",messageExpression="'operator ' + self.operator + ' needs at least one value'"
// +kubebuilder:validation:XValidation:rule="!(self.operator in ['Exists', 'DoesNotExist']) || !has(self.values) || size(self.values) == 0",messageExpression="'operator ' + self.operator + ' takes no values'"
type LabelSelectorRequirement struct {
	// Key is the label key: an optional DNS subdomain prefix and '/', then
	// a name.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=317
	// +kubebuilder:validation:XValidation:rule="self.matches('^([a-z0-9]([-a-z0-9]*[a-z0-9])?([.][a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$')",message="key must be a label key: an optional DNS subdomain prefix and '/', then a name of letters, digits, '-', '_' and '.' that starts and ends with a letter or digit"
	// +required
	Key string `json:"key"`
	// Operator relates the key to the values: In, NotIn, Exists or
	// DoesNotExist.
	// +kubebuilder:validation:Enum=In;NotIn;Exists;DoesNotExist
	// +required
	Operator metav1.LabelSelectorOperator `json:"operator"`
	// Values for In and NotIn (at least one); none for Exists and
	// DoesNotExist.
	// +kubebuilder:validation:MaxItems=64
	// +listType=atomic
	// +optional
	Values []LabelValue `json:"values,omitempty"`
}

// Meta is the selector as a metav1.LabelSelector.
func (s *LabelSelector) Meta() *metav1.LabelSelector {
	if s == nil {
		return nil
	}
	m := &metav1.LabelSelector{}
	if s.MatchLabels != nil {
		m.MatchLabels = make(map[string]string, len(s.MatchLabels))
		for k, v := range s.MatchLabels {
			m.MatchLabels[k] = string(v)
		}
	}
	for _, e := range s.MatchExpressions {
		r := metav1.LabelSelectorRequirement{Key: e.Key, Operator: e.Operator}
		for _, v := range e.Values {
			r.Values = append(r.Values, string(v))
		}
		m.MatchExpressions = append(m.MatchExpressions, r)
	}
	return m
}

// AsSelector is the selector as a labels.Selector: nil matches nothing,
// empty everything.
func (s *LabelSelector) AsSelector() (labels.Selector, error) {
	return metav1.LabelSelectorAsSelector(s.Meta())
}

// SelectorFromLabels is a selector of every object carrying all of these
// labels.
func SelectorFromLabels(l map[string]string) LabelSelector {
	s := LabelSelector{MatchLabels: make(map[string]LabelValue, len(l))}
	for k, v := range l {
		s.MatchLabels[k] = LabelValue(v)
	}
	return s
}
