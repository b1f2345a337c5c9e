package integration

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/kubeflow/mpi-operator/pkg/operator"
	"github.com/kubeflow/mpi-operator/test/harness"
)

// shippedClusterRole reads the ClusterRole called name from the manifests'
// cluster-role.yaml.
func shippedClusterRole(t *testing.T, name string) *rbacv1.ClusterRole {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(env.Root, "manifests", "base", "cluster-role.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, doc := range strings.Split(string(data), "\n---\n") {
		var role rbacv1.ClusterRole
		if err := yaml.Unmarshal([]byte(doc), &role); err != nil {
			t.Fatalf("cluster-role.yaml: %v", err)
		}
		if role.Name == name {
			return &role
		}
	}
	t.Fatalf("cluster-role.yaml has no ClusterRole %s", name)
	return nil
}

// serviceAccountToken creates the ServiceAccount ns/name and returns a
// token of it.
func serviceAccountToken(t *testing.T, ns, name string) string {
	t.Helper()
	ctx := context.Background()
	sas := env.Kube.CoreV1().ServiceAccounts(ns)
	if _, err := sas.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	tr, err := sas.CreateToken(ctx, name, &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return tr.Status.Token
}

// TestMetricsNeedKubernetesAuth serves the monitoring port as the manifests
// ask (--metrics-auth=kubernetes) and scrapes it as the real API server's
// authenticator and authorizer decide: /metrics only with the token of an
// account bound to the shipped mpi-operator-metrics-reader ClusterRole,
// over HTTPS; /healthz for anyone.
func TestMetricsNeedKubernetesAuth(t *testing.T) {
	ns := env.Namespace(t)
	ctx := context.Background()
	reader := shippedClusterRole(t, "mpi-operator-metrics-reader")
	reader.Name += "-" + ns
	if _, err := env.Kube.RbacV1().ClusterRoles().Create(ctx, reader, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: reader.Name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: reader.Name},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: "scraper", Namespace: ns}},
	}
	if _, err := env.Kube.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = env.Kube.RbacV1().ClusterRoleBindings().Delete(context.Background(), reader.Name, metav1.DeleteOptions{})
		_ = env.Kube.RbacV1().ClusterRoles().Delete(context.Background(), reader.Name, metav1.DeleteOptions{})
	})
	scraper := serviceAccountToken(t, ns, "scraper")
	stranger := serviceAccountToken(t, ns, "stranger")

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	_ = ln.Close()
	serveCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		done <- operator.Serve(serveCtx, operator.ServeOptions{MonitoringPort: port, MetricsAuth: operator.MetricsAuthKubernetes, Kube: env.Kube},
			func(ctx context.Context, _ *operator.RunningController) error { <-ctx.Done(); return nil })
	}()
	t.Cleanup(func() {
		stop()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})

	get := func(scheme, path, token string) (int, string, error) {
		return harness.Scrape(context.Background(), fmt.Sprintf("%s://127.0.0.1:%d%s", scheme, port, path), token)
	}
	harness.Eventually(t, poll, waitTimeout, "the monitoring port to answer /healthz over HTTPS", func() (bool, error) {
		code, _, err := get("https", "/healthz", "")
		return err == nil && code == http.StatusOK, nil
	})
	cases := []struct {
		name, token string
		want        int
	}{
		{"without a token", "", http.StatusUnauthorized},
		{"with a token the API server does not know", "not-a-token", http.StatusUnauthorized},
		{"as an account without the reader role", stranger, http.StatusForbidden},
		{"as the reader", scraper, http.StatusOK},
	}
	for _, tc := range cases {
		code, body, err := get("https", "/metrics", tc.token)
		if err != nil {
			t.Fatalf("/metrics %s: %v", tc.name, err)
		}
		if code != tc.want {
			t.Errorf("/metrics %s: %d, want %d (%s)", tc.name, code, tc.want, strings.TrimSpace(body))
		}
		if code == http.StatusOK && !strings.Contains(body, "mpi_operator_is_leader") {
			t.Errorf("/metrics as the reader lacks mpi_operator_is_leader:\n%s", body)
		}
	}
	if code, _, err := get("http", "/metrics", scraper); err == nil && code == http.StatusOK {
		t.Error("/metrics answered over plain HTTP")
	}
}
