package e2e

import (
	"testing"

	"github.com/kubeflow/mpi-operator/test/testcluster"
)

// checkAccess checks, through SubjectAccessReviews, what the installed roles
// allow: the operator's account exactly the verbs the operator calls (the
// rest of this test runs it as that account), its Lease in its own
// namespace only; tenants with the Kubeflow edit and view roles everything
// on their jobs but their status.
func checkAccess(t *testing.T) {
	in := func(verb, resource, ns string, allowed bool) testcluster.Access {
		return testcluster.Access{Verb: verb, Resource: resource, Namespace: ns, Allowed: allowed}
	}
	check(t, testcluster.ServiceAccount("mpi-operator", "mpi-operator"), []testcluster.Access{
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
	tenant := func(writes bool) []testcluster.Access {
		return []testcluster.Access{
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
	check(t, testcluster.User("editor"), tenant(true))
	check(t, testcluster.User("viewer"), tenant(false))
}

func check(t *testing.T, who testcluster.Subject, cells []testcluster.Access) {
	t.Helper()
	testcluster.ExpectAccess(t, suite.kubeconfig, who, cells)
}
