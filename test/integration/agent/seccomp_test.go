package agent

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kubefairv1 "github.com/kubefair/kubefair/api/v1alpha1"
	"github.com/kubefair/kubefair/node-agent/enforce/slices"
	"github.com/kubefair/kubefair/node-agent/seccomp"
	"github.com/kubefair/kubefair/test/harness/containerd"
	"github.com/kubefair/kubefair/test/harness/kubeapi"
	"github.com/kubefair/kubefair/test/harness/podcgroups"
	"github.com/kubefair/kubefair/test/harness/scrape"
)

var (
	agentBuild sync.Once
	agentBin   string
	agentErr   error
)

// agentBinary builds the real kubefair-agent, as the image ships it
// (static, CGO_ENABLED=0), once per suite run.
func agentBinary(t testing.TB) string {
	t.Helper()
	agentBuild.Do(func() {
		agentBin = filepath.Join(scratch, "kubefair-agent")
		cmd := exec.Command("go", "build", "-o", agentBin, "./node-agent/cmd/kubefair-agent")
		cmd.Dir = kubeapi.RepoRoot()
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			agentErr = fmt.Errorf("building the agent: %v\n%s", err, out)
		}
	})
	if agentErr != nil {
		t.Fatal(agentErr)
	}
	return agentBin
}

// nodeScene is a node for the agent binary: tenants whose pods burn CPU in
// kubelet-shaped cgroups (two threads per pod in one tenant, so the nice
// thread backend has work), the same containers registered in a private
// containerd, and an admin kubeconfig for the envtest API server.
type nodeScene struct {
	w          *world
	threaded   string // the tenant whose pods run two threads each
	containerd *containerd.Daemon
	kubeconfig string
	metrics    string
	probes     string
}

func newNode(t *testing.T, prefix string) *nodeScene {
	w := newWorld(t)
	threaded, single := prefix+"-a", prefix+"-b"
	// The threaded tenant's tier has a latency class: its threads' slices
	// are among the agent's writes; it asks for request-based elevation:
	// the agent's eBPF counter watches its processes.
	tier := &kubefairv1.PricingTier{ObjectMeta: metav1.ObjectMeta{Name: prefix + "-interactive"},
		Spec: kubefairv1.PricingTierSpec{Weight: 3, PricePerCPUHour: "0.01", LatencyClass: kubefairv1.LatencyClassInteractive}}
	if err := w.k8s.Create(context.Background(), tier); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = w.k8s.Delete(context.Background(), tier) })
	w.addTenantSpec(threaded, kubefairv1.TenantSpec{Tier: tier.Name, RequestElevation: true}, 2, 2)
	w.addTenant(single, 1, 1, 1)
	d, _ := startContainerd(t)
	var pods corev1.PodList
	if err := w.k8s.List(context.Background(), &pods); err != nil {
		t.Fatal(err)
	}
	for i := range pods.Items {
		p := &pods.Items[i]
		if p.Namespace != threaded && p.Namespace != single {
			continue
		}
		cg := "/kubepods/burstable/pod" + string(p.UID) + "/ctr-" + string(p.UID)[:8]
		createCRIContainer(t, d.Address, "app-"+string(p.UID), p, "burner", "container", cg)
		createCRIContainer(t, d.Address, "sandbox-"+string(p.UID), p, "", "sandbox", path.Dir(cg)+"/pause-"+string(p.UID)[:8])
	}
	n := &nodeScene{w: w, threaded: threaded, containerd: d, kubeconfig: filepath.Join(t.TempDir(), "kubeconfig"), metrics: scrape.FreeAddress(t), probes: scrape.FreeAddress(t)}
	if err := api.WriteKubeconfig(n.kubeconfig); err != nil {
		t.Fatal(err)
	}
	return n
}

