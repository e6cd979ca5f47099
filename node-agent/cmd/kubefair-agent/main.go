// Command kubefair-agent is kubefair's node agent (a DaemonSet): it sets pod
// cgroup weights so that tenants get their entitled CPU share, measures what
// they achieved, and reports it in this node's NodeShareReport.
package main

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"os"
	"os/signal"
	"runtime"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	kruntime "k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	kubefairv1 "github.com/kubefair/kubefair/api/v1alpha1"
	"github.com/kubefair/kubefair/internal/metricsauth"
	"github.com/kubefair/kubefair/node-agent/agent"
	"github.com/kubefair/kubefair/node-agent/enforce/threads"
	"github.com/kubefair/kubefair/node-agent/fairness"
	"github.com/kubefair/kubefair/node-agent/seccomp"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "kubefair-agent:", err)
		os.Exit(1)
	}
}

func run() error {
	nodeName := flag.String("node-name", os.Getenv("NODE_NAME"), "this node's name (default $NODE_NAME, from the downward API)")
	podUID := flag.String("pod-uid", os.Getenv("POD_UID"), "the agent's own pod (default $POD_UID, from the downward API): its weight is restored last, so that the agent is not starved by the weights it has yet to restore")
	cgroupRoot := flag.String("cgroup-root", "/sys/fs/cgroup", "where the host's cgroup filesystem is mounted; only <root>/…/kubepods is touched")
	kubeletCgroupRoot := flag.String("kubelet-cgroup-root", "/", "kubelet's cgroupRoot: the cgroup that holds kubepods (with the systemd driver a slice, e.g. /kubelet.slice)")
	cgroupDriver := flag.String("cgroup-driver", "auto", "kubelet's cgroupDriver: cgroupfs, systemd, or auto (whichever layout the node has, systemd's first)")
	procRoot := flag.String("proc-root", "/proc", "where the host's /proc is (threads and their scheduler statistics)")
	period := flag.Duration("period", time.Second, "how often to measure and enforce")
	reportPeriod := flag.Duration("report-period", 10*time.Second, "how often to write this node's NodeShareReport")
	backend := flag.String("backend", "auto", "enforcement: cgroup (pod weights only), syscall (plus thread weights through the patched kernel's sched_setweight), nice (plus per-thread nice levels, approximate), auto (syscall when the kernel publishes the ABI, else cgroup)")
	metricsAddr := flag.String("metrics-bind-address", ":9090", "address of the Prometheus endpoint; 0 disables it")
	metricsSecure := flag.Bool("metrics-secure", true, "serve the Prometheus endpoint over HTTPS, only to callers the API server authenticates and allows to get /metrics (the chart's ClusterRole "+metricsauth.ReaderRole+"); false serves plain HTTP to anyone who reaches the port")
	probeAddr := flag.String("health-probe-bind-address", ":9091", "address of /healthz and /readyz")
	restoreOnExit := flag.Bool("restore-on-exit", false, "when stopped (SIGTERM, SIGINT), put kubelet's weights back on every pod kubefair changed before exiting (the chart sets it: uninstall and updates leave stock weights until the next agent)")
	restoreNow := flag.Bool("restore", false, "put kubelet's weights back on every pod a previous agent changed (from --state-dir), then exit")
	stateDir := flag.String("state-dir", "/var/lib/kubefair", "where the agent keeps kubelet's original weights and what its closed loops learnt, across restarts")
	cpus := flag.Int("cpus", runtime.NumCPU(), "CPUs the pods share on this node")
	gain := flag.Float64("correction-gain", fairness.DefaultCorrection.Gain, "closed-loop gain in (0, 1]: the fraction of a period's measured error (as a fraction of the entitlement) corrected at once; lower is steadier on noisy nodes, slower to correct")
	containerdAddress := flag.String("containerd-address", "", "containerd's socket, to discover containers through its API (falling back to the cgroup tree when it is unreachable); empty: walk the cgroup tree kubelet made")
	containerdNamespace := flag.String("containerd-namespace", "k8s.io", "containerd namespace of kubelet's containers")
	requestElevation := flag.Bool("request-elevation", false, "count the requests that reach the pods of tenants with spec.requestElevation (eBPF: CAP_BPF and CAP_PERFMON, a kernel with BTF, Linux 6.4+) and elevate the receiving workloads inside their tenants; off, or when the counter cannot load, the node's report says so")
	latencyClasses := flag.Bool("latency-classes", false, "give the threads of tenants whose tier has a latencyClass that class's scheduler slice (Linux 6.12+; other users' threads need CAP_SYS_NICE); off, every slice is left to the kernel and the node's report says so")
	interactiveSlice := flag.Duration("interactive-slice", 500*time.Microsecond, "the scheduler slice of the interactive latency class (0.1ms to 10ms): shorter than the kernel's, so a waking thread runs sooner")
	batchSlice := flag.Duration("batch-slice", 0, "the scheduler slice of the batch latency class (0.1ms to 10ms; 0: the kernel's): longer slices let threads switch less, but moved tenants' CPU shares and the interactive tenants' latency (docs/agent.md)")
	confined := flag.Bool("seccomp", true, "confine the agent to the system calls it makes (node-agent/seccomp): any other call fails with EPERM")
	printProfile := flag.Bool("print-seccomp-profile", false, "print the agent container's Localhost seccomp profile (JSON, for kubelet's seccomp directory) and exit")
	opts := zap.Options{}
	opts.BindFlags(flag.CommandLine)
	flag.Parse()
	if *printProfile {
		if seccomp.Supported() {
			enc := json.NewEncoder(os.Stdout)
			enc.SetIndent("", "  ")
			return enc.Encode(seccomp.Profile())
		}
		return seccomp.ErrUnsupportedArch
	}
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&opts)))
	log := ctrl.Log.WithName("agent")
	if *confined {
		if err := confine(*procRoot); err != nil {
			return err
		}
	}

	if !(*gain > 0 && *gain <= 1) {
		return fmt.Errorf("--correction-gain %v: want a value in (0, 1]", *gain)
	}
	correction := fairness.DefaultCorrection
	correction.Gain = *gain
	classSlices := map[kubefairv1.LatencyClass]time.Duration{kubefairv1.LatencyClassInteractive: *interactiveSlice, kubefairv1.LatencyClassBatch: *batchSlice}
	for c, s := range classSlices {
		if s != 0 && (s < agent.MinSlice || s > agent.MaxSlice) {
			return fmt.Errorf("--%s-slice %v: want 0 (the kernel's) or %v to %v (the kernel takes no shorter one; longer ones moved tenants' CPU shares, docs/agent.md)", c, s, agent.MinSlice, agent.MaxSlice)
		}
	}
	cfg := agent.Config{NodeName: *nodeName, PodUID: *podUID, Period: *period, ReportPeriod: *reportPeriod,
		CgroupRoot: *cgroupRoot, KubeletCgroupRoot: *kubeletCgroupRoot, CgroupDriver: *cgroupDriver, ProcRoot: *procRoot,
		Backend: *backend, ContainerdAddress: *containerdAddress, ContainerdNamespace: *containerdNamespace,
		CPUs: *cpus, Correction: correction, StateDir: *stateDir, Slices: classSlices, LatencyClasses: *latencyClasses,
		RequestElevation: *requestElevation}
	if *restoreNow {
		n, err := agent.Restore(cfg, log)
		if err != nil {
			return err
		}
		log.Info("restored kubelet's weights", "pods", n)
		return nil
	}

	scheme := kruntime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	utilruntime.Must(kubefairv1.AddToScheme(scheme))
	rest, err := ctrl.GetConfig()
	if err != nil {
		return fmt.Errorf("no Kubernetes API configuration: %w", err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()

	cache, err := agent.NewCache(rest, scheme, *nodeName)
	if err != nil {
		return err
	}
	writer, err := client.New(rest, client.Options{Scheme: scheme})
	if err != nil {
		return err
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(prometheus.NewGoCollector(), prometheus.NewProcessCollector(prometheus.ProcessCollectorOpts{}))
	a, err := agent.New(cfg, agent.Options{Reader: cache, Writer: writer, Metrics: agent.NewMetrics(reg), Log: log})
	if err != nil {
		return err
	}

	// The probes first: the metrics' set-up must not keep them waiting.
	ready := make(chan struct{})
	serve(ctx, *probeAddr, "/", nil, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/readyz" {
			select {
			case <-ready:
			default:
				http.Error(w, "waiting for the API cache", http.StatusServiceUnavailable)
				return
			}
		}
		_, _ = w.Write([]byte("ok"))
	}))

	var metrics http.Handler = promhttp.HandlerFor(reg, promhttp.HandlerOpts{})
	var metricsTLS *tls.Config
	if *metricsSecure {
		guard, err := metricsauth.New(rest)
		if err != nil {
			return err
		}
		if metricsTLS, err = metricsauth.SelfSignedTLS(); err != nil {
			return err
		}
		metrics = guard.Wrap(metrics)
	}
	serve(ctx, *metricsAddr, "/metrics", metricsTLS, metrics)

	go func() { _ = cache.Start(ctx) }()
	if !cache.WaitForCacheSync(ctx) {
		return errors.New("the API cache did not sync")
	}
	if err := a.KickOnChanges(ctx, cache); err != nil {
		return err
	}
	close(ready)
	log.Info("enforcing", "node", *nodeName, "backends", a.BackendNames(), "cpus", *cpus, "boot", a.BootID())
	if err := a.Run(ctx); err != nil {
		return err
	}
	// Stopping: kubelet kills the agent at the end of the pod's grace
	// period, so the local, quick part comes first. The loop has stopped,
	// so nothing re-applies kubefair's weights after the restore.
	stopping := time.Now()
	log.Info("stopping")
	var restoreErr error
	if *restoreOnExit {
		if restoreErr = a.RestoreAll(); restoreErr == nil {
			log.Info("restored kubelet's weights", "after", time.Since(stopping).Round(time.Millisecond).String())
		}
	}
	// The CPU counted since the last report is billed before this run ends.
	final, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	if err := a.FinalReport(final); err != nil {
		log.Info("could not write the final report; the CPU since the last one is not billed", "error", err.Error())
	}
	cancel()
	if restoreErr != nil {
		return fmt.Errorf("restoring kubelet's weights on exit: %w", restoreErr)
	}
	log.Info("stopped", "after", time.Since(stopping).Round(time.Millisecond).String())
	return nil
}

