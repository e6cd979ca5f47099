package cluster

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubefair/kubefair/test/harness/images"
	"github.com/kubefair/kubefair/test/harness/kubeapi"
)

// A guest node is a second node of the cluster with cgroup v2 and systemd
// as PID 1 — which this machine's own cgroups (v1, cpu bound there) cannot
// give — in a QEMU guest (TCG: KVM hangs here) of the stock kernel that
// kernel/build.sh builds, on the disk image of hack/build-node-image.sh.
//
// Its network is QEMU's user network, in the benchmarking range: the guest
// is GuestIP, the host's loopback is guestHostAddr. No default route in the
// guest: it reaches the host and nothing else. Two ports reach in from the
// host: ssh on a free port of 127.0.0.1, and kubelet's port on GuestIP, so
// that the API server reaches the node's kubelet (logs, exec) at the address
// the node reports. For that GuestIP is local on the host too, as a route in
// the local table with 127.0.0.1 as its source (no address on an interface):
// QEMU shows connections from 127.0.0.1 to the guest as coming from
// guestHostAddr, but passes any other source through, and the guest drops a
// packet from its own address.
const (
	guestNet      = "198.18.2.0/24"
	guestHostAddr = "198.18.2.2"
	// GuestIP is the guest node's InternalIP.
	GuestIP = "198.18.2.15"
	// GuestPodCIDR is the guest node's default pod range.
	GuestPodCIDR = "198.18.3.0/24"
)

// GuestConfig says how a guest node runs. Zero fields take defaults.
type GuestConfig struct {
	// Name is the node's name (default "kubefair-guest").
	Name string
	// ImageDir holds disk.img and the ssh key pair; default: the directory
	// hack/build-node-image.sh prints (it builds the image when an input
	// changed, and is quick otherwise).
	ImageDir string
	// Kernel is the bzImage to boot; default: KernelImage("stock").
	Kernel string
	// CPUs and MemoryMiB of the guest (default 2 and 3072).
	CPUs, MemoryMiB int
	// PodCIDR is the node's pod range (default GuestPodCIDR).
	PodCIDR string
	// Images are imported into the node's containerd (default: pause,
	// burner and agent).
	Images []images.Image `json:"-"`
	// Forward are guest ports reachable from the host's loopback, each on a
	// free port of its own (HostPort), e.g. a host-network pod's.
	Forward []int
	// Labels and Taints the node registers with.
	Labels map[string]string
	Taints []corev1.Taint
	// Timeout bounds the start, from QEMU to the Ready node (default 10
	// minutes: under TCG the guest's Go programs run several times slower).
	Timeout time.Duration
}

// KernelImage is the bzImage of kernel/build.sh's "stock" or "patched"
// kernel in the cache (`make kernel`).
func KernelImage(flavour string) string {
	return filepath.Join(kubeapi.CacheDir(), "kernel", flavour, "arch", "x86", "boot", "bzImage")
}

// OnPatchedKernel is cfg booting kubefair's kernel, the node labelled with
// its agent shape (PatchedKernelShape).
func (cfg GuestConfig) OnPatchedKernel() GuestConfig {
	cfg.Kernel = KernelImage("patched")
	cfg.Labels = maps.Clone(cfg.Labels)
	if cfg.Labels == nil {
		cfg.Labels = map[string]string{}
	}
	cfg.Labels[ShapeLabel] = PatchedKernelShape
	return cfg
}

func (cfg *GuestConfig) defaults() error {
	if cfg.Name == "" {
		cfg.Name = "kubefair-guest"
	}
	if cfg.Kernel == "" {
		cfg.Kernel = KernelImage("stock")
	}
	if _, err := os.Stat(cfg.Kernel); err != nil {
		return fmt.Errorf("no kernel for the guest at %s: run `make kernel`", cfg.Kernel)
	}
	if cfg.ImageDir == "" {
		out, err := exec.Command(filepath.Join(kubeapi.RepoRoot(), "hack", "build-node-image.sh")).Output()
		if err != nil {
			var exit *exec.ExitError
			if errors.As(err, &exit) {
				err = fmt.Errorf("%w\n%s", err, exit.Stderr)
			}
			return fmt.Errorf("hack/build-node-image.sh (`make node-image`): %w", err)
		}
		cfg.ImageDir = strings.TrimSpace(string(out))
	}
	for _, f := range []string{"disk.img", "id_ed25519"} {
		if _, err := os.Stat(filepath.Join(cfg.ImageDir, f)); err != nil {
			return fmt.Errorf("the node image in %s has no %s: run `make node-image`", cfg.ImageDir, f)
		}
	}
	if cfg.CPUs == 0 {
		cfg.CPUs = 2
	}
	if cfg.MemoryMiB == 0 {
		cfg.MemoryMiB = 3072
	}
	if cfg.PodCIDR == "" {
		cfg.PodCIDR = GuestPodCIDR
	}
	if cfg.Images == nil {
		cfg.Images = []images.Image{images.Pause, images.Burner, images.Agent}
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = 10 * time.Minute
	}
	return nil
}

