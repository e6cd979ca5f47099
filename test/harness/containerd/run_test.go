package containerd

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kubefair/kubefair/test/harness/images"
)

// TestRunAndRemove: an imported image runs as a runc container in the
// cgroup its spec names, and Remove leaves no task, process or cgroup.
func TestRunAndRemove(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatal("running containers needs root (CI runs as root)")
	}
	dir := filepath.Join("/tmp", fmt.Sprintf("kf-ctrd-h%d", os.Getpid()))
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	d, err := Start(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.Stop() })
	_, file, _, _ := runtime.Caller(0)
	tarball := filepath.Join(dir, "burner.tar")
	if err := images.Burner.Build(filepath.Join(filepath.Dir(file), "..", "..", ".."), tarball); err != nil {
		t.Fatal(err)
	}
	if err := d.Import(tarball); err != nil {
		t.Fatal(err)
	}

	parent := fmt.Sprintf("/kubefair-harness-%d", os.Getpid())
	t.Cleanup(func() {
		for _, ctl := range []string{"cpu", "cpuacct", "memory", "pids", "blkio", "devices", "freezer", "cpuset", "systemd", "unified"} {
			_ = syscall.Rmdir(filepath.Join("/sys/fs/cgroup", ctl, parent))
		}
	})
	c := Container{ID: "burner-1", Image: images.Burner.Ref, Args: []string{"/burner"}, CgroupsPath: parent + "/burner-1", CPUShares: 512}
	pid, err := d.Run(context.Background(), c)
	if err != nil {
		t.Fatal(err)
	}
	cg := filepath.Join("/sys/fs/cgroup/cpu", c.CgroupsPath)
	procs, err := os.ReadFile(filepath.Join(cg, "cgroup.procs"))
	if err != nil || strings.TrimSpace(string(procs)) != fmt.Sprint(pid) {
		t.Fatalf("cgroup %s holds %q (%v), want the task's PID %d", cg, procs, err, pid)
	}
	if shares, _ := os.ReadFile(filepath.Join(cg, "cpu.shares")); strings.TrimSpace(string(shares)) != "512" {
		t.Errorf("cpu.shares = %q, want the spec's 512", shares)
	}
	start := time.Now()
	if err := d.Remove(context.Background(), c.ID); err != nil {
		t.Fatal(err)
	}
	t.Logf("removed in %v", time.Since(start))
	if _, err := os.Stat(cg); !os.IsNotExist(err) {
		t.Errorf("cgroup %s still there after Remove (%v)", cg, err)
	}
	if err := syscall.Kill(pid, 0); err == nil {
		t.Errorf("process %d still alive after Remove", pid)
	}
}
