package agent

import (
	"context"
	"fmt"
	"math"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	kubefairv1 "github.com/kubefair/kubefair/api/v1alpha1"
	"github.com/kubefair/kubefair/test/harness/podcgroups"
)

// serverRuns is how many wrk runs of serverWindow each figure is the
// median of.
const (
	serverRuns   = 5
	serverWindow = 5 * time.Second
)

// TestLatencyClassesOnAServer measures what the latency classes do for a
// server nobody here wrote — Debian's nginx, the one pod of an interactive
// tenant — answering Debian's wrk on loopback (2 connections, each waiting
// 1 ms between requests) while two tenants of equal weight burn both CPUs
// with 4 threads a pod — jobs, batch, in 1 pod; crunch, no class, in 3:
// request latency p50/p99 and throughput, with the tenants' CPU shares,
// unloaded, under load with kubelet's weights (stock: 1:3), with kubefair's
// weights (1:1), and with kubefair's weights and the classes — side by side
// from one run, on this host's real cgroups. The figures are printed, not
// asserted: the slices do not keep the 2-point bound on the shares here
// (docs/agent.md, "Latency classes", has the runs). It asserts that the
// load contends: the burners take most of the CPU, and the server's p99
// under stock weights is above its unloaded one.
func TestLatencyClassesOnAServer(t *testing.T) {
	for _, bin := range []string{"nginx", "wrk"} {
		if _, err := exec.LookPath(bin); err != nil {
			t.Fatalf("%s (Debian's nginx-light, wrk) is missing: run hack/deps.sh", bin)
		}
	}
	w := newWorld(t)
	w.addClassTiers(t, "web-fast", 1, "jobs-bulk", 1)
	srv := startNginx(t)
	w.addTenantSpec("web", kubefairv1.TenantSpec{Tier: "web-fast"}, 0, 0)
	w.addServerPod("web", srv.pids...)
	t.Cleanup(func() { w.deleteTenant("web") })

	var rows []serverRow
	rows = append(rows, w.serve(t, srv, "unloaded"))
	w.addTenantSpec("jobs", kubefairv1.TenantSpec{Tier: "jobs-bulk"}, 1, 4)
	w.addTenant("crunch", 1, 3, 4)
	for _, n := range []string{"jobs", "crunch"} {
		t.Cleanup(func() { w.deleteTenant(n) })
	}
	rows = append(rows, w.serve(t, srv, "stock"))

	w.startAgent(time.Second)
	time.Sleep(10 * time.Second) // the closed loop settles
	off := w.serve(t, srv, "kubefair")
	rows = append(rows, off)
	w.stopAgent()

	interactive := 500 * time.Microsecond
	w.slices = map[kubefairv1.LatencyClass]time.Duration{kubefairv1.LatencyClassInteractive: interactive, kubefairv1.LatencyClassBatch: 0}
	w.latencyClasses = true
	w.startAgent(time.Second)
	w.waitForSlices(t, map[string]time.Duration{"web": interactive})
	time.Sleep(10 * time.Second)
	on := w.serve(t, srv, "kubefair + classes")
	rows = append(rows, on)

	var b strings.Builder
	fmt.Fprintf(&b, "\nnginx (web, interactive) under wrk beside jobs (batch, 1 pod) and crunch (3 pods), 4 spinning threads a pod, 2 CPUs; median of %d runs of %v:\n", serverRuns, serverWindow)
	fmt.Fprintf(&b, "%-20s %9s %9s %9s %7s %7s %7s\n", "", "p50", "p99", "req/s", "web", "jobs", "crunch")
	for _, r := range rows {
		fmt.Fprintf(&b, "%-20s %9v %9v %9.0f %6.1f%% %6.1f%% %6.1f%%\n", r.name, r.p50, r.p99, r.rps, 100*r.shares["web"], 100*r.shares["jobs"], 100*r.shares["crunch"])
	}
	fmt.Print(b.String())

	moved := 0.0
	for _, n := range []string{"web", "jobs", "crunch"} {
		moved = max(moved, 100*math.Abs(on.shares[n]-off.shares[n]))
	}
	fmt.Printf("the classes moved a tenant's share by up to %.1f points; p99 %v without them, %v with them\n", moved, off.p99, on.p99)
	if stock := rows[1]; stock.shares["jobs"]+stock.shares["crunch"] < 0.8 || stock.p99 <= rows[0].p99 {
		t.Errorf("under load the burners used %.0f%% of the test's CPU and the server's p99 was %v (unloaded %v): the server is not contended as intended",
			100*(stock.shares["jobs"]+stock.shares["crunch"]), stock.p99, rows[0].p99)
	}
}

// nginx is a running nginx: its address and its processes (master, worker).
type nginx struct {
	addr string
	pids []int
}

