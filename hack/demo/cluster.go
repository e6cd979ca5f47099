package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"syscall"
	"text/tabwriter"
	"time"

	"go.uber.org/zap/zapcore"
	kruntime "k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	kubefairv1 "github.com/kubefair/kubefair/api/v1alpha1"
	"github.com/kubefair/kubefair/test/harness/cluster"
	"github.com/kubefair/kubefair/test/harness/containerd"
	"github.com/kubefair/kubefair/test/harness/kubeapi"
	"github.com/kubefair/kubefair/test/harness/scenario"
)

func runCluster(stockFor, kubefairFor time.Duration, keep, withGuest bool) (err error) {
	if os.Geteuid() != 0 {
		return fmt.Errorf("the demo runs a real cluster (kubelet, containerd, cgroups): run it as root, or use -embedded")
	}
	// The harness's clients log through controller-runtime: errors only.
	logf.SetLogger(zap.New(zap.WriteTo(os.Stderr), zap.Level(zapcore.ErrorLevel)))
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	say("bringing up the cluster's first node, this host (cgroup v1): etcd, kube-apiserver, controller-manager, scheduler, kubelet " + kubeapi.K8sVersion +
		", containerd " + containerd.Version + ", runc " + containerd.RuncVersion)
	logTo := func(f string, a ...any) { fmt.Printf("  "+f+"\n", a...) }
	c, err := cluster.Up(ctx, cluster.Config{Log: logTo})
	if err != nil {
		return err
	}
	defer func() {
		if keep && err == nil {
			fmt.Printf("\nThe cluster keeps running:\n  export KUBECONFIG=%s\n  make cluster-down   # when done\n", c.Kubeconfig())
			return
		}
		say("tearing the cluster down")
		if derr := c.Down(); derr != nil && err == nil {
			err = derr
		}
	}()
	var g *cluster.GuestNode
	if withGuest {
		say("adding a second node: a QEMU guest running kubefair's kernel, with cgroup v2, systemd, containerd and kubelet (a few minutes under emulation)")
		if g, err = c.AddGuestNode(ctx, cluster.GuestConfig{}.OnPatchedKernel()); err != nil {
			return err
		}
	}
	scheme := kruntime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	utilruntime.Must(kubefairv1.AddToScheme(scheme))
	cfg, err := c.RESTConfig()
	if err != nil {
		return err
	}
	k, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return err
	}
	tools := scenario.Tools{Cluster: c, Helm: os.Getenv("HELM")}
	nodes := []*clusterNode{{name: c.NodeName(), sc: scenario.Full.On(c.NodeName()), usage: scenario.HostUsage}}
	// The controller stays on the host; the guest's agent runs Go several
	// times slower under emulation, so it requests more of its CPU.
	var flags []string
	if g != nil {
		nodes = append(nodes, &clusterNode{name: g.Name(), sc: scenario.Threads.On(g.Name()), usage: scenario.GuestUsage(g), guest: g})
		flags = []string{"--set", "controller.nodeSelector.kubernetes\\.io/hostname=" + c.NodeName(), "--set", "agent.resources.requests.cpu=500m"}
	}

	say("helm install kubefair charts/kubefair (the agent off for now: stock Kubernetes)")
	if err := tools.InstallKubefair(ctx, false, flags...); err != nil {
		return err
	}
	say("creating pricing tiers, tenants and their Deployments of CPU burners")
	// The guest's pods first: once the host's burners load its CPUs, the
	// emulated node starts containers far more slowly.
	for _, n := range slices.Backward(nodes) {
		if err := n.sc.Create(ctx, k, 5*time.Minute); err != nil {
			return err
		}
	}
	fmt.Println()
	for _, n := range nodes {
		for _, tn := range n.sc.Tenants {
			for _, w := range tn.Workloads {
				fmt.Printf("  %-14s tenant %-9s tier %-7s %-9s %2d pod(s) × %s\n", n.name, tn.Name, tn.Tier, w.Name, w.Pods, threadsOf(w))
			}
		}
	}

	say(fmt.Sprintf("stock Kubernetes for %s: every pod gets kubelet's weight for its request, every thread the same", stockFor))
	if err := measureNodes(ctx, k, nodes, stockFor, true); err != nil {
		return err
	}

	say(fmt.Sprintf("helm upgrade: the kubefair agents on; `kubectl get tenants` for %s", kubefairFor))
	if err := tools.InstallKubefair(ctx, true, flags...); err != nil {
		return err
	}
	if err := waitReports(ctx, k, nodes, 5*time.Minute); err != nil {
		return err
	}
	for i, deadline := 0, time.Now().Add(kubefairFor); i < 3 || time.Now().Before(deadline); i++ {
		if err := measureNodes(ctx, k, nodes, loopWindow, false); err != nil {
			return err
		}
		out, err := tools.Kubectl(ctx, "get", "tenants")
		if err != nil {
			return err
		}
		fmt.Printf("\n$ kubectl get tenants    (%s)\n%s", time.Now().Format("15:04:05"), out)
	}
	out, err := tools.Kubectl(ctx, "get", "nodesharereports")
	if err != nil {
		return err
	}
	fmt.Printf("\n$ kubectl get nodesharereports\n%s", out)

	if g != nil {
		// Both nodes share this machine's two CPUs: the host's burners take
		// most of the emulated node's time, and its agent, starved, acts in
		// bursts (the guest's tenants 18 points off and its thread table
		// 23/49/28 % in one run so). A real node has CPUs of its own: the
		// guest's figures are taken with the host's tenants stopped.
		say(fmt.Sprintf("the guest alone: the host's tenant Deployments scaled to zero, %s to settle, then %s measured", guestSettle, guestWindow))
		if err := scaleWorkloads(ctx, tools, nodes[0].sc, 0); err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(guestSettle):
		}
		if err := measureNodes(ctx, k, nodes[1:], guestWindow, false); err != nil {
			return err
		}
		nodes[1].alone = true
	}

	for _, n := range nodes {
		fmt.Printf("\n%s: stock vs kubefair, same run (share of the CPU the node's tenant pods used; kubefair %s):\n", n.name, n.window())
		w := tabwriter.NewWriter(os.Stdout, 0, 2, 2, ' ', 0)
		fmt.Fprintln(w, "TENANT\tTIER\tPODS\tENTITLED\tSTOCK\tKUBEFAIR")
		entitled := n.sc.EntitledShares()
		for _, tn := range n.sc.Tenants {
			fmt.Fprintf(w, "%s\t%s\t%d\t%.1f%%\t%.1f%%\t%.1f%%\n", tn.Name, tn.Tier, tn.Pods(), 100*entitled[tn.Name], 100*n.stock.Tenant[tn.Name], 100*n.last.Tenant[tn.Name])
		}
		_ = w.Flush()
		if n.sc.HasVMs() {
			fmt.Printf("hosting's VMs weighted 3:1: vm-large gets %.1f%% of the tenant's CPU (stock %.1f%%)\n", 100*n.last.VMLarge, 100*n.stock.VMLarge)
		}
		if n.threads != nil {
			n.threads.print(n.window())
		}
	}
	return nil
}

