package agent

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	containersapi "github.com/containerd/containerd/api/services/containers/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kubefair/kubefair/node-agent/discovery"
	"github.com/kubefair/kubefair/test/harness/containerd"
	"github.com/kubefair/kubefair/test/harness/images"
	"github.com/kubefair/kubefair/test/harness/kubeapi"
	"github.com/kubefair/kubefair/test/harness/podcgroups"
)

// Container shares kubelet gives a pod's containers: a burstable container
// requesting 100m, and the pause sandbox.
const (
	appShares     = podcgroups.KubeletShares
	sandboxShares = 2
)

// runPod does what kubelet and containerd's CRI plugin do for a pod, with
// the real runtime: kubelet's pod cgroup, then a pause sandbox and a burner
// container created and started by runc through containerd's API, with the
// CRI labels and the cgroupfs paths kubelet gives them (below the test's
// kubelet cgroup root).
func (w *world) runPod(pod *corev1.Pod, threads int) {
	uid := string(pod.UID)
	if err := w.tree.AddPodCgroup(uid); err != nil {
		w.t.Fatal(err)
	}
	podCgroup := w.tree.KubeletRoot + podcgroups.PodCgroup(uid)
	sandbox, app := containerID(), containerID()
	for _, c := range []containerd.Container{
		{ID: sandbox, Image: images.Pause.Ref, Args: []string{images.Pause.Binary()}, Labels: criLabels(pod, "sandbox", ""),
			CgroupsPath: podCgroup + "/" + sandbox, CPUShares: sandboxShares},
		{ID: app, Image: images.Burner.Ref, Args: []string{images.Burner.Binary(), "-threads", strconv.Itoa(threads)},
			Labels: criLabels(pod, "container", "burner"), CgroupsPath: podCgroup + "/" + app, CPUShares: appShares},
	} {
		pid, err := w.runtime.Run(context.Background(), c)
		if err != nil {
			w.t.Fatal(err)
		}
		w.t.Cleanup(func() {
			if err := w.runtime.Remove(context.Background(), c.ID); err != nil {
				w.t.Errorf("removing container: %v", err)
			}
		})
		w.started[c.ID] = pid
	}
}

// criLabels are the labels containerd's CRI plugin puts on a pod's
// container (kind "container") or sandbox (kind "sandbox", no name).
func criLabels(pod *corev1.Pod, kind, name string) map[string]string {
	l := map[string]string{discovery.LabelPodUID: string(pod.UID), "io.kubernetes.pod.namespace": pod.Namespace,
		"io.kubernetes.pod.name": pod.Name, "io.cri-containerd.kind": kind}
	if name != "" {
		l[discovery.LabelContainer] = name
	}
	return l
}

// createCRIContainer registers a container in containerd's k8s.io
// namespace as the CRI plugin holds it between CreateContainer and
// StartContainer: CRI labels, kubelet's cgroup path in its OCI spec, no
// task (the test runs the processes in the cgroups itself).
func createCRIContainer(t *testing.T, address, id string, pod *corev1.Pod, name, kind, cgroup string) {
	t.Helper()
	image := images.Burner.Ref
	if kind == "sandbox" {
		image = images.Pause.Ref
	}
	d := &containerd.Daemon{Address: address}
	if err := d.Register(context.Background(), containerd.Container{ID: id, Image: image, Labels: criLabels(pod, kind, name), CgroupsPath: cgroup}); err != nil {
		t.Fatal(err)
	}
}

