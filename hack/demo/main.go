// Command demo shows kubefair at work in one command (`make demo`).
//
// By default it brings up a real cluster of two nodes on this machine
// (test/harness/cluster: etcd, kube-apiserver, controller-manager,
// scheduler, kubelet, containerd, runc on the host; a QEMU guest booted with
// kubefair's kernel, cgroup v2 and systemd, as the second node), installs
// kubefair's chart with helm, creates priced tenants whose Deployments run
// real CPU burners on each node (test/harness/scenario), shows stock
// Kubernetes first (shares follow pod and thread counts), then a live
// `kubectl get tenants` while kubefair enforces, each node's table and the
// guest's thread table, and tears the cluster down. -guest=false leaves the
// guest out.
//
// With -embedded (machines that cannot run containers) it runs the
// controller and the agent against an embedded API server instead, on real
// cgroups laid out as kubelet lays them out.
//
// It needs root, and the binaries `make demo` builds.
package main

import (
	"flag"
	"fmt"
	"os"
	"time"
)

func main() {
	duration := flag.Duration("duration", time.Minute, "how long to show kubefair enforcing")
	stock := flag.Duration("stock", 15*time.Second, "how long to show stock Kubernetes first")
	embedded := flag.Bool("embedded", false, "no containers: an embedded API server, the agent on kubelet-shaped cgroups of this machine")
	keep := flag.Bool("keep", false, "leave the cluster running at the end (stop it with `make cluster-down`)")
	guest := flag.Bool("guest", true, "add the second node: a QEMU guest running kubefair's kernel (cgroup v2, systemd; the syscall backend), with the thread table")
	flag.Parse()
	var err error
	if *embedded {
		err = runEmbedded(*stock, *duration)
	} else {
		err = runCluster(*stock, *duration, *keep, *guest)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "demo:", err)
		os.Exit(1)
	}
}
