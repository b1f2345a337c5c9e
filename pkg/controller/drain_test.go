package controller

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"

	kubeflow "github.com/kubeflow/mpi-operator/pkg/apis/kubeflow/v1"
)

// TestDrainStartsAfterTheUnlistingWrite: a scale-in's victims are marked
// draining, which starts their drain period, only once the ConfigMap write
// that unlists them went through and the launcher was told. A refused
// write (an admission policy, say) or a failed launcher refresh marks
// nobody; a later sync that goes through marks them then.
func TestDrainStartsAfterTheUnlistingWrite(t *testing.T) {
	refusal := apierrors.NewForbidden(schema.GroupResource{Resource: "configmaps"}, "pi-config", nil)
	refused := map[string]struct {
		verb, resource string
		want           []action // the requests of the refused sync
	}{
		"ConfigMap": {"update", "configmaps", []action{update("configmaps", "pi-config")}},
		"launcher":  {"patch", "pods", []action{update("configmaps", "pi-config"), patchPod("pi-launcher")}},
	}
	for what, r := range refused {
		t.Run(what+" refused", func(t *testing.T) {
			f := newFixture(t)
			job := runningJob(f, 4)
			job.Spec.MPIReplicaSpecs[kubeflow.MPIReplicaTypeWorker].Replicas = ptr[int32](2)
			_, err := f.syncPrepared(job, func(*MPIJobController) { refuse(&f.kubeClient.Fake, r.verb, r.resource, refusal) })
			if !apierrors.IsForbidden(err) {
				t.Fatalf("sync error %v, want the refusal", err)
			}
			got := writes(f.kubeClient.Actions())
			if diff := cmp.Diff(r.want, got); diff != "" {
				t.Errorf("requests with the %s refused, no victim marked (-want +got):\n%s", what, diff)
			}

			// The same sync once the API server takes the writes.
			f.sync(job)
			f.expectKubeWrites(update("configmaps", "pi-config"), patchPod("pi-launcher"),
				patchPod("pi-worker-2"), patchPod("pi-worker-3"))
		})
	}
}
