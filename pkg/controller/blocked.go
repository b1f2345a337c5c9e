package controller

import (
	common "github.com/kubeflow/common/pkg/apis/common/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubeflow/mpi-operator/pkg/reconcile"
)

// conditionBlocked is True while the job cannot make progress because the
// API server refuses a write it needs for a reason that retrying alone does
// not cure: the object is invalid, too large or forbidden, or an object
// that is not the job's holds a child's name. Its reason says which
// (reconcile.BlockedReason), and its message carries the API server's words.
// It goes once a sync completes.
const conditionBlocked common.JobConditionType = "Blocked"

// updateBlocked sets or clears the Blocked condition from the outcome of a
// sync: set for an error that blocks the job, cleared once a sync went
// through, and left as it was after an error that a retry may cure.
func updateBlocked(status *common.JobStatus, err error, now metav1.Time) {
	if reason, ok := reconcile.BlockedReason(err); ok {
		setCondition(status, conditionBlocked, reason, err.Error(), now)
		return
	}
	if err == nil {
		removeCondition(status, conditionBlocked)
	}
}
