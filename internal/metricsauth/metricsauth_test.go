package metricsauth

import (
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

// fakeAPI answers TokenReviews (token "reader" and "stranger" are known,
// "broken" makes the API server fail) and SubjectAccessReviews (only
// "reader" may get /metrics), counting the calls. The real API server's
// answers are tested in the controller and agent suites; this covers the
// guard's own edges.
func fakeAPI(t *testing.T) (*Guard, *int) {
	calls := 0
	cs := fake.NewClientset()
	cs.PrependReactor("create", "tokenreviews", func(a k8stesting.Action) (bool, runtime.Object, error) {
		calls++
		tr := a.(k8stesting.CreateAction).GetObject().(*authenticationv1.TokenReview)
		switch tr.Spec.Token {
		case "broken":
			return true, nil, errors.New("connection refused")
		case "reader", "stranger":
			tr.Status = authenticationv1.TokenReviewStatus{Authenticated: true, User: authenticationv1.UserInfo{Username: tr.Spec.Token}}
		}
		return true, tr, nil
	})
	cs.PrependReactor("create", "subjectaccessreviews", func(a k8stesting.Action) (bool, runtime.Object, error) {
		calls++
		sar := a.(k8stesting.CreateAction).GetObject().(*authorizationv1.SubjectAccessReview)
		sar.Status.Allowed = sar.Spec.User == "reader" && sar.Spec.NonResourceAttributes.Path == "/metrics" && sar.Spec.NonResourceAttributes.Verb == "get"
		return true, sar, nil
	})
	return &Guard{tokens: cs.AuthenticationV1().TokenReviews(), access: cs.AuthorizationV1().SubjectAccessReviews(), now: time.Now,
		verdicts: map[[32]byte]verdict{}}, &calls
}

func TestGuard(t *testing.T) {
	g, calls := fakeAPI(t)
	h := g.Wrap(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("series")) }))
	get := func(method, token string) int {
		req := httptest.NewRequest(method, "/metrics", nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec.Code
	}
	for _, c := range []struct {
		name, method, token string
		status, calls       int
	}{
		{"no token: refused without asking", http.MethodGet, "", http.StatusUnauthorized, 0},
		{"not a GET", http.MethodPost, "reader", http.StatusMethodNotAllowed, 0},
		{"an unknown token", http.MethodGet, "made-up", http.StatusUnauthorized, 1},
		{"the same again: kept", http.MethodGet, "made-up", http.StatusUnauthorized, 0},
		{"an identity not granted", http.MethodGet, "stranger", http.StatusForbidden, 2},
		{"a granted identity", http.MethodGet, "reader", http.StatusOK, 2},
		{"granted, again: kept", http.MethodGet, "reader", http.StatusOK, 0},
		{"the API server failing", http.MethodGet, "broken", http.StatusServiceUnavailable, 1},
		{"failing again: asked again, not kept", http.MethodGet, "broken", http.StatusServiceUnavailable, 1},
	} {
		before := *calls
		if got := get(c.method, c.token); got != c.status || *calls-before != c.calls {
			t.Errorf("%s: status %d after %d API calls, want %d after %d", c.name, got, *calls-before, c.status, c.calls)
		}
	}

	// A verdict expires: the API server is asked again.
	now := time.Now()
	g.now = func() time.Time { return now.Add(allowedFor + time.Second) }
	if before := *calls; get(http.MethodGet, "reader") != http.StatusOK || *calls-before != 2 {
		t.Errorf("an expired verdict was not asked again (%d calls)", *calls-before)
	}

	// A flood of made-up tokens does not grow the cache without bound.
	for i := range 3 * maxVerdicts {
		get(http.MethodGet, fmt.Sprintf("flood-%d", i))
	}
	if n := len(g.verdicts); n > maxVerdicts {
		t.Errorf("%d verdicts kept, want at most %d", n, maxVerdicts)
	}
}
