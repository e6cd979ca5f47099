// Package chart checks the Helm chart against a real API server (envtest):
// lint, every values file in charts/kubefair/ci rendered and validated by
// server-side dry-run, install, the agent's own-node-only write rule, the
// tenancy labels only the platform may set, upgrade of the CRDs, and an
// uninstall that leaves nothing behind.
package chart

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kubefairv1 "github.com/kubefair/kubefair/api/v1alpha1"
	"github.com/kubefair/kubefair/internal/metricsauth"
	"github.com/kubefair/kubefair/test/harness/kubeapi"
	"github.com/kubefair/kubefair/test/harness/scrape"
)

const namespace = "kubefair-system"

var (
	api        *kubeapi.Server
	k8s        client.Client
	helm       string
	kubeconfig string
	chartDir   = filepath.Join(kubeapi.RepoRoot(), "charts", "kubefair")
)

func TestMain(m *testing.M) {
	code, err := setup(m)
	if err != nil {
		fmt.Fprintln(os.Stderr, "chart suite:", err)
		os.Exit(1)
	}
	os.Exit(code)
}

func setup(m *testing.M) (int, error) {
	helm = os.Getenv("HELM")
	if helm == "" {
		return 0, errors.New("$HELM is not set: run the suite with `make test` (it builds helm into the tools cache)")
	}
	if _, err := os.Stat(helm); err != nil {
		return 0, fmt.Errorf("helm not found at %s: run `make helm`", helm)
	}
	if err := apiextensionsv1.AddToScheme(scheme.Scheme); err != nil {
		return 0, err
	}
	var err error
	if api, err = kubeapi.StartBare(); err != nil {
		return 0, err
	}
	defer api.Stop()
	k8s = api.Client
	tmp, err := os.MkdirTemp("", "kubefair-chart")
	if err != nil {
		return 0, err
	}
	defer os.RemoveAll(tmp)
	kubeconfig = filepath.Join(tmp, "kubeconfig")
	if err := api.WriteKubeconfig(kubeconfig); err != nil {
		return 0, err
	}
	return m.Run(), nil
}

func runHelm(t *testing.T, args ...string) string {
	t.Helper()
	cmd := exec.Command(helm, append([]string{"--kubeconfig", kubeconfig}, args...)...)
	cmd.Env = append(os.Environ(), "HELM_CACHE_HOME="+t.TempDir(), "HELM_CONFIG_HOME="+t.TempDir(), "HELM_DATA_HOME="+t.TempDir())
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("helm %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

func decode(t *testing.T, manifest string) []*unstructured.Unstructured {
	t.Helper()
	var objs []*unstructured.Unstructured
	dec := yaml.NewYAMLOrJSONDecoder(strings.NewReader(manifest), 4096)
	for {
		u := &unstructured.Unstructured{}
		if err := dec.Decode(&u.Object); err != nil {
			if errors.Is(err, io.EOF) {
				return objs
			}
			t.Fatalf("decoding rendered manifest: %v", err)
		}
		if len(u.Object) > 0 {
			objs = append(objs, u)
		}
	}
}

func TestLint(t *testing.T) {
	out := runHelm(t, "lint", "--strict", chartDir)
	if !strings.Contains(out, "0 chart(s) failed") {
		t.Fatalf("helm lint: %s", out)
	}
}

// TestEveryValuesFileRendersValidObjects: each ci/*.yaml renders objects
// the pinned Kubernetes API server accepts (server-side dry-run validates
// them against its schemas).
func TestEveryValuesFileRendersValidObjects(t *testing.T) {
	files, _ := filepath.Glob(filepath.Join(chartDir, "ci", "*.yaml"))
	if len(files) < 3 {
		t.Fatalf("want a matrix of values files in ci/, found %v", files)
	}
	ensureNamespace(t)
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			objs := decode(t, runHelm(t, "template", "kubefair", chartDir, "-n", namespace, "-f", f))
			if len(objs) == 0 {
				t.Fatal("rendered nothing")
			}
			for _, o := range objs {
				if err := k8s.Create(context.Background(), o, client.DryRunAll); err != nil {
					t.Errorf("%s %s refused by the API server: %v", o.GetKind(), o.GetName(), err)
				}
			}
		})
	}
}

