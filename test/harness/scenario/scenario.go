// Package scenario is the multi-tenant workload kubefair's end-to-end suite
// and `make demo` run on a real cluster: three priced tiers, three tenants
// whose Deployments of CPU burners have 1, 4 and 12 pods with different
// thread counts, and a tenant hosting two VM-like multi-threaded pods that
// its workloads weigh 3:1.
package scenario

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kubefairv1 "github.com/kubefair/kubefair/api/v1alpha1"
	"github.com/kubefair/kubefair/test/harness/images"
)

// Tier is a pricing tier of the scenario.
type Tier struct {
	Name   string
	Weight int32
	Price  string // per CPU-hour
}

// Workload is one Deployment of burners.
type Workload struct {
	Name          string
	Pods, Threads int
	// Labels of the pods (a VM's domain label selects its workload).
	Labels map[string]string
	// Weight inside the tenant (Tenant.spec.workloads); 0: not a workload.
	Weight int32
	// BestEffort pods request no CPU (kubelet puts them below the
	// BestEffort QoS cgroup, which weighs 2 shares); the others request
	// CPURequest and are Burstable.
	BestEffort bool
	// Children: each pod runs the spinner instead of the burner, which
	// starts one more process per entry, with that many threads, in its
	// container (spinner -children).
	Children []int
}

// PodThreads is how many spinning threads each of the workload's pods runs.
func (w Workload) PodThreads() int {
	n := w.Threads
	for _, c := range w.Children {
		n += c
	}
	return n
}

// Tenant is one tenant of the scenario and what it runs in its namespace.
type Tenant struct {
	Name, Tier string
	// Namespace is the tenant's one namespace; BySelector claims it by the
	// label team=<tenant> instead of by name.
	Namespace  string
	BySelector bool
	Workloads  []Workload
}

// Currency of every tier.
const Currency = "EUR"

// CPURequest of every burner container: Burstable pods, 51 cpu.shares
// each from kubelet — the stock behaviour kubefair is measured against.
const CPURequest = "50m"

// Tiers of every scenario.
var Tiers = []Tier{{"gold", 400, "0.120"}, {"silver", 200, "0.060"}, {"bronze", 100, "0.030"}}

// The tenants: greedy ones with 1, 4 and 12 pods, weights 4:2:1, and one
// hosting two VMs.
var (
	checkout = Tenant{Name: "checkout", Tier: "gold", Namespace: "checkout", Workloads: []Workload{{Name: "web", Pods: 1, Threads: 4}}}
	search   = Tenant{Name: "search", Tier: "silver", Namespace: "search", BySelector: true, Workloads: []Workload{{Name: "index", Pods: 4, Threads: 2}}}
	batch    = Tenant{Name: "batch", Tier: "bronze", Namespace: "batch", Workloads: []Workload{{Name: "jobs", Pods: 12, Threads: 1}}}
	hosting  = Tenant{Name: "hosting", Tier: "silver", Namespace: "hosting", Workloads: []Workload{
		{Name: "vm-large", Pods: 1, Threads: 4, Labels: map[string]string{"kubevirt.io/domain": "large"}, Weight: 3},
		{Name: "vm-small", Pods: 1, Threads: 4, Labels: map[string]string{"kubevirt.io/domain": "small"}, Weight: 1},
	}}
	// render's one pod runs processes of 1, 8 and 50 threads: under its
	// default threadPolicy PFS each gets a third of the pod's CPU on
	// kubefair's kernel, stock gives them 1:8:50.
	render = Tenant{Name: "render", Tier: "silver", Namespace: "render", Workloads: []Workload{{Name: "frames", Pods: 1, Threads: 1, Children: []int{8, 50}}}}
	etl    = Tenant{Name: "etl", Tier: "bronze", Namespace: "etl", Workloads: []Workload{{Name: "load", Pods: 4, Threads: 1}}}
)

// Scenario is a set of tenants and the node their pods run on.
type Scenario struct {
	Tenants []Tenant
	// Node pins every pod to one node (kubernetes.io/hostname); "" leaves
	// it to the scheduler.
	Node string
}

