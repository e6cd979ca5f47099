// Package cgroup is the cgroup enforcement backend: pod cgroup weights,
// realised through kubelet's QoS hierarchy.
package cgroup

import (
	"errors"
	"fmt"
	"iter"
	"maps"
	"math"
	"os"
	"path"
	"slices"
	"sync"

	"github.com/kubefair/kubefair/node-agent/cgroupfs"
	"github.com/kubefair/kubefair/node-agent/enforce"
	"github.com/kubefair/kubefair/node-agent/fairness"
	"github.com/kubefair/kubefair/node-agent/internal/statedir"
)

// Backend is the cgroup enforcement layer: it owns every pod cgroup weight
// the agent writes. It writes only values that differ, counts and undoes
// drift (someone else — kubelet on a resize, systemd on a daemon-reload —
// changed a value it set), and remembers each pod's original value on disk
// so that a pod leaving its tenant, an uninstall or an agent restart can
// put kubelet's value back.
//
// Weights keep their resolution by scale, where the plan allows it:
// kubelet's weights are small on cgroup v2 (a 50m request is cpu.weight
// 2), too coarse to split among a tenant's pods. So in each QoS cgroup the
// backend multiplies every pod's weight by one factor — the tenants'
// planned weights and kubelet's weights of the pods of no tenant alike —,
// which leaves every ratio between siblings, and so every share, as
// planned.
type Backend struct {
	h        *cgroupfs.Hierarchy
	stateDir statedir.Dir

	mu sync.Mutex
	// state is persisted in stateDir as JSON after every change.
	state backendState
	// scale is each pod parent's factor on its pods' weights (a power of
	// two, 1 when absent).
	scale map[string]uint64
	// burstableHealthy is the Burstable QoS weight (native units) last found
	// or made healthy by repairBurstable.
	burstableHealthy uint64
	// own is the agent's own pod cgroup ("": not known), restored last.
	own string
	// wrote, when set (tests), is told every weight written, in order.
	wrote func(cgroup string)
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
func NewBackend(h *cgroupfs.Hierarchy, stateDir string) (*Backend, error) {
	b := &Backend{h: h, stateDir: statedir.Dir(stateDir), scale: map[string]uint64{}}
	if _, err := b.stateDir.Load(stateFile, &b.state); err != nil {
		return nil, fmt.Errorf("reading the agent's state: %w", err)
	}
	if b.state.Original == nil {
		b.state.Original = map[string]uint64{}
	}
	if b.state.Written == nil {
		b.state.Written = map[string]uint64{}
	}
	return b, nil
}

// Name is what the node's report shows.
func (b *Backend) Name() string { return "cgroup" }

// KernelABI is 0: cgroup weights need no patched kernel.
func (b *Backend) KernelABI() int { return 0 }

// resolution is the smallest weight, in native units, the scale aims to
// give any pod: rounding it then moves its share by at most 0.5 %.
const resolution = 100

// Apply realises the plan through kubelet's QoS hierarchy
// (fairness.Flatten): it writes the tenants' pods', the QoS cgroups' and,
// where that is needed to keep their stock share, the pods of no tenant's
// weights, each level scaled for resolution where the plan allows it, and
// only values that differ from those in place by more than 1 %. Cgroups
// that no longer need a value of kubefair's get kubelet's back.
//
// It then repairs kubelet's start-up weight of the Burstable QoS cgroup
// where needed (repairBurstable).
func (b *Backend) Apply(plan enforce.Plan) (enforce.Result, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	res, err := b.apply(plan)
	repaired, rerr := b.repairBurstable(plan.Cgroups())
	res.RepairedBurstable = repaired
	return res, errors.Join(err, rerr)
}

func (b *Backend) apply(plan enforce.Plan) (enforce.Result, error) {
	var res enforce.Result
	var errs []error
	// The levels: kubepods (Guaranteed pods and the QoS cgroups), and each
	// QoS cgroup's pods. want and kubelet hold each cgroup's weight. With
	// no tenant's pod planned there is nothing to realise: every value
	// goes back to kubelet's below.
	levels := map[string][]string{}
	want, kubelet := map[string]float64{}, map[string]float64{}
	if len(plan.Pods) > 0 {
		t, err := b.readTree(plan, &res)
		if err != nil {
			return res, err
		}
		w := fairness.Flatten(t.QoSTree)
		populated := make([]bool, len(t.classes))
		for i, p := range t.Pods {
			if p.Class >= 0 {
				populated[p.Class] = true
			}
			parent := path.Dir(t.cgroups[i])
			levels[parent] = append(levels[parent], t.cgroups[i])
			want[t.cgroups[i]], kubelet[t.cgroups[i]] = w.Pods[i], p.Kubelet
		}
		for c, cg := range t.classes {
			if populated[c] { // an empty QoS cgroup competes for nothing: left to kubelet
				levels[t.kubepods] = append(levels[t.kubepods], cg)
				want[cg], kubelet[cg] = w.Classes[c], t.Classes[c]
			}
		}
	}
	planned := make(map[string]bool, len(plan.Pods))
	for _, pod := range plan.Pods {
		planned[pod.Cgroup] = true
	}
	maps.DeleteFunc(b.scale, func(parent string, _ uint64) bool { return levels[parent] == nil }) // kept for hysteresis where still in use
	changed := false
	for _, parent := range slices.Sorted(maps.Keys(levels)) {
		k := uint64(1)
		if plan.Rescale {
			k = b.rescale(parent, levels[parent], want)
		}
		b.scale[parent] = k
		for _, cg := range levels[parent] {
			scaled := max(want[cg], 0) * float64(k)
			v := b.h.ClampNative(uint64(math.Round(scaled)))
			if planned[cg] && (scaled < float64(b.h.MinNative()) || scaled > float64(b.h.MaxNative())) {
				res.Clamped = append(res.Clamped, cg)
			}
			if planned[cg] || v != uint64(math.Round(kubelet[cg])) {
				changed = b.set(cg, v, &res, &errs) || changed
			} else if _, managed := b.state.Original[cg]; managed {
				changed = b.restore(cg, &errs) || changed // kubelet's value is right again
			}
		}
	}
	for cg := range b.state.Original { // gone, or no longer weighed by kubefair
		if _, ok := want[cg]; !ok {
			changed = b.restore(cg, &errs) || changed
		}
	}
	if changed {
		errs = append(errs, b.save())
	}
	return res, errors.Join(errs...)
}

// tree is a node's pod cgroups as Flatten takes them, with their paths.
type tree struct {
	fairness.QoSTree
	kubepods string
	classes  []string // the QoS cgroups' paths
	cgroups  []string // each pod's, in QoSTree.Pods' order
}

// readTree is the plan's pods and the pods of no tenant beside them, by
// QoS class, with kubelet's weight of each and the plan's part and limit
// of the tenants' pods; a pod whose cgroup is gone counts as vanished
// (no error). The QoS cgroups weigh what kubelet gives them: Burstable
// the sum of its pods' requests (as cpu.shares; at least the minimum),
// BestEffort the minimum — computed, not read, so that kubelet's
// start-up value of Burstable (repairBurstable) does not count as its
// weight.
func (b *Backend) readTree(plan enforce.Plan, res *enforce.Result) (tree, error) {
	layout, err := b.h.Layout()
	if err != nil {
		return tree{}, err
	}
	class := map[string]int{layout.Kubepods: -1, layout.Burstable: 0, layout.BestEffort: 1}
	t := tree{kubepods: layout.Kubepods, classes: []string{layout.Burstable, layout.BestEffort}}
	var burstable uint64
	add := func(cg string, pod enforce.Pod) {
		c, ok := class[path.Dir(cg)]
		if !ok {
			return // not a pod cgroup kubelet laid out
		}
		native, err := b.kubeletWeight(cg)
		if err != nil {
			res.Vanished++
			return
		}
		t.Pods = append(t.Pods, fairness.QoSPod{Class: c, Kubelet: float64(native), Part: pod.Weight, Limit: pod.Limit})
		t.cgroups = append(t.cgroups, cg)
		if c == 0 {
			burstable += b.requestShares(native)
		}
	}
	// The pods of no tenant first, as apply writes them: when every weight
	// was just reset (systemd's daemon-reload, say) and the plan raises the
	// tenants' pods far above kubelet's values, a pod of no tenant written
	// after them would starve in between — the agent's own among them,
	// which then cannot finish the writes that would free it.
	for _, cg := range plan.Others {
		add(cg, enforce.Pod{})
	}
	for _, pod := range plan.Pods {
		add(pod.Cgroup, pod)
	}
	t.Classes = []float64{float64(b.h.Native(max(burstable, fairness.MinShares))), float64(b.h.Native(fairness.MinShares))}
	return t, nil
}

// requestShares is a pod's CPU request in cpu.shares as kubelet sums it
// into the Burstable QoS cgroup, from the pod's native weight: 0 for a pod
// without a request (the minimum weight).
func (b *Backend) requestShares(native uint64) uint64 {
	if shares := b.h.Shares(native); shares > fairness.MinShares {
		return shares
	}
	return 0
}

// rescale is a level's factor for this period: the smallest power of two
// that lifts its smallest weight to resolution, as far as its largest
// stays in range. A factor in use is kept while the smallest weight stays
// below four times resolution with it, so that weights moving a little do
// not rewrite every sibling.
func (b *Backend) rescale(parent string, cgroups []string, want map[string]float64) uint64 {
	lo, hi := math.Inf(1), 0.0
	for _, cg := range cgroups {
		w := want[cg]
		lo, hi = min(lo, max(w, 1e-3)), max(hi, w)
	}
	top := float64(b.h.MaxNative())
	k := max(b.scale[parent], 1)
	if scaled := lo * float64(k); scaled < resolution || scaled >= 4*resolution || hi*float64(k) > top {
		k = 1
		for lo*float64(k) < resolution && hi*float64(2*k) <= top {
			k *= 2
		}
	}
	return k
}

// Held is every cgroup kubefair holds at a value of its own (pods and QoS
// cgroups), with that value in native units.
func (b *Backend) Held() map[string]uint64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return maps.Clone(b.state.Written)
}

