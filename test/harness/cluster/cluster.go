// Package cluster runs a real single-node Kubernetes cluster on this
// machine for kubefair's end-to-end suite and demo: etcd v3.6.16,
// kube-apiserver, kube-controller-manager, kube-scheduler and kubelet
// v1.37.2 built from the Go module proxy (hack/build-k8s.sh), containerd
// 2.4.2, runc 1.5.2 and the CNI plugins 1.10.0 built from it too
// (hack/build-runtime.sh), a CNI bridge in the benchmarking range
// 198.18.0.0/15, and kubefair's images built from this tree and imported
// (no registry). The node runs on this host's cgroup v1 with the cgroupfs
// driver, kubelet's legacy path (failCgroupV1: false).
//
// Everything lives below one directory; every process is recorded by PID in
// its state file, so another process (`make cluster-down`) can stop exactly
// those. Down leaves the machine as Up found it: processes, mounts, pod
// cgroups, the bridge, ip_forward and the host paths kubelet, containerd and
// CNI hard-code.
package cluster

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubefair/kubefair/test/harness/containerd"
	"github.com/kubefair/kubefair/test/harness/images"
	"github.com/kubefair/kubefair/test/harness/kubeapi"
)

// Config says where and how the cluster runs. Zero fields take defaults.
type Config struct {
	// Dir holds everything: certificates, data, sockets, logs, the state
	// file. Kept short: at most 29 characters, as containerd's shims put
	// their sockets in Dir/containerd/s.
	Dir string
	// BinDir has etcd, kube-apiserver, kube-controller-manager,
	// kube-scheduler, kubelet and kubectl.
	BinDir   string
	NodeName string
	// APIPort is the API server's port on 127.0.0.1.
	APIPort  int
	EtcdPort int
	// KubeletPort is kubelet's API port; its healthz is KubeletPort+8.
	KubeletPort int
	// PodCIDR and ServiceCIDR stay outside the private ranges.
	PodCIDR, ServiceCIDR string
	// NodeIP is the node's address, put on the loopback interface (kubelet
	// refuses 127.0.0.1, and probes of host-network pods need an address).
	NodeIP string
	// Bridge is the CNI bridge's interface name.
	Bridge     string
	PauseImage string
	// Log receives progress lines; nil discards them.
	Log func(format string, args ...any) `json:"-"`
}

// DefaultDir is where `make cluster-up` keeps its cluster.
const DefaultDir = "/tmp/kubefair-cluster"

// HostShapeLabel names the host node's shape for kubefair's chart (its
// agent.shapes in ci/local-cluster-values.yaml): cgroup v1, cgroupfs
// driver, so kubelet's pod cgroups are below cpu/kubepods rather than the
// chart's default kubepods.slice (the guest node's).
const HostShapeLabel = ShapeLabel + "=v1-cgroupfs"

// ShapeLabel names a node's agent shape; PatchedKernelShape is the shape
// of a guest booted with kubefair's kernel (KernelImage("patched")): the
// syscall backend under the agent's Localhost seccomp profile.
const (
	ShapeLabel         = "kubefair.io/agent-shape"
	PatchedKernelShape = "patched-kernel"
)

func (cfg *Config) defaults() {
	if cfg.Dir == "" {
		cfg.Dir = DefaultDir
	}
	if cfg.BinDir == "" {
		cfg.BinDir = kubeapi.Assets()
	}
	if cfg.NodeName == "" {
		cfg.NodeName = "kubefair-node"
	}
	if cfg.APIPort == 0 {
		cfg.APIPort = 6443
	}
	if cfg.EtcdPort == 0 {
		cfg.EtcdPort = 12379
	}
	if cfg.KubeletPort == 0 {
		cfg.KubeletPort = 10250
	}
	if cfg.PodCIDR == "" {
		cfg.PodCIDR = "198.18.0.0/24"
	}
	if cfg.ServiceCIDR == "" {
		cfg.ServiceCIDR = "198.19.0.0/24"
	}
	if cfg.NodeIP == "" {
		cfg.NodeIP = "198.18.1.1"
	}
	if cfg.Bridge == "" {
		cfg.Bridge = "kubefair0"
	}
	if cfg.PauseImage == "" {
		cfg.PauseImage = images.Pause.Ref
	}
	if cfg.Log == nil {
		cfg.Log = func(string, ...any) {}
	}
}