var (
	// Full is the end-to-end suite's and the demo's scenario.
	Full = Scenario{Tenants: []Tenant{checkout, search, batch, hosting}}
	// Greedy is its greedy tenants alone: 1, 4 and 12 pods weighted 4:2:1,
	// the 4 BestEffort (as batch and dev namespaces often are).
	Greedy = Scenario{Tenants: []Tenant{checkout, search.withBestEffortPods(), batch}}
	// Threads is the demo's patched-kernel node: render, whose one pod
	// runs processes of 1, 8 and 50 threads, beside etl's four
	// single-thread pods, weighted 2:1.
	Threads = Scenario{Tenants: []Tenant{render, etl}}
	// GreedyThreads is the node suite's: the greedy tenants and render.
	GreedyThreads = Scenario{Tenants: append(slices.Clone(Greedy.Tenants), render)}
)

// ThreadsTenant is the scenario's tenant whose one pod runs processes of
// different thread counts (Workload.Children), if any.
func (s Scenario) ThreadsTenant() (Tenant, bool) {
	for _, tn := range s.Tenants {
		if len(tn.Workloads) == 1 && tn.Workloads[0].Pods == 1 && len(tn.Workloads[0].Children) > 0 {
			return tn, true
		}
	}
	return Tenant{}, false
}

// ProcessThreads are the thread counts of the tenant's processes, the
// pod's main process first (what ProcessUsage keys them by).
func (t Tenant) ProcessThreads() []int {
	w := t.Workloads[0]
	return append([]int{w.Threads}, w.Children...)
}

// On is the scenario with its pods pinned to node.
func (s Scenario) On(node string) Scenario { s.Node = node; return s }

// Pods is how many pods the scenario runs.
func (s Scenario) Pods() int {
	n := 0
	for _, t := range s.Tenants {
		n += t.Pods()
	}
	return n
}

// HasVMs tells whether the scenario has the hosting tenant's VMs.
func (s Scenario) HasVMs() bool {
	for _, t := range s.Tenants {
		for _, w := range t.Workloads {
			if w.Weight > 0 {
				return true
			}
		}
	}
	return false
}

// TierOf is a tenant's tier.
func TierOf(t Tenant) Tier {
	for _, tier := range Tiers {
		if tier.Name == t.Tier {
			return tier
		}
	}
	panic("scenario: tenant " + t.Name + " has no tier " + t.Tier)
}

// withBestEffortPods is the tenant with every pod BestEffort.
func (t Tenant) withBestEffortPods() Tenant {
	t.Workloads = slices.Clone(t.Workloads)
	for i := range t.Workloads {
		t.Workloads[i].BestEffort = true
	}
	return t
}

// BestEffort tells whether all the tenant's pods are BestEffort.
func (t Tenant) BestEffort() bool {
	for _, w := range t.Workloads {
		if !w.BestEffort {
			return false
		}
	}
	return len(t.Workloads) > 0
}

// Pods is how many pods the tenant runs.
func (t Tenant) Pods() int {
	n := 0
	for _, w := range t.Workloads {
		n += w.Pods
	}
	return n
}

// EntitledShares are the tenants' shares of the CPU the scenario's pods
// use when every tenant is backlogged and feasible (each has ≥ 2 threads
// on 2 CPUs): their weights over the sum.
func (s Scenario) EntitledShares() map[string]float64 {
	var sum float64
	for _, t := range s.Tenants {
		sum += float64(TierOf(t).Weight)
	}
	out := map[string]float64{}
	for _, t := range s.Tenants {
		out[t.Name] = float64(TierOf(t).Weight) / sum
	}
	return out
}