// TestAgentPrivilegesAreExplained: with default values every privilege of
// the agent's pod is there on purpose, and values.yaml says why.
func TestAgentPrivilegesAreExplained(t *testing.T) {
	objs := decode(t, runHelm(t, "template", "kubefair", chartDir, "-n", namespace))
	var ds *appsv1.DaemonSet
	for _, o := range objs {
		if o.GetKind() == "DaemonSet" {
			ds = &appsv1.DaemonSet{}
			if err := runtimeConvert(o, ds); err != nil {
				t.Fatal(err)
			}
		}
	}
	if ds == nil {
		t.Fatal("no agent DaemonSet rendered")
	}
	spec := ds.Spec.Template.Spec
	c := spec.Containers[0]
	sc := c.SecurityContext
	if sc == nil || sc.Privileged != nil && *sc.Privileged || sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation ||
		len(sc.Capabilities.Drop) != 1 || sc.Capabilities.Drop[0] != "ALL" || len(sc.Capabilities.Add) != 0 ||
		sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem || sc.SeccompProfile == nil {
		t.Fatalf("agent security context is wider than it needs: %+v", sc)
	}
	if spec.HostNetwork || spec.HostIPC {
		t.Error("the agent needs neither the host network nor host IPC by default")
	}
	// Host paths: the cgroup tree read-only, kubelet's pod cgroups (the
	// default node shape's) read-write, the state directory; no runtime
	// socket (containerd's API is opt-in): discovery walks the cgroup tree.
	var hostPaths []string
	for _, v := range spec.Volumes {
		if v.HostPath != nil {
			hostPaths = append(hostPaths, v.HostPath.Path)
		}
	}
	if fmt.Sprint(hostPaths) != "[/sys/fs/cgroup /sys/fs/cgroup/kubepods.slice /var/lib/kubefair]" {
		t.Errorf("the agent mounts host paths %v by default, want the cgroup tree, kubepods.slice and its state", hostPaths)
	}
	checkCgroupMounts(t, c, "kubepods.slice")
	if !slices.Contains(c.Args, "--containerd-address=") {
		t.Errorf("the agent's arguments %v do not leave containerd's address empty", c.Args)
	}
	values, err := os.ReadFile(filepath.Join(chartDir, "values.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	// Each privilege the pod takes has a comment in values.yaml or beside it in the template.
	template, _ := os.ReadFile(filepath.Join(chartDir, "templates", "agent", "daemonset.yaml"))
	for privilege, reason := range map[string]string{
		"hostPID":        "host PIDs",
		"cgroup mount":   "reads counters, processes and the",
		"pod cgroups rw": "writes pod cpu.shares",
		"state mount":    "original weights",
		"runAsUser 0":    "root-owned",
		"priorityClass":  "must not be evicted",
		"seccompProfile": "makes no call it refuses",
	} {
		if !bytes.Contains(values, []byte(reason)) && !bytes.Contains(template, []byte(reason)) {
			t.Errorf("no written reason for the agent's %s (looked for %q)", privilege, reason)
		}
	}
}

// checkCgroupMounts: the agent container mounts the cgroup tree read-only,
// recursively, and exactly the directories given read-write over it.
func checkCgroupMounts(t *testing.T, c corev1.Container, writable ...string) {
	t.Helper()
	var rw []string
	for _, m := range c.VolumeMounts {
		switch {
		case m.MountPath == "/host/cgroup":
			if !m.ReadOnly || m.RecursiveReadOnly == nil || *m.RecursiveReadOnly != corev1.RecursiveReadOnlyEnabled {
				t.Errorf("the cgroup tree is mounted %+v, want read-only, recursively", m)
			}
		case strings.HasPrefix(m.MountPath, "/host/cgroup/"):
			if m.ReadOnly {
				t.Errorf("%s is mounted read-only", m.MountPath)
			}
			rw = append(rw, strings.TrimPrefix(m.MountPath, "/host/cgroup/"))
		}
	}
	if !slices.Equal(rw, writable) {
		t.Errorf("read-write below the cgroup tree: %v, want %v", rw, writable)
	}
}

// TestAgentShapes: one agent DaemonSet per node shape, each on its nodes
// only, with its own backend, seccomp profile and writable cgroup
// directories; the default on the nodes of no shape; bad shapes refused.
func TestAgentShapes(t *testing.T) {
	shapes := `agent.shapes={"v1-cgroupfs":{"cgroupWritable":["cpu,cpuacct/kubepods"]},` +
		`"patched":{"backend":"syscall","seccompProfile":{"type":"Localhost","localhostProfile":"kubefair-agent.json"},"kubelet":{"cgroupDriver":"systemd"}}}`
	out := runHelm(t, "template", "kubefair", chartDir, "-n", namespace, "--show-only", "templates/agent/daemonset.yaml", "--set-json", shapes)
	byName := map[string]*appsv1.DaemonSet{}
	for _, o := range decode(t, out) {
		ds := &appsv1.DaemonSet{}
		if err := runtimeConvert(o, ds); err != nil {
			t.Fatal(err)
		}
		byName[ds.Name] = ds
	}
	for name, want := range map[string]struct {
		shape, backend, driver string
		writable               string
		seccomp                corev1.SeccompProfileType
	}{
		"kubefair-agent":             {"", "auto", "auto", "kubepods.slice", corev1.SeccompProfileTypeRuntimeDefault},
		"kubefair-agent-v1-cgroupfs": {"v1-cgroupfs", "auto", "auto", "cpu,cpuacct/kubepods", corev1.SeccompProfileTypeRuntimeDefault},
		"kubefair-agent-patched":     {"patched", "syscall", "systemd", "kubepods.slice", corev1.SeccompProfileTypeLocalhost},
	} {
		ds := byName[name]
		if ds == nil {
			t.Errorf("no DaemonSet %s rendered:\n%s", name, out)
			continue
		}
		spec := ds.Spec.Template.Spec
		c := spec.Containers[0]
		term := spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms
		expr := term[0].MatchExpressions[0]
		if want.shape == "" && expr.Operator != corev1.NodeSelectorOpDoesNotExist ||
			want.shape != "" && (expr.Operator != corev1.NodeSelectorOpIn || fmt.Sprint(expr.Values) != "["+want.shape+"]") ||
			expr.Key != "kubefair.io/agent-shape" || len(term) != 1 {
			t.Errorf("%s runs on nodes %+v, want those of shape %q", name, term, want.shape)
		}
		if got := ds.Spec.Selector.MatchLabels["kubefair.io/agent-shape"]; got != want.shape || spec.Containers == nil ||
			ds.Spec.Template.Labels["kubefair.io/agent-shape"] != want.shape {
			t.Errorf("%s selects pods of shape %q, want %q", name, got, want.shape)
		}
		for _, arg := range []string{"--backend=" + want.backend, "--cgroup-driver=" + want.driver, "--kubelet-cgroup-root=/"} {
			if !slices.Contains(c.Args, arg) {
				t.Errorf("%s: no %s in %v", name, arg, c.Args)
			}
		}
		if p := c.SecurityContext.SeccompProfile; p == nil || p.Type != want.seccomp {
			t.Errorf("%s: seccomp %+v, want %s", name, p, want.seccomp)
		}
		checkCgroupMounts(t, c, want.writable)
	}
	for set, refusal := range map[string]string{
		`agent.shapes={"Bad_Name":{}}`:                    "Bad_Name",
		`agent.shapes={"v1":{"period":"5s"}}`:             "period",
		`agent.cgroupWritable=["../etc"]`:                 "cgroupWritable",
		`agent.shapes={"v1":{"cgroupWritable":["/abs"]}}`: "cgroupWritable",
	} {
		out, err := exec.Command(helm, "template", "kubefair", chartDir, "--set-json", set).CombinedOutput()
		if err == nil || !strings.Contains(string(out), refusal) {
			t.Errorf("helm template --set-json %s: %v, want a refusal naming %q; output:\n%s", set, err, refusal, out)
		}
	}
}

func runtimeConvert(u *unstructured.Unstructured, into any) error {
	return runtimeDefaultConverter.FromUnstructured(u.Object, into)
}

func ensureNamespace(t *testing.T) {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}
	if err := k8s.Create(context.Background(), ns); err != nil && !strings.Contains(err.Error(), "already exists") {
		t.Fatal(err)
	}
}

func eventually(t *testing.T, what string, cond func() error) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	var err error
	for time.Now().Before(deadline) {
		if err = cond(); err == nil {
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Fatalf("%s: %v", what, err)
}

// TestInstallUpgradeUninstall is the life of a release.
func TestInstallUpgradeUninstall(t *testing.T) {
	ctx := context.Background()
	runHelm(t, "install", "kubefair", chartDir, "-n", namespace, "--create-namespace")

	for _, crd := range []string{"tenants.kubefair.io", "pricingtiers.kubefair.io", "nodesharereports.kubefair.io"} {
		eventually(t, "CRD "+crd+" established", func() error {
			var c apiextensionsv1.CustomResourceDefinition
			if err := k8s.Get(ctx, client.ObjectKey{Name: crd}, &c); err != nil {
				return err
			}
			for _, cond := range c.Status.Conditions {
				if cond.Type == apiextensionsv1.Established && cond.Status == apiextensionsv1.ConditionTrue {
					return nil
				}
			}
			return fmt.Errorf("not established: %v", c.Status.Conditions)
		})
	}
	for _, o := range []client.Object{
		&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "kubefair-controller"}},
		&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "kubefair-agent"}},
		&rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "kubefair-controller", Namespace: namespace}},
		&appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "kubefair-controller", Namespace: namespace}},
		&appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Name: "kubefair-agent", Namespace: namespace}},
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "kubefair-agent", Namespace: namespace}},
	} {
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(o), o); err != nil {
			t.Errorf("%T %s not installed: %v", o, o.GetName(), err)
		}
	}

	t.Run("an agent writes only its own node's report", testOwnReportOnly)
	t.Run("only the platform sets the labels that decide tenancy", testTenancyLabels)

	// Upgrade with a chart whose Tenant CRD changed: helm updates the CRD.
	upgraded := filepath.Join(t.TempDir(), "kubefair")
	if out, err := exec.Command("cp", "-r", chartDir, upgraded).CombinedOutput(); err != nil {
		t.Fatalf("copying the chart: %v %s", err, out)
	}
	crdFile := filepath.Join(upgraded, "templates", "crds", "kubefair.io_tenants.yaml")
	data, _ := os.ReadFile(crdFile)
	const marker = "Tenant is a group of namespaces that shares CPU by one weight (upgraded)."
	changed := strings.Replace(string(data), "description: Tenant is a group of namespaces that shares CPU by one weight.\n", "description: "+marker+"\n", 1)
	if changed == string(data) {
		t.Fatal("the test could not find the Tenant description to change")
	}
	if err := os.WriteFile(crdFile, []byte(changed), 0o644); err != nil {
		t.Fatal(err)
	}
	runHelm(t, "upgrade", "kubefair", upgraded, "-n", namespace)
	var crd apiextensionsv1.CustomResourceDefinition
	if err := k8s.Get(ctx, client.ObjectKey{Name: "tenants.kubefair.io"}, &crd); err != nil {
		t.Fatal(err)
	}
	if got := crd.Spec.Versions[0].Schema.OpenAPIV3Schema.Description; !strings.Contains(got, "(upgraded)") {
		t.Fatalf("helm upgrade did not update the CRD: description %q", got)
	}

	// Uninstall: nothing namespaced is left; CRDs (and tenants) are kept.
	runHelm(t, "uninstall", "kubefair", "-n", namespace, "--wait")
	var leftovers []string
	lists := map[string]client.ObjectList{
		"deployments": &appsv1.DeploymentList{}, "daemonsets": &appsv1.DaemonSetList{}, "services": &corev1.ServiceList{},
		"serviceaccounts": &corev1.ServiceAccountList{}, "roles": &rbacv1.RoleList{}, "rolebindings": &rbacv1.RoleBindingList{},
		"configmaps": &corev1.ConfigMapList{}, "secrets": &corev1.SecretList{},
	}
	for kind, list := range lists {
		if err := k8s.List(ctx, list, client.InNamespace(namespace)); err != nil {
			t.Fatal(err)
		}
		items, _ := metaItems(list)
		for _, name := range items {
			if name == "default" || name == "kube-root-ca.crt" { // made by Kubernetes itself
				continue
			}
			leftovers = append(leftovers, kind+"/"+name)
		}
	}
	if len(leftovers) > 0 {
		t.Errorf("helm uninstall left %v in %s", leftovers, namespace)
	}
	for _, name := range []string{"kubefair-controller", "kubefair-agent"} {
		if err := k8s.Get(ctx, client.ObjectKey{Name: name}, &rbacv1.ClusterRole{}); err == nil {
			t.Errorf("ClusterRole %s survived uninstall", name)
		}
	}
	if err := k8s.Get(ctx, client.ObjectKey{Name: "tenants.kubefair.io"}, &apiextensionsv1.CustomResourceDefinition{}); err != nil {
		t.Errorf("the Tenant CRD was removed by uninstall (resource-policy keep): %v", err)
	}
}