// Cluster is a running cluster.
type Cluster struct {
	cfg   Config
	pki   *pki
	state state
	// started are the processes this Go process started (and must reap).
	started map[string]*exec.Cmd
}

// state is what the state file records: enough for Down from any process.
type state struct {
	Config     Config               `json:"config"`
	Components map[string]component `json:"components"`
	Host       hostFootprint        `json:"host"`
	// Owner is the process that brought the cluster up. While it runs, the
	// cluster is its own: another Up must not tear it down as a leftover.
	Owner component `json:"owner"`
	// Guests are the guest nodes (guest.go), by node name.
	Guests map[string]guestState `json:"guests,omitempty"`
}

type component struct {
	PID  int      `json:"pid"`
	Args []string `json:"args"`
}

// The components, in start order.
const (
	Etcd              = "etcd"
	APIServer         = "kube-apiserver"
	ControllerManager = "kube-controller-manager"
	Scheduler         = "kube-scheduler"
	Containerd        = "containerd"
	Kubelet           = "kubelet"
)

var startOrder = []string{Etcd, APIServer, ControllerManager, Scheduler, Containerd, Kubelet}

func (c *Cluster) path(parts ...string) string {
	return filepath.Join(append([]string{c.cfg.Dir}, parts...)...)
}

// APIServerURL is the API server's address.
func (c *Cluster) APIServerURL() string { return fmt.Sprintf("https://127.0.0.1:%d", c.cfg.APIPort) }

// APIPort is the API server's port on 127.0.0.1.
func (c *Cluster) APIPort() int { return c.cfg.APIPort }

// NodeName is the one node's name.
func (c *Cluster) NodeName() string { return c.cfg.NodeName }

// Dir is the cluster's directory.
func (c *Cluster) Dir() string { return c.cfg.Dir }

// ContainerdSocket is the cluster's containerd socket.
func (c *Cluster) ContainerdSocket() string { return c.path("containerd", "containerd.sock") }

// Kubeconfig is an admin kubeconfig (system:masters).
func (c *Cluster) Kubeconfig() string { return c.path("admin.kubeconfig") }

// RESTConfig is the admin's client configuration.
func (c *Cluster) RESTConfig() (*rest.Config, error) {
	return clientcmd.BuildConfigFromFlags("", c.Kubeconfig())
}

// DownLeftover tears down a cluster a crashed run left in cfg.Dir, unless
// the process that owns it still runs. Up calls it; a suite that records
// the host before Up calls it first, so that the record is of the host
// without the leftover.
func DownLeftover(cfg Config) error {
	cfg.defaults()
	old, err := Attach(cfg.Dir)
	if err != nil {
		return nil // nothing left there
	}
	if o := old.state.Owner; o.PID != 0 && o.PID != os.Getpid() && len(o.Args) > 0 && isOurs(o.PID, o.Args[0]) {
		return fmt.Errorf("the cluster in %s belongs to process %d (%s), which is still running; let it finish or use another directory", cfg.Dir, o.PID, o.Args[0])
	}
	cfg.Log("cluster: tearing down a cluster left in %s", cfg.Dir)
	if err := old.Down(); err != nil {
		return fmt.Errorf("tearing down the old cluster in %s: %w", cfg.Dir, err)
	}
	return nil
}