// Scales are the factors in use, by pod parent (those at 1 omitted).
func (b *Backend) Scales() map[string]uint64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := map[string]uint64{}
	for parent, k := range b.scale {
		if k > 1 {
			out[parent] = k
		}
	}
	return out
}

// set makes one cgroup's weight want (native units), recording kubelet's
// value before the first write and counting drift. It reports whether the
// state changed.
func (b *Backend) set(cgroup string, want uint64, res *enforce.Result, errs *[]error) (changed bool) {
	have, err := b.h.ReadWeight(cgroup)
	if errors.Is(err, os.ErrNotExist) {
		res.Vanished++
		return b.forget(cgroup) // nothing left to restore
	}
	if err != nil {
		*errs = append(*errs, err)
		return false
	}
	if _, known := b.state.Original[cgroup]; !known {
		b.state.Original[cgroup] = have
		changed = true
	}
	if last, ok := b.state.Written[cgroup]; ok && have != last {
		// Someone else wrote: kubelet on an in-place resize, systemd
		// applying the unit's CPUWeight again. Their new value is the one
		// to give back when kubefair lets go.
		res.Drift++
		b.state.Original[cgroup] = have
		changed = true
	}
	kept := have
	if significant(have, want) {
		if err := b.h.WriteWeight(cgroup, want); err != nil {
			if errors.Is(err, os.ErrNotExist) {
				res.Vanished++
				return b.forget(cgroup) || changed
			}
			*errs = append(*errs, fmt.Errorf("writing %s: %w", cgroup, err))
			return changed
		}
		res.Writes++
		if b.wrote != nil {
			b.wrote(cgroup)
		}
		kept = want
	}
	if last, ok := b.state.Written[cgroup]; !ok || last != kept {
		b.state.Written[cgroup] = kept
		changed = true
	}
	return changed
}

