package controllers

import (
	"context"
	"slices"

	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	kubefairv1 "github.com/kubefair/kubefair/api/v1alpha1"
)

// Cache indexes, so that a change to a tier, a namespace, a report or a
// usage record finds exactly the objects it affects.
const (
	// indexTier maps a tier name to the tenants whose spec.tier names it.
	indexTier = "kubefair.io/tier"
	// indexNamespace maps a namespace name to the tenants that name it in
	// spec.namespaces or own it in status.namespaces.
	indexNamespace = "kubefair.io/namespace"
	// indexUID maps a tenant UID to the tenant (reports name tenants by UID).
	indexUID = "kubefair.io/uid"
	// indexRecordNode maps a node name to its UsageRecords.
	indexRecordNode = "kubefair.io/record-node"
	// indexRecordPeriod maps a billing period to its UsageRecords.
	indexRecordPeriod = "kubefair.io/record-period"
	// indexOpenRecord maps "true" to the nodes' open UsageRecords.
	indexOpenRecord = "kubefair.io/open-record"
	// indexOpenRecordTenant maps a tenant UID to the open UsageRecords that
	// name it (a charge line, the cursor, a refusal): a tenant's status
	// reads those, not every node's.
	indexOpenRecordTenant = "kubefair.io/open-record-tenant"
	// indexReportTenant maps "uid/" and a tenant's UID to the reports with
	// its share, and "name/" and its name to those counting its unmeasured
	// pods: a tenant's status reads those, not every node's.
	indexReportTenant = "kubefair.io/report-tenant"
)

// reportTenantKeys are a report's keys in indexReportTenant.
func reportTenantKeys(r *kubefairv1.NodeShareReport) []string {
	var keys []string
	for _, s := range r.Tenants {
		keys = append(keys, "uid/"+s.UID)
	}
	for _, u := range r.Unmeasured {
		keys = append(keys, "name/"+u.Tenant)
	}
	slices.Sort(keys)
	return slices.Compact(keys)
}

// openRecordTenants are the tenant UIDs an open record names.
func openRecordTenants(u *kubefairv1.UsageRecord) []string {
	if u.Closed {
		return nil
	}
	var uids []string
	for _, l := range u.Lines {
		uids = append(uids, l.TenantUID)
	}
	for _, c := range u.Cursor.Tenants {
		uids = append(uids, c.UID)
	}
	if l := u.LastReport; l != nil {
		for _, t := range l.Refused {
			uids = append(uids, t.UID)
		}
	}
	slices.Sort(uids)
	return slices.Compact(uids)
}

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
	for name, value := range map[string]func(*kubefairv1.UsageRecord) string{
		indexRecordNode:   func(r *kubefairv1.UsageRecord) string { return r.Node },
		indexRecordPeriod: func(r *kubefairv1.UsageRecord) string { return r.Period },
		indexOpenRecord: func(r *kubefairv1.UsageRecord) string {
			if r.Closed {
				return ""
			}
			return "true"
		},
	} {
		if err := idx.IndexField(ctx, &kubefairv1.UsageRecord{}, name, func(o client.Object) []string {
			if v := value(o.(*kubefairv1.UsageRecord)); v != "" {
				return []string{v}
			}
			return nil
		}); err != nil {
			return err
		}
	}
	if err := idx.IndexField(ctx, &kubefairv1.UsageRecord{}, indexOpenRecordTenant, func(o client.Object) []string {
		return openRecordTenants(o.(*kubefairv1.UsageRecord))
	}); err != nil {
		return err
	}
	if err := idx.IndexField(ctx, &kubefairv1.NodeShareReport{}, indexReportTenant, func(o client.Object) []string {
		return reportTenantKeys(o.(*kubefairv1.NodeShareReport))
	}); err != nil {
		return err
	}
	return idx.IndexField(ctx, &kubefairv1.Tenant{}, indexUID, func(o client.Object) []string { return []string{string(o.GetUID())} })
}