// Up builds kubefair's images, starts every component and waits until the
// node is Ready. A cluster left behind in cfg.Dir (a crashed run) is torn
// down first.
func Up(ctx context.Context, cfg Config) (*Cluster, error) {
	cfg.defaults()
	if err := DownLeftover(cfg); err != nil {
		return nil, err
	}
	if err := preflight(cfg); err != nil {
		return nil, err
	}
	c := &Cluster{cfg: cfg, started: map[string]*exec.Cmd{}, state: state{Config: cfg, Components: map[string]component{}}}
	c.state.Host = recordHost(cfg)
	if exe, err := os.Executable(); err == nil {
		c.state.Owner = component{PID: os.Getpid(), Args: []string{exe}}
	}
	if err := os.MkdirAll(cfg.Dir, 0o700); err != nil {
		return nil, err
	}
	if err := c.save(); err != nil {
		return nil, err
	}
	ok := false
	defer func() {
		if !ok {
			cfg.Log("cluster: start failed, tearing down (logs were in %s)", c.path("logs"))
			_ = c.keepLogs()
			_ = c.Down()
		}
	}()
	if err := c.up(ctx); err != nil {
		return nil, err
	}
	ok = true
	return c, nil
}

func preflight(cfg Config) error {
	for _, b := range []string{Etcd, APIServer, ControllerManager, Scheduler, Kubelet, "kubectl"} {
		if _, err := os.Stat(filepath.Join(cfg.BinDir, b)); err != nil {
			return fmt.Errorf("%s is not built in %s: run `make cluster-binaries`", b, cfg.BinDir)
		}
	}
	if err := containerd.CheckBuilt(); err != nil {
		return err
	}
	if s := (&Cluster{cfg: cfg}).shimSocketDir(); len(s) > 42 {
		return fmt.Errorf("the cluster's directory %s is too long: containerd's shims put their sockets in %s, which must fit 42 characters", cfg.Dir, s)
	}
	if _, err := exec.LookPath("ip"); err != nil {
		return errors.New("ip is not installed (Debian iproute2: run `make deps`)")
	}
	if os.Geteuid() != 0 {
		return errors.New("a local cluster needs root (kubelet, containerd, cgroups, network)")
	}
	if out, _ := exec.Command("ip", "-o", "address", "show", "to", cfg.NodeIP).Output(); len(out) > 0 {
		return fmt.Errorf("the node address %s is already on this machine: %s", cfg.NodeIP, out)
	}
	for _, port := range []int{cfg.APIPort, cfg.EtcdPort, cfg.EtcdPort + 1, cfg.KubeletPort, cfg.KubeletPort + 8, 10257, 10259} {
		l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
		if err != nil {
			return fmt.Errorf("port %d on 127.0.0.1 is taken; a cluster needs it: %w", port, err)
		}
		_ = l.Close()
	}
	return nil
}

