package discovery

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	containersapi "github.com/containerd/containerd/api/services/containers/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"

	"github.com/kubefair/kubefair/node-agent/cgroupfs"
)

// The CRI labels kubelet's runtime puts on every container.
const (
	LabelPodUID       = "io.kubernetes.pod.uid"
	LabelPodNamespace = "io.kubernetes.pod.namespace"
	LabelPodName      = "io.kubernetes.pod.name"
	LabelContainer    = "io.kubernetes.container.name"
	// labelContainerType is "sandbox" for a pod's pause container.
	labelContainerType = "io.cri-containerd.kind"
)

// containerd lists containers through containerd's Containers service
// (gRPC, in one namespace — k8s.io for kubelet's), reading each one's CRI
// labels and, from its OCI spec, the cgroup path; PIDs come from that
// cgroup's cgroup.procs, so a container whose processes come and go is
// always read as it is now.
type containerd struct {
	conn      *grpc.ClientConn
	client    containersapi.ContainersClient
	namespace string
	cgroups   *cgroupfs.Hierarchy // maps runtime cgroup paths, reads cgroup.procs
}

// NewContainerd connects to containerd's socket. The connection is made
// lazily: a containerd that is down (or restarting) makes Containers fail,
// and the agent falls back to the cgroup tree until it is back.
func NewContainerd(address, namespace string, cgroups *cgroupfs.Hierarchy) (Source, error) {
	conn, err := grpc.NewClient("unix://"+address, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil, fmt.Errorf("containerd at %s: %w", address, err)
	}
	return &containerd{conn: conn, client: containersapi.NewContainersClient(conn), namespace: namespace, cgroups: cgroups}, nil
}

// runtimeSpec is the part of the OCI runtime spec discovery reads.
type runtimeSpec struct {
	Linux *struct {
		CgroupsPath string `json:"cgroupsPath"`
	} `json:"linux"`
}

func (c *containerd) Containers(ctx context.Context) ([]Container, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	ctx = metadata.AppendToOutgoingContext(ctx, "containerd-namespace", c.namespace)
	resp, err := c.client.List(ctx, &containersapi.ListContainersRequest{})
	if err != nil {
		return nil, fmt.Errorf("listing containers in containerd namespace %s: %w", c.namespace, err)
	}
	var out []Container
	for _, ct := range resp.Containers {
		uid := ct.Labels[LabelPodUID]
		if uid == "" {
			continue // not a Kubernetes container
		}
		cont := Container{
			ID: ct.ID, PodUID: uid, PodNamespace: ct.Labels[LabelPodNamespace], PodName: ct.Labels[LabelPodName],
			Name: ct.Labels[LabelContainer], Sandbox: ct.Labels[labelContainerType] == "sandbox",
		}
		if ct.Spec != nil {
			var spec runtimeSpec
			if err := json.Unmarshal(ct.Spec.GetValue(), &spec); err == nil && spec.Linux != nil {
				if cg, ok := c.cgroups.FromRuntime(spec.Linux.CgroupsPath); ok {
					cont.Cgroup = cg
					cont.PIDs, _ = c.cgroups.Procs(cg)
				}
			}
		}
		out = append(out, cont)
	}
	return out, nil
}

// Close ends the connection.
func (c *containerd) Close() error { return c.conn.Close() }
