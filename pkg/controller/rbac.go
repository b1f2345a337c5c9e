package controller

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/equality"

	kubeflow "github.com/kubeflow/mpi-operator/pkg/apis/kubeflow/v1"
	"github.com/kubeflow/mpi-operator/pkg/reconcile"
)

// syncLauncherRBAC makes sure the launcher's ServiceAccount, Role and
// RoleBinding exist, and that the Role allows exec into exactly the workers
// named in exec. It runs before any new worker is created.
// The ServiceAccount and the Role are written in parallel; the RoleBinding
// follows the Role, since the API server lets the operator bind only a Role
// that exists (it checks that the binding grants nothing the operator does
// not hold).
func (c *MPIJobController) syncLauncherRBAC(ctx context.Context, job *kubeflow.MPIJob, exec []string) error {
	err := reconcile.Concurrently(
		func() error {
			_, err := reconcile.Ensure(ctx, owner(job), c.serviceAccountChild(), newLauncherServiceAccount(job))
			return err
		},
		func() error {
			_, err := reconcile.Ensure(ctx, owner(job), c.roleChild(), newLauncherRole(job, exec))
			return err
		},
	)
	if err != nil {
		return err
	}
	_, err = reconcile.Ensure(ctx, owner(job), c.roleBindingChild(), newLauncherRoleBinding(job))
	return err
}

// serviceAccountChild: nothing of a ServiceAccount is the controller's
// beyond its name.
func (c *MPIJobController) serviceAccountChild() reconcile.Child[*corev1.ServiceAccount] {
	return reconcile.ChildOf("ServiceAccount", func(ns, name string) (*corev1.ServiceAccount, error) { return c.saLister.ServiceAccounts(ns).Get(name) },
		func(ns string) reconcile.TypedClient[*corev1.ServiceAccount] {
			return c.kubeClient.CoreV1().ServiceAccounts(ns)
		},
		reconcile.Keep[*corev1.ServiceAccount])
}

func (c *MPIJobController) roleChild() reconcile.Child[*rbacv1.Role] {
	return reconcile.ChildOf("Role", func(ns, name string) (*rbacv1.Role, error) { return c.roleLister.Roles(ns).Get(name) },
		func(ns string) reconcile.TypedClient[*rbacv1.Role] { return c.kubeClient.RbacV1().Roles(ns) },
		mergeRole)
}

// mergeRole takes the rules from want.
func mergeRole(cur, want *rbacv1.Role) (*rbacv1.Role, bool) {
	if equality.Semantic.DeepEqual(cur.Rules, want.Rules) {
		return cur, false
	}
	merged := cur.DeepCopy()
	merged.Rules = want.Rules
	return merged, true
}

func (c *MPIJobController) roleBindingChild() reconcile.Child[*rbacv1.RoleBinding] {
	return reconcile.ChildOf("RoleBinding", func(ns, name string) (*rbacv1.RoleBinding, error) { return c.rbLister.RoleBindings(ns).Get(name) },
		func(ns string) reconcile.TypedClient[*rbacv1.RoleBinding] {
			return c.kubeClient.RbacV1().RoleBindings(ns)
		},
		mergeRoleBinding)
}

// mergeRoleBinding takes the subjects from want: the roleRef cannot change,
// only the subjects can drift.
func mergeRoleBinding(cur, want *rbacv1.RoleBinding) (*rbacv1.RoleBinding, bool) {
	if equality.Semantic.DeepEqual(cur.Subjects, want.Subjects) {
		return cur, false
	}
	merged := cur.DeepCopy()
	merged.Subjects = want.Subjects
	return merged, true
}
