package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
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

func runCluster(stockFor, kubefairFor time.Duration, keep bool) (err error) {
	if os.Geteuid() != 0 {
		return fmt.Errorf("the demo runs a real cluster (kubelet, containerd, cgroups): run it as root, or use -embedded")
	}
	// The harness's clients log through controller-runtime: errors only.
	logf.SetLogger(zap.New(zap.WriteTo(os.Stderr), zap.Level(zapcore.ErrorLevel)))
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	say("bringing up a single-node cluster: etcd, kube-apiserver, controller-manager, scheduler, kubelet " + kubeapi.K8sVersion +
		", containerd " + containerd.Version + ", runc " + containerd.RuncVersion)
	c, err := cluster.Up(ctx, cluster.Config{Log: func(f string, a ...any) { fmt.Printf("  "+f+"\n", a...) }})
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
	sc := scenario.Full

	say("helm install kubefair charts/kubefair (the agent off for now: stock Kubernetes)")
	if err := tools.InstallKubefair(ctx, false); err != nil {
		return err
	}
	say("creating pricing tiers, tenants and their Deployments of CPU burners")
	if err := sc.Create(ctx, k, 2*time.Minute); err != nil {
		return err
	}
	fmt.Println()
	for _, tn := range sc.Tenants {
		for _, w := range tn.Workloads {
			fmt.Printf("  tenant %-9s tier %-7s %-9s %2d pod(s) × %d threads\n", tn.Name, tn.Tier, w.Name, w.Pods, w.Threads)
		}
	}

	say(fmt.Sprintf("stock Kubernetes for %s: every pod gets kubelet's equal cpu.shares", stockFor))
	stock, err := sc.Measure(ctx, k, stockFor, scenario.HostUsage)
	if err != nil {
		return err
	}

	say(fmt.Sprintf("helm upgrade: the kubefair agent on; `kubectl get tenants` for %s", kubefairFor))
	if err := tools.InstallKubefair(ctx, true); err != nil {
		return err
	}
	deadline := time.Now().Add(kubefairFor)
	var last scenario.Shares
	for time.Now().Before(deadline) {
		if last, err = sc.Measure(ctx, k, 10*time.Second, scenario.HostUsage); err != nil {
			return err
		}
		out, err := tools.Kubectl(ctx, "get", "tenants")
		if err != nil {
			return err
		}
		fmt.Printf("\n$ kubectl get tenants    (%s)\n%s", time.Now().Format("15:04:05"), out)
	}

	fmt.Printf("\nstock vs kubefair, same run (share of the CPU the tenants' pods used; kubefair over the last 10 s):\n")
	w := tabwriter.NewWriter(os.Stdout, 0, 2, 2, ' ', 0)
	fmt.Fprintln(w, "TENANT\tTIER\tPODS\tENTITLED\tSTOCK\tKUBEFAIR")
	entitled := sc.EntitledShares()
	for _, tn := range sc.Tenants {
		fmt.Fprintf(w, "%s\t%s\t%d\t%.1f%%\t%.1f%%\t%.1f%%\n", tn.Name, tn.Tier, tn.Pods(), 100*entitled[tn.Name], 100*stock.Tenant[tn.Name], 100*last.Tenant[tn.Name])
	}
	_ = w.Flush()
	fmt.Printf("hosting's VMs weighted 3:1: vm-large gets %.1f%% of the tenant's CPU (stock %.1f%%)\n", 100*last.VMLarge, 100*stock.VMLarge)
	return nil
}
