package cluster

import (
	"encoding/base64"
	"fmt"
	"os"

	"github.com/kubefair/kubefair/test/harness/containerd"
)

// kubeconfig writes a kubeconfig for one client identity with its
// certificate embedded, so the file alone is enough.
func (c *Cluster) kubeconfig(id identity) (string, error) {
	read := func(name string) (string, error) {
		b, err := os.ReadFile(c.pki.path(name))
		return base64.StdEncoding.EncodeToString(b), err
	}
	ca, err := read("ca.crt")
	if err != nil {
		return "", err
	}
	crt, err := read(id.file + ".crt")
	if err != nil {
		return "", err
	}
	key, err := read(id.file + ".key")
	if err != nil {
		return "", err
	}
	out := c.path(id.file + ".kubeconfig")
	return out, os.WriteFile(out, []byte(fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: kubefair-local
  cluster:
    server: %s
    certificate-authority-data: %s
users:
- name: %s
  user:
    client-certificate-data: %s
    client-key-data: %s
contexts:
- name: kubefair-local
  context: {cluster: kubefair-local, user: %s}
current-context: kubefair-local
`, c.APIServerURL(), ca, id.user, crt, key, id.user)), 0o600)
}

// containerdConfig: containerd 2.x (config version 3, whose CRI plugin
// ids are io.containerd.cri.v1.images and io.containerd.cri.v1.runtime)
// with everything below the cluster's directory (the shims' sockets and
// runc's state too, whose defaults are below /run/containerd), the CRI
// plugin on cgroupfs (this host's cgroup v1), our own pause image (no
// registry), the shim, runc and the CNI plugins hack/build-runtime.sh
// built, and the CNI config below. NRI is off: nothing here uses it, and
// its socket is a host path.
func (c *Cluster) containerdConfig() string {
	return fmt.Sprintf(`version = 3
root = %q
state = %q
[grpc]
  address = %q
[ttrpc]
  address = %q
[debug]
  address = %q
[plugins]
  [plugins.'io.containerd.internal.v1.opt']
    path = %q
  [plugins.'io.containerd.nri.v1.nri']
    disable = true
  [plugins.'io.containerd.shim.v1.manager']
    socket_dir = %q
  [plugins.'io.containerd.cri.v1.images']
    snapshotter = 'overlayfs'
    [plugins.'io.containerd.cri.v1.images'.pinned_images]
      sandbox = %q
  [plugins.'io.containerd.cri.v1.runtime']
    # This VM denies CAP_SYS_RESOURCE even to root: without this every
    # sandbox fails with "can't get final child's PID from pipe: EOF".
    restrict_oom_score_adj = true
    netns_mounts_under_state_dir = true
    [plugins.'io.containerd.cri.v1.runtime'.containerd]
      default_runtime_name = 'runc'
      [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc]
        runtime_type = 'io.containerd.runc.v2'
        runtime_path = %q
        [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options]
          BinaryName = %q
          Root = %q
          SystemdCgroup = false
    [plugins.'io.containerd.cri.v1.runtime'.cni]
      bin_dirs = [%q]
      conf_dir = %q
`, c.path("containerd", "root"), c.path("containerd", "state"), c.ContainerdSocket(), c.ContainerdSocket()+".ttrpc",
		c.path("containerd", "debug.sock"), c.path("containerd", "opt"), c.shimSocketDir(), c.cfg.PauseImage,
		containerd.Binary("containerd-shim-runc-v2"), containerd.Binary("runc"), c.path("containerd", "runc"),
		containerd.CNIDir(), c.path("cni", "net.d"))
}

// shimSocketDir holds the runtime shims' sockets; containerd takes at most
// 42 characters for it (a socket's name is 64 more).
func (c *Cluster) shimSocketDir() string { return c.path("containerd", "s") }

// cniConfig: one bridge with host-local addresses from the pod range (the
// benchmarking range, never a private one), no masquerading (nothing
// leaves the node).
func (c *Cluster) cniConfig() string {
	return fmt.Sprintf(`{
  "cniVersion": "0.4.0",
  "name": "kubefair-local",
  "plugins": [
    {
      "type": "bridge",
      "bridge": %q,
      "isGateway": true,
      "ipMasq": false,
      "ipam": {
        "type": "host-local",
        "dataDir": %q,
        "ranges": [[{"subnet": %q}]],
        "routes": [{"dst": "0.0.0.0/0"}]
      }
    },
    {"type": "loopback"}
  ]
}
`, c.cfg.Bridge, c.path("cni", "ipam"), c.cfg.PodCIDR)
}

// kubeletConfig: on loopback, no image garbage collection (images are
// imported, not pulled), no host iptables chains, no eviction on this
// machine's disk use, the cgroupfs driver on this machine's cgroup v1.
// cgroup v1 is the legacy path, kept because this host's init binds the cpu
// controller to it: kubelet refuses cgroup v1 unless failCgroupV1 is false,
// and containerd (since 2.2) and runc (since 1.4) deprecate it.
func (c *Cluster) kubeletConfig() string {
	return fmt.Sprintf(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: %s
port: %d
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: %d
cgroupDriver: cgroupfs
failCgroupV1: false
failSwapOn: false
makeIPTablesUtilChains: false
containerRuntimeEndpoint: unix://%s
podLogsDir: %s
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard:
  memory.available: "100Mi"
  nodefs.available: "1%%"
  imagefs.available: "1%%"
clusterDomain: cluster.local
resolvConf: /etc/resolv.conf
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: %s}
authorization:
  mode: Webhook
serializeImagePulls: false
`, c.cfg.NodeIP, c.cfg.KubeletPort, c.cfg.KubeletPort+8, c.ContainerdSocket(), c.path("pod-logs"), c.pki.path("ca.crt"))
}
