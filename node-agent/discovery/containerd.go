package discovery

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	containersapi "github.com/containerd/containerd/api/services/containers/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/kubefair/kubefair/node-agent/cgroupfs"
)

// The CRI labels kubelet's runtime puts on every container that the agent
// reads.
const (
	LabelPodUID    = "io.kubernetes.pod.uid"
	LabelContainer = "io.kubernetes.container.name"
)

// containerd lists containers through containerd's Containers service
// (gRPC, in one namespace — k8s.io for kubelet's), reading each one's CRI
// labels and, from its OCI spec, the cgroup path.
type containerd struct {
	conn      *grpc.ClientConn
	client    containersapi.ContainersClient
	namespace string
	cgroups   *cgroupfs.Hierarchy // maps runtime cgroup paths
	// cgroupOf caches each container's cgroup from its spec: the CRI
	// plugin never changes a container's cgroupsPath, and decoding every
	// spec every period would be most of discovery's cost.
	cgroupOf map[string]string
}

// NewContainerd connects to containerd's socket. The connection is made
// lazily: a containerd that is down (or restarting) makes Containers fail,
// and the agent falls back to the cgroup tree until it is back.
func NewContainerd(address, namespace string, cgroups *cgroupfs.Hierarchy) (Source, error) {
	conn, err := grpc.NewClient("unix://"+address, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil, fmt.Errorf("containerd at %s: %w", address, err)
	}
	return &containerd{conn: conn, client: containersapi.NewContainersClient(conn), namespace: namespace, cgroups: cgroups, cgroupOf: map[string]string{}}, nil
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
	listed, err := c.list(ctx)
	if err != nil {
		return nil, fmt.Errorf("listing containers in containerd namespace %s: %w", c.namespace, err)
	}
	var out []Container
	seen := make(map[string]string, len(listed))
	for _, ct := range listed {
		uid := ct.Labels[LabelPodUID]
		if uid == "" {
			continue // not a Kubernetes container
		}
		cont := Container{
			ID: ct.ID, PodUID: uid, Name: ct.Labels[LabelContainer],
		}
		cg, known := c.cgroupOf[ct.ID]
		if !known {
			cg = c.cgroupFromSpec(ct)
		}
		seen[ct.ID] = cg
		cont.Cgroup = cg
		out = append(out, cont)
	}
	c.cgroupOf = seen
	return out, nil
}

// list streams the containers one message each: List answers in one
// message, which with each container's whole OCI spec (about 10 KB with
// the runtime's seccomp profile) passes gRPC's 4 MiB limit at a few hundred
// containers. A containerd without ListStream is asked with List.
func (c *containerd) list(ctx context.Context) ([]*containersapi.Container, error) {
	stream, err := c.client.ListStream(ctx, &containersapi.ListContainersRequest{})
	if err != nil {
		return nil, err
	}
	var out []*containersapi.Container
	for {
		m, err := stream.Recv()
		switch {
		case errors.Is(err, io.EOF):
			return out, nil
		case status.Code(err) == codes.Unimplemented:
			resp, err := c.client.List(ctx, &containersapi.ListContainersRequest{})
			if err != nil {
				return nil, err
			}
			return resp.Containers, nil
		case err != nil:
			return nil, err
		}
		out = append(out, m.Container)
	}
}

// cgroupFromSpec is the container's cgroup in the agent's hierarchy, from
// its OCI spec; "" when it has none there.
func (c *containerd) cgroupFromSpec(ct *containersapi.Container) string {
	var spec runtimeSpec
	if ct.Spec == nil || json.Unmarshal(ct.Spec.GetValue(), &spec) != nil || spec.Linux == nil {
		return ""
	}
	cg, _ := c.cgroups.FromRuntime(spec.Linux.CgroupsPath)
	return cg
}

// Close ends the connection.
func (c *containerd) Close() error { return c.conn.Close() }