func (c *Cluster) up(ctx context.Context) error {
	cfg := c.cfg
	_, svcNet, err := net.ParseCIDR(cfg.ServiceCIDR)
	if err != nil {
		return fmt.Errorf("service range %q: %w", cfg.ServiceCIDR, err)
	}
	firstService := append(net.IP(nil), svcNet.IP.To4()...)
	firstService[3]++
	if c.pki, err = newPKI(cfg.Dir, cfg.NodeName, firstService); err != nil {
		return err
	}
	for _, id := range append(clientIdentities, kubeletIdentity(cfg.NodeName)) {
		if _, err := c.kubeconfig(id); err != nil {
			return err
		}
	}
	for _, d := range []string{"logs", "etcd", "containerd", "cni/net.d", "kubelet", "pod-logs"} {
		if err := os.MkdirAll(c.path(d), 0o700); err != nil {
			return err
		}
	}

	cfg.Log("cluster: starting etcd and the control plane")
	etcdURL := fmt.Sprintf("http://127.0.0.1:%d", cfg.EtcdPort)
	if err := c.start(Etcd, filepath.Join(cfg.BinDir, Etcd),
		"--data-dir="+c.path("etcd"), "--name=kubefair",
		"--listen-client-urls="+etcdURL, "--advertise-client-urls="+etcdURL,
		fmt.Sprintf("--listen-peer-urls=http://127.0.0.1:%d", cfg.EtcdPort+1),
		fmt.Sprintf("--initial-advertise-peer-urls=http://127.0.0.1:%d", cfg.EtcdPort+1),
		fmt.Sprintf("--initial-cluster=kubefair=http://127.0.0.1:%d", cfg.EtcdPort+1),
		"--unsafe-no-fsync", "--quota-backend-bytes=2147483648"); err != nil {
		return err
	}
	p := c.pki.path
	if err := c.start(APIServer, filepath.Join(cfg.BinDir, APIServer),
		"--etcd-servers="+etcdURL,
		"--bind-address=127.0.0.1", "--advertise-address=127.0.0.1", fmt.Sprintf("--secure-port=%d", cfg.APIPort),
		"--tls-cert-file="+p("apiserver.crt"), "--tls-private-key-file="+p("apiserver.key"),
		"--client-ca-file="+p("ca.crt"),
		"--kubelet-client-certificate="+p("apiserver-kubelet-client.crt"), "--kubelet-client-key="+p("apiserver-kubelet-client.key"),
		"--kubelet-preferred-address-types=InternalIP",
		"--service-account-issuer=https://kubernetes.default.svc", "--service-account-key-file="+p("sa.pub"),
		"--service-account-signing-key-file="+p("sa.key"),
		"--service-cluster-ip-range="+cfg.ServiceCIDR,
		"--authorization-mode=Node,RBAC", "--enable-admission-plugins=NodeRestriction",
		"--allow-privileged=true", "--profiling=false", "--endpoint-reconciler-type=none"); err != nil {
		return err
	}
	if err := c.waitHTTPS(ctx, fmt.Sprintf("%s/readyz", c.APIServerURL()), 90*time.Second); err != nil {
		return fmt.Errorf("the API server did not become ready: %w (see %s)", err, c.logPath(APIServer))
	}
	if err := c.start(ControllerManager, filepath.Join(cfg.BinDir, ControllerManager),
		"--kubeconfig="+c.path("controller-manager.kubeconfig"),
		"--authentication-kubeconfig="+c.path("controller-manager.kubeconfig"),
		"--authorization-kubeconfig="+c.path("controller-manager.kubeconfig"),
		"--bind-address=127.0.0.1", "--leader-elect=false", "--use-service-account-credentials=true",
		"--service-account-private-key-file="+p("sa.key"), "--root-ca-file="+p("ca.crt"),
		"--cluster-signing-cert-file="+p("ca.crt"), "--cluster-signing-key-file="+p("ca.key"),
		"--profiling=false"); err != nil {
		return err
	}
	if err := c.start(Scheduler, filepath.Join(cfg.BinDir, Scheduler),
		"--kubeconfig="+c.path("scheduler.kubeconfig"),
		"--authentication-kubeconfig="+c.path("scheduler.kubeconfig"),
		"--authorization-kubeconfig="+c.path("scheduler.kubeconfig"),
		"--bind-address=127.0.0.1", "--leader-elect=false", "--profiling=false"); err != nil {
		return err
	}

	cfg.Log("cluster: starting containerd and importing kubefair's images")
	if err := os.WriteFile(c.path("containerd", "config.toml"), []byte(c.containerdConfig()), 0o600); err != nil {
		return err
	}
	if err := os.WriteFile(c.path("cni", "net.d", "10-kubefair.conflist"), []byte(c.cniConfig()), 0o644); err != nil {
		return err
	}
	if err := c.startContainerd(ctx); err != nil {
		return err
	}
	if err := c.ImportImages(images.Pause, images.Burner, images.Controller, images.Agent); err != nil {
		return err
	}

	cfg.Log("cluster: starting kubelet")
	if out, err := exec.Command("ip", "address", "add", cfg.NodeIP+"/32", "dev", "lo").CombinedOutput(); err != nil {
		return fmt.Errorf("adding the node address %s to lo: %w: %s", cfg.NodeIP, err, out)
	}
	if err := os.WriteFile(c.path("kubelet", "config.yaml"), []byte(c.kubeletConfig()), 0o600); err != nil {
		return err
	}
	if err := c.start(Kubelet, filepath.Join(cfg.BinDir, Kubelet),
		"--config="+c.path("kubelet", "config.yaml"), "--kubeconfig="+c.path("kubelet.kubeconfig"),
		"--root-dir="+c.path("kubelet"), "--hostname-override="+cfg.NodeName, "--node-ip="+cfg.NodeIP,
		"--node-labels="+HostShapeLabel, "--v=1"); err != nil {
		return err
	}
	if err := c.WaitNodeReady(ctx, 2*time.Minute); err != nil {
		return err
	}
	// Pods need the default ServiceAccount (the controller-manager makes it).
	return c.waitFor(ctx, time.Minute, "the default ServiceAccount", func(cl client.Client) (bool, error) {
		err := cl.Get(ctx, client.ObjectKey{Namespace: "default", Name: "default"}, &corev1.ServiceAccount{})
		return err == nil, client.IgnoreNotFound(err)
	})
}

