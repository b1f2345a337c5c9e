package operator

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"
)

// The values of --metrics-auth.
const (
	// MetricsAuthNone serves the monitoring port over plain HTTP to
	// anyone, as the upstream operator did.
	MetricsAuthNone = "none"
	// MetricsAuthKubernetes serves it over HTTPS, and /metrics and the
	// profiles only to callers whose bearer token the API server accepts
	// (a TokenReview) and who may get the path (a SubjectAccessReview of a
	// non-resource URL, which RBAC grants with nonResourceURLs). /healthz
	// stays open to the kubelet's probes.
	MetricsAuthKubernetes = "kubernetes"
)

const (
	// reviewTimeout bounds each review request to the API server.
	reviewTimeout = 10 * time.Second
	// reviewTTL is how long a caller's answer is reused, so that a scraper
	// costs the API server two requests a minute, and a caller with a bad
	// token no more.
	reviewTTL = time.Minute
)

// RequireKubernetesAuth wraps h, the monitoring handler, so that every path
// but /healthz needs a bearer token that kube authenticates and authorizes.
func RequireKubernetesAuth(h http.Handler, kube kubernetes.Interface) http.Handler {
	a := &reviewer{kube: kube, now: time.Now, answers: map[answerKey]answer{}}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/healthz" {
			h.ServeHTTP(w, r)
			return
		}
		token, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		if !ok || token == "" {
			w.Header().Set("WWW-Authenticate", `Bearer realm="mpi-operator"`)
			http.Error(w, "Unauthorized: a bearer token is required", http.StatusUnauthorized)
			return
		}
		switch code, msg := a.review(r.Context(), token, strings.ToLower(r.Method), r.URL.Path); code {
		case http.StatusOK:
			h.ServeHTTP(w, r)
		default:
			http.Error(w, msg, code)
		}
	})
}

// reviewer asks the API server who a token is and what it may do, and
// remembers the answers for reviewTTL.
type reviewer struct {
	kube kubernetes.Interface
	now  func() time.Time

	mu      sync.Mutex
	answers map[answerKey]answer
}

type answerKey struct {
	token      [sha256.Size]byte
	verb, path string
}

type answer struct {
	code    int
	message string
	expires time.Time
}

// review returns the HTTP status for token's request of verb on path, and
// a message when it is not 200.
func (a *reviewer) review(ctx context.Context, token, verb, path string) (int, string) {
	key := answerKey{token: sha256.Sum256([]byte(token)), verb: verb, path: path}
	now := a.now()
	a.mu.Lock()
	if ans, ok := a.answers[key]; ok && now.Before(ans.expires) {
		a.mu.Unlock()
		return ans.code, ans.message
	}
	a.mu.Unlock()

	ctx, cancel := context.WithTimeout(ctx, reviewTimeout)
	defer cancel()
	code, msg, err := a.ask(ctx, token, verb, path)
	if err != nil {
		// The API server did not answer: nothing to remember.
		klog.ErrorS(err, "Reviewing a monitoring request", "path", path)
		return http.StatusServiceUnavailable, "the API server could not review the request"
	}
	a.mu.Lock()
	for k, ans := range a.answers {
		if !now.Before(ans.expires) {
			delete(a.answers, k)
		}
	}
	a.answers[key] = answer{code: code, message: msg, expires: now.Add(reviewTTL)}
	a.mu.Unlock()
	return code, msg
}

func (a *reviewer) ask(ctx context.Context, token, verb, path string) (int, string, error) {
	tr, err := a.kube.AuthenticationV1().TokenReviews().Create(ctx, &authenticationv1.TokenReview{
		Spec: authenticationv1.TokenReviewSpec{Token: token},
	}, metav1.CreateOptions{})
	if err != nil {
		return 0, "", fmt.Errorf("TokenReview: %w", err)
	}
	if !tr.Status.Authenticated {
		return http.StatusUnauthorized, "Unauthorized: the token is not valid", nil
	}
	user := tr.Status.User
	extra := make(map[string]authorizationv1.ExtraValue, len(user.Extra))
	for k, v := range user.Extra {
		extra[k] = authorizationv1.ExtraValue(v)
	}
	sar, err := a.kube.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{
		Spec: authorizationv1.SubjectAccessReviewSpec{
			User: user.Username, UID: user.UID, Groups: user.Groups, Extra: extra,
			NonResourceAttributes: &authorizationv1.NonResourceAttributes{Path: path, Verb: verb},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		return 0, "", fmt.Errorf("SubjectAccessReview: %w", err)
	}
	if !sar.Status.Allowed {
		return http.StatusForbidden, fmt.Sprintf("Forbidden: %s may not %s %s", user.Username, verb, path), nil
	}
	return http.StatusOK, "", nil
}

// selfSignedTLS is the TLS configuration of a monitoring port that has no
// certificate of its own: a key and a self-signed certificate made at start,
// which scrapers accept without verifying it (Prometheus'
// insecure_skip_verify), as they do for kube-rbac-proxy's.
func selfSignedTLS() (*tls.Config, error) {
	_, cert, err := SelfSignedCert("mpi-operator")
	if err != nil {
		return nil, err
	}
	return &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}, nil
}

// SelfSignedCert makes a key and a certificate for localhost and the
// loopback addresses, signed by itself, and returns the certificate in PEM
// too: a client that is to verify it (an API server calling a webhook)
// takes that as its CA bundle.
func SelfSignedCert(commonName string) ([]byte, tls.Certificate, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, tls.Certificate{}, err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		return nil, tls.Certificate{}, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: commonName},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(10 * 365 * 24 * time.Hour),
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames:              []string{"localhost"},
		IPAddresses:           []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
		IsCA:                  true,
		BasicConstraintsValid: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, tls.Certificate{}, err
	}
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	return certPEM, tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, nil
}
