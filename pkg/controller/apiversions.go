package controller

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	kubeflow "github.com/kubeflow/mpi-operator/pkg/apis/kubeflow/v1"
	"github.com/kubeflow/mpi-operator/pkg/podcache"
)

// MPIJobs of another API version. A cluster that ran upstream's v2beta1
// operator keeps MPIJobs stored as kubeflow.org/v2beta1. The CRD lists that
// version (not served) only so that it applies over such a cluster; the API
// server hands those objects out through v1 with their apiVersion rewritten.
// Run as v1 jobs they would get a second launcher beside their v2beta1
// launcher Job and files written for kubectl exec instead of SSH, and
// writing their status would drop every field v1 does not know. The only
// trace of their origin that survives is in their managed fields, which
// record the API version of each write: a job that anything wrote through
// another kubeflow.org version is left alone, with a Warning event.

const eventUnsupportedAPIVersion = "UnsupportedAPIVersion"

// foreignAPIVersion returns the first kubeflow.org API version other than
// v1 that the job's managed fields record a write through.
func foreignAPIVersion(job *kubeflow.MPIJob) (string, bool) {
	for _, e := range job.ManagedFields {
		if isForeignVersion(e.APIVersion) {
			return e.APIVersion, true
		}
	}
	return "", false
}

func isForeignVersion(apiVersion string) bool {
	gv, err := schema.ParseGroupVersion(apiVersion)
	return err == nil && gv.Group == kubeflow.GroupName && gv.Version != kubeflow.SchemeGroupVersion.Version
}

// trimJob is the transform of the MPIJob informer: of the managed fields it
// keeps only the API version of one write through another kubeflow.org
// version, if there is one, which is all that foreignAPIVersion reads.
// Nothing the controller sends to the API server carries them: the sync
// clears them on its copy.
func trimJob(obj any) (any, error) {
	job, ok := obj.(*kubeflow.MPIJob)
	if !ok {
		return podcache.DropManagedFields(obj)
	}
	var kept []metav1.ManagedFieldsEntry
	if v, found := foreignAPIVersion(job); found {
		kept = []metav1.ManagedFieldsEntry{{APIVersion: v}}
	}
	job.ManagedFields = kept
	return job, nil
}

// warnForeignJob tells, in a Warning event, that the job was written
// through another API version and is left alone.
func (c *MPIJobController) warnForeignJob(job *kubeflow.MPIJob) {
	v, _ := foreignAPIVersion(job)
	c.Recorder.Eventf(job, corev1.EventTypeWarning, eventUnsupportedAPIVersion,
		"MPIJob %s/%s was written through %s; this operator runs %s MPIJobs and leaves it alone. "+
			"Run it with an operator of %s, or create it again through %s",
		job.Namespace, job.Name, v, kubeflow.SchemeGroupVersion, v, kubeflow.SchemeGroupVersion)
}
