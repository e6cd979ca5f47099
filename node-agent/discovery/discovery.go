// Package discovery finds the containers running on this node, the pods they
// belong to, their cgroups and their processes.
package discovery

import "context"

// Container is one container of a pod on this node, as the runtime knows it.
type Container struct {
	// ID is the runtime's container id (the pod status's containerID
	// without the "containerd://" prefix).
	ID string
	// PodUID is the CRI label io.kubernetes.pod.uid.
	PodUID string
	// Name is io.kubernetes.container.name; empty for a pod sandbox.
	Name string
	// Cgroup is the container's cgroup in the agent's hierarchy (e.g.
	// "/kubepods/burstable/pod<uid>/<id>"), mapped from the path the runtime
	// set. Its processes are read from the cgroup when they are needed.
	Cgroup string
}

// Source lists the containers running on this node.
type Source interface {
	Containers(ctx context.Context) ([]Container, error)
}
