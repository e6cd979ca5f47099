package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"testing"
	"time"

	containersapi "github.com/containerd/containerd/api/services/containers/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/types/known/anypb"
	corev1 "k8s.io/api/core/v1"

	"github.com/kubefair/kubefair/node-agent/discovery"
	"github.com/kubefair/kubefair/test/harness/containerd"
)

// createCRIContainer registers a container in containerd's k8s.io namespace
// the way the CRI plugin does for kubelet: CRI labels, and an OCI spec whose
// cgroupsPath is kubelet's cgroupfs path for it.
func createCRIContainer(t *testing.T, address, id string, pod *corev1.Pod, name, kind, cgroup string) {
	t.Helper()
	conn, err := grpc.NewClient("unix://"+address, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	spec, _ := json.Marshal(map[string]any{"ociVersion": "1.0.2", "linux": map[string]any{"cgroupsPath": cgroup}})
	ctx := metadata.AppendToOutgoingContext(context.Background(), "containerd-namespace", "k8s.io")
	_, err = containersapi.NewContainersClient(conn).Create(ctx, &containersapi.CreateContainerRequest{Container: &containersapi.Container{
		ID: id,
		Labels: map[string]string{
			discovery.LabelPodUID: string(pod.UID), discovery.LabelPodNamespace: pod.Namespace, discovery.LabelPodName: pod.Name,
			discovery.LabelContainer: name, "io.cri-containerd.kind": kind,
		},
		Image:   "kubefair/burner:test",
		Runtime: &containersapi.Container_Runtime{Name: "io.containerd.runc.v2"},
		Spec:    &anypb.Any{TypeUrl: "types.containerd.io/opencontainers/runtime-spec/1/Spec", Value: spec},
	}})
	if err != nil {
		t.Fatalf("creating container %s in containerd: %v", id, err)
	}
}

// TestContainerdDiscovery: the agent finds pods through a real containerd's
// API (CRI labels, cgroup paths from the OCI spec, PIDs from the cgroups),
// weighs them, and keeps working on the cgroup tree while containerd is
// down, then picks containerd up again after its restart.
func TestContainerdDiscovery(t *testing.T) {
	w := newWorld(t)
	w.addTenant("ct", 2, 2, 1)
	w.addTenant("cu", 1, 1, 1)

	dir, err := shortTempDir(t)
	if err != nil {
		t.Fatal(err)
	}
	d, err := containerd.Start(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.Stop() })

	var pods corev1.PodList
	if err := w.k8s.List(context.Background(), &pods); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{} // pod uid → app container cgroup
	for i := range pods.Items {
		p := &pods.Items[i]
		if p.Namespace != "ct" && p.Namespace != "cu" {
			continue
		}
		cg := "/kubepods/burstable/pod" + string(p.UID) + "/ctr-" + string(p.UID)[:8]
		createCRIContainer(t, d.Address, "app-"+string(p.UID), p, "burner", "container", cg)
		createCRIContainer(t, d.Address, "sandbox-"+string(p.UID), p, "", "sandbox", path.Dir(cg)+"/pause-"+string(p.UID)[:8])
		want[string(p.UID)] = cg
	}
	if len(want) != 3 {
		t.Fatalf("want 3 pods, found %d", len(want))
	}

	src, err := discovery.NewContainerd(d.Address, "k8s.io", filepath.Join(w.tree.Root, "cpu"))
	if err != nil {
		t.Fatal(err)
	}
	found, err := src.Containers(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	apps := 0
	for _, c := range found {
		if c.Sandbox {
			continue
		}
		apps++
		if want[c.PodUID] != c.Cgroup || c.Name != "burner" || len(c.PIDs) != 1 || c.PodNamespace == "" {
			t.Errorf("discovered %+v, want cgroup %s with one burner PID", c, want[c.PodUID])
		}
	}
	if apps != 3 || len(found) != 6 {
		t.Fatalf("discovered %d containers (%d apps), want 6 (3 apps, 3 sandboxes): %+v", len(found), apps, found)
	}

	w.source = src
	a, _, ctx, _ := w.newAgent(time.Second)
	planPods := func() []string {
		t.Helper()
		time.Sleep(300 * time.Millisecond)
		s, err := a.Step(ctx, time.Now())
		if err != nil {
			t.Fatalf("step: %v", err)
		}
		var cgs []string
		for _, p := range s.Plan.Pods {
			cgs = append(cgs, p.Cgroup)
		}
		return cgs
	}
	waitFor(t, "the agent weighs the three pods found through containerd", func() bool { return len(planPods()) == 3 })
	for _, cg := range planPods() {
		if path.Dir(want[podUID(cg)]) != cg {
			t.Errorf("planned %s, not a discovered pod cgroup", cg)
		}
	}

	// containerd goes away: the agent walks the cgroup tree instead.
	if err := d.Stop(); err != nil {
		t.Fatal(err)
	}
	if _, err := src.Containers(context.Background()); err == nil {
		t.Fatal("discovery did not notice containerd is down")
	}
	if n := len(planPods()); n != 3 {
		t.Fatalf("with containerd down the agent planned %d pods, want 3", n)
	}
	// ... and uses containerd again once it is back, with its containers.
	if d, err = containerd.Start(dir); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "containerd back with its containers", func() bool {
		c, err := src.Containers(context.Background())
		return err == nil && len(c) == 6
	})
	if n := len(planPods()); n != 3 {
		t.Fatalf("after containerd restarted the agent planned %d pods, want 3", n)
	}
}

func podUID(cgroup string) string { return path.Base(cgroup)[len("pod"):] }

// shortTempDir keeps the containerd socket path under the 108-byte limit.
func shortTempDir(t *testing.T) (string, error) {
	dir := filepath.Join("/tmp", fmt.Sprintf("kf-ctrd-%d", time.Now().UnixNano()%1e9))
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	return dir, os.MkdirAll(dir, 0o700)
}
