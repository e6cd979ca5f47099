package kubeapi

import (
	"context"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/kubefair/kubefair/controllers"
)

// RunController starts kubefair's controller against the server, wired as
// its main wires it, and returns a function that stops it and waits. Each
// call is a fresh controller process as far as the API can tell, which is
// what restart tests need. The controller logs to log; statusPeriod is its
// --status-period (0: the default).
func (s *Server) RunController(log logr.Logger, statusPeriod time.Duration) (stop func(), err error) {
	mgr, err := ctrl.NewManager(s.Config, ctrl.Options{
		Logger:     log,
		Scheme:     scheme.Scheme,
		Metrics:    metricsserver.Options{BindAddress: "0"},
		Controller: config.Controller{SkipNameValidation: ptr.To(true)},
	})
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	if err := controllers.Setup(ctx, mgr, controllers.Options{SkipMetrics: true, StatusPeriod: statusPeriod}); err != nil {
		cancel()
		return nil, err
	}
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	stopped := false
	return func() {
		if !stopped {
			stopped = true
			cancel()
			<-done
		}
	}, nil
}
