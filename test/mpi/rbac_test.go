package mpi

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubeflow/mpi-operator/test/harness"
)

// checkRefused runs the operator's kubexec.sh, with the launcher's
// credentials, into a worker of the job (allowed) and into a pod the
// launcher's Role does not name (refused by the API server), both pods
// served by kwok alike.
func checkRefused(ctx context.Context, t *testing.T, l *launcher, root string) {
	const outsider = "other-worker-0"
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: outsider, Namespace: namespace},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "worker", Image: "debian:bookworm"}}},
	}
	if _, err := env.Kube.CoreV1().Pods(namespace).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	harness.Eventually(t, poll, waitTimeout, outsider+" Running", func() (bool, string) {
		p, err := env.Kube.CoreV1().Pods(namespace).Get(ctx, outsider, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return p.Status.Phase == corev1.PodRunning, string(p.Status.Phase)
	})
	// The admin can exec into it: what refuses the launcher is RBAC.
	serveExec(ctx, t, outsider, filepath.Join(root, "pods", outsider))

	kubexec := l.path("/etc/mpi/kubexec.sh")
	worker := job + "-worker-0"
	if out, err := l.run(ctx, kubexec, worker, "echo", "$MPI_TEST_POD"); err != nil || strings.TrimSpace(out) != worker {
		t.Errorf("kubexec.sh %s echo $MPI_TEST_POD = %q (%v), want %q", worker, out, err, worker)
	}
	out, err := l.run(ctx, kubexec, outsider, "echo", "ran")
	t.Logf("kubexec.sh %s echo ran: %v\n%s", outsider, err, out)
	want := `pods "` + outsider + `" is forbidden: User "system:serviceaccount:` + namespace + `:` + job +
		`-launcher" cannot create resource "pods/exec" in API group "" in the namespace "` + namespace + `"`
	if err == nil || !strings.Contains(out, want) || strings.Contains(out, "ran\n") {
		t.Errorf("kubexec.sh into %s: err %v, output %q; want a failure saying %q", outsider, err, out, want)
	}
}
