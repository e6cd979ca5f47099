// Package scrape reads kubefair's Prometheus endpoints as a scraper does:
// over HTTPS (their certificates are self-signed) with a service account's
// bearer token, which the endpoint checks with the API server.
package scrape

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubefair/kubefair/internal/metricsauth"
)

// Identity makes a service account in namespace ns, bound to the ClusterRole
// metricsauth.ReaderRole when granted, and returns a token of it (valid an
// hour).
func Identity(ctx context.Context, c client.Client, ns, name string, granted bool) (string, error) {
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	if err := c.Create(ctx, sa); err != nil && !apierrors.IsAlreadyExists(err) {
		return "", fmt.Errorf("service account %s/%s: %w", ns, name, err)
	}
	if granted {
		b := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: metricsauth.ReaderRole + "-" + ns + "-" + name},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: metricsauth.ReaderRole},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: name}}}
		if err := c.Create(ctx, b); err != nil && !apierrors.IsAlreadyExists(err) {
			return "", fmt.Errorf("binding %s: %w", b.Name, err)
		}
	}
	tr := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)}}
	if err := c.SubResource("token").Create(ctx, sa, tr); err != nil {
		return "", fmt.Errorf("a token of %s/%s: %w", ns, name, err)
	}
	return tr.Status.Token, nil
}

// Identities are, for a suite that runs without the chart, the chart's
// reader role (ReaderRole) and tokens of two service accounts named after
// prefix: one bound to it, one not.
func Identities(ctx context.Context, c client.Client, prefix string) (granted, stranger string, err error) {
	if err := c.Create(ctx, ReaderRole()); err != nil && !apierrors.IsAlreadyExists(err) {
		return "", "", err
	}
	if granted, err = Identity(ctx, c, "default", prefix+"-scraper", true); err != nil {
		return "", "", err
	}
	stranger, err = Identity(ctx, c, "default", prefix+"-stranger", false)
	return granted, stranger, err
}

// ReaderRole is the chart's ClusterRole that grants scraping, for suites
// that run without the chart (the chart suite checks the chart's is this).
func ReaderRole() *rbacv1.ClusterRole {
	return &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: metricsauth.ReaderRole},
		Rules: []rbacv1.PolicyRule{{NonResourceURLs: []string{"/metrics"}, Verbs: []string{"get"}}}}
}

var insecure = &http.Client{Timeout: 20 * time.Second, Transport: &http.Transport{
	TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // self-signed; the caller is what is checked
}}

// Get fetches url with token (none when empty): the status and the body.
func Get(ctx context.Context, url, token string) (int, string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, "", err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := insecure.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body), err
}

// Value is the value of an unlabelled series in a Prometheus text body, or
// -1 when it is absent.
func Value(body, name string) float64 {
	for _, line := range strings.Split(body, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), name+" "); ok {
			if f, err := strconv.ParseFloat(strings.TrimSpace(v), 64); err == nil {
				return f
			}
		}
	}
	return -1
}

// Guarded checks that url refuses a scrape without a token (401) and one
// with a token whose identity is not granted (403), and serves a granted
// one (200, with want in the body).
func Guarded(ctx context.Context, url, granted, stranger, want string) error {
	for _, c := range []struct {
		who, token string
		status     int
	}{{"no token", "", http.StatusUnauthorized}, {"an identity not granted", stranger, http.StatusForbidden}, {"a granted identity", granted, http.StatusOK}} {
		status, body, err := Get(ctx, url, c.token)
		if err != nil {
			return fmt.Errorf("GET %s with %s: %w", url, c.who, err)
		}
		if status != c.status || (status == http.StatusOK && !strings.Contains(body, want)) {
			return fmt.Errorf("GET %s with %s: %d %.300s, want %d", url, c.who, status, body, c.status)
		}
	}
	return nil
}

// FreeAddress is a loopback address whose port nothing listens on, for an
// endpoint under test.
func FreeAddress(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}