// guestState is what the state file records of a guest: its QEMU process
// (Down stops it by PID), the host route it added, how to log in.
type guestState struct {
	Config  GuestConfig `json:"config"`
	QEMU    component   `json:"qemu"`
	SSHPort int         `json:"sshPort"`
	// Forwards are the host ports of GuestConfig.Forward, by guest port.
	Forwards map[int]int `json:"forwards,omitempty"`
	// HostRoute is GuestIP's route in the host's local table, once added.
	HostRoute string `json:"hostRoute,omitempty"`
}

// GuestNode is a running guest node.
type GuestNode struct {
	c    *Cluster
	name string
	cfg  GuestConfig
	// exited is closed when the QEMU this process booted exits, with
	// exitErr its status (nil for a guest attached to, not booted).
	exited  chan struct{}
	exitErr error
}

// Name is the node's name.
func (g *GuestNode) Name() string { return g.name }

// IP is the node's InternalIP.
func (g *GuestNode) IP() string { return GuestIP }

// SerialLog is the file that holds the guest's serial console (kernel and
// systemd's boot messages).
func (g *GuestNode) SerialLog() string { return g.c.logPath("guest-" + g.name + ".serial") }

func (g *GuestNode) state() guestState { return g.c.state.Guests[g.name] }

// HostPort is the port of the host's loopback that reaches guestPort, one
// of GuestConfig.Forward (0 for another).
func (g *GuestNode) HostPort(guestPort int) int { return g.state().Forwards[guestPort] }

// SSHArgs are the ssh command line that logs into the guest as root (for a
// person: `ssh <SSHArgs...>`; append a command to run one).
func (g *GuestNode) SSHArgs() []string {
	return []string{
		"-i", filepath.Join(g.cfg.ImageDir, "id_ed25519"), "-p", fmt.Sprint(g.state().SSHPort),
		"-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null", "-o", "LogLevel=ERROR",
		"-o", "BatchMode=yes", "-o", "ConnectTimeout=20", "-o", "ServerAliveInterval=15",
		"root@127.0.0.1",
	}
}

// Run runs a shell command in the guest as root and returns its standard
// output; a failure's error holds its exit status and standard error.
//
// An emulated node that shares its host's CPUs with busy processes can be
// slow to greet: ssh gives up on the banner before the command was sent.
// Run tries such a connection again, a bounded number of times; a command
// that did start is never repeated.
func (g *GuestNode) Run(ctx context.Context, cmd string) (string, error) {
	for attempt := 1; ; attempt++ {
		out, err := g.RunInput(ctx, nil, cmd)
		if err == nil || attempt == sshAttempts || !strings.Contains(err.Error(), sshNoBanner) || ctx.Err() != nil {
			return out, err
		}
	}
}

// sshNoBanner is what ssh says when the guest accepted the connection but
// sent no banner in ConnectTimeout; sshAttempts bounds Run's tries.
const (
	sshNoBanner = "timed out during banner exchange"
	sshAttempts = 3
)

// RunInput is Run with stdin as the command's standard input.
func (g *GuestNode) RunInput(ctx context.Context, stdin io.Reader, cmd string) (string, error) {
	var stdout, stderr bytes.Buffer
	c := exec.CommandContext(ctx, "ssh", append(g.SSHArgs(), "--", cmd)...)
	c.Stdin, c.Stdout, c.Stderr = stdin, &stdout, &stderr
	if err := c.Run(); err != nil {
		return stdout.String(), fmt.Errorf("in guest %s: %q: %w: %s", g.name, cmd, err, strings.TrimSpace(stderr.String()))
	}
	return stdout.String(), nil
}

// ReadFile reads a file in the guest.
func (g *GuestNode) ReadFile(path string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, err := g.Run(ctx, "cat "+shellQuote(path))
	return []byte(out), err
}