// forget drops a cgroup that is gone from the state, telling whether it
// was there.
func (b *Backend) forget(cgroup string) bool {
	_, held := b.state.Original[cgroup]
	delete(b.state.Original, cgroup)
	delete(b.state.Written, cgroup)
	return held
}

// significant tells whether a planned weight differs enough from the one
// in place to be written: the closed loop nudges every pod's weight each
// period, and a change of 1 % or less moves no share measurably but costs
// a write (and the kernel a reweight) per pod per period.
func significant(have, want uint64) bool {
	return (max(have, want)-min(have, want))*100 > have
}

// SetOwn names the agent's own pod cgroup (path as in plans), which
// RestoreAll leaves for last.
func (b *Backend) SetOwn(cgroup string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.own = cgroup
}

// RestoreAll puts kubelet's value back on every cgroup kubefair changed,
// the agent's own pod and the QoS cgroup that holds it last. Each write
// lowers a weight kubefair scaled up, so whatever is restored early
// weighs less against what is not yet: the agent's pod, restored before
// its siblings, would run at kubelet's weight against theirs many times
// heavier — on a busy node too little CPU to finish the restore within
// its grace period (seen on the guest under TCG: killed mid-restore, half
// the pods left at kubefair's weights).
func (b *Backend) RestoreAll() error {
	b.mu.Lock()
	own := b.own
	b.mu.Unlock()
	last := func(cg string) int {
		switch {
		case own == "":
			return 0
		case cg == own:
			return 2
		case cg == path.Dir(own):
			return 1
		}
		return 0
	}
	pods := b.Managed()
	slices.SortStableFunc(pods, func(x, y enforce.Pod) int { return last(x.Cgroup) - last(y.Cgroup) })
	return b.Restore(pods)
}

