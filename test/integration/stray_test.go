package integration

import (
	"context"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kubeflow/mpi-operator/pkg/controller"
	"github.com/kubeflow/mpi-operator/test/harness"
)

// TestStrayWorkerIsAdopted: a Running worker of an elastic job whose
// job-name label a user takes away drops out of the operator's pod cache.
// The job finds it by ownership and gives it its labels back; the job ends
// with the workers it asks for, listed, and deletes none while listed.
func TestStrayWorkerIsAdopted(t *testing.T) {
	ns := env.Namespace(t)
	startController(t, controller.Config{Namespace: ns})
	createJob(t, elasticJob(ns, "stray", 2, 1, 4, 1))
	for _, w := range namesOf("stray", 0, 1) {
		waitForRunning(t, ns, w)
	}
	waitForHosts(t, ns, "stray", hostsOf("stray", 0, 1)...)
	checkNoDeletionWhileListed(t, ns, "stray")

	strip := []byte(`{"metadata":{"labels":{"mpi-job-name":null}}}`)
	if _, err := env.Kube.CoreV1().Pods(ns).Patch(context.Background(), "stray-worker-1", types.MergePatchType, strip, metav1.PatchOptions{}); err != nil {
		t.Fatalf("taking the label away: %v", err)
	}
	harness.Eventually(t, poll, waitTimeout, "every pod of the job labelled again, and two workers listed", func() (bool, error) {
		pods, err := env.Kube.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		for _, p := range pods.Items {
			if ref := metav1.GetControllerOf(&p); ref != nil && ref.Name == "stray" && p.Labels["mpi-job-name"] != "stray" {
				return false, nil
			}
		}
		return len(discoveredHosts(t, ns, "stray")) == 2 && len(workerPods(t, ns, "stray")) == 2, nil
	})
}
