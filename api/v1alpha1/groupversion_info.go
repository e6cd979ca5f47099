// Package v1alpha1 holds the kubefair.io/v1alpha1 API: PricingTier, Tenant and
// NodeShareReport, all cluster-scoped.
// +kubebuilder:object:generate=true
// +groupName=kubefair.io
package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

var (
	// GroupVersion is the group and version of every kubefair object.
	GroupVersion = schema.GroupVersion{Group: "kubefair.io", Version: "v1alpha1"}

	// SchemeBuilder registers the kubefair types with a runtime.Scheme: the
	// group version's common options here, each kind in its own file.
	SchemeBuilder = runtime.NewSchemeBuilder(func(s *runtime.Scheme) error {
		metav1.AddToGroupVersion(s, GroupVersion)
		return nil
	})

	// AddToScheme adds the kubefair types to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)
