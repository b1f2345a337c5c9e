package controller

import (
	"context"
	"maps"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubeflow/mpi-operator/pkg/elastic"
	"github.com/kubeflow/mpi-operator/pkg/reconcile"
	"github.com/kubeflow/mpi-operator/v2/pkg/apis/kubeflow/v2beta1"
)

// The children that are not pods are got or created by name through
// reconcile.Ensure, which never writes an object of the name that the job
// does not control, and updates one only where what the controller owns
// differs. The launcher Job is created here too; its updates are
// suspend.go's.

// owner is the job as reconcile.Ensure names it.
func owner(job *v2beta1.MPIJob) reconcile.Owner {
	return reconcile.Owner{Kind: v2beta1.Kind, Object: job}
}

// syncService ensures the headless Service that names the job's pods.
func (c *MPIJobController) syncService(ctx context.Context, job *v2beta1.MPIJob) error {
	ch := reconcile.ChildOf("Service", func(ns, name string) (*corev1.Service, error) { return c.serviceLister.Services(ns).Get(name) },
		func(ns string) reconcile.TypedClient[*corev1.Service] { return c.kube.CoreV1().Services(ns) }, mergeService)
	_, err := reconcile.Ensure(ctx, owner(job), ch, newService(job))
	return err
}

// mergeService takes the selector and the publishing of unready pods from
// want; the cluster IP cannot change, and everything else is left as it is.
func mergeService(cur, want *corev1.Service) (*corev1.Service, bool) {
	if maps.Equal(cur.Spec.Selector, want.Spec.Selector) &&
		cur.Spec.PublishNotReadyAddresses == want.Spec.PublishNotReadyAddresses {
		return cur, false
	}
	merged := cur.DeepCopy()
	merged.Spec.Selector = maps.Clone(want.Spec.Selector)
	merged.Spec.PublishNotReadyAddresses = want.Spec.PublishNotReadyAddresses
	return merged, true
}

// syncSSHSecret creates the job's SSH Secret, with a new key, when it does
// not exist. An existing Secret of the job's is never changed: its key is
// in the running pods' volumes, and a new one would lock them out of each
// other.
func (c *MPIJobController) syncSSHSecret(ctx context.Context, job *v2beta1.MPIJob) error {
	secrets := func(ns string) reconcile.TypedClient[*corev1.Secret] { return c.kube.CoreV1().Secrets(ns) }
	ch := reconcile.ChildOf("Secret", func(ns, name string) (*corev1.Secret, error) { return c.secretLister.Secrets(ns).Get(name) },
		secrets, reconcile.Keep[*corev1.Secret])
	// The key is made only when the Secret is created.
	ch.Create = func(ctx context.Context, _ *corev1.Secret) (*corev1.Secret, error) {
		key, err := generateSSHKey()
		if err != nil {
			return nil, err
		}
		s, err := newSSHSecret(job, key)
		if err != nil {
			return nil, err
		}
		return secrets(s.Namespace).Create(ctx, s, metav1.CreateOptions{})
	}
	_, err := reconcile.Ensure(ctx, owner(job), ch, &corev1.Secret{ObjectMeta: childMeta(job, sshSecretName(job))})
	return err
}

// configMapChild reads and writes the job's ConfigMap.
func (c *MPIJobController) configMapChild() reconcile.Child[*corev1.ConfigMap] {
	return reconcile.ChildOf("ConfigMap", c.configMaps.Get,
		func(ns string) reconcile.TypedClient[*corev1.ConfigMap] { return c.kube.CoreV1().ConfigMaps(ns) }, elastic.MergeFiles).Remembering(c.configMaps)
}

// launcherChild reads and creates the launcher Job. It never updates one:
// a Job's pod template may change only while it is suspended, which
// suspend.go handles.
func (c *MPIJobController) launcherChild() reconcile.Child[*batchv1.Job] {
	return reconcile.ChildOf("Job", c.launchers.Get,
		func(ns string) reconcile.TypedClient[*batchv1.Job] { return c.kube.BatchV1().Jobs(ns) }, reconcile.Keep[*batchv1.Job]).Remembering(c.launchers)
}

// semanticallyEqual is equality as the API server sees it: quantities by
// value, empty and nil alike where the API makes them so.
func semanticallyEqual(a, b any) bool { return equality.Semantic.DeepEqual(a, b) }
