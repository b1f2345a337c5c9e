package main

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	mathrand "math/rand/v2"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	admissionregv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/kubeflow/mpi-operator/pkg/operator"
	"github.com/kubeflow/mpi-operator/test/harness"
)

// Faults at admission: windows in which the API server refuses every update
// of the jobs' ConfigMaps (the files that list the workers), and a webhook
// that holds each creation of a pod for a random while.

// refusalMessage is what the refused writes say; the operator's log lines
// that carry it are explained by the refusal.
const refusalMessage = "chaos: updates of ConfigMaps are refused for a while"

// refusal is one window of refused ConfigMap updates.
type refusal struct{ from, to time.Time }

// refuseConfigMapUpdates refuses every update of a ConfigMap of the chaos
// namespace for hold, and returns the window. A second into it, when the
// API server enforces the policy, during calls the scale-in that the window
// must meet.
func refuseConfigMapUpdates(ctx context.Context, kube kubernetes.Interface, hold time.Duration, during func(context.Context)) (refusal, error) {
	rule := admissionregv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"configmaps"}}
	remove, err := harness.RefuseUpdates(ctx, kube, "chaos-refuse-configmaps", namespace, rule, "false", refusalMessage)
	if err != nil {
		return refusal{}, err
	}
	r := refusal{from: time.Now()}
	sleepErr := sleepCtx(ctx, time.Second)
	if sleepErr == nil {
		during(ctx)
		sleepErr = sleepCtx(ctx, time.Until(r.from.Add(hold)))
	}
	// Remove it even when the run is being stopped.
	rmErr := remove()
	r.to = time.Now()
	if sleepErr != nil {
		return r, sleepErr
	}
	return r, rmErr
}

// countRefusedEvents counts the events of the chaos namespace that tell of
// a refused ConfigMap write: the operator's Blocked events, which say that
// the refusal met a write.
func countRefusedEvents(ctx context.Context, kube kubernetes.Interface) (int, error) {
	events, err := kube.CoreV1().Events(namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return 0, fmt.Errorf("listing events: %w", err)
	}
	n := 0
	for _, e := range events.Items {
		if strings.Contains(e.Message, refusalMessage) {
			n += max(int(e.Count), 1)
		}
	}
	return n, nil
}

// slowWebhook is a validating webhook on 127.0.0.1 that admits every pod
// creation of the chaos namespace after a random delay of up to maxDelay.
type slowWebhook struct {
	srv      *http.Server
	ln       net.Listener
	maxDelay time.Duration

	mu     sync.Mutex
	rng    *mathrand.Rand
	delays harness.Sample
}

// startSlowWebhook serves the webhook and registers it with the API server.
func startSlowWebhook(ctx context.Context, kube kubernetes.Interface, maxDelay time.Duration, seed int64) (*slowWebhook, error) {
	certPEM, tlsCert, err := operator.SelfSignedCert("chaos-webhook")
	if err != nil {
		return nil, err
	}
	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{tlsCert}, MinVersion: tls.VersionTLS12})
	if err != nil {
		return nil, err
	}
	w := &slowWebhook{ln: ln, maxDelay: maxDelay, rng: mathrand.New(mathrand.NewPCG(uint64(seed), 4))}
	w.srv = &http.Server{Handler: http.HandlerFunc(w.review), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = w.srv.Serve(ln) }()

	url := fmt.Sprintf("https://%s/validate", ln.Addr())
	none := admissionregv1.SideEffectClassNone
	ignore := admissionregv1.Ignore
	timeout := int32(10)
	cfg := &admissionregv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "chaos-slow-pods"},
		Webhooks: []admissionregv1.ValidatingWebhook{{
			Name:                    "slow-pods.chaos.mpi-operator.kubeflow.org",
			ClientConfig:            admissionregv1.WebhookClientConfig{URL: &url, CABundle: certPEM},
			Rules:                   []admissionregv1.RuleWithOperations{{Operations: []admissionregv1.OperationType{admissionregv1.Create}, Rule: admissionregv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"pods"}}}},
			NamespaceSelector:       &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": namespace}},
			FailurePolicy:           &ignore,
			SideEffects:             &none,
			TimeoutSeconds:          &timeout,
			AdmissionReviewVersions: []string{"v1"},
		}},
	}
	if _, err := kube.AdmissionregistrationV1().ValidatingWebhookConfigurations().Create(ctx, cfg, metav1.CreateOptions{}); err != nil {
		w.stop()
		return nil, fmt.Errorf("registering the slow webhook: %w", err)
	}
	return w, nil
}

// review admits the pod after a random delay.
func (w *slowWebhook) review(rw http.ResponseWriter, r *http.Request) {
	var review admissionv1.AdmissionReview
	if err := json.NewDecoder(r.Body).Decode(&review); err != nil || review.Request == nil {
		http.Error(rw, "not an AdmissionReview", http.StatusBadRequest)
		return
	}
	w.mu.Lock()
	delay := time.Duration(w.rng.Int64N(int64(w.maxDelay) + 1))
	w.delays = append(w.delays, delay)
	w.mu.Unlock()
	time.Sleep(delay)
	review.Response = &admissionv1.AdmissionResponse{UID: review.Request.UID, Allowed: true}
	review.Request = nil
	rw.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(rw).Encode(&review)
}

// calls returns the delays the webhook has applied.
func (w *slowWebhook) calls() harness.Sample {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append(harness.Sample(nil), w.delays...)
}

func (w *slowWebhook) stop() { _ = w.srv.Close() }

// unregister removes the webhook from the API server.
func (w *slowWebhook) unregister(ctx context.Context, kube kubernetes.Interface) error {
	return kube.AdmissionregistrationV1().ValidatingWebhookConfigurations().Delete(ctx, "chaos-slow-pods", metav1.DeleteOptions{})
}