func testOwnReportOnly(t *testing.T) {
	ctx := context.Background()
	if err := kubefairv1.AddToScheme(scheme.Scheme); err != nil {
		t.Fatal(err)
	}
	agentCfg := rest.CopyConfig(api.Config)
	agentCfg.Impersonate = rest.ImpersonationConfig{
		UserName: "system:serviceaccount:" + namespace + ":kubefair-agent",
		Groups:   []string{"system:serviceaccounts", "system:serviceaccounts:" + namespace, "system:authenticated"},
		Extra:    map[string][]string{"authentication.kubernetes.io/node-name": {"node-a"}},
	}
	agentClient, err := client.New(agentCfg, client.Options{Scheme: scheme.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	report := func(name string) *kubefairv1.NodeShareReport {
		return &kubefairv1.NodeShareReport{ObjectMeta: metav1.ObjectMeta{Name: name}, Backend: kubefairv1.BackendCgroup, CPUs: 2,
			BootID: "boot", Window: metav1.Duration{Duration: 10 * time.Second}, ObservedTime: metav1.Now()}
	}
	// The policy takes effect a moment after it is created.
	eventually(t, "another node's report refused", func() error {
		err := agentClient.Create(ctx, report("node-b"))
		if err == nil {
			_ = k8s.Delete(ctx, report("node-b"))
			return errors.New("the agent of node-a created node-b's report")
		}
		if !strings.Contains(err.Error(), "only the NodeShareReport of its own node") {
			return fmt.Errorf("refused for another reason: %v", err)
		}
		t.Logf("refused: %v", err)
		return nil
	})
	own := report("node-a")
	if err := agentClient.Create(ctx, own); err != nil {
		t.Fatalf("the agent could not create its own node's report: %v", err)
	}
	own.CPUs = 4
	if err := agentClient.Update(ctx, own); err != nil {
		t.Fatalf("the agent could not update its own node's report: %v", err)
	}
	if err := agentClient.Delete(ctx, own); err == nil {
		t.Error("the agent may delete reports, which RBAC does not grant")
	}
	// Without a node-name claim (a token not bound to a pod) nothing is written.
	noNode := rest.CopyConfig(agentCfg)
	noNode.Impersonate.Extra = nil
	c, _ := client.New(noNode, client.Options{Scheme: scheme.Scheme})
	if err := c.Create(ctx, report("node-c")); err == nil {
		t.Error("a token without a node-name claim wrote a report")
	}
	_ = k8s.Delete(ctx, own)
}

// testTenancyLabels impersonates a namespace admin (RBAC lets her create
// and label namespaces) and a member of the platform's group: only the
// platform may set, change or remove the namespace label that decides
// tenancy, anyone may set others, and a Tenant may select namespaces by that
// label or by name only.
func testTenancyLabels(t *testing.T) {
	ctx := context.Background()
	if err := kubefairv1.AddToScheme(scheme.Scheme); err != nil {
		t.Fatal(err)
	}
	const key = "kubefair.io/tenant"
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "test-namespace-admin"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"namespaces"}, Verbs: []string{"get", "create", "update", "patch"}}}}
	binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "test-namespace-admin"},
		RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: role.Name},
		Subjects: []rbacv1.Subject{{APIGroup: "rbac.authorization.k8s.io", Kind: "User", Name: "alice"}, {APIGroup: "rbac.authorization.k8s.io", Kind: "Group", Name: "kubeadm:cluster-admins"}}}
	for _, o := range []client.Object{role, binding} {
		if err := k8s.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
		defer func() { _ = k8s.Delete(ctx, o) }()
	}
	as := func(user string, groups ...string) client.Client {
		cfg := rest.CopyConfig(api.Config)
		cfg.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: append(groups, "system:authenticated")}
		c, err := client.New(cfg, client.Options{Scheme: scheme.Scheme})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	alice, platform := as("alice"), as("bob", "kubeadm:cluster-admins")
	ns := func(name string, labels map[string]string) *corev1.Namespace {
		return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}
	}
	refused := func(what string, err error) {
		t.Helper()
		if err == nil {
			t.Errorf("%s: allowed, want refused", what)
		} else if !strings.Contains(err.Error(), "decide which kubefair Tenant a namespace belongs to") || !strings.Contains(err.Error(), "alice") {
			t.Errorf("%s: refused for another reason: %v", what, err)
		}
	}
	// The policy takes effect a moment after it is created.
	eventually(t, "the namespace admin refused a namespace created with the label", func() error {
		err := alice.Create(ctx, ns("shop-made-by-alice", map[string]string{key: "shop"}))
		if err == nil {
			_ = k8s.Delete(ctx, ns("shop-made-by-alice", nil))
			return errors.New("allowed")
		}
		if !strings.Contains(err.Error(), "decide which kubefair Tenant") {
			return fmt.Errorf("refused for another reason: %v", err)
		}
		t.Logf("refused: %v", err)
		return nil
	})
	mine := ns("alices", map[string]string{"team": "a"})
	if err := alice.Create(ctx, mine); err != nil {
		t.Fatalf("the namespace admin could not create a namespace without the label: %v", err)
	}
	defer func() { _ = k8s.Delete(ctx, mine) }()
	mine.Labels[key] = "shop"
	refused("adding the label", alice.Update(ctx, mine))
	delete(mine.Labels, key)
	mine.Labels["team"] = "b"
	if err := alice.Update(ctx, mine); err != nil {
		t.Errorf("changing another label: %v", err)
	}
	mine.Labels[key] = "shop"
	if err := platform.Update(ctx, mine); err != nil {
		t.Fatalf("the platform could not label the namespace: %v", err)
	}
	mine.Labels[key] = "other"
	refused("changing the label", alice.Update(ctx, mine))
	delete(mine.Labels, key)
	refused("removing the label", alice.Update(ctx, mine))

	// Tenants select by the protected label or by name, nothing else.
	tenant := func(name string, sel *kubefairv1.LabelSelector) *kubefairv1.Tenant {
		return &kubefairv1.Tenant{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: kubefairv1.TenantSpec{Weight: ptr.To[int32](1), NamespaceSelector: sel}}
	}
	byTeam := tenant("by-team", &kubefairv1.LabelSelector{MatchLabels: map[string]kubefairv1.LabelValue{"team": "a"}})
	if err := k8s.Create(ctx, byTeam); err == nil || !strings.Contains(err.Error(), "spec.namespaceSelector may use only the namespace labels kubefair protects") {
		t.Errorf("a Tenant selecting by a label namespace admins set: %v, want refused", err)
		_ = k8s.Delete(ctx, byTeam)
	}
	byExpression := tenant("by-expression", &kubefairv1.LabelSelector{MatchExpressions: []kubefairv1.LabelSelectorRequirement{{Key: "team", Operator: metav1.LabelSelectorOpExists}}})
	if err := k8s.Create(ctx, byExpression); err == nil {
		t.Error("a Tenant selecting by an expression on an unprotected label was allowed")
		_ = k8s.Delete(ctx, byExpression)
	}
	for _, ok := range []*kubefairv1.Tenant{
		tenant("by-label", &kubefairv1.LabelSelector{MatchLabels: map[string]kubefairv1.LabelValue{key: "shop"}}),
		tenant("by-name", &kubefairv1.LabelSelector{MatchExpressions: []kubefairv1.LabelSelectorRequirement{
			{Key: "kubernetes.io/metadata.name", Operator: metav1.LabelSelectorOpIn, Values: []kubefairv1.LabelValue{"alices"}}}}),
	} {
		if err := k8s.Create(ctx, ok); err != nil {
			t.Errorf("Tenant %s: %v", ok.Name, err)
		}
		_ = k8s.Delete(ctx, ok)
	}
}

