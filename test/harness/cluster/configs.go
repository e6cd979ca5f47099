package cluster

import (
	"encoding/base64"
	"fmt"
	"os"
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

// containerdConfig: containerd with everything below the cluster's
// directory, the CRI plugin on cgroupfs, our own pause image (no registry),
// CNI from Debian's plugins with the config below.
func (c *Cluster) containerdConfig() string {
	return fmt.Sprintf(`version = 2
root = %q
state = %q
[grpc]
  address = %q
[ttrpc]
  address = %q
[debug]
  address = %q
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = %q
  # This VM denies CAP_SYS_RESOURCE even to root: without this every
  # sandbox fails with "can't get final child's PID from pipe: EOF".
  restrict_oom_score_adj = true
  netns_mounts_under_state_dir = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = %q
    conf_dir = %q
`, c.path("containerd", "root"), c.path("containerd", "state"), c.ContainerdSocket(), c.ContainerdSocket()+".ttrpc",
		c.path("containerd", "debug.sock"), c.cfg.PauseImage, cniBinDir, c.path("cni", "net.d"))
}

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

// kubeletConfig: cgroupfs on this machine's cgroup v1, on loopback, no
// image garbage collection (images are imported, not pulled), no host
// iptables chains, no eviction on this machine's disk use.
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
