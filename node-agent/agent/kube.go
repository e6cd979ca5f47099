package agent

import (
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	corev1 "k8s.io/api/core/v1"
)

// NewCache is the agent's view of the API: every Tenant, and only the Pods
// bound to this node (a field selector on spec.nodeName, so a node never
// receives the rest of the cluster's pods). Being an informer cache, it
// keeps serving the last known state while the API server is unreachable.
// The objects are kept without their managed fields, which the agent never
// reads (at 250 pods a sizable part of the cache).
func NewCache(cfg *rest.Config, scheme *runtime.Scheme, nodeName string) (cache.Cache, error) {
	return cache.New(cfg, cache.Options{
		Scheme:           scheme,
		DefaultTransform: cache.TransformStripManagedFields(),
		ByObject: map[client.Object]cache.ByObject{
			&corev1.Pod{}: {Field: fields.OneTermEqualSelector("spec.nodeName", nodeName)},
		},
	})
}
