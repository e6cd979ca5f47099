// Package containerd runs a private containerd for a test — containerd
// 2.x and runc as hack/build-runtime.sh builds them (`make runtime`) — with
// its own config, root, state and socket under a test directory, started
// and stopped by PID, so the host's containerd (if any) is never touched.
package containerd

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"
)

// Daemon is one running private containerd.
type Daemon struct {
	// Address is its gRPC socket.
	Address string
	dir     string
	cmd     *exec.Cmd
}

// Start runs containerd with everything below dir. The CRI plugin is off:
// tests talk to containerd's own API, as kubefair's discovery does.
func Start(dir string) (*Daemon, error) {
	if err := CheckBuilt(); err != nil {
		return nil, err
	}
	d := &Daemon{Address: filepath.Join(dir, "containerd.sock"), dir: dir}
	if err := d.start(); err != nil {
		return nil, err
	}
	return d, nil
}

// Restart starts containerd again on the same directory after Halt or
// Stop; it finds its containers, and their shims if they still run.
func (d *Daemon) Restart() error {
	if d.cmd != nil {
		return fmt.Errorf("containerd in %s is running", d.dir)
	}
	return d.start()
}

// config is containerd's configuration (version 3, containerd 2.x's): the
// CRI plugins and NRI off, every path below dir — the shims' sockets too
// (their default is /run/containerd/s; runc's state, whose default is
// /run/containerd/runc, goes below dir with each container's runtime
// options).
func (d *Daemon) config() string {
	dir := d.dir
	return fmt.Sprintf(`version = 3
root = %q
state = %q
disabled_plugins = ["io.containerd.grpc.v1.cri", "io.containerd.cri.v1.runtime", "io.containerd.cri.v1.images",
  "io.containerd.podsandbox.controller.v1.podsandbox", "io.containerd.nri.v1.nri"]
[grpc]
  address = %q
[ttrpc]
  address = %q
[debug]
  address = %q
[plugins.'io.containerd.internal.v1.opt']
  path = %q
[plugins.'io.containerd.shim.v1.manager']
  socket_dir = %q
`, filepath.Join(dir, "root"), filepath.Join(dir, "state"), d.Address, d.Address+".ttrpc", filepath.Join(dir, "debug.sock"),
		filepath.Join(dir, "opt"), filepath.Join(dir, "s"))
}

func (d *Daemon) start() error {
	dir := d.dir
	if err := os.WriteFile(filepath.Join(dir, "config.toml"), []byte(d.config()), 0o600); err != nil {
		return err
	}
	log, err := os.OpenFile(filepath.Join(dir, "containerd.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	defer log.Close()
	_ = os.Remove(d.Address) // a stale socket would look like a live daemon
	d.cmd = exec.Command(Binary("containerd"), "--config", filepath.Join(dir, "config.toml"))
	d.cmd.Env = Env()
	d.cmd.Stdout, d.cmd.Stderr = log, log
	if err := d.cmd.Start(); err != nil {
		d.cmd = nil
		return err
	}
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		if _, err := os.Stat(d.Address); err == nil {
			return nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	_ = d.Stop()
	out, _ := os.ReadFile(filepath.Join(dir, "containerd.log"))
	return fmt.Errorf("containerd did not come up within 20 s:\n%s", out)
}

// Stop ends containerd (by its PID) and unmounts what it mounted below dir.
// Remove the containers first: their shims outlive containerd.
func (d *Daemon) Stop() error {
	if err := d.Halt(); err != nil {
		return err
	}
	return unmountBelow(d.dir)
}

// Halt ends containerd alone, by its PID, as when containerd restarts on a
// node: the shims keep their containers running with their rootfs mounted,
// and Start on the same directory picks them up again.
func (d *Daemon) Halt() error {
	if d.cmd == nil || d.cmd.Process == nil {
		return nil
	}
	_ = d.cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { _, _ = d.cmd.Process.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		_ = d.cmd.Process.Kill()
		<-done
	}
	d.cmd = nil
	return nil
}

// unmountBelow lazily unmounts every mount below dir, deepest first.
func unmountBelow(dir string) error {
	data, err := os.ReadFile("/proc/self/mounts")
	if err != nil {
		return err
	}
	var mounts []string
	for _, line := range splitLines(string(data)) {
		var src, target string
		if n, _ := fmt.Sscanf(line, "%s %s", &src, &target); n == 2 && len(target) > len(dir) && target[:len(dir)+1] == dir+"/" {
			mounts = append(mounts, target)
		}
	}
	for i := len(mounts) - 1; i >= 0; i-- {
		_ = syscall.Unmount(mounts[i], syscall.MNT_DETACH)
	}
	return nil
}

func splitLines(s string) []string {
	var out []string
	start := 0
	for i := 0; i < len(s); i++ {
		if s[i] == '\n' {
			out = append(out, s[start:i])
			start = i + 1
		}
	}
	return out
}