// serve serves h at pattern on addr, over TLS when tlsCfg is set.
func serve(ctx context.Context, addr, pattern string, tlsCfg *tls.Config, h http.Handler) {
	if addr == "0" || addr == "" {
		return
	}
	mux := http.NewServeMux()
	mux.Handle(pattern, h)
	srv := &http.Server{Addr: addr, Handler: mux, ReadHeaderTimeout: 5 * time.Second, TLSConfig: tlsCfg}
	go func() {
		if tlsCfg != nil {
			_ = srv.ListenAndServeTLS("", "")
		} else {
			_ = srv.ListenAndServe()
		}
	}()
	go func() { <-ctx.Done(); _ = srv.Close() }()
}

// confine installs the agent's own seccomp filter, before it does anything
// else: its allow-list, plus sched_setweight/sched_getweight when the kernel
// publishes their ABI (on other kernels the numbers are other calls).
func confine(procRoot string) error {
	var kernelCalls []seccomp.Call
	abi := threads.KnownABI(threads.ProbeABI(procRoot))
	if abi {
		kernelCalls = threads.SeccompCalls()
	}
	allowed, err := seccomp.AllowList(kernelCalls...)
	if err == nil {
		err = seccomp.Install(allowed)
	}
	if err != nil {
		return fmt.Errorf("--seccomp: %w (--seccomp=false runs without the agent's own filter)", err)
	}
	ctrl.Log.WithName("setup").Info("seccomp filter installed: any system call outside the allow-list fails with EPERM",
		"allowed", len(allowed), "sched_setweight", abi)
	return nil
}
