package integration

import (
	"context"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kubeflow/mpi-operator/test/harness"
	"github.com/kubeflow/mpi-operator/v2/pkg/controller"
)

// TestStrayWorkerIsAdopted: a Running worker of an elastic job whose
// job-name label a user takes away drops out of the operator's pod cache.
// The job finds it by ownership and gives it its labels back; the job ends
// with the workers it asks for, listed, and deletes none while listed.
func TestStrayWorkerIsAdopted(t *testing.T) {
	t.Parallel()
	ns := suite.Namespace(t)
	h := recordHistory(t, ns)
	runController(t, nil, controller.Config{Namespace: ns})
	createJob(t, elasticJob(ns, "stray", 2, 1, 4, 1))
	runningWorkers(t, ns, "stray", 2)
	harness.Eventually(t, poll, waitTimeout, "two workers listed", func() (bool, error) { return len(listedWorkers(t, ns, "stray")) == 2, nil })

	strip := []byte(`{"metadata":{"labels":{"` + labelJobName + `":null}}}`)
	if _, err := suite.Kube.CoreV1().Pods(ns).Patch(context.Background(), "stray-worker-1", types.MergePatchType, strip, metav1.PatchOptions{}); err != nil {
		t.Fatalf("taking the label away: %v", err)
	}
	harness.Eventually(t, poll, waitTimeout, "every pod of the job labelled again, and two workers listed", func() (bool, error) {
		pods, err := suite.Kube.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		for _, p := range pods.Items {
			if ref := metav1.GetControllerOf(&p); ref != nil && ref.Name == "stray" && p.Labels[labelJobName] != "stray" {
				return false, nil
			}
		}
		return len(listedWorkers(t, ns, "stray")) == 2 && len(workerPods(t, ns, "stray", true)) == 2, nil
	})
	h.finish()
	h.checkWorkerOrder("stray")
}
