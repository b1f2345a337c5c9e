package controller

import (
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	kubeflow "github.com/kubeflow/mpi-operator/pkg/apis/kubeflow/v1"
	"github.com/kubeflow/mpi-operator/pkg/elastic"
	"github.com/kubeflow/mpi-operator/pkg/reconcile"
)

// jobPodLabels gives the labels by which the informers and selectors know
// a pod of job's of the name given, for its launcher and its workers; nil
// for any other name.
func jobPodLabels(job *kubeflow.MPIJob) func(name string) map[string]string {
	launcher, workers := podLabels(job, roleLauncher), podLabels(job, roleWorker)
	return func(name string) map[string]string {
		if name == launcherName(job) {
			return launcher
		}
		if _, ok := workerIndexOf(job.Name, name, nil); ok {
			return workers
		}
		return nil
	}
}

// jobPods are the job's pods: those its pod cache shows, and those of the
// other pods' cache it controls (reconcile.Strays).
func (c *MPIJobController) jobPods(job *kubeflow.MPIJob, launcher *corev1.Pod, ws []elastic.Worker) []metav1.Object {
	pods := reconcile.Strays(c.strays, job.UID)
	if launcher != nil {
		pods = append(pods, launcher)
	}
	for _, w := range ws {
		pods = append(pods, w.Pod)
	}
	return pods
}

// jobNameOfPod is the name of the job whose launcher or worker would have
// the pod name given, if any would.
func jobNameOfPod(pod string) (string, bool) {
	if job, ok := strings.CutSuffix(pod, launcherSuffix); ok && job != "" {
		return job, true
	}
	i := strings.LastIndex(pod, workerInfix)
	if i <= 0 {
		return "", false
	}
	if _, ok := elastic.ParseIndex(pod[i+len(workerInfix):]); !ok {
		return "", false
	}
	return pod[:i], true
}
