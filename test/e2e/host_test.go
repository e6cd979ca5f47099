package e2e

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kubefair/kubefair/test/harness/cluster"
)

// clusterDir holds the suites' cluster (one at a time).
const clusterDir = "/tmp/kubefair-e2e"

// teardownMargin is how long before go test's timeout TestMain tears the
// cluster down: Down takes up to a minute (30 s for the containers, then
// the guest and the daemons).
const teardownMargin = 3 * time.Minute

// TestMain tears the cluster down before go test's timeout. A test binary
// that times out panics without running its cleanups, and the QEMU guest
// and pods it would leave burn both CPUs under every suite after it.
func TestMain(m *testing.M) {
	flag.Parse()
	if timeout := flag.Lookup("test.timeout").Value.(flag.Getter).Get().(time.Duration); timeout > teardownMargin {
		time.AfterFunc(timeout-teardownMargin, func() {
			fmt.Printf("--- FAIL: the e2e package ran %v of go test's %v timeout: tearing its cluster down before the timeout's panic\n", timeout-teardownMargin, timeout)
			logf := func(format string, args ...any) { fmt.Printf(format+"\n", args...) }
			if err := cluster.DownLeftover(cluster.Config{Dir: clusterDir, Log: logf}); err != nil {
				fmt.Println(err)
			}
			os.Exit(1)
		})
	}
	os.Exit(m.Run())
}

// host is what the suite checks the cluster leaves as it found it.
type host struct {
	links, addresses, routes, ipForward, iptables string
	kubepods, paths, mounts                       []string
}

// footprintPaths are where a cluster's mounts and files may appear: its
// directory and the host paths kubelet, containerd and CNI hard-code.
var footprintPaths = []string{clusterDir, "/var/log/containers", "/var/log/pods", "/var/lib/kubelet", "/var/lib/cni", "/run/containerd", "/run/netns", "/etc/cni", "/opt/cni"}

func hostSnapshot(t *testing.T) host {
	t.Helper()
	out := func(name string, args ...string) string {
		b, _ := exec.Command(name, args...).Output()
		return string(b)
	}
	var h host
	h.links = out("ip", "-br", "link")
	h.addresses = out("ip", "-br", "address")
	h.routes = out("ip", "-4", "route", "show", "table", "all")
	h.iptables = out("iptables-save")
	if b, err := os.ReadFile("/proc/sys/net/ipv4/ip_forward"); err == nil {
		h.ipForward = string(b)
	}
	h.kubepods, _ = filepath.Glob("/sys/fs/cgroup/*/kubepods")
	for _, p := range footprintPaths {
		if _, err := os.Lstat(p); err == nil {
			h.paths = append(h.paths, p)
		}
	}
	if b, err := os.ReadFile("/proc/self/mounts"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			f := strings.Fields(line)
			for _, p := range footprintPaths {
				if len(f) > 1 && strings.HasPrefix(f[1], p) {
					h.mounts = append(h.mounts, f[1])
				}
			}
		}
	}
	return h
}

// iptablesRules drops the comment and counter lines of iptables-save.
func iptablesRules(s string) string {
	var keep []string
	for _, l := range strings.Split(s, "\n") {
		if !strings.HasPrefix(l, "#") && !strings.HasPrefix(l, ":") {
			keep = append(keep, l)
		}
	}
	return strings.Join(keep, "\n")
}

func checkHostRestored(t *testing.T, before host) {
	t.Helper()
	after := hostSnapshot(t)
	check := func(what, b, a string) {
		if b != a {
			t.Errorf("the cluster changed the host's %s:\nbefore:\n%s\nafter:\n%s", what, b, a)
		}
	}
	check("links", before.links, after.links)
	check("addresses", before.addresses, after.addresses)
	check("routes", before.routes, after.routes)
	check("ip_forward", before.ipForward, after.ipForward)
	check("iptables rules", iptablesRules(before.iptables), iptablesRules(after.iptables))
	check("kubepods cgroups", fmt.Sprint(before.kubepods), fmt.Sprint(after.kubepods))
	check("host paths", fmt.Sprint(before.paths), fmt.Sprint(after.paths))
	check("mounts", strings.Join(before.mounts, "\n"), strings.Join(after.mounts, "\n"))
}

// keepLogs saves the components' logs of a failed run outside the
// cluster's directory, which Down removes.
func keepLogs(t *testing.T, c *cluster.Cluster) {
	dst := filepath.Join(os.TempDir(), "kubefair-e2e-logs-"+time.Now().Format("150405"))
	if err := exec.Command("cp", "-r", filepath.Join(c.Dir(), "logs"), dst).Run(); err == nil {
		// and the pods' own logs (kubefair's agent and controller among them)
		_ = exec.Command("cp", "-rL", filepath.Join(c.Dir(), "pod-logs"), filepath.Join(dst, "pods")).Run()
		t.Logf("the cluster's logs are in %s", dst)
	}
}

// upCluster starts the suite's local cluster; the test's cleanup tears it
// down, keeps its logs if the test failed, and checks that the host is as
// before.
func upCluster(ctx context.Context, t *testing.T) *cluster.Cluster {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Fatal("the suite runs a real cluster (kubelet, containerd, cgroups) and needs root (CI runs as root)")
	}
	cfg := cluster.Config{Dir: clusterDir, Log: t.Logf}
	if err := cluster.DownLeftover(cfg); err != nil { // (the host is recorded as it is without it)
		t.Fatal(err)
	}
	before := hostSnapshot(t)
	c, err := cluster.Up(ctx, cfg)
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
	return c
}
