package controller

import (
	kubeflow "github.com/kubeflow/mpi-operator/pkg/apis/kubeflow/v1"
	"github.com/kubeflow/mpi-operator/pkg/reconcile"
)

// owner is the job as the owner of its children, which reconcile.Ensure
// writes and errors name.
func owner(job *kubeflow.MPIJob) reconcile.Owner {
	return reconcile.Owner{Kind: kubeflow.Kind, Object: job}
}