// args are the agent's flags as the chart gives them, for this node, with
// the nice thread backend so that the thread layer's calls run too.
func (n *nodeScene) args(extra ...string) []string {
	return append([]string{
		"--node-name=" + node, "--cgroup-root=" + n.w.tree.Root, "--proc-root=/proc", "--state-dir=" + n.w.stateDir,
		"--backend=nice", "--latency-classes=true", "--request-elevation=true", "--period=500ms", "--report-period=2s", "--cpus=2",
		"--metrics-bind-address=" + n.metrics, "--health-probe-bind-address=" + n.probes,
		"--containerd-address=" + n.containerd.Address,
	}, extra...)
}

// agentProcess is a started agent (possibly under a tracer) and its output.
type agentProcess struct {
	cmd     *exec.Cmd
	pid     int // the agent itself (not the tracer)
	out     *lockedBuffer
	started time.Time // reports observed before are an earlier agent's
}

type lockedBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// start runs argv (the agent, or a tracer running it) with the node's
// kubeconfig; agentPID finds the agent's PID once it runs.
func (n *nodeScene) start(t *testing.T, argv []string) *agentProcess {
	t.Helper()
	p := &agentProcess{cmd: exec.Command(argv[0], argv[1:]...), out: &lockedBuffer{}, started: time.Now()}
	p.cmd.Env = append(os.Environ(), "KUBECONFIG="+n.kubeconfig)
	p.cmd.Stdout, p.cmd.Stderr = p.out, p.out
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = p.cmd.Process.Kill()
		_ = p.cmd.Wait()
	})
	p.pid = p.cmd.Process.Pid
	return p
}

// enforces checks, on the running agent, every path of its steady state:
// the API cache, containerd discovery, cgroup and nice writes, reports
// written period after period, and its metrics and probe endpoints. Then it
// stops the agent with SIGTERM, as kubelet does, and wants a clean exit.
func (n *nodeScene) enforces(t *testing.T, p *agentProcess) {
	t.Helper()
	ctx := context.Background()
	// Several report periods: the report's observed time moves on each time.
	var seen []time.Time
	sliced, counting := false, false
	deadline := time.Now().Add(60 * time.Second)
	for len(seen) < 4 && time.Now().Before(deadline) {
		if p.cmd.ProcessState != nil {
			break
		}
		var r kubefairv1.NodeShareReport
		if err := n.w.k8s.Get(ctx, client.ObjectKey{Name: node}, &r); err == nil && len(r.Tenants) == 2 && r.ObservedTime.After(p.started) {
			if len(seen) == 0 || r.ObservedTime.After(seen[len(seen)-1]) {
				seen = append(seen, r.ObservedTime.Time)
				if r.Backend != kubefairv1.BackendNice {
					t.Errorf("report backend %q, want nice", r.Backend)
				}
				for _, s := range r.Tenants {
					if s.CPUNanoseconds <= 0 || s.Pods == 0 {
						t.Errorf("report for %s has no usage: %+v", s.Name, s)
					}
				}
				sliced = sliced || shareOf(&r, n.threaded).SlicedThreads > 0
				c := meta.FindStatusCondition(r.Conditions, kubefairv1.ConditionRequestElevation)
				counting = counting || (c != nil && c.Status == metav1.ConditionTrue && !shareOf(&r, n.threaded).RequestElevationOff)
			}
		}
		time.Sleep(300 * time.Millisecond)
	}
	if len(seen) < 4 {
		t.Fatalf("the agent wrote %d successive reports within 60 s, want 4; its output:\n%s", len(seen), p.out.String())
	}
	for _, cgs := range n.w.pods {
		for _, cg := range cgs {
			if s, err := n.w.tree.Shares(cg); err != nil || s == podcgroups.KubeletShares {
				t.Errorf("pod %s still has kubelet's %d shares (%v)", cg, s, err)
			}
		}
	}
	if reniced := n.renicedThreads(t, n.threaded); reniced == 0 {
		t.Error("no thread of the two-thread two-thread burners has a nice level: the nice backend did not write")
	}
	if !counting {
		t.Errorf("no report says the request counter watches tenant %s's processes (RequestElevation True); the agent's output:\n%s", n.threaded, p.out.String())
	}
	if custom := n.slicedThreads(t, n.threaded); !sliced || custom == 0 {
		t.Errorf("the interactive tenant's threads: the report counted sliced ones %v, %d have a slice of their own; want both", sliced, custom)
	}
	// The metrics, as the chart serves them: to a granted identity alone,
	// checked with the API server (TokenReview, SubjectAccessReview) by the
	// confined agent.
	granted, stranger, err := scrape.Identities(ctx, n.w.k8s, "seccomp")
	if err != nil {
		t.Fatal(err)
	}
	if err := scrape.Guarded(ctx, "https://"+n.metrics+"/metrics", granted, stranger, "kubefair_agent_"); err != nil {
		t.Error(err)
	}
	for _, u := range []string{"http://" + n.probes + "/healthz", "http://" + n.probes + "/readyz"} {
		resp, err := http.Get(u)
		if err != nil {
			t.Errorf("GET %s: %v", u, err)
			continue
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("GET %s: %d %.200s", u, resp.StatusCode, body)
		}
	}
	if err := syscall.Kill(p.pid, syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- p.cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("the agent did not exit cleanly on SIGTERM: %v\n%s", err, p.out.String())
		}
	case <-time.After(20 * time.Second):
		t.Fatalf("the agent did not exit within 20 s of SIGTERM; output:\n%s", p.out.String())
	}
}

