// Command demo shows kubefair at work in one command (`make demo`).
//
// By default it brings up a real single-node cluster on this machine
// (test/harness/cluster: etcd, kube-apiserver, controller-manager,
// scheduler, kubelet, containerd, runc), installs kubefair's chart with
// helm, creates priced tenants whose Deployments run real CPU burners
// (test/harness/scenario), shows stock Kubernetes first (shares follow pod
// counts), then a live `kubectl get tenants` while kubefair enforces, and
// tears the cluster down.
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
	flag.Parse()
	var err error
	if *embedded {
		err = runEmbedded(*stock, *duration)
	} else {
		err = runCluster(*stock, *duration, *keep)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "demo:", err)
		os.Exit(1)
	}
}
