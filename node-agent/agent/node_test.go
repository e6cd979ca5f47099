package agent

import (
	"path"
	"testing"

	"github.com/go-logr/logr"

	"github.com/kubefair/kubefair/node-agent/cgroupfs/cgroupfstest"
)

// TestOwnPod: the agent finds its own pod cgroup by its UID on every node
// shape; an unknown UID finds none.
func TestOwnPod(t *testing.T) {
	cgroupfstest.ForEach(t, func(t *testing.T, s cgroupfstest.Setup) {
		root, h := cgroupfstest.Tree(t, s)
		own := path.Dir(s.Cgroup(cgroupfstest.PodA)) + "/" + path.Base(s.Cgroup(cgroupfstest.Pod{UID: "f-6", QoS: "burstable"}))
		cgroupfstest.AddPod(t, root, s, own)
		n := &node{hier: h}
		if got := n.ownPod("f-6", logr.Discard()); got != own {
			t.Errorf("ownPod(f-6) = %q, want %q", got, own)
		}
		if got := n.ownPod("g-7", logr.Discard()); got != "" {
			t.Errorf("ownPod of an unknown UID = %q, want none", got)
		}
	})
}
