package kubeapi

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// CreateNode registers a Node with cpus CPUs, as a kubelet would: the
// controller checks a node's reports against it (no kubelet runs here).
func (s *Server) CreateNode(ctx context.Context, name string, cpus int64) (*corev1.Node, error) {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if err := s.Client.Create(ctx, n); err != nil {
		return nil, err
	}
	n.Status.Capacity = corev1.ResourceList{corev1.ResourceCPU: *resource.NewQuantity(cpus, resource.DecimalSI)}
	n.Status.Allocatable = n.Status.Capacity
	return n, s.Client.Status().Update(ctx, n)
}
