package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap/zapcore"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	kruntime "k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	kubefairv1 "github.com/kubefair/kubefair/api/v1alpha1"
	"github.com/kubefair/kubefair/test/harness/cluster"
	"github.com/kubefair/kubefair/test/harness/scenario"
	"github.com/kubefair/kubefair/test/harness/scrape"
)

// world is the running cluster and the suite's ways into it.
type world struct {
	t     *testing.T
	c     *cluster.Cluster
	k8s   client.Client
	ctx   context.Context
	tools scenario.Tools
	// sc is the scenario under test, node the node its pods run on, and
	// cpu reads their CPU time there.
	sc   scenario.Scenario
	node string
	cpu  scenario.Usage
	// Shares are medians of windows many windows of window each.
	window  time.Duration
	windows int
	// scraper is a token of an identity granted the chart's metrics reader
	// role, made at the first scrape (shared by the world's copies).
	scraper *string
	// goneCPU is the CPU that pods of the scenario's tenants used before
	// the suite deleted them, by tenant name (deleteTenantPod; shared by
	// the world's copies): it was billed, so checkCost counts it as used.
	goneCPU map[string]int64
}

// deleteTenantPod deletes a pod of a scenario tenant and waits until it is
// gone. It reads the pod's cgroup every 20 ms until kubelet removes it,
// which it does after the pod's processes stopped: the last figure is all
// the pod used, and goes into goneCPU.
func (w *world) deleteTenantPod(tenant string, pod *corev1.Pod) {
	w.t.Helper()
	if err := w.k8s.Delete(w.ctx, pod); err != nil {
		w.t.Fatal(err)
	}
	var used int64
	for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(20 * time.Millisecond) {
		u, err := w.cpu(w.ctx, []corev1.Pod{*pod})
		if err != nil { // the cgroup is gone
			break
		}
		used = u[pod.UID]
		if time.Now().After(deadline) {
			w.t.Fatalf("pod %s/%s: its cgroup is still there 2 minutes after its deletion", pod.Namespace, pod.Name)
		}
	}
	w.eventually(time.Minute, "pod "+pod.Name+" gone", func() (bool, string) {
		err := w.k8s.Get(w.ctx, client.ObjectKeyFromObject(pod), &corev1.Pod{})
		return apierrors.IsNotFound(err), fmt.Sprint(err)
	})
	w.goneCPU[tenant] += used
	w.t.Logf("pod %s/%s used %.3f CPU-s before it was deleted (tenant %s's, counted as used)", pod.Namespace, pod.Name, float64(used)/1e9, tenant)
}

// scraperToken is the token of the suite's scraper, a service account
// bound to the chart's kubefair-metrics-reader ClusterRole.
func (w *world) scraperToken() string {
	w.t.Helper()
	if *w.scraper == "" {
		tok, err := scrape.Identity(w.ctx, w.k8s, "default", "kubefair-e2e-scraper", true)
		if err != nil {
			w.t.Fatal(err)
		}
		*w.scraper = tok
	}
	return *w.scraper
}

// agentMetric reads one series of an agent's Prometheus endpoint, at port
// of the host's loopback, as the suite's scraper; -1 when absent.
func (w *world) agentMetric(port int, name string) float64 {
	_, body, err := scrape.Get(w.ctx, fmt.Sprintf("https://127.0.0.1:%d/metrics", port), w.scraperToken())
	if err != nil {
		return -1
	}
	return scrape.Value(body, name)
}

// The harness's controller-runtime clients log through controller-runtime's
// logger: errors only, on stderr.
func init() { logf.SetLogger(zap.New(zap.WriteTo(os.Stderr), zap.Level(zapcore.ErrorLevel))) }

func newClient(t *testing.T, c *cluster.Cluster) client.Client {
	scheme := kruntime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	utilruntime.Must(kubefairv1.AddToScheme(scheme))
	cfg, err := c.RESTConfig()
	if err != nil {
		t.Fatal(err)
	}
	k, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func (w *world) kubectl(args ...string) string {
	w.t.Helper()
	out, err := w.tools.Kubectl(w.ctx, args...)
	if err != nil {
		w.t.Fatal(err)
	}
	return out
}

// eventually polls cond every 250 ms until it holds or timeout passes.
func (w *world) eventually(timeout time.Duration, what string, cond func() (bool, string)) {
	w.t.Helper()
	deadline := time.Now().Add(timeout)
	last := ""
	for time.Now().Before(deadline) {
		ok, msg := cond()
		if ok {
			return
		}
		last = msg
		time.Sleep(250 * time.Millisecond)
	}
	w.t.Fatalf("waited %s for %s; last: %s", timeout, what, last)
}

// podsOf lists the running pods of a namespace (or selector), sorted by name.
func (w *world) pods(opts ...client.ListOption) []corev1.Pod {
	w.t.Helper()
	var list corev1.PodList
	if err := w.k8s.List(w.ctx, &list, opts...); err != nil {
		w.t.Fatal(err)
	}
	var out []corev1.Pod
	for _, p := range list.Items {
		if p.DeletionTimestamp == nil {
			out = append(out, p)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

func ready(p corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// waitReady waits until want pods match and all are Ready.
func (w *world) waitReady(timeout time.Duration, want int, what string, opts ...client.ListOption) []corev1.Pod {
	w.t.Helper()
	var pods []corev1.Pod
	w.eventually(timeout, what, func() (bool, string) {
		pods = w.pods(opts...)
		n := 0
		for _, p := range pods {
			if ready(p) {
				n++
			}
		}
		return n == want && len(pods) == want, fmt.Sprintf("%d of %d ready (%d pods)", n, want, len(pods))
	})
	return pods
}

func readInt(t *testing.T, path string) int64 {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	v, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return v
}

func (w *world) shares(p corev1.Pod) int64 {
	return readInt(w.t, filepath.Join(scenario.PodCgroup("cpu", p), "cpu.shares"))
}
