package operator

import (
	"crypto/tls"
	"io"
	"net"
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

// reviewingClient is an API server that knows the token "scraper" as user
// scraper, who may get /metrics, and the token "nobody" as user nobody, who
// may not; it counts the reviews asked for.
func reviewingClient(reviews *int) *fake.Clientset {
	kube := fake.NewClientset()
	kube.PrependReactor("create", "tokenreviews", func(a k8stesting.Action) (bool, runtime.Object, error) {
		*reviews++
		tr := a.(k8stesting.CreateAction).GetObject().(*authenticationv1.TokenReview)
		switch tr.Spec.Token {
		case "scraper", "nobody":
			tr.Status = authenticationv1.TokenReviewStatus{Authenticated: true,
				User: authenticationv1.UserInfo{Username: tr.Spec.Token, Groups: []string{"system:authenticated"}}}
		}
		return true, tr, nil
	})
	kube.PrependReactor("create", "subjectaccessreviews", func(a k8stesting.Action) (bool, runtime.Object, error) {
		*reviews++
		sar := a.(k8stesting.CreateAction).GetObject().(*authorizationv1.SubjectAccessReview)
		nr := sar.Spec.NonResourceAttributes
		sar.Status.Allowed = sar.Spec.User == "scraper" && nr != nil && nr.Path == "/metrics" && nr.Verb == "get"
		return true, sar, nil
	})
	return kube
}

func TestRequireKubernetesAuth(t *testing.T) {
	var reviews int
	h := RequireKubernetesAuth(NewMonitoringHandler(&RunningController{}, true), reviewingClient(&reviews))
	srv := httptest.NewServer(h)
	defer srv.Close()

	cases := []struct {
		name, path, token string
		want              int
	}{
		{"health needs no token", "/healthz", "", http.StatusOK},
		{"no token", "/metrics", "", http.StatusUnauthorized},
		{"unknown token", "/metrics", "forged", http.StatusUnauthorized},
		{"user without the right", "/metrics", "nobody", http.StatusForbidden},
		{"user with the right", "/metrics", "scraper", http.StatusOK},
		{"profiles need their own right", "/debug/pprof/", "scraper", http.StatusForbidden},
	}
	for _, tc := range cases {
		req, err := http.NewRequest(http.MethodGet, srv.URL+tc.path, nil)
		if err != nil {
			t.Fatal(err)
		}
		if tc.token != "" {
			req.Header.Set("Authorization", "Bearer "+tc.token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		if resp.StatusCode != tc.want {
			t.Errorf("%s: GET %s answered %d %q, want %d", tc.name, tc.path, resp.StatusCode, body, tc.want)
		}
	}

	// A scraper's answer is remembered: its next scrapes cost no review.
	before := reviews
	for range 3 {
		req, _ := http.NewRequest(http.MethodGet, srv.URL+"/metrics", nil)
		req.Header.Set("Authorization", "Bearer scraper")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
	}
	if reviews != before {
		t.Errorf("%d reviews for three more scrapes, want 0", reviews-before)
	}
}

// TestReviewAnswersExpire: an answer is reused for reviewTTL only, so that
// a revoked right or token stops working within it.
func TestReviewAnswersExpire(t *testing.T) {
	var reviews int
	now := time.Unix(1000, 0)
	a := &reviewer{kube: reviewingClient(&reviews), now: func() time.Time { return now }, answers: map[answerKey]answer{}}
	if code, _ := a.review(t.Context(), "scraper", "get", "/metrics"); code != http.StatusOK {
		t.Fatalf("code %d, want 200", code)
	}
	a.review(t.Context(), "scraper", "get", "/metrics")
	if reviews != 2 {
		t.Errorf("%d reviews, want 2 (one TokenReview and one SubjectAccessReview)", reviews)
	}
	now = now.Add(reviewTTL)
	a.review(t.Context(), "scraper", "get", "/metrics")
	if reviews != 4 {
		t.Errorf("%d reviews after the answer expired, want 4", reviews)
	}
	if len(a.answers) != 1 {
		t.Errorf("%d answers remembered, want 1", len(a.answers))
	}
}

// TestServeMonitoringOverTLS: with MetricsAuthKubernetes, Serve's
// monitoring port speaks TLS only, and /healthz answers without a token.
func TestServeMonitoringOverTLS(t *testing.T) {
	var reviews int
	mon, err := startMonitoring(ServeOptions{MonitoringPort: freePort(t), MetricsAuth: MetricsAuthKubernetes,
		Kube: reviewingClient(&reviews)}, &RunningController{})
	if err != nil {
		t.Fatal(err)
	}
	defer mon.Stop()
	insecure := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec // the certificate is self-signed
	resp, err := insecure.Get("https://" + loopback(mon.Addr()) + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("GET /healthz over TLS: %d, want 200", resp.StatusCode)
	}
	if resp, err := http.Get("http://" + loopback(mon.Addr()) + "/metrics"); err == nil {
		_ = resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			t.Error("/metrics answered 200 over plain HTTP")
		}
	}
}

// loopback is the loopback address of the port of addr, which listens on
// every interface.
func loopback(addr string) string {
	_, port, _ := net.SplitHostPort(addr)
	return net.JoinHostPort("127.0.0.1", port)
}
