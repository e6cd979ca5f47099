package controllers

import (
	"context"

	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	kubefairv1 "github.com/kubefair/kubefair/api/v1alpha1"
)

// Cache indexes on Tenants, so that a change to a tier, a namespace or a
// node's report finds exactly the tenants it affects.
const (
	// indexTier maps a tier name to the tenants whose spec.tier names it.
	indexTier = "kubefair.io/tier"
	// indexNamespace maps a namespace name to the tenants that name it in
	// spec.namespaces or own it in status.namespaces.
	indexNamespace = "kubefair.io/namespace"
	// indexNode maps a node name to the tenants with a status entry for it.
	indexNode = "kubefair.io/node"
)

func registerIndexes(ctx context.Context, mgr manager.Manager) error {
	idx := mgr.GetFieldIndexer()
	if err := idx.IndexField(ctx, &kubefairv1.Tenant{}, indexTier, func(o client.Object) []string {
		if tier := o.(*kubefairv1.Tenant).Spec.Tier; tier != "" {
			return []string{tier}
		}
		return nil
	}); err != nil {
		return err
	}
	if err := idx.IndexField(ctx, &kubefairv1.Tenant{}, indexNamespace, func(o client.Object) []string {
		t := o.(*kubefairv1.Tenant)
		return append(append([]string{}, t.Spec.Namespaces...), t.Status.Namespaces...)
	}); err != nil {
		return err
	}
	return idx.IndexField(ctx, &kubefairv1.Tenant{}, indexNode, func(o client.Object) []string {
		var nodes []string
		for _, n := range o.(*kubefairv1.Tenant).Status.Nodes {
			nodes = append(nodes, n.Node)
		}
		return nodes
	})
}
