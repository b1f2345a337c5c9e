package controller

import (
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	core "k8s.io/client-go/testing"

	"github.com/kubeflow/mpi-operator/pkg/elastic"
)

// TestDrainStartsAfterTheUnlistingWrite: a scale-in's victims are marked
// draining, which starts their drain period, only once the ConfigMap write
// that unlists them went through. A refused write (an admission policy,
// say) marks nobody; the sync after it, which goes through, marks them.
func TestDrainStartsAfterTheUnlistingWrite(t *testing.T) {
	f := newFixture(t).start(storedJob(3, withElastic(1, 5)))
	runningJob(t, f, "job-worker-0", "job-worker-1", "job-worker-2")
	f.updateJob(setWorkers(1))
	f.refresh()
	refusal := apierrors.NewForbidden(schema.GroupResource{Resource: "configmaps"}, "job-config", nil)
	f.kube.PrependReactor("update", "configmaps", func(core.Action) (bool, runtime.Object, error) {
		return true, nil, refusal
	})
	if _, err := f.syncErr(); !apierrors.IsForbidden(err) {
		t.Fatalf("sync error %v, want the refusal", err)
	}
	// The refused request, and the status: no victim marked.
	f.expectWrites(update("configmaps", "job-config"), statusUpdate())
	for _, name := range []string{"job-worker-1", "job-worker-2"} {
		if p := f.pod(name); p.Annotations[elastic.AnnotationDrainingSince] != "" {
			t.Errorf("%s marked draining although discover_hosts.sh still lists it", name)
		}
	}

	f.kube.ReactionChain = f.kube.ReactionChain[1:]
	f.step()
	f.expectWrites(
		update("configmaps", "job-config"),
		patchPod("job-launcher-abcde"),
		patchPod("job-worker-1"), patchPod("job-worker-2"),
		statusUpdate(),
	)
}
