package controller

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	core "k8s.io/client-go/testing"

	"github.com/kubeflow/mpi-operator/v2/pkg/apis/kubeflow/v2beta1"
)

// TestVolcanoPodGroup: the PodGroup is made before the pods, whose
// scheduler and group annotation point at it; a queue volcano filled in
// is kept, and a resize changes minMember only.
func TestVolcanoPodGroup(t *testing.T) {
	f := newFixture(t)
	f.cfg.GangSchedulerName = "volcano"
	f.start(storedJob(2, withElastic(1, 4)))
	f.sync()
	if diff := cmp.Diff([]action{create("podgroups", "job")}, f.groups.writes); diff != "" {
		t.Fatalf("PodGroup writes (-want +got):\n%s", diff)
	}
	if w := f.pod("job-worker-0"); w.Spec.SchedulerName != "volcano" || w.Annotations[annotationVolcanoGroup] != "job" {
		t.Errorf("worker scheduler %q, annotations %v", w.Spec.SchedulerName, w.Annotations)
	}
	f.groups.volcano["job"].Spec.Queue = "team-a"
	f.step()
	f.expectGroupWrites()
	f.updateJob(func(j *v2beta1.MPIJob) { j.Spec.ElasticPolicy.MinReplicas = ptr[int32](2) })
	f.step()
	pg := f.groups.volcano["job"]
	if pg.Spec.MinMember != 3 || pg.Spec.Queue != "team-a" {
		t.Errorf("PodGroup minMember %d, queue %q; want 3, team-a", pg.Spec.MinMember, pg.Spec.Queue)
	}
}

func TestSchedulerPluginsPodGroup(t *testing.T) {
	f := newFixture(t)
	f.cfg.GangSchedulerName = "scheduler-plugins-scheduler"
	f.start(storedJob(3))
	f.sync()
	pg := f.groups.sched["job"]
	if pg == nil || pg.Spec.MinMember != 4 {
		t.Fatalf("PodGroup %+v", pg)
	}
	if w := f.pod("job-worker-0"); w.Spec.SchedulerName != "scheduler-plugins-scheduler" || w.Labels[labelSchedulerPluginsGroup] != "job" {
		t.Errorf("worker scheduler %q, labels %v", w.Spec.SchedulerName, w.Labels)
	}
	f.step()
	f.expectGroupWrites()
}

// TestRefusedWriteBlocks: a write the API server refuses for good blocks
// the job with its message; a sync that goes through clears it.
func TestRefusedWriteBlocks(t *testing.T) {
	f := newFixture(t).start(storedJob(1))
	refuse := true
	f.kube.PrependReactor("create", "configmaps", func(core.Action) (bool, runtime.Object, error) {
		if !refuse {
			return false, nil, nil
		}
		return true, nil, apierrors.NewForbidden(schema.GroupResource{Resource: "configmaps"}, "job-config", errors.New("exceeded quota"))
	})
	if _, err := f.syncErr(); !apierrors.IsForbidden(err) {
		t.Fatalf("error %v, want Forbidden", err)
	}
	f.expectCondition(conditionBlocked, "True Forbidden")
	f.expectPods() // none before the files
	refuse = false
	f.step()
	f.expectCondition(conditionBlocked, "")
	f.expectCondition(v2beta1.JobCreated, "True MPIJobCreated")
	if f.pod("job-worker-0") == nil {
		t.Error("no worker")
	}
}