func (c *Cluster) startContainerd(ctx context.Context) error {
	// containerd.Env puts the runtime's bin/ first on PATH, as the shim and
	// runc named in the config are there too.
	if err := c.startWithEnv(Containerd, containerd.Env(), containerd.Binary("containerd"), "--config="+c.path("containerd", "config.toml")); err != nil {
		return err
	}
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if err := c.ctr(ctx, "version").Run(); err == nil {
			return nil
		}
		time.Sleep(200 * time.Millisecond)
	}
	return fmt.Errorf("containerd did not answer within 30 s (see %s)", c.logPath(Containerd))
}

// ImportImages builds the images from this tree and imports them into
// the node's containerd, where kubelet finds them (pods use
// imagePullPolicy: Never or IfNotPresent).
func (c *Cluster) ImportImages(imgs ...images.Image) error {
	dir := filepath.Join(kubeapi.CacheDir(), "images")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for _, img := range imgs {
		tarball := filepath.Join(dir, filepath.Base(img.Package)+".tar")
		if err := img.Build(kubeapi.RepoRoot(), tarball); err != nil {
			return err
		}
		out, err := c.ctr(context.Background(), "-n", "k8s.io", "images", "import", "--no-unpack=false", tarball).CombinedOutput()
		if err != nil {
			return fmt.Errorf("importing %s: %w\n%s", img.Ref, err, out)
		}
	}
	return nil
}

// WaitNodeReady waits until the node reports Ready.
func (c *Cluster) WaitNodeReady(ctx context.Context, timeout time.Duration) error {
	return c.waitNodeReady(ctx, c.cfg.NodeName, timeout)
}

func (c *Cluster) waitNodeReady(ctx context.Context, name string, timeout time.Duration) error {
	return c.waitFor(ctx, timeout, "node "+name+" Ready", func(cl client.Client) (bool, error) {
		var n corev1.Node
		if err := cl.Get(ctx, client.ObjectKey{Name: name}, &n); err != nil {
			return false, client.IgnoreNotFound(err)
		}
		for _, cond := range n.Status.Conditions {
			if cond.Type == corev1.NodeReady {
				return cond.Status == corev1.ConditionTrue, nil
			}
		}
		return false, nil
	})
}

// client is an admin client of the cluster's API.
func (c *Cluster) client() (client.Client, error) {
	cfg, err := c.RESTConfig()
	if err != nil {
		return nil, err
	}
	return client.New(cfg, client.Options{})
}

