package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// LatencyClass selects the scheduler slice of every thread of a tier's
// tenants (docs/agent.md, "Latency classes"): short for interactive, so a
// waking thread runs sooner; long for batch, so threads switch less. The
// CPU shares do not change.
// +kubebuilder:validation:Enum=interactive;batch
// +kubebuilder:validation:MaxLength=11
type LatencyClass string

const (
	LatencyClassInteractive LatencyClass = "interactive"
	LatencyClassBatch       LatencyClass = "batch"
)

// PricingTierSpec is what a tier sells: a CPU weight at a price.
// +kubebuilder:validation:XValidation:rule="(has(self.currency) ? self.currency : 'USD') == (has(oldSelf.currency) ? oldSelf.currency : 'USD')",message="currency cannot change: usage already billed is in the old currency; create a new PricingTier in the new currency and move tenants to it"
type PricingTierSpec struct {
	// Weight is the CPU weight this tier buys, relative to other tenants on
	// the same node (1..10000).
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=10000
	// +required
	Weight int32 `json:"weight"`

	// PricePerCPUHour is the price of one CPU-hour used, as a decimal
	// string from 0 to 999999.999999 with at most 6 fraction digits (e.g.
	// "0.045"), so money stays exact and bounded. A new price applies to
	// CPU used from the moment the API server accepted it (status.prices).
	// +kubebuilder:validation:MaxLength=13
	// +kubebuilder:validation:XValidation:rule="self.matches('^[0-9]{1,6}([.][0-9]{1,6})?$')",message="pricePerCPUHour must be a decimal from 0 to 999999.999999 with at most 6 fraction digits, e.g. 0.045"
	// +required
	PricePerCPUHour string `json:"pricePerCPUHour"`

	// Currency is the ISO 4217 code the price is in. It cannot change once
	// set: a tier in another currency is another PricingTier.
	// +kubebuilder:default=USD
	// +kubebuilder:validation:MaxLength=3
	// +kubebuilder:validation:XValidation:rule="self.matches('^[A-Z]{3}$')",message="currency must be an ISO 4217 code of three capital letters, e.g. USD"
	// +optional
	Currency string `json:"currency,omitempty"`

	// LatencyClass is the scheduling latency class of the tier's tenants:
	// interactive or batch; none leaves the kernel's slice.
	// +optional
	LatencyClass LatencyClass `json:"latencyClass,omitempty"`
}

// PricingTierStatus tells which tenants use a tier.
type PricingTierStatus struct {
	// ObservedGeneration is the generation this status was computed from.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// Tenants are the names of the tenants that reference this tier,
	// sorted: the first 1024 when more do.
	// +listType=set
	// +kubebuilder:validation:MaxItems=1024
	// +kubebuilder:validation:items:MaxLength=253
	// +optional
	Tenants []string `json:"tenants,omitempty"`

	// TenantCount is how many tenants reference this tier (all of them,
	// also beyond the 1024 Tenants lists), for the printer column.
	// +optional
	TenantCount int32 `json:"tenantCount"`
	// Prices are the tier's prices over time, oldest first (the last 32),
	// each with the time the API server accepted it: CPU is billed at the
	// price in force when it was used.
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=32
	// +optional
	Prices []PriceChange `json:"prices,omitempty"`
}

// PriceChange is one price of a tier and when it took effect.
type PriceChange struct {
	// PricePerCPUHour as in the spec.
	// +kubebuilder:validation:MaxLength=13
	PricePerCPUHour string `json:"pricePerCPUHour"`
	// Since is when the price took effect: when the API server accepted
	// the write that set it.
	Since metav1.Time `json:"since"`
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