// renicedThreads counts the threads of a tenant's burners whose nice level
// is not 0.
func (n *nodeScene) renicedThreads(t *testing.T, tenant string) int {
	return n.countThreads(t, tenant, func(tid int) bool {
		prio, err := unix.Getpriority(unix.PRIO_PROCESS, tid)
		return err == nil && 20-prio != 0
	})
}

// slicedThreads counts the threads of a tenant's burners whose scheduler
// slice is not the kernel's default (the test's own thread's).
func (n *nodeScene) slicedThreads(t *testing.T, tenant string) int {
	def, err := slices.Of(0)
	if err != nil {
		t.Fatal(err)
	}
	return n.countThreads(t, tenant, func(tid int) bool {
		s, err := slices.Of(tid)
		return err == nil && s != def
	})
}

// countThreads counts the threads of a tenant's burners for which is holds.
func (n *nodeScene) countThreads(t *testing.T, tenant string, is func(tid int) bool) int {
	count := 0
	for _, cg := range n.w.pods[tenant] {
		tids, err := n.w.tree.Threads(cg)
		if err != nil {
			t.Fatal(err)
		}
		for _, tid := range tids {
			if is(tid) {
				count++
			}
		}
	}
	return count
}

// restores runs `kubefair-agent --restore` (the one-shot restore),
// (argv runs it, possibly under a tracer) and wants kubelet's weights and
// nice 0 back on every pod.
func (n *nodeScene) restores(t *testing.T, argv []string) {
	t.Helper()
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+n.kubeconfig)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("--restore: %v\n%s", err, out)
	}
	for _, cgs := range n.w.pods {
		for _, cg := range cgs {
			if s, err := n.w.tree.Shares(cg); err != nil || s != podcgroups.KubeletShares {
				t.Errorf("after --restore pod %s has %d shares (%v), want kubelet's %d", cg, s, err, podcgroups.KubeletShares)
			}
		}
	}
	if reniced := n.renicedThreads(t, n.threaded); reniced != 0 {
		t.Errorf("after --restore %d threads still have a nice level", reniced)
	}
	if sliced := n.slicedThreads(t, n.threaded); sliced != 0 {
		t.Errorf("after --restore %d threads still have a slice of their own", sliced)
	}
}

