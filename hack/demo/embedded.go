package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"go.uber.org/zap/zapcore"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	kubefairv1 "github.com/kubefair/kubefair/api/v1alpha1"
	"github.com/kubefair/kubefair/node-agent/agent"
	"github.com/kubefair/kubefair/test/harness/kubeapi"
	"github.com/kubefair/kubefair/test/harness/podcgroups"
)

const node = "demo-node"

type tenantSpec struct {
	name, tier    string
	pods, threads int
	description   string
}

var tiers = []kubefairv1.PricingTier{
	{ObjectMeta: metav1.ObjectMeta{Name: "gold"}, Spec: kubefairv1.PricingTierSpec{Weight: 400, PricePerCPUHour: "0.120", Currency: "EUR"}},
	{ObjectMeta: metav1.ObjectMeta{Name: "silver"}, Spec: kubefairv1.PricingTierSpec{Weight: 200, PricePerCPUHour: "0.060", Currency: "EUR"}},
	{ObjectMeta: metav1.ObjectMeta{Name: "bronze"}, Spec: kubefairv1.PricingTierSpec{Weight: 100, PricePerCPUHour: "0.030", Currency: "EUR"}},
}

var tenants = []tenantSpec{
	{"checkout", "gold", 1, 2, "1 pod, 2 threads"},
	{"search", "silver", 4, 1, "4 pods"},
	{"batch", "bronze", 12, 1, "12 pods"},
}

func runEmbedded(stockFor, kubefairFor time.Duration) error {
	if os.Geteuid() != 0 {
		return fmt.Errorf("the embedded demo writes real cgroups: run it as root (sudo make demo)")
	}
	logf.SetLogger(zap.New(zap.WriteTo(os.Stderr), zap.Level(zapcore.ErrorLevel)))
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	tmp, err := os.MkdirTemp("", "kubefair-demo")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	say("building the CPU burner")
	burner, err := podcgroups.BuildBurner(kubeapi.RepoRoot(), tmp)
	if err != nil {
		return err
	}

	say("starting etcd and kube-apiserver " + kubeapi.K8sVersion + " with kubefair's CRDs")
	api, err := kubeapi.Start()
	if err != nil {
		return err
	}
	defer api.Stop()
	kubeconfig := filepath.Join(tmp, "kubeconfig")
	if err := api.WriteKubeconfig(kubeconfig); err != nil {
		return err
	}

	say("starting the kubefair controller")
	stopController, err := api.RunController(logf.Log, 5*time.Second) // (the embedded agent reports every 5 s)
	if err != nil {
		return err
	}
	defer stopController()

	tree, err := podcgroups.New(tmp)
	if err != nil {
		return err
	}
	defer tree.Close()

	k := api.Client
	if _, err := api.CreateNode(ctx, node, int64(runtime.NumCPU())); err != nil { // the controller bills reports of Nodes only
		return err
	}
	for i := range tiers {
		if err := k.Create(ctx, &tiers[i]); err != nil {
			return err
		}
	}
	cgroupsOf := map[string][]string{}
	for _, t := range tenants {
		if err := k.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: t.name}}); err != nil {
			return err
		}
		if err := k.Create(ctx, &kubefairv1.Tenant{ObjectMeta: metav1.ObjectMeta{Name: t.name},
			Spec: kubefairv1.TenantSpec{Tier: t.tier, Namespaces: []string{t.name}}}); err != nil {
			return err
		}
		for i := 0; i < t.pods; i++ {
			pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{GenerateName: t.name + "-", Namespace: t.name},
				Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "burner", Image: "kubefair/burner"}}}}
			if err := k.Create(ctx, pod); err != nil {
				return err
			}
			if _, err := tree.AddPod(string(pod.UID), burner, t.threads); err != nil {
				return err
			}
			cgroupsOf[t.name] = append(cgroupsOf[t.name], podcgroups.PodCgroup(string(pod.UID)))
		}
	}
	fmt.Println()
	for _, t := range tenants {
		fmt.Printf("  tenant %-9s tier %-7s %s\n", t.name, t.tier, t.description)
	}

	say(fmt.Sprintf("stock Kubernetes for %s: every pod gets kubelet's equal cpu.shares", stockFor))
	stockShares := measure(tree, cgroupsOf, stockFor)
	printShares("stock (measured share of the CPU the demo's pods used)", stockShares)

	say(fmt.Sprintf("starting the kubefair agent; showing `kubectl get tenants` for %s", kubefairFor))
	cache, err := agent.NewCache(api.Config, scheme.Scheme, node)
	if err != nil {
		return err
	}
	go func() { _ = cache.Start(ctx) }()
	if !cache.WaitForCacheSync(ctx) {
		return fmt.Errorf("agent cache did not sync")
	}
	a, err := agent.New(agent.Config{NodeName: node, Period: time.Second, ReportPeriod: 5 * time.Second,
		CgroupRoot: tree.Root, ProcRoot: "/proc", Backend: "cgroup", CPUs: runtime.NumCPU(), StateDir: filepath.Join(tmp, "agent-state")},
		agent.Options{Reader: cache, Writer: k, Log: logf.Log.WithName("agent")})
	if err != nil {
		return err
	}
	if err := a.KickOnChanges(ctx, cache); err != nil {
		return err
	}
	agentCtx, stopAgent := context.WithCancel(ctx)
	defer stopAgent()
	agentDone := make(chan struct{})
	go func() { defer close(agentDone); _ = a.Run(agentCtx) }()

	deadline := time.Now().Add(kubefairFor)
	var last map[string]float64
	for time.Now().Before(deadline) && ctx.Err() == nil {
		last = measure(tree, cgroupsOf, 10*time.Second)
		fmt.Printf("\n$ kubectl get tenants    (%s)\n", time.Now().Format("15:04:05"))
		if err := getTenants(ctx, k, kubeconfig); err != nil {
			return err
		}
	}
	printShares("kubefair (measured share of the CPU the demo's pods used, last 10 s)", last)
	fmt.Printf("\nstock vs kubefair, same run:\n")
	w := tabwriter.NewWriter(os.Stdout, 0, 2, 2, ' ', 0)
	fmt.Fprintln(w, "TENANT\tTIER\tPODS\tSTOCK\tKUBEFAIR")
	for _, t := range tenants {
		fmt.Fprintf(w, "%s\t%s\t%d\t%.1f%%\t%.1f%%\n", t.name, t.tier, t.pods, 100*stockShares[t.name], 100*last[t.name])
	}
	_ = w.Flush()

	stopAgent()
	<-agentDone
	if err := a.RestoreAll(); err != nil {
		return fmt.Errorf("restoring kubelet's weights: %w", err)
	}
	say("restored kubelet's weights; stopping everything and removing the demo's cgroups")
	return nil
}

