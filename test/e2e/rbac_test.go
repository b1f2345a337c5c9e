package e2e

import (
	"testing"

	"github.com/kubeflow/mpi-operator/test/harness"
)

// tenantNamespace is where the tenants of the access matrix hold their
// roles.
const tenantNamespace = "team"

// checkAccess checks, through SubjectAccessReviews, what the installed roles
// allow: the operator's account exactly the verbs the operator calls (the
// rest of this test runs it as that account), its Lease in its own
// namespace only; tenants with the Kubeflow edit and view roles everything
// on their jobs but their status.
func checkAccess(t *testing.T) {
	operator := []harness.Access{
		{Verb: "create", Resource: "pods", Namespace: jobNamespace, Allowed: true},
		{Verb: "patch", Resource: "pods", Namespace: jobNamespace, Allowed: true},
		{Verb: "delete", Resource: "pods", Namespace: jobNamespace, Allowed: true},
		{Verb: "create", Resource: "pods/exec", Namespace: jobNamespace, Allowed: true},
		{Verb: "update", Resource: "roles.rbac.authorization.k8s.io", Namespace: jobNamespace, Allowed: true},
		{Verb: "delete", Resource: "mpijobs.kubeflow.org", Namespace: jobNamespace, Allowed: true},
		{Verb: "update", Resource: "mpijobs.kubeflow.org/status", Namespace: jobNamespace, Allowed: true},
		{Verb: "delete", Resource: "podgroups.scheduling.volcano.sh", Namespace: jobNamespace, Allowed: true},
		{Verb: "update", Resource: "leases.coordination.k8s.io", Namespace: operatorNamespace, Allowed: true},
		{Verb: "create", Resource: "events", Namespace: jobNamespace, Allowed: true},
		{Verb: "get", Resource: "leases.coordination.k8s.io", Namespace: jobNamespace},
		{Verb: "update", Resource: "leases.coordination.k8s.io", Namespace: "kube-system"},
		{Verb: "update", Resource: "mpijobs.kubeflow.org", Namespace: jobNamespace},
		{Verb: "patch", Resource: "mpijobs.kubeflow.org", Namespace: jobNamespace},
		{Verb: "get", Resource: "secrets", Namespace: jobNamespace},
		{Verb: "delete", Resource: "configmaps", Namespace: jobNamespace},
		{Verb: "delete", Resource: "roles.rbac.authorization.k8s.io", Namespace: jobNamespace},
		{Verb: "create", Resource: "events.events.k8s.io", Namespace: jobNamespace},
	}
	check(t, harness.ServiceAccount(operatorNamespace, "mpi-operator"), operator)

	mustKubectl(t, "create", "namespace", tenantNamespace)
	mustKubectl(t, "create", "rolebinding", "editor", "--clusterrole=kubeflow-mpijobs-edit", "--user=editor", "-n", tenantNamespace)
	mustKubectl(t, "create", "rolebinding", "admin", "--clusterrole=kubeflow-mpijobs-admin", "--user=admin", "-n", tenantNamespace)
	mustKubectl(t, "create", "rolebinding", "viewer", "--clusterrole=kubeflow-mpijobs-view", "--user=viewer", "-n", tenantNamespace)
	writer := func(allowed bool) []harness.Access {
		return []harness.Access{
			{Verb: "create", Resource: "mpijobs.kubeflow.org", Namespace: tenantNamespace, Allowed: allowed},
			{Verb: "patch", Resource: "mpijobs.kubeflow.org", Namespace: tenantNamespace, Allowed: allowed},
			{Verb: "update", Resource: "mpijobs.kubeflow.org/scale", Namespace: tenantNamespace, Allowed: allowed},
			{Verb: "delete", Resource: "mpijobs.kubeflow.org", Namespace: tenantNamespace, Allowed: allowed},
			{Verb: "get", Resource: "mpijobs.kubeflow.org/status", Namespace: tenantNamespace, Allowed: true},
			{Verb: "update", Resource: "mpijobs.kubeflow.org/status", Namespace: tenantNamespace},
			{Verb: "patch", Resource: "mpijobs.kubeflow.org/status", Namespace: tenantNamespace},
			{Verb: "create", Resource: "mpijobs.kubeflow.org", Namespace: jobNamespace},
		}
	}
	check(t, harness.User("editor"), writer(true))
	check(t, harness.User("admin"), writer(true))
	check(t, harness.User("viewer"), writer(false))
}

func check(t *testing.T, who harness.Subject, cells []harness.Access) {
	t.Helper()
	harness.ExpectAccess(t, env.Kubeconfig, who, cells)
}