// Objects are everything the scenario creates, in creation order: tiers,
// tenants, namespaces, Deployments.
func (s Scenario) Objects() []client.Object {
	var objs []client.Object
	for _, tier := range Tiers {
		objs = append(objs, &kubefairv1.PricingTier{
			ObjectMeta: metav1.ObjectMeta{Name: tier.Name},
			Spec:       kubefairv1.PricingTierSpec{Weight: tier.Weight, PricePerCPUHour: tier.Price, Currency: Currency},
		})
	}
	for _, t := range s.Tenants {
		objs = append(objs, tenantObject(t))
	}
	for _, t := range s.Tenants {
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: t.Namespace}}
		if t.BySelector {
			ns.Labels = map[string]string{TenancyLabel: t.Name}
		}
		objs = append(objs, ns)
	}
	for _, t := range s.Tenants {
		for _, w := range t.Workloads {
			d := Deployment(t.Namespace, w)
			if s.Node != "" {
				d.Spec.Template.Spec.NodeSelector = map[string]string{corev1.LabelHostname: s.Node}
			}
			objs = append(objs, d)
		}
	}
	return objs
}

// TenancyLabel is the namespace label a tenant claiming its namespace by
// label selects: the chart's default tenancy.labelKeys, which only the
// platform (the scenario's admin) may set.
const TenancyLabel = "kubefair.io/tenant"

func tenantObject(t Tenant) *kubefairv1.Tenant {
	tn := &kubefairv1.Tenant{ObjectMeta: metav1.ObjectMeta{Name: t.Name}, Spec: kubefairv1.TenantSpec{Tier: t.Tier}}
	if t.BySelector {
		tn.Spec.NamespaceSelector = &kubefairv1.LabelSelector{MatchLabels: map[string]kubefairv1.LabelValue{TenancyLabel: kubefairv1.LabelValue(t.Name)}}
	} else {
		tn.Spec.Namespaces = []string{t.Namespace}
	}
	for _, w := range t.Workloads {
		if w.Weight > 0 {
			tn.Spec.Workloads = append(tn.Spec.Workloads, kubefairv1.Workload{
				Name: w.Name, Weight: w.Weight, PodSelector: kubefairv1.SelectorFromLabels(w.Labels),
			})
		}
	}
	return tn
}

// Deployment runs a workload's burners: each pod one burner with
// w.Threads spinning threads (the spinner, with w.Children's processes,
// where it has any), requesting CPURequest unless BestEffort.
func Deployment(namespace string, w Workload) *appsv1.Deployment {
	labels := map[string]string{"app": w.Name}
	for k, v := range w.Labels {
		labels[k] = v
	}
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: w.Name},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(int32(w.Pods)),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": w.Name}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					TerminationGracePeriodSeconds: ptr.To(int64(2)),
					AutomountServiceAccountToken:  ptr.To(false),
					Containers: []corev1.Container{{
						Name:            "burner",
						Image:           images.Burner.Ref,
						ImagePullPolicy: corev1.PullNever,
						Command:         []string{images.Burner.Binary(), "-threads", strconv.Itoa(w.Threads)},
						Resources: corev1.ResourceRequirements{
							Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(CPURequest)},
						},
						// In-place resizes of CPU need no restart (the suite's resize fault).
						ResizePolicy: []corev1.ContainerResizePolicy{{ResourceName: corev1.ResourceCPU, RestartPolicy: corev1.NotRequired}},
					}},
				},
			},
		},
	}
	if len(w.Children) > 0 {
		counts := make([]string, len(w.Children))
		for i, n := range w.Children {
			counts[i] = strconv.Itoa(n)
		}
		// Processes of exactly n runnable threads, for the thread policies:
		// a Go burner's runtime threads are runnable too, most of the
		// time in a busy guest (docs/guest-node.md).
		c := &d.Spec.Template.Spec.Containers[0]
		c.Command = []string{images.Spinner, "-threads", strconv.Itoa(w.Threads), "-children", strings.Join(counts, ",")}
	}
	if w.BestEffort {
		c := &d.Spec.Template.Spec.Containers[0]
		c.Resources, c.ResizePolicy = corev1.ResourceRequirements{}, nil
	}
	return d
}

// String names a workload for tables: tenant/workload.
func (w Workload) String() string { return fmt.Sprintf("%s×%d threads", w.Name, w.PodThreads()) }