// startNginx runs Debian's nginx on a free loopback port with one worker
// that answers every request with a short body, and stops it (by PID)
// when the test ends.
func startNginx(t *testing.T) nginx {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	dir := t.TempDir()
	conf := fmt.Sprintf(`worker_processes 1;
pid nginx.pid;
error_log stderr;
events { worker_connections 256; }
http {
  access_log off;
  server { listen %s; location / { return 200 "ok\n"; } }
}
`, addr)
	if err := os.WriteFile(filepath.Join(dir, "nginx.conf"), []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("nginx", "-p", dir, "-c", "nginx.conf", "-g", "daemon off;")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	master := cmd.Process.Pid
	n := nginx{addr: addr, pids: []int{master}}
	t.Cleanup(func() {
		for _, pid := range n.pids {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		_ = cmd.Wait()
	})
	deadline := time.Now().Add(10 * time.Second)
	for len(n.pids) < 2 {
		if time.Now().After(deadline) {
			t.Fatalf("nginx started no worker within 10 s: %s", stderr.String())
		}
		kids, _ := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", master, master))
		for _, f := range strings.Fields(string(kids)) {
			pid, _ := strconv.Atoi(f)
			n.pids = append(n.pids, pid)
		}
		time.Sleep(50 * time.Millisecond)
	}
	return n
}

// addServerPod creates a pod of the tenant on the node and puts processes
// already running in its cgroup, as kubelet and the runtime would.
func (w *world) addServerPod(tenant string, pids ...int) {
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "server-", Namespace: tenant},
		Spec:       corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "nginx", Image: "debian/nginx-light"}}},
	}
	if err := w.k8s.Create(context.Background(), pod); err != nil {
		w.t.Fatal(err)
	}
	cg, err := w.tree.AdoptPod(string(pod.UID), pids...)
	if err != nil {
		w.t.Fatal(err)
	}
	w.pods[tenant] = append(w.pods[tenant], cg)
}

// serverRow is one line of the table: the server's latency and
// throughput, and each tenant's share of the CPU the test's pods used.
type serverRow struct {
	name     string
	p50, p99 time.Duration
	rps      float64
	shares   map[string]float64
}

// serve runs wrk serverRuns times against the server and measures the
// tenants' shares over the same time; each figure is the median.
func (w *world) serve(t *testing.T, srv nginx, name string) serverRow {
	t.Helper()
	script := filepath.Join(t.TempDir(), "pace.lua")
	if err := os.WriteFile(script, []byte("function delay() return 1 end\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	row := serverRow{name: name, shares: map[string]float64{}}
	var p50s, p99s, rpss []float64
	perTenant := map[string][]float64{}
	for i := 0; i < serverRuns; i++ {
		before, err := w.tree.GroupUsage(w.pods)
		if err != nil {
			t.Fatal(err)
		}
		out, err := exec.Command("wrk", "-t1", "-c2", fmt.Sprintf("-d%ds", int(serverWindow.Seconds())), "--latency", "-s", script, "http://"+srv.addr+"/").CombinedOutput()
		if err != nil {
			t.Fatalf("wrk: %v\n%s", err, out)
		}
		after, err := w.tree.GroupUsage(w.pods)
		if err != nil {
			t.Fatal(err)
		}
		p50, p99, rps, err := parseWrk(string(out))
		if err != nil {
			t.Fatalf("%v:\n%s", err, out)
		}
		p50s, p99s, rpss = append(p50s, float64(p50)), append(p99s, float64(p99)), append(rpss, rps)
		for n, s := range podcgroups.Shares(before, after) {
			perTenant[n] = append(perTenant[n], s)
		}
	}
	row.p50, row.p99, row.rps = time.Duration(medianFloat(p50s)), time.Duration(medianFloat(p99s)), medianFloat(rpss)
	for n, s := range perTenant {
		row.shares[n] = medianFloat(s)
	}
	return row
}

func medianFloat(v []float64) float64 {
	v = slices.Clone(v)
	slices.Sort(v)
	return v[len(v)/2]
}

var (
	wrkPercentile = regexp.MustCompile(`(?m)^\s+(50|99)%\s+([0-9.]+)(us|ms|s)\s*$`)
	wrkRate       = regexp.MustCompile(`(?m)^Requests/sec:\s+([0-9.]+)`)
)

// parseWrk reads the 50th and 99th latency percentiles and the request
// rate from wrk --latency's output; responses that are not 200 are an
// error.
func parseWrk(out string) (p50, p99 time.Duration, rps float64, err error) {
	if strings.Contains(out, "Non-2xx") || strings.Contains(out, "Socket errors") {
		return 0, 0, 0, fmt.Errorf("wrk saw errors")
	}
	for _, m := range wrkPercentile.FindAllStringSubmatch(out, -1) {
		v, _ := strconv.ParseFloat(m[2], 64)
		unit := map[string]time.Duration{"us": time.Microsecond, "ms": time.Millisecond, "s": time.Second}[m[3]]
		d := time.Duration(v * float64(unit)).Round(time.Microsecond)
		if m[1] == "50" {
			p50 = d
		} else {
			p99 = d
		}
	}
	m := wrkRate.FindStringSubmatch(out)
	if p50 == 0 || p99 == 0 || m == nil {
		return 0, 0, 0, fmt.Errorf("no latency percentiles or rate in wrk's output")
	}
	rps, err = strconv.ParseFloat(m[1], 64)
	return p50, p99, rps, err
}