// TestKustomizeBaseMatchesTheChart: config/default is rendered from the
// chart, so it holds the same workloads and RBAC.
func TestKustomizeBaseMatchesTheChart(t *testing.T) {
	base, err := os.ReadFile(filepath.Join(kubeapi.RepoRoot(), "config", "default", "kubefair.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	rendered := decode(t, runHelm(t, "template", "kubefair", chartDir, "-n", namespace, "--set", "crds.enabled=false"))
	kept := decode(t, string(base))
	if len(kept) != len(rendered) {
		t.Fatalf("config/default/kubefair.yaml has %d objects, the chart renders %d: run `make manifests`", len(kept), len(rendered))
	}
	for i := range kept {
		if kept[i].GetKind() != rendered[i].GetKind() || kept[i].GetName() != rendered[i].GetName() {
			t.Errorf("object %d: %s/%s in config/default, %s/%s in the chart", i, kept[i].GetKind(), kept[i].GetName(), rendered[i].GetKind(), rendered[i].GetName())
		}
	}
}

// TestMetricsPrivileges: by default both components serve metrics only to
// identities bound to kubefair-metrics-reader (which grants exactly that),
// and may create TokenReviews and SubjectAccessReviews to check them, and
// nothing more; with metrics.secure=false neither. The ServiceMonitors
// scrape over HTTPS with Prometheus's token.
func TestMetricsPrivileges(t *testing.T) {
	rules := func(objs []*unstructured.Unstructured, name string) []rbacv1.PolicyRule {
		for _, o := range objs {
			if o.GetKind() == "ClusterRole" && o.GetName() == name {
				var r rbacv1.ClusterRole
				if err := runtimeConvert(o, &r); err != nil {
					t.Fatal(err)
				}
				return r.Rules
			}
		}
		return nil
	}
	args := func(objs []*unstructured.Unstructured) string {
		var all []string
		for _, o := range objs {
			if k := o.GetKind(); k == "Deployment" || k == "DaemonSet" {
				cs, _, _ := unstructured.NestedSlice(o.Object, "spec", "template", "spec", "containers")
				for _, c := range cs {
					a, _, _ := unstructured.NestedStringSlice(c.(map[string]any), "args")
					all = append(all, k+": "+strings.Join(a, " "))
				}
			}
		}
		return strings.Join(all, "\n")
	}
	objs := decode(t, runHelm(t, "template", "kubefair", chartDir, "-n", namespace))
	if got, want := rules(objs, metricsauth.ReaderRole), scrape.ReaderRole().Rules; !reflect.DeepEqual(got, want) {
		t.Errorf("%s grants %+v, want %+v", metricsauth.ReaderRole, got, want)
	}
	wantAuth := []rbacv1.PolicyRule{
		{APIGroups: []string{"authentication.k8s.io"}, Resources: []string{"tokenreviews"}, Verbs: []string{"create"}},
		{APIGroups: []string{"authorization.k8s.io"}, Resources: []string{"subjectaccessreviews"}, Verbs: []string{"create"}},
	}
	if got := rules(objs, "kubefair-metrics-auth"); !reflect.DeepEqual(got, wantAuth) {
		t.Errorf("kubefair-metrics-auth grants %+v, want %+v", got, wantAuth)
	}
	if a := args(objs); strings.Count(a, "--metrics-secure=true") != 2 {
		t.Errorf("want both components with --metrics-secure=true:\n%s", a)
	}
	open := decode(t, runHelm(t, "template", "kubefair", chartDir, "-n", namespace, "--set", "metrics.secure=false"))
	if rules(open, "kubefair-metrics-auth") != nil {
		t.Error("metrics.secure=false still grants TokenReviews and SubjectAccessReviews")
	}
	if a := args(open); strings.Count(a, "--metrics-secure=false") != 2 {
		t.Errorf("want both components with --metrics-secure=false:\n%s", a)
	}
	monitored := decode(t, runHelm(t, "template", "kubefair", chartDir, "-n", namespace, "--set", "metrics.serviceMonitor.enabled=true"))
	var monitors int
	for _, o := range monitored {
		if o.GetKind() != "ServiceMonitor" {
			continue
		}
		monitors++
		eps, _, _ := unstructured.NestedSlice(o.Object, "spec", "endpoints")
		if len(eps) != 1 || eps[0].(map[string]any)["scheme"] != "https" || eps[0].(map[string]any)["bearerTokenFile"] == nil {
			t.Errorf("ServiceMonitor %s scrapes %v, want https with Prometheus's token", o.GetName(), eps)
		}
	}
	if monitors != 2 {
		t.Errorf("%d ServiceMonitors, want the controller's and the agents'", monitors)
	}
}
