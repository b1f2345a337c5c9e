package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kubeflow/mpi-operator/test/harness"
)

// checkAccess checks, through SubjectAccessReviews, what the installed roles
// allow: the operator's account exactly the verbs the operator calls (the
// rest of this test runs it as that account), its Lease in its own
// namespace only; tenants with the Kubeflow edit and view roles everything
// on their jobs but their status.
func checkAccess(t *testing.T) {
	in := func(verb, resource, ns string, allowed bool) harness.Access {
		return harness.Access{Verb: verb, Resource: resource, Namespace: ns, Allowed: allowed}
	}
	check(t, harness.ServiceAccount("mpi-operator", "mpi-operator"), []harness.Access{
		in("create", "pods", jobsNS, true),
		in("patch", "pods", jobsNS, true),
		in("delete", "pods", jobsNS, true),
		in("update", "configmaps", jobsNS, true),
		in("create", "secrets", jobsNS, true),
		in("update", "services", jobsNS, true),
		in("update", "jobs.batch", jobsNS, true),
		in("update", "jobs.batch/status", jobsNS, true),
		in("update", "mpijobs.kubeflow.org/status", jobsNS, true),
		in("update", "mpijobs.kubeflow.org/finalizers", jobsNS, true),
		in("watch", "endpointslices.discovery.k8s.io", jobsNS, true),
		in("delete", "podgroups.scheduling.volcano.sh", jobsNS, true),
		in("delete", "podgroups.scheduling.x-k8s.io", jobsNS, true),
		in("update", "leases.coordination.k8s.io", "mpi-operator", true),
		in("create", "events", jobsNS, true),
		in("update", "mpijobs.kubeflow.org", jobsNS, false),
		in("patch", "mpijobs.kubeflow.org", jobsNS, false),
		in("delete", "mpijobs.kubeflow.org", jobsNS, false),
		in("update", "mpijobs.kubeflow.org/scale", jobsNS, false),
		in("delete", "secrets", jobsNS, false),
		in("patch", "secrets", jobsNS, false),
		in("delete", "jobs.batch", jobsNS, false),
		in("delete", "services", jobsNS, false),
		in("create", "pods/exec", jobsNS, false),
		in("get", "leases.coordination.k8s.io", jobsNS, false),
		in("update", "leases.coordination.k8s.io", "kube-system", false),
		in("create", "events.events.k8s.io", jobsNS, false),
	})

	t.Logf("kubectl apply -f v2/manifests/overlays/kubeflow/user-roles.yaml:\n%s",
		must(t, "apply", "-f", "v2/manifests/overlays/kubeflow/user-roles.yaml"))
	const team = "team"
	must(t, "create", "namespace", team)
	must(t, "create", "rolebinding", "editor", "--clusterrole=kubeflow-mpijobs-edit", "--user=editor", "-n", team)
	must(t, "create", "rolebinding", "viewer", "--clusterrole=kubeflow-mpijobs-view", "--user=viewer", "-n", team)
	tenant := func(writes bool) []harness.Access {
		return []harness.Access{
			in("create", "mpijobs.kubeflow.org", team, writes),
			in("patch", "mpijobs.kubeflow.org", team, writes),
			in("update", "mpijobs.kubeflow.org/scale", team, writes),
			in("delete", "mpijobs.kubeflow.org", team, writes),
			in("get", "mpijobs.kubeflow.org/status", team, true),
			in("update", "mpijobs.kubeflow.org/status", team, false),
			in("patch", "mpijobs.kubeflow.org/status", team, false),
			in("create", "mpijobs.kubeflow.org", jobsNS, false),
		}
	}
	check(t, harness.User("editor"), tenant(true))
	check(t, harness.User("viewer"), tenant(false))
}

func check(t *testing.T, who harness.Subject, cells []harness.Access) {
	t.Helper()
	harness.ExpectAccess(t, suite.Kubeconfig, who, cells)
}

// checkPodIdentity: a tenant allowed to create pods (Kubernetes' edit role)
// cannot give one the labels that put it behind a job's Service, under a
// worker's host name, neither at creation nor later; the same pod without
// them is admitted. The operator's own workers and the Job controller's
// launcher pods are admitted throughout the rest of the suite.
func checkPodIdentity(t *testing.T) {
	const ns = "impostor"
	waitNamespace(t, ns)
	must(t, "create", "rolebinding", "mallory", "--clusterrole=edit", "--user=mallory", "-n", ns)
	pod := func(labels string) string {
		return fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata:
  name: pi-worker-0
  namespace: %s
  labels: {%s}
spec:
  hostname: pi-worker-0
  subdomain: pi
  containers:
    - name: sshd
      image: busybox
`, ns, labels)
	}
	asMallory := func(manifest string) error {
		path := filepath.Join(t.TempDir(), "pod.yaml")
		if err := os.WriteFile(path, []byte(manifest), 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := kubectl("--as=mallory", "create", "-f", path)
		return err
	}
	const refusal = "only the MPI operator labels pods"
	impostor := pod(`training.kubeflow.org/operator-name: mpi-operator, training.kubeflow.org/job-name: pi, training.kubeflow.org/job-role: worker`)
	if err := asMallory(impostor); err == nil || !strings.Contains(err.Error(), refusal) {
		t.Errorf("a tenant's pod labelled as a worker of job pi: %v, want it refused saying %q", err, refusal)
	}
	if err := asMallory(pod(`app: sshd`)); err != nil {
		t.Fatalf("the same pod without the operator's labels: %v", err)
	}
	_, err := kubectl("--as=mallory", "label", "pod", "pi-worker-0", "-n", ns, "training.kubeflow.org/operator-name=mpi-operator")
	if err == nil || !strings.Contains(err.Error(), refusal) {
		t.Errorf("labelling a tenant's pod as the operator's: %v, want it refused saying %q", err, refusal)
	}
}