func (c *Cluster) waitFor(ctx context.Context, timeout time.Duration, what string, done func(client.Client) (bool, error)) error {
	cl, err := c.client()
	if err != nil {
		return err
	}
	deadline := time.Now().Add(timeout)
	var last error
	for time.Now().Before(deadline) {
		ok, err := done(cl)
		if ok {
			return nil
		}
		last = err
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
	return fmt.Errorf("waiting %s for %s: last error %v (logs in %s)", timeout, what, last, c.path("logs"))
}

func (c *Cluster) waitHTTPS(ctx context.Context, url string, timeout time.Duration) error {
	cert, err := tls.LoadX509KeyPair(c.pki.path("admin.crt"), c.pki.path("admin.key"))
	if err != nil {
		return err
	}
	pool := x509.NewCertPool()
	pool.AddCert(c.pki.caCert)
	hc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{Certificates: []tls.Certificate{cert}, RootCAs: pool}}}
	deadline := time.Now().Add(timeout)
	var last error
	for time.Now().Before(deadline) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		resp, err := hc.Do(req)
		if err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			err = fmt.Errorf("%s", resp.Status)
		}
		last = err
		if ctx.Err() != nil {
			return ctx.Err()
		}
		time.Sleep(300 * time.Millisecond)
	}
	return last
}

func (c *Cluster) logPath(name string) string { return c.path("logs", name+".log") }

// ctr is containerd's ctr against the cluster's socket: the one beside the
// containerd the cluster started, else the built runtime's.
func (c *Cluster) ctr(ctx context.Context, args ...string) *exec.Cmd {
	bin := containerd.Binary("ctr")
	if comp, ok := c.state.Components[Containerd]; ok {
		bin = filepath.Join(filepath.Dir(comp.Args[0]), "ctr")
	}
	return exec.CommandContext(ctx, bin, append([]string{"-a", c.ContainerdSocket()}, args...)...)
}

// start runs one component in its own process group (a signal to the
// starter does not reach it), logging to logs/<name>.log, and records it.
func (c *Cluster) start(name, bin string, args ...string) error {
	return c.startWithEnv(name, nil, bin, args...)
}

// startWithEnv is start with an environment of its own (nil: this
// process's).
func (c *Cluster) startWithEnv(name string, env []string, bin string, args ...string) error {
	log, err := os.OpenFile(c.logPath(name), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer log.Close()
	cmd := exec.Command(bin, args...)
	cmd.Env = env
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting %s: %w", name, err)
	}
	c.started[name] = cmd
	go func() { _ = cmd.Wait() }() // reap it whenever it ends
	c.state.Components[name] = component{PID: cmd.Process.Pid, Args: append([]string{bin}, args...)}
	return c.save()
}

// Restart stops one component by its PID and starts it again with the
// same arguments (the suite's kubelet and containerd faults).
func (c *Cluster) Restart(ctx context.Context, name string) error {
	comp, ok := c.state.Components[name]
	if !ok {
		return fmt.Errorf("no %s in this cluster", name)
	}
	if err := stopPID(comp.PID, comp.Args[0]); err != nil {
		return err
	}
	delete(c.state.Components, name)
	if name == Containerd {
		return c.startContainerd(ctx)
	}
	return c.start(name, comp.Args[0], comp.Args[1:]...)
}

// PID is a running component's process id.
func (c *Cluster) PID(name string) int { return c.state.Components[name].PID }

