package cluster

import (
	"fmt"
	"sort"
	"strings"
)

// Paths inside the guest node's image (hack/build-node-image.sh,
// hack/node-image): its units read these files, which AddGuestNode writes.
const (
	guestCA              = "/etc/kubernetes/pki/ca.crt"
	guestKubeconfig      = "/etc/kubernetes/kubelet.kubeconfig"
	guestKubeletConfig   = "/etc/kubernetes/kubelet-config.yaml"
	guestKubeletEnv      = "/etc/kubernetes/kubelet.env"
	guestContainerd      = "/etc/containerd/config.toml"
	guestContainerdSock  = "/run/containerd/containerd.sock"
	guestCNIConfig       = "/etc/cni/net.d/10-kubefair.conflist"
	guestProxyUnit       = "kube-apiserver-proxy"
	guestSocketProxyd    = "/usr/lib/systemd/systemd-socket-proxyd"
	guestKubeletPort     = 10250
	guestKubeletHealthz  = 10248
	guestPodBridge       = "kubefair0"
	guestProxyUnitSocket = "/etc/systemd/system/" + guestProxyUnit + ".socket"
	guestProxyUnitServ   = "/etc/systemd/system/" + guestProxyUnit + ".service"
)

// configFiles are the files AddGuestNode writes into the guest, by path.
func (g *GuestNode) configFiles(ca, kubeconfig []byte) map[string][]byte {
	return map[string][]byte{
		guestCA:              ca,
		guestKubeconfig:      kubeconfig,
		guestKubeletConfig:   []byte(g.kubeletConfig()),
		guestKubeletEnv:      []byte(g.kubeletEnv()),
		guestContainerd:      []byte(g.containerdConfig()),
		guestCNIConfig:       []byte(g.cniConfig()),
		guestProxyUnitSocket: []byte(g.proxySocket()),
		guestProxyUnitServ:   []byte(g.proxyService()),
	}
}

// proxySocket: the API server at 127.0.0.1:<its port> inside the guest as
// on the host, so kubeconfigs and the chart's apiServerOverride of
// 127.0.0.1 work for kubelet and host-network pods on both nodes.
func (g *GuestNode) proxySocket() string {
	return fmt.Sprintf(`[Unit]
Description=The cluster's API server on 127.0.0.1:%[1]d, as on the host

[Socket]
ListenStream=127.0.0.1:%[1]d

[Install]
WantedBy=sockets.target
`, g.c.cfg.APIPort)
}

// proxyService forwards to the host's loopback, which QEMU's user network
// shows the guest at guestHostAddr.
func (g *GuestNode) proxyService() string {
	return fmt.Sprintf(`[Unit]
Description=Forwards 127.0.0.1:%[1]d to the API server on the host
Requires=%[3]s.socket
After=%[3]s.socket

[Service]
ExecStart=%[4]s %[2]s:%[1]d
`, g.c.cfg.APIPort, guestHostAddr, guestProxyUnit, guestSocketProxyd)
}

// containerdConfig: containerd 2 (configuration version 3) in its default
// places, runc with systemd's cgroup driver, kubefair's pause image pinned
// as the sandbox image (no registry), CNI from the image's plugins.
func (g *GuestNode) containerdConfig() string {
	return fmt.Sprintf(`version = 3
root = '/var/lib/containerd'
state = '/run/containerd'

[grpc]
  address = '%s'

[plugins.'io.containerd.cri.v1.images']
  snapshotter = 'overlayfs'
  [plugins.'io.containerd.cri.v1.images'.pinned_images]
    sandbox = '%s'

[plugins.'io.containerd.cri.v1.runtime']
  [plugins.'io.containerd.cri.v1.runtime'.containerd]
    default_runtime_name = 'runc'
    [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc]
      runtime_type = 'io.containerd.runc.v2'
      [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options]
        BinaryName = '/usr/local/bin/runc'
        SystemdCgroup = true
  [plugins.'io.containerd.cri.v1.runtime'.cni]
    bin_dirs = ['/opt/cni/bin']
    conf_dir = '/etc/cni/net.d'
`, guestContainerdSock, g.c.cfg.PauseImage)
}

// cniConfig: a bridge with host-local addresses from the node's own pod
// range (outside the private ranges), no masquerading. The guest has no
// default route: pods reach the node and each other, nothing else.
func (g *GuestNode) cniConfig() string {
	return fmt.Sprintf(`{
  "cniVersion": "1.0.0",
  "name": "kubefair-guest",
  "plugins": [
    {
      "type": "bridge",
      "bridge": %q,
      "isGateway": true,
      "ipMasq": false,
      "ipam": {
        "type": "host-local",
        "ranges": [[{"subnet": %q}]],
        "routes": [{"dst": "0.0.0.0/0"}]
      }
    }
  ]
}
`, guestPodBridge, g.cfg.PodCIDR)
}

// kubeletConfig: like the host kubelet's (no image garbage collection,
// lenient eviction, webhook authentication and authorization, no iptables
// chains), on cgroup v2 with systemd's driver.
func (g *GuestNode) kubeletConfig() string {
	taints := ""
	if len(g.cfg.Taints) > 0 {
		taints = "registerWithTaints:\n"
		for _, t := range g.cfg.Taints {
			taints += fmt.Sprintf("- {key: %q, value: %q, effect: %q}\n", t.Key, t.Value, t.Effect)
		}
	}
	return fmt.Sprintf(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: %s
port: %d
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: %d
cgroupDriver: systemd
failSwapOn: false
makeIPTablesUtilChains: false
containerRuntimeEndpoint: unix://%s
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
# kubelet 1.36+ reports a pod cgroup's weight back as the pod's CPU request
# (status.resources), which the scheduler counts; kubefair then does not
# scale weights up for resolution, and on cgroup v2 a 50m pod's weight (2)
# leaves too little to split. Off, as kubefair recommends for such nodes.
featureGates:
  InPlacePodLevelResourcesVerticalScaling: false
%s`, GuestIP, guestKubeletPort, guestKubeletHealthz, guestContainerdSock, guestCA, taints)
}

// kubeletEnv: the arguments kubelet.service passes.
func (g *GuestNode) kubeletEnv() string {
	args := []string{
		"--config=" + guestKubeletConfig, "--kubeconfig=" + guestKubeconfig,
		"--hostname-override=" + g.name, "--node-ip=" + GuestIP, "--v=1",
	}
	if len(g.cfg.Labels) > 0 {
		var labels []string
		for k, v := range g.cfg.Labels {
			labels = append(labels, k+"="+v)
		}
		sort.Strings(labels)
		args = append(args, "--node-labels="+strings.Join(labels, ","))
	}
	return fmt.Sprintf("KUBELET_ARGS=%q\n", strings.Join(args, " "))
}
