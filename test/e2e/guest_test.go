package e2e

import (
	"context"
	"os"
	"path"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubefair/kubefair/test/harness/cluster"
	"github.com/kubefair/kubefair/test/harness/images"
	"github.com/kubefair/kubefair/test/harness/scenario"
)

// TestGuestNode proves the guest node's plumbing: the cgroup v2 node in
// QEMU joins the local cluster, reports the pinned kubelet and containerd,
// runs a burner pod under systemd's cgroup driver, and Down leaves the host
// as it was.
func TestGuestNode(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatal("the guest node suite runs a real cluster and a QEMU guest, and needs root (CI runs as root)")
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	before := hostSnapshot(t)
	c, err := cluster.Up(ctx, cluster.Config{Dir: "/tmp/kubefair-e2e", Log: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			keepLogs(t, c)
		}
		if err := c.Down(); err != nil {
			t.Errorf("tearing the cluster down: %v", err)
		}
		checkHostRestored(t, before)
	})
	g, err := c.AddGuestNode(ctx, cluster.GuestConfig{Images: []images.Image{images.Pause, images.Burner}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			logCtx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			if err := g.SaveLogs(logCtx); err != nil {
				t.Logf("the guest's journal: %v", err)
			}
		}
	})
	k := newClient(t, c)

	var node corev1.Node
	if err := k.Get(ctx, client.ObjectKey{Name: g.Name()}, &node); err != nil {
		t.Fatal(err)
	}
	info := node.Status.NodeInfo
	t.Logf("guest node %s: kubelet %s, %s, kernel %s", g.Name(), info.KubeletVersion, info.ContainerRuntimeVersion, info.KernelVersion)
	if info.KubeletVersion != "v1.37.2" {
		t.Errorf("the guest's kubelet is %s, want v1.37.2", info.KubeletVersion)
	}
	if info.ContainerRuntimeVersion != "containerd://2.4.2" {
		t.Errorf("the guest's runtime is %s, want containerd://2.4.2", info.ContainerRuntimeVersion)
	}
	controllers, err := g.ReadFile("/sys/fs/cgroup/cgroup.controllers")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(" "+strings.TrimSpace(string(controllers))+" ", " cpu ") {
		t.Fatalf("the guest's cgroup v2 root has controllers %q, want cpu among them", controllers)
	}

	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "guest-burner"},
		Spec: corev1.PodSpec{
			// The host node is in the cluster too.
			NodeSelector:                  map[string]string{corev1.LabelHostname: g.Name()},
			TerminationGracePeriodSeconds: ptr.To(int64(2)),
			AutomountServiceAccountToken:  ptr.To(false),
			Containers: []corev1.Container{{
				Name:            "burner",
				Image:           images.Burner.Ref,
				ImagePullPolicy: corev1.PullNever,
				Command:         []string{images.Burner.Binary(), "-threads", "1"},
				Resources: corev1.ResourceRequirements{
					Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(scenario.CPURequest)},
				},
			}},
		},
	}
	if err := k.Create(ctx, pod); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Minute)
	for {
		if err := k.Get(ctx, client.ObjectKeyFromObject(pod), pod); err != nil {
			t.Fatal(err)
		}
		if pod.Status.Phase == corev1.PodRunning && len(pod.Status.ContainerStatuses) == 1 && pod.Status.ContainerStatuses[0].ContainerID != "" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the burner pod on the guest is not running after 5 minutes: %+v", pod.Status)
		}
		time.Sleep(time.Second)
	}
	id := strings.TrimPrefix(pod.Status.ContainerStatuses[0].ContainerID, "containerd://")
	uid := strings.ReplaceAll(string(pod.UID), "-", "_")
	cgroup := path.Join("/sys/fs/cgroup/kubepods.slice/kubepods-burstable.slice",
		"kubepods-burstable-pod"+uid+".slice", "cri-containerd-"+id+".scope")
	weight, err := g.ReadFile(path.Join(cgroup, "cpu.weight"))
	if err != nil {
		t.Fatalf("the burner's cgroup: %v", err)
	}
	procs, err := g.ReadFile(path.Join(cgroup, "cgroup.procs"))
	if err != nil || strings.TrimSpace(string(procs)) == "" {
		t.Fatalf("no process in the burner's cgroup %s: %v", cgroup, err)
	}
	t.Logf("burner pod %s on %s: cgroup %s, cpu.weight %s, processes %s", pod.Name, pod.Spec.NodeName, cgroup,
		strings.TrimSpace(string(weight)), strings.Fields(string(procs)))
	if pod.Spec.NodeName != g.Name() {
		t.Errorf("the burner ran on %s, want %s", pod.Spec.NodeName, g.Name())
	}
	// The API server reaches the guest's kubelet at the node's address.
	cfg, err := c.RESTConfig()
	if err != nil {
		t.Fatal(err)
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cs.CoreV1().Pods(pod.Namespace).GetLogs(pod.Name, &corev1.PodLogOptions{}).DoRaw(ctx); err != nil {
		t.Errorf("the burner's logs through the API server: %v", err)
	}
}