func (n *nodeScene) restoreArgs() []string {
	return []string{"--restore", "--cgroup-root=" + n.w.tree.Root, "--state-dir=" + n.w.stateDir, "--backend=nice", "--latency-classes=true", "--proc-root=/proc"}
}

// TestAgentUnderItsSeccompFilter runs the real agent binary with its own
// seccomp filter (the default) through every path of a node's life — API
// cache, containerd discovery, cgroup and nice writes, several reports,
// metrics and probes, SIGTERM, then the one-shot restore — and checks the
// filter was really in force. A call missing from the allow-list would fail
// with EPERM and show up here as a step, report or restore that fails.
func TestAgentUnderItsSeccompFilter(t *testing.T) {
	n := newNode(t, "filtered")
	bin := agentBinary(t)
	p := n.start(t, append([]string{bin}, n.args()...))
	waitFor(t, "the agent's filter in force", func() bool {
		status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", p.pid))
		return err == nil && strings.Contains(string(status), "Seccomp:\t2") && strings.Contains(string(status), "Seccomp_filters:\t1")
	})
	n.enforces(t, p)
	if !strings.Contains(p.out.String(), "seccomp filter installed") {
		t.Errorf("the agent did not log its filter; output:\n%s", p.out.String())
	}
	if strings.Contains(p.out.String(), "operation not permitted") {
		t.Errorf("something the agent did was refused (EPERM); output:\n%s", p.out.String())
	}
	n.restores(t, append([]string{bin}, n.restoreArgs()...))
}

// tracedCall is one line of strace -f output: "<pid> <name>(...".
var tracedCall = regexp.MustCompile(`^\d+\s+([a-z0-9_]+)\(`)

// TestAgentSyscallsAreListed traces the real agent binary (strace -f, which
// shows refused calls too) through the same paths, and wants every system
// call it made, from its first instruction on, in the allow-list: this is
// how the list was found, and how it is kept complete when the agent
// changes.
func TestAgentSyscallsAreListed(t *testing.T) {
	strace, err := exec.LookPath("strace")
	if err != nil {
		t.Fatal("strace (Debian strace) is missing: run hack/deps.sh")
	}
	n := newNode(t, "traced")
	bin := agentBinary(t)
	dir := t.TempDir()
	trace := func(name string) []string {
		return []string{strace, "-f", "-qq", "-o", filepath.Join(dir, name), "--", bin}
	}
	p := n.start(t, append(trace("run"), n.args()...))
	waitFor(t, "the traced agent started", func() bool {
		kids, _ := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", p.cmd.Process.Pid, p.cmd.Process.Pid))
		pid, err := strconv.Atoi(strings.TrimSpace(string(kids)))
		p.pid = pid
		return err == nil
	})
	n.enforces(t, p)
	n.restores(t, append(trace("restore"), n.restoreArgs()...))

	used := map[string]int{}
	for _, name := range []string{"run", "restore"} {
		f, err := os.Open(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			if m := tracedCall.FindStringSubmatch(sc.Text()); m != nil {
				used[m[1]]++
			}
		}
		f.Close()
	}
	allowed, err := seccomp.AllowList()
	if err != nil {
		t.Fatal(err)
	}
	listed := map[string]bool{}
	for _, c := range allowed {
		listed[c.Name] = true
	}
	for _, name := range seccomp.ContainerStart.Calls {
		listed[name] = true
	}
	var missing, unseen []string
	for name, count := range used {
		if !listed[name] {
			missing = append(missing, fmt.Sprintf("%s (%d calls)", name, count))
		}
	}
	for name := range listed {
		if used[name] == 0 {
			unseen = append(unseen, name)
		}
	}
	sort.Strings(missing)
	sort.Strings(unseen)
	t.Logf("the agent made %d distinct system calls; listed but not seen in this run: %v", len(used), unseen)
	if len(missing) > 0 {
		t.Errorf("system calls the agent made that its seccomp allow-list lacks (node-agent/seccomp/table.go): %v", missing)
	}
}
