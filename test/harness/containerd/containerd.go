// Package containerd runs a private containerd (Debian's package) for a
// test: its own config, root, state and socket under a test directory,
// started and stopped by PID, so the host's containerd (if any) is never
// touched.
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
	bin, err := exec.LookPath("containerd")
	if err != nil {
		return nil, fmt.Errorf("containerd is not installed (Debian package containerd; hack/deps.sh installs it)")
	}
	d := &Daemon{Address: filepath.Join(dir, "containerd.sock"), dir: dir}
	config := fmt.Sprintf(`version = 2
root = %q
state = %q
disabled_plugins = ["io.containerd.grpc.v1.cri"]
[grpc]
  address = %q
[ttrpc]
  address = %q
[debug]
  address = %q
`, filepath.Join(dir, "root"), filepath.Join(dir, "state"), d.Address, d.Address+".ttrpc", filepath.Join(dir, "debug.sock"))
	if err := os.WriteFile(filepath.Join(dir, "config.toml"), []byte(config), 0o600); err != nil {
		return nil, err
	}
	log, err := os.Create(filepath.Join(dir, "containerd.log"))
	if err != nil {
		return nil, err
	}
	d.cmd = exec.Command(bin, "--config", filepath.Join(dir, "config.toml"))
	d.cmd.Stdout, d.cmd.Stderr = log, log
	if err := d.cmd.Start(); err != nil {
		return nil, err
	}
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		if _, err := os.Stat(d.Address); err == nil {
			return d, nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	_ = d.Stop()
	out, _ := os.ReadFile(filepath.Join(dir, "containerd.log"))
	return nil, fmt.Errorf("containerd did not come up within 20 s:\n%s", out)
}

// Stop ends containerd (by its PID) and unmounts what it mounted below dir.
func (d *Daemon) Stop() error {
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
	return unmountBelow(d.dir)
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
