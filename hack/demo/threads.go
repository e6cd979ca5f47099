package main

import (
	"context"
	"fmt"
	"os"
	"text/tabwriter"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubefair/kubefair/test/harness/podcgroups"
	"github.com/kubefair/kubefair/test/harness/scenario"
)

// threadTable is the guest's thread-fairness table: how the processes of
// the one pod whose processes run different numbers of threads share its
// CPU, stock (each thread alike) and with kubefair (the tenant's
// threadPolicy, PFS by default: each process alike).
type threadTable struct {
	n          *clusterNode
	tenant     scenario.Tenant
	pod        corev1.Pod
	stockPhase bool
	before     map[int]int64
	stock, kf  map[int]float64 // share of the pod's CPU, by the process's threads
}

// startThreads reads the processes' CPU time at the start of a window.
func startThreads(ctx context.Context, k client.Client, n *clusterNode, stock bool) (*threadTable, error) {
	tt := n.threads
	if tt == nil {
		tn, ok := n.sc.ThreadsTenant()
		if !ok {
			return nil, fmt.Errorf("no tenant on %s runs processes of different thread counts", n.name)
		}
		tt = &threadTable{n: n, tenant: tn}
		groups, err := n.sc.Groups(ctx, k)
		if err != nil {
			return nil, err
		}
		if len(groups[tt.tenant.Name]) != 1 {
			return nil, fmt.Errorf("tenant %s runs %d pods, want 1", tt.tenant.Name, len(groups[tt.tenant.Name]))
		}
		tt.pod = groups[tt.tenant.Name][0]
		n.threads = tt
	}
	before, err := scenario.ProcessUsage(ctx, n.guest, tt.pod)
	tt.before, tt.stockPhase = before, stock
	return tt, err
}

// stop reads them again at the window's end: the window's shares.
func (tt *threadTable) stop(ctx context.Context) error {
	after, err := scenario.ProcessUsage(ctx, tt.n.guest, tt.pod)
	if err != nil {
		return err
	}
	shares := podcgroups.Shares(tt.before, after)
	if tt.stockPhase {
		tt.stock = shares
	} else {
		tt.kf = shares
	}
	return nil
}

// print shows each process's share of the pod beside what each policy
// aims at: its threads' proportion (stock) and an equal part (PFS).
func (tt *threadTable) print(window string) {
	w := tt.tenant.Workloads[0]
	counts := tt.tenant.ProcessThreads()
	fmt.Printf("\nthreads inside tenant %s's pod on %s (share of the pod's CPU; stock, then kubefair's PFS %s):\n", tt.tenant.Name, tt.n.name, window)
	tw := tabwriter.NewWriter(os.Stdout, 0, 2, 2, ' ', 0)
	fmt.Fprintln(tw, "PROCESS\tTHREADS' PROPORTION\tSTOCK\tPFS (A THIRD)\tKUBEFAIR")
	for _, c := range counts {
		fmt.Fprintf(tw, "%d-thread\t%.1f%%\t%.1f%%\t%.1f%%\t%.1f%%\n", c, 100*float64(c)/float64(w.PodThreads()), 100*tt.stock[c], 100/float64(len(counts)), 100*tt.kf[c])
	}
	_ = tw.Flush()
}