// clusterNode is one node of the demo: the scenario its pods run, how to read
// their CPU time, and what was measured there.
type clusterNode struct {
	name        string
	sc          scenario.Scenario
	usage       scenario.Usage
	guest       *cluster.GuestNode // nil on the host
	stock, last scenario.Shares
	alone       bool // last measured with the host's tenants scaled down
	threads     *threadTable
}

// window says when last was measured, for the tables' headers.
func (n *clusterNode) window() string {
	if n.alone {
		return fmt.Sprintf("with the guest alone, over %s", guestWindow)
	}
	return fmt.Sprintf("over the last %s", loopWindow)
}

// The window of each `kubectl get tenants` round; the guest's last window,
// measured alone, and the time its agent's loops get first to settle after
// the host's burners stop.
const (
	loopWindow  = 10 * time.Second
	guestSettle = 20 * time.Second
	guestWindow = 20 * time.Second
)

// scaleWorkloads sets every Deployment of the scenario to replicas pods.
func scaleWorkloads(ctx context.Context, tools scenario.Tools, sc scenario.Scenario, replicas int) error {
	for _, tn := range sc.Tenants {
		for _, w := range tn.Workloads {
			if _, err := tools.Kubectl(ctx, "scale", "deployment/"+w.Name, "--namespace", tn.Namespace, "--replicas", strconv.Itoa(replicas)); err != nil {
				return err
			}
		}
	}
	return nil
}

// measureNodes measures every node's tenant shares over one window, at once —
// and on the guest the thread table's tenant's processes — as stock
// figures or as kubefair's latest.
func measureNodes(ctx context.Context, k client.Client, nodes []*clusterNode, window time.Duration, stock bool) error {
	errs := make(chan error, len(nodes))
	for _, n := range nodes {
		go func() {
			var tt *threadTable
			if n.guest != nil {
				var err error
				if tt, err = startThreads(ctx, k, n, stock); err != nil {
					errs <- err
					return
				}
			}
			s, err := n.sc.Measure(ctx, k, window, n.usage)
			if err == nil && tt != nil {
				err = tt.stop(ctx)
			}
			if err == nil {
				if stock {
					n.stock = s
				} else {
					n.last = s
				}
			}
			errs <- err
		}()
	}
	var first error
	for range nodes {
		if err := <-errs; err != nil && first == nil {
			first = err
		}
	}
	return first
}

// threadsOf names a workload's threads per pod, process by process.
func threadsOf(w scenario.Workload) string {
	if len(w.Children) == 0 {
		return fmt.Sprintf("%d threads", w.Threads)
	}
	s := fmt.Sprintf("processes of %d", w.Threads)
	for i, n := range w.Children {
		sep := ", "
		if i == len(w.Children)-1 {
			sep = " and "
		}
		s += sep + fmt.Sprint(n)
	}
	return s + " threads"
}

// waitReports waits until every node's agent has reported twice — its
// first report, and one with its weights applied for a whole report
// period — and lets the closed loops settle for one more.
func waitReports(ctx context.Context, k client.Client, nodes []*clusterNode, timeout time.Duration) error {
	say("waiting for every node's agent to report (the guest's starts slowly under emulation)")
	first := map[string]time.Time{}
	for deadline := time.Now().Add(timeout); ; {
		ready := 0
		for _, n := range nodes {
			var r kubefairv1.NodeShareReport
			if err := k.Get(ctx, client.ObjectKey{Name: n.name}, &r); err != nil || r.Backend == "" {
				continue
			}
			if first[n.name].IsZero() {
				first[n.name] = r.ObservedTime.Time
				fmt.Printf("  %s: backend %s, kernel ABI %d\n", n.name, r.Backend, r.KernelABI)
			} else if r.ObservedTime.After(first[n.name]) {
				ready++
			}
		}
		if ready == len(nodes) {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d of %d nodes' agents reported twice within %s", ready, len(nodes), timeout)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Second):
		}
	}
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(10 * time.Second):
		return nil
	}
}