// WriteFiles writes files into the guest (mode 0644, 0600 for keys and
// kubeconfigs), creating their directories, in one tar stream.
func (g *GuestNode) WriteFiles(ctx context.Context, files map[string][]byte) error {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	paths := make([]string, 0, len(files))
	for p := range files {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	for _, p := range paths {
		mode := int64(0o644)
		if strings.HasSuffix(p, ".kubeconfig") || strings.HasSuffix(p, ".key") {
			mode = 0o600
		}
		if err := tw.WriteHeader(&tar.Header{Name: strings.TrimPrefix(p, "/"), Mode: mode, Size: int64(len(files[p])), ModTime: time.Now()}); err != nil {
			return err
		}
		if _, err := tw.Write(files[p]); err != nil {
			return err
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	_, err := g.RunInput(ctx, &buf, "tar -x --no-same-owner -C /")
	return err
}

// RestartUnit restarts a systemd unit of the guest (kubelet, containerd).
func (g *GuestNode) RestartUnit(ctx context.Context, unit string) error {
	_, err := g.Run(ctx, "systemctl restart "+shellQuote(unit))
	return err
}

// Journal is the guest's journal of some units (all of it without).
func (g *GuestNode) Journal(ctx context.Context, units ...string) (string, error) {
	cmd := "journalctl --no-pager -o short-monotonic"
	for _, u := range units {
		cmd += " -u " + shellQuote(u)
	}
	return g.Run(ctx, cmd)
}

// SaveLogs writes the journal of kubelet, containerd and the API server
// proxy next to the serial console log in the cluster's logs directory (a
// failed test keeps that directory; FollowPodLogs keeps the pods' logs).
func (g *GuestNode) SaveLogs(ctx context.Context) error {
	out, err := g.Journal(ctx, "kubelet", "containerd", guestProxyUnit)
	if out == "" && err != nil {
		return err
	}
	return os.WriteFile(g.c.logPath("guest-"+g.name+".journal"), []byte(out), 0o644)
}

// ImportImages builds images from this tree and imports them into the
// guest's containerd, streamed through ssh.
func (g *GuestNode) ImportImages(ctx context.Context, imgs ...images.Image) error {
	for _, img := range imgs {
		tarball, err := buildImage(img)
		if err != nil {
			return err
		}
		f, err := os.Open(tarball)
		if err != nil {
			return err
		}
		_, err = g.RunInput(ctx, f, "ctr -n k8s.io images import -")
		f.Close()
		if err != nil {
			return fmt.Errorf("importing %s: %w", img.Ref, err)
		}
	}
	return nil
}

// Guest is a guest node this cluster runs (one started by another process
// too, from the state file).
func (c *Cluster) Guest(name string) (*GuestNode, error) {
	st, ok := c.state.Guests[name]
	if !ok {
		return nil, fmt.Errorf("no guest node %s in this cluster", name)
	}
	return &GuestNode{c: c, name: name, cfg: st.Config}, nil
}

// AddGuestNode boots a guest node and joins it to the cluster: QEMU on a
// throwaway snapshot of the cached image, the node's kubelet certificate
// from the cluster's CA, its configuration, containerd and kubelet started
// by systemd, kubefair's images imported. It returns when the node is
// Ready; on failure the guest is stopped (its logs stay in the cluster's
// logs directory). Down stops it with the rest of the cluster.
func (c *Cluster) AddGuestNode(ctx context.Context, cfg GuestConfig) (*GuestNode, error) {
	if err := cfg.defaults(); err != nil {
		return nil, err
	}
	if len(c.state.Guests) > 0 {
		// One guest: its network and kubelet address are fixed (GuestIP).
		return nil, errors.New("the cluster already has a guest node")
	}
	if _, ok := c.state.Guests[cfg.Name]; ok || cfg.Name == c.cfg.NodeName {
		return nil, fmt.Errorf("the cluster already has a node %s", cfg.Name)
	}
	for _, bin := range []string{"qemu-system-x86_64", "ssh"} {
		if _, err := exec.LookPath(bin); err != nil {
			return nil, fmt.Errorf("%s is not installed (hack/deps.sh installs it)", bin)
		}
	}
	if out, _ := exec.Command("ip", "-o", "address", "show", "to", GuestIP).Output(); len(out) > 0 {
		return nil, fmt.Errorf("the guest address %s is already on this machine: %s", GuestIP, out)
	}
	if out, _ := exec.Command("ip", "route", "show", "table", "local", GuestIP).Output(); len(out) > 0 {
		return nil, fmt.Errorf("the guest address %s is already routed on this machine: %s", GuestIP, out)
	}
	ctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
	defer cancel()
	start := time.Now()
	g := &GuestNode{c: c, name: cfg.Name, cfg: cfg}
	if c.state.Guests == nil {
		c.state.Guests = map[string]guestState{}
	}
	c.state.Guests[g.name] = guestState{Config: cfg}
	if err := c.save(); err != nil {
		return nil, err
	}
	ok := false
	defer func() {
		if !ok {
			saveCtx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			_ = g.SaveLogs(saveCtx)
			_ = g.stop()
		}
	}()

	c.cfg.Log("cluster: booting guest node %s (QEMU, TCG)", g.name)
	if err := g.boot(); err != nil {
		return nil, err
	}
	if err := g.waitSSH(ctx); err != nil {
		return nil, err
	}
	booted := time.Since(start)

	c.cfg.Log("cluster: configuring guest node %s (booted in %s)", g.name, booted.Round(time.Second))
	files, err := g.issueFiles()
	if err != nil {
		return nil, err
	}
	if err := g.WriteFiles(ctx, files); err != nil {
		return nil, err
	}
	if _, err := g.Run(ctx, "systemctl daemon-reload && systemctl start "+guestProxyUnit+".socket containerd.service"+
		" && for i in $(seq 120); do ctr version >/dev/null 2>&1 && exit 0; sleep 0.5; done; echo containerd does not answer >&2; exit 1"); err != nil {
		return nil, err
	}
	// The chart's one DaemonSet names the host node's containerd socket;
	// the guest's answers at the same path too.
	if _, err := g.Run(ctx, "mkdir -p "+shellQuote(filepath.Dir(c.ContainerdSocket()))+" && ln -sfn "+guestContainerdSock+" "+shellQuote(c.ContainerdSocket())); err != nil {
		return nil, err
	}
	if err := g.ImportImages(ctx, cfg.Images...); err != nil {
		return nil, err
	}
	c.cfg.Log("cluster: starting kubelet on guest node %s", g.name)
	if _, err := g.Run(ctx, "systemctl start kubelet.service"); err != nil {
		return nil, err
	}
	deadline, _ := ctx.Deadline()
	if err := c.waitNodeReady(ctx, g.name, time.Until(deadline)); err != nil {
		return nil, err
	}
	c.cfg.Log("cluster: guest node %s is Ready (%s after QEMU started, %s after boot)", g.name,
		time.Since(start).Round(time.Second), (time.Since(start) - booted).Round(time.Second))
	ok = true
	return g, nil
}

// boot starts QEMU and records it, with the host route and ports it uses.
func (g *GuestNode) boot() error {
	c := g.c
	port, err := freePort()
	if err != nil {
		return err
	}
	st := c.state.Guests[g.name]
	st.SSHPort = port
	st.HostRoute = GuestIP
	st.Forwards = map[int]int{}
	for _, gp := range g.cfg.Forward {
		if st.Forwards[gp], err = freePort(); err != nil {
			return err
		}
	}
	c.state.Guests[g.name] = st
	if err := c.save(); err != nil {
		return err
	}
	if out, err := exec.Command("ip", "route", "add", "local", GuestIP+"/32", "dev", "lo", "src", "127.0.0.1", "table", "local").CombinedOutput(); err != nil {
		return fmt.Errorf("routing the guest address %s to lo: %w: %s", GuestIP, err, out)
	}
	netdev := fmt.Sprintf("user,id=n0,net=%s,host=%s,hostfwd=tcp:127.0.0.1:%d-%s:22,hostfwd=tcp:%s:%d-%s:%d",
		guestNet, guestHostAddr, port, GuestIP, GuestIP, guestKubeletPort, GuestIP, guestKubeletPort)
	for gp, hp := range st.Forwards {
		netdev += fmt.Sprintf(",hostfwd=tcp:127.0.0.1:%d-%s:%d", hp, GuestIP, gp)
	}
	args := []string{
		"-name", "kubefair-" + g.name,
		"-accel", "tcg,thread=multi", "-smp", fmt.Sprint(g.cfg.CPUs), "-m", fmt.Sprint(g.cfg.MemoryMiB),
		"-nodefaults", "-display", "none", "-no-reboot", "-monitor", "none",
		"-kernel", g.cfg.Kernel,
		"-append", "root=/dev/vda rw console=ttyS0 net.ifnames=0 systemd.unified_cgroup_hierarchy=1 panic=-1",
		// snapshot=on: writes go to a temporary file, the cached image
		// stays as built.
		"-drive", "file=" + filepath.Join(g.cfg.ImageDir, "disk.img") + ",format=raw,if=virtio,snapshot=on,cache=unsafe",
		"-netdev", netdev, "-device", "virtio-net-pci,netdev=n0",
		"-serial", "file:" + g.SerialLog(),
	}
	log, err := os.OpenFile(c.logPath("guest-"+g.name+".qemu"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer log.Close()
	bin, _ := exec.LookPath("qemu-system-x86_64")
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting QEMU: %w", err)
	}
	c.started["guest-"+g.name] = cmd
	g.exited = make(chan struct{})
	go func() { g.exitErr = cmd.Wait(); close(g.exited) }()
	st.QEMU = component{PID: cmd.Process.Pid, Args: append([]string{bin}, args...)}
	c.state.Guests[g.name] = st
	return c.save()
}

// waitSSH waits until the guest's sshd answers (systemd has booted).
func (g *GuestNode) waitSSH(ctx context.Context) error {
	var last error
	for {
		select {
		case <-g.exited:
			// The error carries what tells why: Down removes the files.
			out, _ := os.ReadFile(g.c.logPath("guest-" + g.name + ".qemu"))
			console, _ := os.ReadFile(g.SerialLog())
			lines := strings.Split(strings.TrimSpace(string(console)), "\n")
			lines = lines[max(0, len(lines)-30):]
			return fmt.Errorf("QEMU of guest %s exited (%v): %q; the console's last lines:\n%s", g.name, g.exitErr, strings.TrimSpace(string(out)), strings.Join(lines, "\n"))
		default:
		}
		// Until the guest's network is up, QEMU accepts the connection and
		// ssh waits for a banner: try again soon.
		tctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		_, last = g.Run(tctx, "true")
		cancel()
		if last == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("guest %s: no ssh: %w (console in %s)", g.name, last, g.SerialLog())
		case <-time.After(2 * time.Second):
		}
	}
}

// issueFiles makes the node's kubelet certificate (system:node:<name> in
// system:nodes, from the cluster's CA) and kubeconfig, and every file the
// guest needs.
func (g *GuestNode) issueFiles() (map[string][]byte, error) {
	c := g.c
	if err := c.pki.loadCA(); err != nil {
		return nil, fmt.Errorf("the cluster's CA: %w", err)
	}
	id := kubeletIdentity(g.name)
	id.file = "guest-" + g.name + "-kubelet"
	if err := c.pki.issueClient(id); err != nil {
		return nil, err
	}
	kubeconfig, err := c.kubeconfig(id)
	if err != nil {
		return nil, err
	}
	kc, err := os.ReadFile(kubeconfig)
	if err != nil {
		return nil, err
	}
	ca, err := os.ReadFile(c.pki.path("ca.crt"))
	if err != nil {
		return nil, err
	}
	return g.configFiles(ca, kc), nil
}

// Stop ends the guest: its QEMU process, its route on the host, its Node
// object.
func (g *GuestNode) Stop(ctx context.Context) error {
	err := g.stop()
	if cl, cerr := g.c.client(); cerr == nil {
		node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: g.name}}
		err = errors.Join(err, client.IgnoreNotFound(cl.Delete(ctx, node)))
	}
	return err
}

// stop ends QEMU and removes the host route, and the guest from the state.
func (g *GuestNode) stop() error {
	c := g.c
	st, ok := c.state.Guests[g.name]
	if !ok {
		return nil
	}
	err := st.stop()
	delete(c.state.Guests, g.name)
	return errors.Join(err, c.save())
}

func (st guestState) stop() error {
	var errs []error
	if st.QEMU.PID != 0 {
		errs = append(errs, stopPID(st.QEMU.PID, st.QEMU.Args[0]))
	}
	if st.HostRoute != "" {
		if out, _ := exec.Command("ip", "route", "show", "table", "local", st.HostRoute).Output(); len(out) > 0 {
			if out, err := exec.Command("ip", "route", "delete", "local", st.HostRoute+"/32", "dev", "lo", "table", "local").CombinedOutput(); err != nil {
				errs = append(errs, fmt.Errorf("removing the route of the guest address %s: %w: %s", st.HostRoute, err, out))
			}
		}
	}
	return errors.Join(errs...)
}

// stopGuests ends every guest of the cluster (Down).
func (c *Cluster) stopGuests() error {
	var errs []error
	for name, st := range c.state.Guests {
		if err := st.stop(); err != nil {
			errs = append(errs, fmt.Errorf("guest %s: %w", name, err))
		}
	}
	return errors.Join(errs...)
}

// buildImage builds an image from this tree into the cache (as
// ImportImages does) and returns its tarball.
func buildImage(img images.Image) (string, error) {
	dir := filepath.Join(kubeapi.CacheDir(), "images")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	tarball := filepath.Join(dir, filepath.Base(img.Package)+".tar")
	return tarball, img.Build(kubeapi.RepoRoot(), tarball)
}

// freePort is a TCP port free on 127.0.0.1 now.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// shellQuote quotes s for the guest's shell.
func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }
