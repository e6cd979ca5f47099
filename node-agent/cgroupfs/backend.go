package cgroupfs

import (
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"os"
	"path/filepath"
	"sync"

	"github.com/kubefair/kubefair/node-agent/enforce"
	"github.com/kubefair/kubefair/node-agent/fairness"
)

// Backend is the cgroup enforcement layer: it owns every pod cgroup weight
// the agent writes. It writes only values that differ, counts and undoes
// drift (someone else, usually kubelet on a resize, changed a value it set),
// and remembers each pod's original value on disk so that a pod leaving its
// tenant, an uninstall or an agent restart can put kubelet's value back.
type Backend struct {
	h        *Hierarchy
	stateDir string

	mu sync.Mutex
	// state is persisted in stateDir as JSON after every change.
	state backendState
	// burstableHealthy is the Burstable QoS weight (native units) last found
	// or made healthy by RepairBurstable, which only the agent's loop calls.
	burstableHealthy uint64
}

type backendState struct {
	// Original is kubelet's value (native units) before kubefair first wrote.
	Original map[string]uint64 `json:"original"`
	// Written is the value (native units) kubefair last wrote.
	Written map[string]uint64 `json:"written"`
}

const stateFile = "cgroup-weights.json"

// NewBackend loads what a previous run of the agent wrote, if anything.
// stateDir "" keeps the state in memory only (unit tests).
func NewBackend(h *Hierarchy, stateDir string) (*Backend, error) {
	b := &Backend{h: h, stateDir: stateDir, state: backendState{Original: map[string]uint64{}, Written: map[string]uint64{}}}
	if stateDir == "" {
		return b, nil
	}
	data, err := os.ReadFile(filepath.Join(stateDir, stateFile))
	switch {
	case errors.Is(err, os.ErrNotExist):
	case err != nil:
		return nil, fmt.Errorf("reading agent state: %w", err)
	default:
		if err := json.Unmarshal(data, &b.state); err != nil {
			return nil, fmt.Errorf("agent state %s is corrupt: %w", filepath.Join(stateDir, stateFile), err)
		}
		if b.state.Original == nil {
			b.state.Original = map[string]uint64{}
		}
		if b.state.Written == nil {
			b.state.Written = map[string]uint64{}
		}
	}
	return b, nil
}

// Name is what the node's report shows.
func (b *Backend) Name() string { return "cgroup" }

// Apply writes each pod's weight when it differs from the plan by more
// than 1 %.
func (b *Backend) Apply(plan enforce.Plan) (enforce.Result, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	var res enforce.Result
	var errs []error
	changed := false
	for _, pod := range plan.Pods {
		want := b.h.Native(pod.Shares)
		have, err := b.h.ReadWeight(pod.Cgroup)
		if errors.Is(err, os.ErrNotExist) {
			res.Vanished++
			continue
		}
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if _, known := b.state.Original[pod.Cgroup]; !known {
			b.state.Original[pod.Cgroup] = have
			changed = true
		}
		if last, ok := b.state.Written[pod.Cgroup]; ok && have != last {
			// Someone else wrote: kubelet, on an in-place resize. Its new
			// value is the one to give back when kubefair lets go.
			res.Drift++
			b.state.Original[pod.Cgroup] = have
			changed = true
		}
		kept := have
		if significant(have, want) {
			if err := b.h.WriteWeight(pod.Cgroup, want); err != nil {
				if errors.Is(err, os.ErrNotExist) {
					res.Vanished++
					continue
				}
				errs = append(errs, fmt.Errorf("writing %s: %w", pod.Cgroup, err))
				continue
			}
			res.Writes++
			kept = want
		}
		if last, ok := b.state.Written[pod.Cgroup]; !ok || last != kept {
			b.state.Written[pod.Cgroup] = kept
			changed = true
		}
	}
	if changed {
		errs = append(errs, b.save())
	}
	return res, errors.Join(errs...)
}

// significant tells whether a planned weight differs enough from the one
// in place to be written: the closed loop nudges every pod's weight each
// period, and a change of 1 % or less moves no share measurably but costs
// a write (and the kernel a reweight) per pod per period.
func significant(have, want uint64) bool {
	return (max(have, want)-min(have, want))*100 > have
}

// Restore puts kubelet's value back for each pod and forgets it. A pod whose
// cgroup is gone is simply forgotten.
func (b *Backend) Restore(pods []enforce.Pod) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	var errs []error
	for _, pod := range pods {
		orig, ok := b.state.Original[pod.Cgroup]
		if !ok {
			continue
		}
		if err := b.h.WriteWeight(pod.Cgroup, orig); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, fmt.Errorf("restoring %s: %w", pod.Cgroup, err))
			continue
		}
		delete(b.state.Original, pod.Cgroup)
		delete(b.state.Written, pod.Cgroup)
	}
	errs = append(errs, b.save())
	return errors.Join(errs...)
}

// KubeletShares is the weight kubelet gave a pod cgroup, in cpu.shares
// units: the value it had before kubefair first wrote (or kubelet's latest
// rewrite), else what is on disk now. os.ErrNotExist: the cgroup is gone.
func (b *Backend) KubeletShares(cgroup string) (uint64, error) {
	b.mu.Lock()
	orig, ok := b.state.Original[cgroup]
	b.mu.Unlock()
	if ok {
		return b.h.Shares(orig), nil
	}
	native, err := b.h.ReadWeight(cgroup)
	if err != nil {
		return 0, err
	}
	return b.h.Shares(native), nil
}

// Managed lists the pod cgroups kubefair has changed and not yet restored.
func (b *Backend) Managed() []enforce.Pod {
	b.mu.Lock()
	defer b.mu.Unlock()
	pods := make([]enforce.Pod, 0, len(b.state.Original))
	for cg := range b.state.Original {
		pods = append(pods, enforce.Pod{Cgroup: cg})
	}
	return pods
}

func (b *Backend) save() error {
	if b.stateDir == "" {
		return nil
	}
	data, err := json.Marshal(b.state)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(b.stateDir, 0o700); err != nil {
		return err
	}
	tmp := filepath.Join(b.stateDir, stateFile+".tmp")
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, filepath.Join(b.stateDir, stateFile))
}

// BurstableDir is kubelet's QoS cgroup of Burstable pods.
const BurstableDir = KubepodsDir + "/burstable"

// RepairBurstable undoes a transient of kubelet's: when kubelet starts it
// sets the Burstable QoS cgroup to the minimum weight (2 shares) and writes
// the sum of its pods' requests only at its next QoS update, up to a minute
// later. Meanwhile every Burstable pod together weighs 2 against the rest
// of the node, and the load balancer, which sees the pods' load through
// that weight, no longer places their threads by weight: tenants' shares
// drift by 5–10 points. podCgroups are the node's pod cgroups; the repair
// writes what kubelet will write — the sum of kubelet's weights of the
// Burstable pods, a pod with no CPU request counting 0 as in kubelet — and
// only when the QoS weight is below half of it, which kubelet's own value
// never is (it raises the QoS weight before it creates a pod's cgroup).
// For the same reason a value found healthy stays so until it changes: the
// pods are summed only then, and a steady period costs one read.
// It reports whether it wrote.
func (b *Backend) RepairBurstable(podCgroups iter.Seq[string]) (bool, error) {
	have, err := b.h.ReadWeight(BurstableDir)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return false, nil
		}
		return false, err
	}
	if have == b.burstableHealthy {
		return false, nil
	}
	var want uint64
	for cg := range podCgroups {
		if filepath.Dir(cg) != BurstableDir {
			continue
		}
		shares, err := b.KubeletShares(cg)
		if err != nil || shares <= fairness.MinShares {
			continue // gone, or no CPU request
		}
		want += shares
	}
	if want == 0 {
		return false, nil // kubelet's 2 is right with no requests to sum
	}
	if b.h.Shares(have)*2 >= want {
		b.burstableHealthy = have
		return false, nil
	}
	native := b.h.Native(want)
	if err := b.h.WriteWeight(BurstableDir, native); err != nil {
		return false, fmt.Errorf("repairing %s: %w", BurstableDir, err)
	}
	b.burstableHealthy = native
	return true, nil
}