// Restore puts kubelet's value back for each pod and forgets it. A pod whose
// cgroup is gone is simply forgotten.
func (b *Backend) Restore(pods []enforce.Pod) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	var errs []error
	for _, pod := range pods {
		b.restore(pod.Cgroup, &errs)
	}
	errs = append(errs, b.save())
	return errors.Join(errs...)
}

// restore writes kubelet's value of one cgroup back and forgets it.
func (b *Backend) restore(cgroup string, errs *[]error) (changed bool) {
	orig, ok := b.state.Original[cgroup]
	if !ok {
		return false
	}
	if err := b.h.WriteWeight(cgroup, orig); err != nil && !errors.Is(err, os.ErrNotExist) {
		*errs = append(*errs, fmt.Errorf("restoring %s: %w", cgroup, err))
		return false
	}
	if b.wrote != nil {
		b.wrote(cgroup)
	}
	return b.forget(cgroup)
}

// KubeletWeight is the weight kubelet gave a pod cgroup, in native units:
// the value it had before kubefair first wrote (or kubelet's or systemd's
// latest rewrite), else what is on disk now — read back, never derived
// from the pod's requests, since kubelet and runc convert requests to
// cgroup v2 weights differently. os.ErrNotExist: the cgroup is gone.
func (b *Backend) KubeletWeight(cgroup string) (uint64, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.kubeletWeight(cgroup)
}

func (b *Backend) kubeletWeight(cgroup string) (uint64, error) {
	if orig, ok := b.state.Original[cgroup]; ok {
		return orig, nil
	}
	return b.h.ReadWeight(cgroup)
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

func (b *Backend) save() error { return b.stateDir.Save(stateFile, b.state) }

// repairBurstable undoes a transient of kubelet's: when kubelet starts it
// sets the Burstable QoS cgroup to the minimum weight (2 shares) and writes
// the sum of its pods' requests only at its next QoS update, up to a minute
// later. Meanwhile every Burstable pod together weighs 2 against the rest
// of the node, and the load balancer, which sees the pods' load through
// that weight, no longer places their threads by weight: tenants' shares
// drift by 5–10 points. podCgroups are the node's pod cgroups; the repair
// writes what kubelet will write — the sum of kubelet's weights of the
// Burstable pods in cpu.shares units (on cgroup v2 each converted back
// with kubelet's own mapping), a pod with no CPU request counting 0 as in
// kubelet — and only when the QoS weight is below half of it, which
// kubelet's own value never is (it raises the QoS weight before it creates
// a pod's cgroup). For the same reason a value found healthy stays so
// until it changes: the pods are summed only then, and a steady period
// costs one read. It reports whether it wrote.
func (b *Backend) repairBurstable(podCgroups iter.Seq[string]) (bool, error) {
	layout, err := b.h.Layout()
	if err != nil {
		return false, nil // no kubepods: the agent reports that already
	}
	have, err := b.h.ReadWeight(layout.Burstable)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return false, nil
		}
		return false, err
	}
	if _, managed := b.state.Original[layout.Burstable]; managed || have == b.burstableHealthy {
		return false, nil // kubefair weighs it (Apply), or it was found healthy
	}
	var want uint64
	for cg := range podCgroups {
		if path.Dir(cg) != layout.Burstable {
			continue
		}
		if native, err := b.kubeletWeight(cg); err == nil { // else gone
			want += b.requestShares(native)
		}
	}
	if want == 0 {
		return false, nil // kubelet's 2 is right with no requests to sum
	}
	if b.h.Shares(have)*2 >= want {
		b.burstableHealthy = have
		return false, nil
	}
	native := b.h.Native(want)
	if err := b.h.WriteWeight(layout.Burstable, native); err != nil {
		return false, fmt.Errorf("repairing %s: %w", layout.Burstable, err)
	}
	b.burstableHealthy = native
	return true, nil
}
