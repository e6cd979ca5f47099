// Package v1alpha1 holds the kubefair.io/v1alpha1 API: PricingTier, Tenant and
// NodeShareReport, all cluster-scoped.
// +kubebuilder:object:generate=true
// +groupName=kubefair.io
package v1alpha1

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/scheme"
)

var (
	// GroupVersion is the group and version of every kubefair object.
	GroupVersion = schema.GroupVersion{Group: "kubefair.io", Version: "v1alpha1"}

	// SchemeBuilder registers the kubefair types with a runtime.Scheme.
	SchemeBuilder = &scheme.Builder{GroupVersion: GroupVersion}

	// AddToScheme adds the kubefair types to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)
