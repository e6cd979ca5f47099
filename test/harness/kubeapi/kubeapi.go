// Package kubeapi starts a real kube-apiserver and etcd (controller-runtime
// envtest) with kubefair's CRDs installed, for the integration suites.
package kubeapi

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"

	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	kubefairv1 "github.com/kubefair/kubefair/api/v1alpha1"
)

// Server is a running API server with kubefair's CRDs.
type Server struct {
	Env    *envtest.Environment
	Config *rest.Config
	Client client.Client

	certDir string
}

// RepoRoot is the repository's top directory, found from this file.
func RepoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "..")
}

// CacheDir is kubefair's cache of built tools and binaries:
// $KUBEFAIR_CACHE, else $XDG_CACHE_HOME/kubefair, else ~/.cache/kubefair
// (the Makefile's rule).
func CacheDir() string {
	if cache := os.Getenv("KUBEFAIR_CACHE"); cache != "" {
		return cache
	}
	base := os.Getenv("XDG_CACHE_HOME")
	if base == "" {
		home, _ := os.UserHomeDir()
		base = filepath.Join(home, ".cache")
	}
	return filepath.Join(base, "kubefair")
}

// K8sVersion is the Makefile's K8S_VERSION: the Kubernetes binaries
// hack/build-k8s.sh builds (etcd beside them is ETCD_VERSION's).
const K8sVersion = "v1.37.2"

// Assets is where etcd and kube-apiserver are: $KUBEBUILDER_ASSETS, else
// the cache `make envtest` builds into.
func Assets() string {
	if dir := os.Getenv("KUBEBUILDER_ASSETS"); dir != "" {
		return dir
	}
	return filepath.Join(CacheDir(), "k8s-"+K8sVersion, "bin")
}

// Start runs etcd and kube-apiserver with kubefair's CRDs installed.
func Start() (*Server, error) { return start(true) }

// StartBare runs etcd and kube-apiserver without kubefair's CRDs (for
// installing them the way a user does, with helm).
func StartBare() (*Server, error) { return start(false) }

// start runs etcd and kube-apiserver. A missing binary is an error that
// says how to build it, never a reason to skip.
func start(withCRDs bool) (*Server, error) {
	assets := Assets()
	for _, bin := range []string{"etcd", "kube-apiserver"} {
		if _, err := os.Stat(filepath.Join(assets, bin)); err != nil {
			return nil, fmt.Errorf("%s not found in %s: run `make envtest` (or set KUBEBUILDER_ASSETS)", bin, assets)
		}
	}
	if err := kubefairv1.AddToScheme(scheme.Scheme); err != nil {
		return nil, err
	}
	// A certificate directory of our own (envtest's own is replaced on every
	// start) keeps the serving certificate across StopAPIServer and
	// StartAPIServer, so clients made before a restart still trust it.
	certDir, err := os.MkdirTemp("", "kubefair-apiserver-")
	if err != nil {
		return nil, err
	}
	apiServer := &envtest.APIServer{CertDir: certDir}
	// Close watches when stopping instead of letting them hold the
	// server's exit until its 60-s shutdown timeout.
	apiServer.Configure().Set("shutdown-watch-termination-grace-period", "2s")
	// envtest's default service range is 10.0.0.0/24; no test traffic
	// goes there, but nothing of kubefair's names a private range either
	// (the local cluster's is 198.19.0.0/24).
	apiServer.Configure().Set("service-cluster-ip-range", "198.19.1.0/24")
	env := &envtest.Environment{BinaryAssetsDirectory: assets, ControlPlane: envtest.ControlPlane{APIServer: apiServer}}
	if withCRDs {
		env.CRDDirectoryPaths = []string{filepath.Join(RepoRoot(), "config", "crd", "bases")}
		env.ErrorIfCRDPathMissing = true
	}
	srv := &Server{Env: env, certDir: certDir}
	cfg, err := env.Start()
	if err != nil {
		_ = os.RemoveAll(certDir)
		return nil, fmt.Errorf("starting envtest: %w", err)
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme.Scheme})
	if err != nil {
		_ = srv.Stop()
		return nil, err
	}
	srv.Config, srv.Client = cfg, c
	return srv, nil
}

// StopAPIServer stops kube-apiserver alone, as when the control plane
// becomes unreachable from a node; etcd keeps the cluster's state.
func (s *Server) StopAPIServer() error { return s.Env.ControlPlane.APIServer.Stop() }

// StartAPIServer starts kube-apiserver again after StopAPIServer, on the
// same address with the same certificates and users.
func (s *Server) StartAPIServer() error { return s.Env.ControlPlane.APIServer.Start() }

// WriteKubeconfig writes an admin kubeconfig for tools such as helm.
func (s *Server) WriteKubeconfig(path string) error {
	c := clientcmdapi.NewConfig()
	cfg := s.Config
	c.Clusters["envtest"] = &clientcmdapi.Cluster{Server: cfg.Host, CertificateAuthorityData: cfg.CAData}
	c.AuthInfos["envtest"] = &clientcmdapi.AuthInfo{ClientCertificateData: cfg.CertData, ClientKeyData: cfg.KeyData, Token: cfg.BearerToken}
	c.Contexts["envtest"] = &clientcmdapi.Context{Cluster: "envtest", AuthInfo: "envtest"}
	c.CurrentContext = "envtest"
	return clientcmd.WriteToFile(*c, path)
}

// Stop ends the API server and etcd.
func (s *Server) Stop() error {
	err := s.Env.Stop()
	_ = os.RemoveAll(s.certDir)
	return err
}
