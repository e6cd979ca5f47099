// Command kubefair-controller runs kubefair's reconcilers: it resolves
// tenants' tiers and namespaces, aggregates the nodes' share reports and
// accrues cost.
package main

import (
	"flag"
	"os"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	kubefairv1 "github.com/kubefair/kubefair/api/v1alpha1"
	"github.com/kubefair/kubefair/controllers"
	"github.com/kubefair/kubefair/internal/metricsauth"
)

func main() {
	var metricsAddr, probeAddr, leaderNamespace string
	var leaderElect, metricsSecure bool
	var statusPeriod time.Duration
	flag.StringVar(&metricsAddr, "metrics-bind-address", ":8080", "address the Prometheus metrics endpoint binds to; 0 disables it")
	flag.BoolVar(&metricsSecure, "metrics-secure", true, "serve the metrics endpoint over HTTPS, only to callers the API server authenticates and allows to get /metrics (the chart's ClusterRole "+metricsauth.ReaderRole+"); false serves plain HTTP to anyone who reaches the port")
	flag.DurationVar(&statusPeriod, "status-period", controllers.DefaultStatusPeriod, "how often at most the nodes' reports rewrite a tenant's status and bills (the agents' report period: more often gains nothing, and with many nodes costs API writes and watch events on every agent)")
	flag.StringVar(&probeAddr, "health-probe-bind-address", ":8081", "address the /healthz and /readyz probes bind to")
	flag.BoolVar(&leaderElect, "leader-elect", false, "elect a leader so that only one replica reconciles at a time")
	flag.StringVar(&leaderNamespace, "leader-election-namespace", "", "namespace of the leader election lease (default: the pod's namespace)")
	opts := zap.Options{}
	opts.BindFlags(flag.CommandLine)
	flag.Parse()
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&opts)))
	log := ctrl.Log.WithName("setup")

	scheme := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	utilruntime.Must(kubefairv1.AddToScheme(scheme))

	cfg, err := ctrl.GetConfig()
	if err != nil {
		log.Error(err, "no Kubernetes API configuration (in-cluster, KUBECONFIG or --kubeconfig)")
		os.Exit(1)
	}
	metrics := metricsserver.Options{BindAddress: metricsAddr}
	if metricsSecure { // (controller-runtime makes a self-signed certificate)
		metrics.SecureServing, metrics.FilterProvider = true, metricsauth.FilterProvider
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                  scheme,
		Metrics:                 metrics,
		HealthProbeBindAddress:  probeAddr,
		LeaderElection:          leaderElect,
		LeaderElectionID:        "kubefair-controller.kubefair.io",
		LeaderElectionNamespace: leaderNamespace,
	})
	if err != nil {
		log.Error(err, "creating the manager")
		os.Exit(1)
	}
	ctx := ctrl.SetupSignalHandler()
	if err := controllers.Setup(ctx, mgr, controllers.Options{StatusPeriod: statusPeriod}); err != nil {
		log.Error(err, "setting up reconcilers")
		os.Exit(1)
	}
	utilruntime.Must(mgr.AddHealthzCheck("healthz", healthz.Ping))
	utilruntime.Must(mgr.AddReadyzCheck("readyz", healthz.Ping))
	log.Info("starting kubefair-controller")
	if err := mgr.Start(ctx); err != nil {
		log.Error(err, "manager stopped")
		os.Exit(1)
	}
}
