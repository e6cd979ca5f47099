package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// LatencyClass selects the scheduler slice a tier's tenants get (DESIGN.md
// "beyond": short slices for interactive tenants, long ones for batch).
// +kubebuilder:validation:Enum=interactive;batch
type LatencyClass string

const (
	LatencyClassInteractive LatencyClass = "interactive"
	LatencyClassBatch       LatencyClass = "batch"
)

// PricingTierSpec is what a tier sells: a CPU weight at a price.
type PricingTierSpec struct {
	// Weight is the CPU weight this tier buys, relative to other tenants on
	// the same node (1..10000).
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=10000
	// +required
	Weight int32 `json:"weight"`

	// PricePerCPUHour is the price of one CPU-hour used, as a non-negative
	// decimal string with at most 6 fraction digits (e.g. "0.045"), so money
	// stays exact.
	// +kubebuilder:validation:MaxLength=19
	// +kubebuilder:validation:XValidation:rule="self.matches('^[0-9]{1,12}([.][0-9]{1,6})?$')",message="pricePerCPUHour must be a non-negative decimal with at most 12 integer and 6 fraction digits, e.g. 0.045"
	// +required
	PricePerCPUHour string `json:"pricePerCPUHour"`

	// Currency is the ISO 4217 code the price is in.
	// +kubebuilder:default=USD
	// +kubebuilder:validation:XValidation:rule="self.matches('^[A-Z]{3}$')",message="currency must be an ISO 4217 code of three capital letters, e.g. USD"
	// +optional
	Currency string `json:"currency,omitempty"`

	// LatencyClass is the scheduling latency class of the tier's tenants.
	// +optional
	LatencyClass LatencyClass `json:"latencyClass,omitempty"`
}

// PricingTierStatus tells which tenants use a tier.
type PricingTierStatus struct {
	// ObservedGeneration is the generation this status was computed from.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// Tenants are the names of the tenants that reference this tier, sorted.
	// +listType=set
	// +optional
	Tenants []string `json:"tenants,omitempty"`

	// TenantCount is len(Tenants), for the printer column.
	// +optional
	TenantCount int32 `json:"tenantCount"`
}

// PricingTier is a CPU weight and its price per CPU-hour.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Cluster,shortName=pt;tier
// +kubebuilder:printcolumn:name="WEIGHT",type=integer,JSONPath=`.spec.weight`
// +kubebuilder:printcolumn:name="PRICE/CPU-HOUR",type=string,JSONPath=`.spec.pricePerCPUHour`
// +kubebuilder:printcolumn:name="CURRENCY",type=string,JSONPath=`.spec.currency`
// +kubebuilder:printcolumn:name="TENANTS",type=integer,JSONPath=`.status.tenantCount`
// +kubebuilder:printcolumn:name="AGE",type=date,JSONPath=`.metadata.creationTimestamp`
type PricingTier struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +required
	Spec PricingTierSpec `json:"spec"`
	// +optional
	Status PricingTierStatus `json:"status,omitempty"`
}

// PricingTierList is a list of PricingTiers.
// +kubebuilder:object:root=true
type PricingTierList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []PricingTier `json:"items"`
}

func init() {
	SchemeBuilder.Register(func(s *runtime.Scheme) error {
		s.AddKnownTypes(GroupVersion, &PricingTier{}, &PricingTierList{})
		return nil
	})
}