func (c *Cluster) save() error {
	b, err := json.MarshalIndent(c.state, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(c.path("state.json"), b, 0o600)
}

// Attach finds the cluster recorded in dir (for `make cluster-down` or a
// test that reuses a running cluster).
func Attach(dir string) (*Cluster, error) {
	b, err := os.ReadFile(filepath.Join(dir, "state.json"))
	if err != nil {
		return nil, fmt.Errorf("no cluster in %s: %w", dir, err)
	}
	c := &Cluster{started: map[string]*exec.Cmd{}}
	if err := json.Unmarshal(b, &c.state); err != nil {
		return nil, fmt.Errorf("reading %s/state.json: %w", dir, err)
	}
	c.cfg = c.state.Config
	c.cfg.defaults()
	c.pki = &pki{dir: filepath.Join(dir, "pki")}
	return c, nil
}

// SetLog sends an attached cluster's progress lines to log.
func (c *Cluster) SetLog(log func(format string, args ...any)) { c.cfg.Log = log }

// Down stops every component this cluster started (by PID, kubelet first),
// removes its containers, mounts, pod cgroups and network, restores the
// host settings it changed and deletes its directory.
func (c *Cluster) Down() error {
	// Guest nodes first: QEMU and the host route each one added.
	errs := []error{c.stopGuests()}
	// kubelet first, so it does not restart what we remove; then the
	// containers, while containerd is still there to remove them.
	if comp, ok := c.state.Components[Kubelet]; ok {
		errs = append(errs, stopPID(comp.PID, comp.Args[0]))
	}
	if _, ok := c.state.Components[Containerd]; ok {
		errs = append(errs, c.removeContainers())
	}
	for i := len(startOrder) - 1; i >= 0; i-- {
		if comp, ok := c.state.Components[startOrder[i]]; ok {
			errs = append(errs, stopPID(comp.PID, comp.Args[0]))
		}
	}
	c.stopShims()
	errs = append(errs, c.state.Host.restore(c.cfg))
	if err := errors.Join(errs...); err != nil {
		return err
	}
	return os.RemoveAll(c.cfg.Dir)
}

// removeContainers kills and deletes every container in containerd's
// k8s.io namespace (kubelet is already stopped), so no pod process outlives
// the cluster; it gives up after 30 s (the cgroup sweep kills what is left).
func (c *Cluster) removeContainers() error {
	ctr := func(args ...string) string {
		out, _ := c.ctr(context.Background(), append([]string{"-n", "k8s.io"}, args...)...).Output()
		return string(out)
	}
	containers := strings.Fields(ctr("containers", "ls", "-q"))
	for _, id := range strings.Fields(ctr("tasks", "ls", "-q")) {
		ctr("tasks", "kill", "--all", "-s", "SIGKILL", id)
	}
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		tasks := strings.Fields(ctr("tasks", "ls", "-q"))
		if len(tasks) == 0 {
			break
		}
		for _, id := range tasks {
			ctr("tasks", "delete", "-f", id)
		}
	}
	for _, id := range containers {
		ctr("containers", "delete", id)
	}
	return nil
}

// stopShims ends the runtime shims of this cluster's containerd: they
// outlive containerd by design, and name its socket in their arguments.
func (c *Cluster) stopShims() {
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		cmdline, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err != nil {
			continue
		}
		args := strings.Split(string(cmdline), "\x00")
		if filepath.Base(args[0]) == "containerd-shim-runc-v2" && slices.Contains(args, c.ContainerdSocket()) {
			_ = stopPID(pid, args[0])
		}
	}
}

// stopPID ends a process this cluster started: SIGTERM, then SIGKILL after
// 15 s. A PID that now belongs to another program is left alone.
func stopPID(pid int, bin string) error {
	if pid <= 0 || !isOurs(pid, bin) {
		return nil
	}
	_ = syscall.Kill(pid, syscall.SIGTERM)
	for i := 0; i < 150; i++ {
		if !isOurs(pid, bin) {
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	_ = syscall.Kill(pid, syscall.SIGKILL)
	for i := 0; i < 50; i++ {
		if !isOurs(pid, bin) {
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("process %d (%s) did not stop", pid, bin)
}

// isOurs: the process exists, is not a zombie, and runs bin.
func isOurs(pid int, bin string) bool {
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	if i := strings.LastIndexByte(string(stat), ')'); i > 0 && len(stat) > i+2 && stat[i+2] == 'Z' {
		return false
	}
	cmdline, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	if err != nil {
		return false
	}
	first, _, _ := strings.Cut(string(cmdline), "\x00")
	return first == bin || filepath.Base(first) == filepath.Base(bin)
}

// keepLogs copies the logs of a failed start next to the cluster's
// directory, since Down removes the directory.
func (c *Cluster) keepLogs() error {
	dst := c.cfg.Dir + "-failed-logs"
	_ = os.RemoveAll(dst)
	return exec.Command("cp", "-r", c.path("logs"), dst).Run()
}
