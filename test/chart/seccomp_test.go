package chart

import (
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
)

// renderAgent renders the chart with args and returns the agent's
// DaemonSet and the rendered text of its manifest (comments included).
func renderAgent(t *testing.T, args ...string) (*appsv1.DaemonSet, string) {
	t.Helper()
	out := runHelm(t, append([]string{"template", "kubefair", chartDir, "-n", namespace, "--show-only", "templates/agent/daemonset.yaml"}, args...)...)
	for _, o := range decode(t, out) {
		if o.GetKind() == "DaemonSet" {
			ds := &appsv1.DaemonSet{}
			if err := runtimeConvert(o, ds); err != nil {
				t.Fatal(err)
			}
			return ds, out
		}
	}
	t.Fatalf("no agent DaemonSet rendered with %v", args)
	return nil, ""
}

// TestAgentSeccompPerBackend: each backend gets the runtime seccomp profile
// and the capabilities it needs, no more, each with its reason beside it in
// the rendered manifest, and the agent always confines itself (--seccomp).
func TestAgentSeccompPerBackend(t *testing.T) {
	for _, tc := range []struct {
		name    string
		args    []string
		profile corev1.SeccompProfileType
		nice    bool   // CAP_SYS_NICE added
		reason  string // in the rendered manifest, beside the profile
	}{
		{"default (auto)", nil, corev1.SeccompProfileTypeRuntimeDefault, false, "auto keeps to pod weights"},
		{"cgroup", []string{"--set", "agent.backend=cgroup"}, corev1.SeccompProfileTypeRuntimeDefault, false, "the cgroup backend makes no call it refuses"},
		{"nice", []string{"--set", "agent.backend=nice"}, corev1.SeccompProfileTypeRuntimeDefault, true, "the nice backend makes no call it refuses"},
		{"syscall", []string{"--set", "agent.backend=syscall"}, corev1.SeccompProfileTypeUnconfined, true, "no runtime profile can allow by name"},
		{"patched-kernel-values.yaml", []string{"-f", filepath.Join(chartDir, "ci", "patched-kernel-values.yaml")}, corev1.SeccompProfileTypeLocalhost, true, "lets sched_setweight"},
		{"cgroup with latency classes", []string{"--set", "agent.backend=cgroup", "--set", "agent.latencyClasses.enabled=true"}, corev1.SeccompProfileTypeRuntimeDefault, true, "latency classes set the scheduler slices of other"},
		{"request elevation", []string{"--set", "agent.requestElevation.enabled=true"}, corev1.SeccompProfileTypeRuntimeDefault, false, "# CAP_BPF, CAP_PERFMON: request-based elevation loads an eBPF"},
		{"nice with latency classes and request elevation", []string{"--set", "agent.backend=nice", "--set", "agent.latencyClasses.enabled=true", "--set", "agent.requestElevation.enabled=true"}, corev1.SeccompProfileTypeRuntimeDefault, true, "# CAP_BPF, CAP_PERFMON: request-based elevation loads an eBPF"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ds, text := renderAgent(t, tc.args...)
			c := ds.Spec.Template.Spec.Containers[0]
			sc := c.SecurityContext
			if sc.SeccompProfile == nil || sc.SeccompProfile.Type != tc.profile {
				t.Errorf("seccomp profile %+v, want %s", sc.SeccompProfile, tc.profile)
			}
			if tc.profile == corev1.SeccompProfileTypeLocalhost && (sc.SeccompProfile.LocalhostProfile == nil || *sc.SeccompProfile.LocalhostProfile != "kubefair-agent.json") {
				t.Errorf("Localhost profile %+v, want kubefair-agent.json", sc.SeccompProfile.LocalhostProfile)
			}
			wantAdd := []corev1.Capability(nil)
			if tc.nice {
				wantAdd = []corev1.Capability{"SYS_NICE"}
			}
			elevation := slices.Contains(tc.args, "agent.requestElevation.enabled=true")
			if elevation {
				wantAdd = append(wantAdd, "BPF", "PERFMON")
			}
			if slices.Contains(c.Args, "--request-elevation=true") != elevation {
				t.Errorf("request elevation enabled %v, yet the agent's arguments are %v", elevation, c.Args)
			}
			if !slices.Equal(sc.Capabilities.Add, wantAdd) || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) {
				t.Errorf("capabilities %+v, want drop ALL, add %v", sc.Capabilities, wantAdd)
			}
			if tc.nice && !strings.Contains(text, "# CAP_SYS_NICE: ") {
				t.Error("CAP_SYS_NICE has no written reason")
			}
			if !strings.Contains(text, tc.reason) {
				t.Errorf("no written reason for the seccomp profile (looked for %q):\n%s", tc.reason, text)
			}
			if classes := slices.Contains(tc.args, "agent.latencyClasses.enabled=true"); slices.Contains(c.Args, "--latency-classes=true") != classes ||
				classes && !slices.Contains(c.Args, "--interactive-slice=500us") {
				t.Errorf("latency classes enabled %v, yet the agent's arguments are %v", classes, c.Args)
			}
			if !slices.Contains(c.Args, "--seccomp=true") {
				t.Errorf("the agent runs without its own filter: %v", c.Args)
			}
			if c.Lifecycle != nil && !slices.Contains(c.Lifecycle.PreStop.Exec.Command, "--seccomp=true") {
				t.Errorf("the preStop hook runs without the agent's own filter: %v", c.Lifecycle.PreStop.Exec.Command)
			}
		})
	}
}

// TestUnconfinedNeedsTheAgentsFilter: the chart refuses to run the agent
// with no seccomp confinement at all, and a Localhost profile without a
// file name.
func TestUnconfinedNeedsTheAgentsFilter(t *testing.T) {
	for args, want := range map[string]string{
		"agent.seccompProfile.type=Unconfined,agent.seccompFilter=false": "needs agent.seccompFilter: true",
		"agent.backend=syscall,agent.seccompFilter=false":                "needs agent.seccompFilter: true",
		"agent.seccompProfile.type=Localhost":                            "localhostProfile",
	} {
		out, err := exec.Command(helm, "template", "kubefair", chartDir, "--set", args).CombinedOutput()
		if err == nil || !strings.Contains(string(out), want) {
			t.Errorf("helm template --set %s: %v, want a refusal mentioning %q; output:\n%s", args, err, want, out)
		}
	}
}
