package controller

import (
	"context"
	"maps"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	kubeflow "github.com/kubeflow/mpi-operator/pkg/apis/kubeflow/v1"
	"github.com/kubeflow/mpi-operator/pkg/elastic"
	"github.com/kubeflow/mpi-operator/pkg/reconcile"
)

// syncConfigMap writes the job's /etc/mpi files and bookkeeping, if they
// changed.
func (c *MPIJobController) syncConfigMap(ctx context.Context, job *kubeflow.MPIJob, hosts elastic.Hosts, state elastic.State) (*corev1.ConfigMap, error) {
	return reconcile.Ensure(ctx, owner(job), c.configMapChild(), newConfigMap(job, hosts, state))
}

// recordedState reads the bookkeeping from the job's ConfigMap; the zero
// state when there is none.
func (c *MPIJobController) recordedState(job *kubeflow.MPIJob) elastic.State {
	cm, err := c.cmLister.ConfigMaps(job.Namespace).Get(configMapName(job))
	if err != nil || !metav1.IsControlledBy(cm, job) {
		return elastic.State{}
	}
	return elastic.ParseState(cm.Annotations)
}

func (c *MPIJobController) configMapChild() reconcile.Child[*corev1.ConfigMap] {
	return reconcile.Child[*corev1.ConfigMap]{
		Kind: "ConfigMap",
		Get: func(ns, name string) (*corev1.ConfigMap, error) {
			return c.cmLister.ConfigMaps(ns).Get(name)
		},
		Fetch: func(ctx context.Context, ns, name string) (*corev1.ConfigMap, error) {
			return c.kubeClient.CoreV1().ConfigMaps(ns).Get(ctx, name, metav1.GetOptions{})
		},
		Create: func(ctx context.Context, cm *corev1.ConfigMap) (*corev1.ConfigMap, error) {
			return c.kubeClient.CoreV1().ConfigMaps(cm.Namespace).Create(ctx, cm, metav1.CreateOptions{})
		},
		Update: func(ctx context.Context, cm *corev1.ConfigMap) (*corev1.ConfigMap, error) {
			return c.kubeClient.CoreV1().ConfigMaps(cm.Namespace).Update(ctx, cm, metav1.UpdateOptions{})
		},
		Merge: func(cur, want *corev1.ConfigMap) (*corev1.ConfigMap, bool) {
			same := maps.Equal(cur.Data, want.Data)
			keys := elastic.StateAnnotations()
			for _, k := range keys {
				same = same && cur.Annotations[k] == want.Annotations[k]
			}
			if same {
				return cur, false
			}
			merged := cur.DeepCopy()
			merged.Data = want.Data
			for _, k := range keys {
				if v, ok := want.Annotations[k]; ok {
					if merged.Annotations == nil {
						merged.Annotations = map[string]string{}
					}
					merged.Annotations[k] = v
				} else {
					delete(merged.Annotations, k)
				}
			}
			return merged, true
		},
	}
}