func say(msg string) { fmt.Printf("\n==> %s\n", msg) }

// measure returns each tenant's share of the CPU the demo's pods used.
func measure(tree *podcgroups.Tree, cgroupsOf map[string][]string, window time.Duration) map[string]float64 {
	shares, err := tree.MeasureShares(cgroupsOf, window)
	if err != nil {
		return map[string]float64{}
	}
	return shares
}

func printShares(title string, shares map[string]float64) {
	fmt.Printf("\n%s:\n", title)
	names := make([]string, 0, len(shares))
	for n := range shares {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Printf("  %-9s %5.1f%% %s\n", n, 100*shares[n], strings.Repeat("#", int(shares[n]*50+0.5)))
	}
}

// getTenants prints the tenants as `kubectl get tenants` does: with kubectl
// itself when it is installed, else from the same printer columns.
func getTenants(ctx context.Context, k client.Client, kubeconfig string) error {
	if path, err := exec.LookPath("kubectl"); err == nil {
		cmd := exec.CommandContext(ctx, path, "--kubeconfig", kubeconfig, "get", "tenants")
		cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
		if cmd.Run() == nil {
			return nil
		}
	}
	var list kubefairv1.TenantList
	if err := k.List(ctx, &list); err != nil {
		return err
	}
	w := tabwriter.NewWriter(os.Stdout, 0, 2, 3, ' ', 0)
	fmt.Fprintln(w, "NAME\tTIER\tWEIGHT\tENTITLED\tACHIEVED\tCPU-SECONDS\tCOST\tREADY")
	for _, t := range list.Items {
		ready := ""
		for _, c := range t.Status.Conditions {
			if c.Type == kubefairv1.ConditionReady {
				ready = string(c.Status)
			}
		}
		fmt.Fprintf(w, "%s\t%s\t%d\t%s\t%s\t%s\t%s\t%s\n", t.Name, t.Spec.Tier, t.Status.EffectiveWeight, t.Status.EntitledShare,
			t.Status.AchievedShare, t.Status.CPUSeconds, t.Status.Cost, ready)
	}
	return w.Flush()
}
