// Package controller tests kubefair's reconcilers against a real
// kube-apiserver and etcd (envtest): the CRDs' validation, tier and
// namespace resolution, report aggregation and exactly-once cost.
package controller

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	"go.uber.org/zap/zapcore"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	kubefairv1 "github.com/kubefair/kubefair/api/v1alpha1"
	"github.com/kubefair/kubefair/test/harness/kubeapi"
)

var (
	api *kubeapi.Server
	k8s client.Client
)

func TestMain(m *testing.M) {
	logf.SetLogger(zap.New(zap.WriteTo(os.Stderr), zap.Level(zapcore.ErrorLevel)))
	var err error
	api, err = kubeapi.Start()
	if err != nil {
		fmt.Fprintln(os.Stderr, "controller suite:", err)
		os.Exit(1)
	}
	k8s = api.Client
	code := m.Run()
	_ = api.Stop()
	os.Exit(code)
}

// startManager runs the controller as main does, until the test ends or
// stop is called.
func startManager(t *testing.T) (stop func()) {
	t.Helper()
	// Errors only, printed with the test that failed.
	// The suite's agents report seconds apart, not every 10 s: a short status
	// period keeps its waits short and still spaces what reports cause.
	stop, err := api.RunController(testr.New(t).WithName("controller").V(1), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	return stop
}

// eventually polls cond until it holds or 20 s pass.
func eventually(t *testing.T, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	var last string
	for time.Now().Before(deadline) {
		ok, state := cond()
		if ok {
			return
		}
		last = state
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("timed out waiting for %s; last seen: %s", what, last)
}

func ctx() context.Context { return context.Background() }

func create(t *testing.T, objs ...client.Object) {
	t.Helper()
	for _, o := range objs {
		if err := k8s.Create(ctx(), o); err != nil {
			t.Fatalf("creating %T %s: %v", o, o.GetName(), err)
		}
	}
}

func tier(name string, weight int32, price string) *kubefairv1.PricingTier {
	return &kubefairv1.PricingTier{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: kubefairv1.PricingTierSpec{Weight: weight, PricePerCPUHour: price, Currency: "EUR"}}
}

func namespace(name string, labels map[string]string) *corev1.Namespace {
	return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}
}

func tenantOnTier(name, tierName string, namespaces ...string) *kubefairv1.Tenant {
	return &kubefairv1.Tenant{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: kubefairv1.TenantSpec{Tier: tierName, Namespaces: namespaces}}
}

func getTenant(t *testing.T, name string) *kubefairv1.Tenant {
	t.Helper()
	var tn kubefairv1.Tenant
	if err := k8s.Get(ctx(), client.ObjectKey{Name: name}, &tn); err != nil {
		t.Fatalf("getting tenant %s: %v", name, err)
	}
	return &tn
}

func condition(tn *kubefairv1.Tenant, typ string) metav1.Condition {
	if c := meta.FindStatusCondition(tn.Status.Conditions, typ); c != nil {
		return *c
	}
	return metav1.Condition{}
}

// describe is a one-line view of a tenant's status for failure messages.
func describe(tn *kubefairv1.Tenant) string {
	s := tn.Status
	var conds string
	for _, c := range s.Conditions {
		conds += fmt.Sprintf(" %s=%s/%s", c.Type, c.Status, c.Reason)
	}
	return fmt.Sprintf("weight=%d ns=%v entitled=%q achieved=%q nodes=%d period=%s cpu=%s cost=%s %s%s",
		s.EffectiveWeight, s.Namespaces, s.EntitledShare, s.AchievedShare, s.ReportingNodes, s.Period, s.CPUSeconds, s.Cost, s.Currency, conds)
}
