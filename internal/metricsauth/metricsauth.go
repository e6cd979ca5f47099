// Package metricsauth guards kubefair's Prometheus endpoints: a scrape must
// carry a bearer token the API server authenticates (TokenReview), and its
// identity must be allowed to get the path (SubjectAccessReview on a
// non-resource URL — what the chart's kubefair-metrics-reader ClusterRole
// grants). The endpoints carry per-tenant CPU and cost, which only those a
// cluster's RBAC names may read.
package metricsauth

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	authnclient "k8s.io/client-go/kubernetes/typed/authentication/v1"
	authzclient "k8s.io/client-go/kubernetes/typed/authorization/v1"
	"k8s.io/client-go/rest"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
)

// ReaderRole is the ClusterRole the chart creates to grant scraping.
const ReaderRole = "kubefair-metrics-reader"

// How long a verdict is kept: a scraper asks every few seconds, and the API
// server is asked at most once a minute per identity and path; a refusal is
// kept shorter, so that a new binding takes effect soon.
const (
	allowedFor = time.Minute
	refusedFor = 10 * time.Second
	// maxVerdicts bounds the cache against a flood of made-up tokens.
	maxVerdicts = 1024
)

// Guard checks scrapes against the API server.
type Guard struct {
	tokens authnclient.TokenReviewInterface
	access authzclient.SubjectAccessReviewInterface
	now    func() time.Time

	mu       sync.Mutex
	verdicts map[[sha256.Size]byte]verdict
}

type verdict struct {
	status int // http.StatusOK, or the refusal's
	reason string
	until  time.Time
}

// New is a guard that asks the API server cfg points at.
func New(cfg *rest.Config) (*Guard, error) {
	authn, err := authnclient.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	authz, err := authzclient.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	return &Guard{tokens: authn.TokenReviews(), access: authz.SubjectAccessReviews(), now: time.Now,
		verdicts: map[[sha256.Size]byte]verdict{}}, nil
}

// Wrap lets a request through to next only when its caller may get its path.
func (g *Guard) Wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			http.Error(w, "only GET", http.StatusMethodNotAllowed)
			return
		}
		token, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		if !ok || token == "" {
			http.Error(w, "Unauthorized: send a bearer token (a service account's, bound to the ClusterRole "+ReaderRole+")", http.StatusUnauthorized)
			return
		}
		v := g.check(r.Context(), token, r.URL.Path)
		if v.status != http.StatusOK {
			http.Error(w, v.reason, v.status)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// FilterProvider is a guard in the form controller-runtime's metrics
// server takes (metricsserver.Options.FilterProvider).
func FilterProvider(cfg *rest.Config, _ *http.Client) (metricsserver.Filter, error) {
	g, err := New(cfg)
	if err != nil {
		return nil, err
	}
	return func(_ logr.Logger, next http.Handler) (http.Handler, error) { return g.Wrap(next), nil }, nil
}

// check is the verdict on a token and path, from the cache or the API
// server. A failure to ask is not kept: the next scrape asks again.
func (g *Guard) check(ctx context.Context, token, path string) verdict {
	key := sha256.Sum256([]byte(token + "\x00" + path))
	now := g.now()
	g.mu.Lock()
	v, ok := g.verdicts[key]
	g.mu.Unlock()
	if ok && now.Before(v.until) {
		return v
	}
	v, keep := g.ask(ctx, token, path)
	if !keep {
		return v
	}
	if v.status == http.StatusOK {
		v.until = now.Add(allowedFor)
	} else {
		v.until = now.Add(refusedFor)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.verdicts) >= maxVerdicts {
		for k, old := range g.verdicts {
			if !now.Before(old.until) {
				delete(g.verdicts, k)
			}
		}
		if len(g.verdicts) >= maxVerdicts {
			clear(g.verdicts)
		}
	}
	g.verdicts[key] = v
	return v
}

// ask reviews the token, then the identity's access to get path.
func (g *Guard) ask(ctx context.Context, token, path string) (v verdict, keep bool) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	tr, err := g.tokens.Create(ctx, &authenticationv1.TokenReview{Spec: authenticationv1.TokenReviewSpec{Token: token}}, metav1.CreateOptions{})
	if err != nil {
		return verdict{status: http.StatusServiceUnavailable, reason: fmt.Sprintf("cannot check the token with the API server: %v", err)}, false
	}
	if !tr.Status.Authenticated {
		reason := "Unauthorized: the API server did not accept the token"
		if tr.Status.Error != "" {
			reason += ": " + tr.Status.Error
		}
		return verdict{status: http.StatusUnauthorized, reason: reason}, true
	}
	u := tr.Status.User
	extra := map[string]authorizationv1.ExtraValue{}
	for k, vs := range u.Extra {
		extra[k] = authorizationv1.ExtraValue(vs)
	}
	sar, err := g.access.Create(ctx, &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		User: u.Username, UID: u.UID, Groups: u.Groups, Extra: extra,
		NonResourceAttributes: &authorizationv1.NonResourceAttributes{Path: path, Verb: "get"},
	}}, metav1.CreateOptions{})
	if err != nil {
		return verdict{status: http.StatusServiceUnavailable, reason: fmt.Sprintf("cannot check %s's access with the API server: %v", u.Username, err)}, false
	}
	if !sar.Status.Allowed {
		return verdict{status: http.StatusForbidden, reason: fmt.Sprintf("Forbidden: %s may not get %s (bind it to the ClusterRole %s)", u.Username, path, ReaderRole)}, true
	}
	return verdict{status: http.StatusOK}, true
}

// SelfSignedTLS is a serving configuration with a certificate made at
// start: scrapers authenticate the endpoint's caller, not the endpoint
// (Prometheus scrapes pods by IP, with insecureSkipVerify). An ECDSA P-256
// key: an RSA one takes a slow node (or an emulated one) seconds to a
// minute to find, long enough for a liveness probe to give up.
func SelfSignedTLS() (*tls.Config, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("making the metrics endpoint's key: %w", err)
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, err
	}
	now := time.Now()
	template := &x509.Certificate{
		SerialNumber: serial, Subject: pkix.Name{CommonName: "kubefair-metrics"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.AddDate(10, 0, 0),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames: []string{"localhost"}, IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
	}
	der, err := x509.CreateCertificate(rand.Reader, template, template, &key.PublicKey, key)
	if err != nil {
		return nil, fmt.Errorf("making the metrics endpoint's certificate: %w", err)
	}
	cert := tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
	return &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}, nil
}
