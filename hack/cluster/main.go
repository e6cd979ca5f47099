// Command cluster brings kubefair's local single-node cluster up and down
// (`make cluster-up`, `make cluster-down`): real etcd, kube-apiserver,
// kube-controller-manager, kube-scheduler, kubelet, containerd and runc on
// this machine, with kubefair's images imported. See test/harness/cluster.
//
//	go run ./hack/cluster up      # prints how to use it
//	go run ./hack/cluster -guest up  # and a cgroup v2 node in a QEMU guest (test/harness/cluster/guest.go)
//	go run ./hack/cluster guest   # adds that guest node to the running cluster
//	go run ./hack/cluster images  # rebuild kubefair's images from this tree and import them
//	go run ./hack/cluster restart kubelet  # or containerd: the faults the end-to-end suite injects
//	go run ./hack/cluster down
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"go.uber.org/zap/zapcore"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/kubefair/kubefair/test/harness/cluster"
	"github.com/kubefair/kubefair/test/harness/images"
)

// withGuest: `up` adds the guest node too; guestKernel is the kernel it boots.
var (
	withGuest   = flag.Bool("guest", false, "up: add a cgroup v2 node in a QEMU guest (make node-image builds its disk)")
	guestKernel = flag.String("guest-kernel", "stock", "up -guest, guest: the guest's kernel, stock or patched (kubefair's; the node is labelled for the chart's patched-kernel agent shape, as in the node suite)")
)

func main() {
	dir := flag.String("dir", cluster.DefaultDir, "the cluster's directory (certificates, data, sockets, logs, state)")
	flag.Usage = func() {
		fmt.Fprintln(os.Stderr, "usage: cluster [-dir DIR] [-guest] [-guest-kernel stock|patched] up|guest|images|restart COMPONENT|down")
		flag.PrintDefaults()
	}
	flag.Parse()
	args := 1 // the command
	if flag.Arg(0) == "restart" {
		args = 2 // and the component
	}
	if flag.NArg() != args {
		flag.Usage()
		os.Exit(2)
	}
	// The harness's clients log through controller-runtime: errors only.
	ctrllog.SetLogger(zap.New(zap.WriteTo(os.Stderr), zap.Level(zapcore.ErrorLevel)))
	if err := run(flag.Arg(0), flag.Arg(1), *dir); err != nil {
		fmt.Fprintln(os.Stderr, "cluster:", err)
		os.Exit(1)
	}
}

func run(cmd, arg, dir string) error {
	switch cmd {
	case "up":
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		defer stop()
		c, err := cluster.Up(ctx, cluster.Config{Dir: dir, Log: logf})
		if err != nil {
			return err
		}
		fmt.Printf("cluster: node %s is Ready; API server %s\n", c.NodeName(), c.APIServerURL())
		if *withGuest {
			if err := addGuest(ctx, c, logf); err != nil {
				return fmt.Errorf("%w (the cluster still runs: make cluster-down)", err)
			}
		}
		fmt.Printf("  export KUBECONFIG=%s\n  kubectl get nodes\n  make cluster-down   # stops it and cleans up\n", c.Kubeconfig())
		return nil
	case "guest":
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		defer stop()
		c, err := cluster.Attach(dir)
		if err != nil {
			return err
		}
		return addGuest(ctx, c, logf)
	case "images":
		c, err := cluster.Attach(dir)
		if err != nil {
			return err
		}
		if err := c.ImportImages(images.Controller, images.Agent, images.Burner, images.Pause); err != nil {
			return err
		}
		fmt.Println("cluster: images rebuilt and imported; delete the pods to run the new ones")
		return nil
	case "restart":
		c, err := cluster.Attach(dir)
		if err != nil {
			return err
		}
		if err := c.Restart(context.Background(), arg); err != nil {
			return err
		}
		fmt.Printf("cluster: %s restarted\n", arg)
		return nil
	case "down":
		c, err := cluster.Attach(dir)
		if err != nil {
			fmt.Fprintln(os.Stderr, "cluster: nothing to stop:", err)
			return nil
		}
		if err := c.Down(); err != nil {
			return err
		}
		fmt.Println("cluster: stopped and cleaned up")
		return nil
	}
	return fmt.Errorf("unknown command %q: want up, guest, images, restart or down", cmd)
}

// logf prints the harness's progress lines.
func logf(format string, args ...any) { fmt.Fprintf(os.Stderr, format+"\n", args...) }

// addGuest boots the cgroup v2 guest node and says how to log into it.
func addGuest(ctx context.Context, c *cluster.Cluster, log func(string, ...any)) error {
	c.SetLog(log)
	var cfg cluster.GuestConfig
	switch *guestKernel {
	case "stock":
	case "patched":
		cfg = cfg.OnPatchedKernel()
	default:
		return fmt.Errorf("-guest-kernel %q: want stock or patched", *guestKernel)
	}
	g, err := c.AddGuestNode(ctx, cfg)
	if err != nil {
		return err
	}
	fmt.Printf("cluster: guest node %s (cgroup v2, systemd, the %s kernel) is Ready at %s; its console is in %s\n", g.Name(), *guestKernel, g.IP(), g.SerialLog())
	fmt.Printf("  ssh %s\n", strings.Join(g.SSHArgs(), " "))
	return nil
}