// containerID is a container id in the CRI plugin's form: 64 hex digits.
func containerID() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// TestRuncContainers: pods run as real containers — a locally built
// burner image imported into a private containerd, pause sandboxes, runc
// tasks in kubelet's cgroup paths. The agent discovers them through
// containerd's API, classifies, weighs and measures them: a tenant with one
// (two-thread) container and a tenant with four single-thread containers,
// weights 1:1, reach half each within 2 points, where stock's equal pod
// shares give them 1:4. With containerd down (its containers keep running
// in their shims) the agent walks the cgroup tree and keeps weighing them,
// and picks containerd up again after its restart.
func TestRuncContainers(t *testing.T) {
	w := newWorld(t)
	d, dir := startContainerd(t)
	for _, img := range []images.Image{images.Burner, images.Pause} {
		tarball := filepath.Join(dir, path.Base(img.Package)+".tar")
		if err := img.Build(kubeapi.RepoRoot(), tarball); err != nil {
			t.Fatal(err)
		}
		if err := d.Import(tarball); err != nil {
			t.Fatal(err)
		}
	}
	w.runtime, w.started = d, map[string]int{}
	w.addTenant("solo", 1, 1, 2)
	w.addTenant("quad", 1, 4, 1)

	// Discovery: every container with its pod, kubelet's cgroup and the PID runc started.
	src, err := discovery.NewContainerd(d.Address, containerd.Namespace, w.hierarchy())
	if err != nil {
		t.Fatal(err)
	}
	h := w.hierarchy()
	checkDiscovered := func() {
		t.Helper()
		found, err := src.Containers(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if len(found) != 10 {
			t.Fatalf("discovered %d containers, want 10 (5 sandboxes, 5 burners): %+v", len(found), found)
		}
		burners := 0
		for _, c := range found {
			pod := podcgroups.PodCgroup(c.PodUID)
			pids, err := h.AppendProcs(nil, c.Cgroup)
			if c.Name == "burner" {
				burners++
			}
			if c.Cgroup != pod+"/"+c.ID || !slices.Contains(slices.Concat(w.pods["solo"], w.pods["quad"]), pod) || (c.Name != "" && c.Name != "burner") ||
				err != nil || !slices.Equal(pids, []int{w.started[c.ID]}) {
				t.Errorf("discovered %+v with processes %v (%v); want cgroup %s/%s holding PID %d", c, pids, err, pod, c.ID, w.started[c.ID])
			}
		}
		if burners != 5 {
			t.Errorf("discovered %d burner containers, want 5 (the others sandboxes, unnamed)", burners)
		}
	}
	checkDiscovered()

	// Stock's equal pod shares give the tenants 1:4; the agent, finding
	// the containers through containerd, weighs their pods 4:1. What such
	// weights achieve over long windows is the greedy scenario's and the
	// real cluster's to measure (TestGreedyTenantsFollowWeights, the e2e
	// suites' runc pods under kubelet): here one 2-s window each way.
	entitled := w.entitled(map[string]int32{"solo": 1, "quad": 1})
	if stockErr := maxErrorPoints(entitled, w.shares(2*time.Second)); stockErr < 10 {
		t.Errorf("stock's error only %.1f points: the pods do not contend as intended", stockErr)
	}
	w.startAgent(time.Second)
	w.settle(entitled) // a 2-s window within 2 points
	soloShares, _ := w.tree.Shares(w.pods["solo"][0])
	quadShares, _ := w.tree.Shares(w.pods["quad"][0])
	if soloShares < 2*quadShares {
		t.Errorf("solo's pod has %d shares, quad's %d: the agent did not weigh the containers' pods", soloShares, quadShares)
	}

	// containerd goes away; runc's containers keep running in their shims.
	if err := d.Halt(); err != nil {
		t.Fatal(err)
	}
	if _, err := src.Containers(context.Background()); err == nil {
		t.Fatal("discovery did not notice containerd is down")
	}
	// The agent walks the cgroup tree meanwhile: someone else's rewrite is undone.
	if err := w.tree.WriteShares(w.pods["solo"][0], podcgroups.KubeletShares); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the agent to weigh solo's pod again with containerd down", func() bool {
		s, _ := w.tree.Shares(w.pods["solo"][0])
		return s != podcgroups.KubeletShares
	})
	if err := d.Restart(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "containerd back", func() bool { _, err := src.Containers(context.Background()); return err == nil })
	checkDiscovered()
}

// shortTempDir keeps the containerd socket path under the 108-byte limit.
// startContainerd starts a private containerd in a short directory of its
// own (also returned, for the test's files), stopped when the test ends.
func startContainerd(t testing.TB) (*containerd.Daemon, string) {
	t.Helper()
	dir, err := shortTempDir(t)
	if err != nil {
		t.Fatal(err)
	}
	d, err := containerd.Start(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.Stop() })
	return d, dir
}

func shortTempDir(t testing.TB) (string, error) {
	dir := filepath.Join("/tmp", fmt.Sprintf("kf-ctrd-%d", time.Now().UnixNano()%1e9))
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	return dir, os.MkdirAll(dir, 0o700)
}

// TestDiscoveryOfManyContainers: 250 pods, 500 containers (a sandbox and a
// container each) whose OCI specs weigh what the CRI plugin's do with the
// runtime's seccomp profile (about 10 KB). containerd's List answers in one
// gRPC message, past the 4 MiB a client receives by default; discovery
// streams them and finds every one, with its pod and cgroup.
func TestDiscoveryOfManyContainers(t *testing.T) {
	const pods, specSize = 250, 10 << 10
	w := newWorld(t)
	d, _ := startContainerd(t)
	ctx := context.Background()
	padding := map[string]string{"kubefair.test/spec-size": strings.Repeat("x", specSize)}
	want := map[string]string{} // container id → cgroup
	for i := range pods {
		uid := fmt.Sprintf("%08d-0000-4000-8000-000000000000", i)
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "many", Name: fmt.Sprintf("p%d", i), UID: types.UID(uid)}}
		for _, c := range []struct{ kind, name string }{{"sandbox", ""}, {"container", "app"}} {
			id := containerID()
			cg := podcgroups.PodCgroup(uid) + "/" + id
			if err := d.Register(ctx, containerd.Container{ID: id, Image: images.Pause.Ref, Labels: criLabels(pod, c.kind, c.name),
				CgroupsPath: w.tree.KubeletRoot + cg, Annotations: padding}); err != nil {
				t.Fatal(err)
			}
			want[id] = cg
		}
	}

	// The wall: one List of them all is refused.
	conn, err := grpc.NewClient("unix://"+d.Address, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_, err = containersapi.NewContainersClient(conn).List(metadata.AppendToOutgoingContext(ctx, "containerd-namespace", containerd.Namespace), &containersapi.ListContainersRequest{})
	if status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("List of %d containers: %v, want ResourceExhausted (the specs are too small to test the wall)", len(want), err)
	}

	src, err := discovery.NewContainerd(d.Address, containerd.Namespace, w.hierarchy())
	if err != nil {
		t.Fatal(err)
	}
	found, err := src.Containers(ctx)
	if err != nil {
		t.Fatalf("discovering %d containers: %v", len(want), err)
	}
	if len(found) != len(want) {
		t.Fatalf("discovered %d containers, want %d", len(found), len(want))
	}
	for _, c := range found {
		if cg, ok := want[c.ID]; !ok || c.Cgroup != cg || path.Base(path.Dir(cg)) != "pod"+c.PodUID {
			t.Errorf("discovered %+v, want cgroup %s", c, cg)
		}
	}
}
