package controller

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	common "github.com/kubeflow/common/pkg/apis/common/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/kubeflow/mpi-operator/pkg/reconcile"
)

// TestRefusedWriteBlocksJob: a child the API server refuses as invalid
// gives the job a Blocked condition carrying the API server's message and a
// Warning event; the sync after one that went through clears it.
func TestRefusedWriteBlocksJob(t *testing.T) {
	f := newFixture(t)
	job := newTestJob("pi", 1)
	f.jobs = append(f.jobs, job)
	refusal := apierrors.NewInvalid(schema.GroupKind{Kind: "ConfigMap"}, "pi-config",
		field.ErrorList{field.TooLong(field.NewPath("data"), "", 1<<20)})
	refuseConfigMap := func(err error) func(*MPIJobController) {
		return func(*MPIJobController) { refuse(&f.kubeClient.Fake, "create", "configmaps", err) }
	}
	if _, err := f.syncPrepared(job, refuseConfigMap(refusal)); !apierrors.IsInvalid(err) {
		t.Fatalf("sync error %v, want the refusal", err)
	}
	st := f.writtenStatus()
	expectConditionTrue(t, st, conditionBlocked, "Invalid", refusal.Error())
	events := f.events()
	if len(events) == 0 || !strings.HasPrefix(events[len(events)-1], "Warning Invalid ") {
		t.Errorf("events %q lack the Warning", events)
	}

	// The same refusal again: nothing new to write or tell.
	job.Status = st
	if _, err := f.syncPrepared(job, refuseConfigMap(refusal)); !apierrors.IsInvalid(err) {
		t.Fatalf("sync error %v, want the refusal", err)
	}
	f.expectMPIWrites()
	if e := f.events(); len(e) != 0 {
		t.Errorf("events %q on an unchanged refusal", e)
	}

	// A retry that fails for a passing reason keeps the condition.
	if _, err := f.syncPrepared(job, refuseConfigMap(apierrors.NewTimeoutError("slow", 1))); !apierrors.IsTimeout(err) {
		t.Fatalf("sync error %v, want the timeout", err)
	}
	f.expectMPIWrites()

	// Once the write goes through, the condition goes.
	f.sync(job)
	st = f.writtenStatus()
	if c := conditions.Find(st.Conditions, conditionBlocked); c != nil {
		t.Errorf("Blocked condition %+v kept after a sync that went through", c)
	}
}

// TestForeignObjectWithoutLabelBlocksJob: a ConfigMap or ServiceAccount of
// the child's name that lacks the label the informers select by is not in
// the cache; the create that fails finds it, and the job says so instead
// of retrying in silence.
func TestForeignObjectWithoutLabelBlocksJob(t *testing.T) {
	for kind, obj := range map[string]runtime.Object{
		"ConfigMap":      &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "pi-config", Namespace: "ns"}},
		"ServiceAccount": &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "pi-launcher", Namespace: "ns"}},
	} {
		t.Run(kind, func(t *testing.T) {
			f := newFixture(t)
			job := newTestJob("pi", 1)
			f.jobs = append(f.jobs, job)
			_, err := f.syncPrepared(job, func(*MPIJobController) {
				if err := f.kubeClient.Tracker().Add(obj); err != nil {
					t.Fatal(err)
				}
			})
			var foreign *reconcile.ForeignError
			if !errors.As(err, &foreign) || foreign.Kind != kind {
				t.Fatalf("sync error %v, want a %s in the way", err, kind)
			}
			for _, a := range writes(f.kubeClient.Actions()) {
				if a.Verb == "create" && a.Resource == "pods" {
					t.Errorf("pod created while blocked: %v", a)
				}
			}
			st := f.writtenStatus()
			want := fmt.Sprintf("%s %q already exists and is not managed by MPIJob pi", kind, obj.(metav1.Object).GetName())
			expectConditionTrue(t, st, conditionBlocked, eventErrResourceExists, want)
			if conditions.Has(st.Conditions, common.JobFailed) {
				t.Errorf("job failed: %+v", st.Conditions)
			}
		})
	}
}

// TestBlockedConditionClearedOnFinish: a job that finishes loses the
// condition like any other once its syncs go through.
func TestBlockedConditionClearedOnFinish(t *testing.T) {
	f := newFixture(t)
	job := runningJob(f, 1)
	now := metav1.NewTime(testNow)
	setCondition(&job.Status, conditionBlocked, "Invalid", "old refusal", now)
	f.pods[1].Status.Phase = corev1.PodSucceeded
	st, _ := f.syncRecordingEnd(job)
	if conditions.Find(st.Conditions, conditionBlocked) != nil || !conditions.Has(st.Conditions, common.JobSucceeded) {
		t.Errorf("conditions %+v", st.Conditions)
	}
}

// TestInvalidEditHoldsRunningJob: an edit that makes a running job's spec
// invalid does not fail it nor touch its pods and files; the job is Blocked
// with the field named until the spec is valid again.
func TestInvalidEditHoldsRunningJob(t *testing.T) {
	f := newFixture(t)
	job := runningJob(f, 2)
	job.Spec.MainContainer = "tpyo"
	_, err := f.syncErr(job)
	var spec *reconcile.SpecError
	if !errors.As(err, &spec) {
		t.Fatalf("sync error %v, want the spec held", err)
	}
	f.expectKubeWrites()
	st := f.writtenStatus()
	if conditions.Finished(st.Conditions) || !conditions.Has(st.Conditions, common.JobRunning) {
		t.Errorf("conditions %+v, want still Running", st.Conditions)
	}
	expectConditionTrue(t, st, conditionBlocked, reasonInvalidSpec, "spec.mainContainer")
	if ev := f.events(); len(ev) != 1 || !strings.HasPrefix(ev[0], "Warning InvalidMPIJobSpec ") {
		t.Errorf("events %q", ev)
	}

	job.Status = st
	job.Spec.MainContainer = ""
	f.sync(job)
	f.expectKubeWrites()
	st = f.writtenStatus()
	if c := conditions.Find(st.Conditions, conditionBlocked); c != nil {
		t.Errorf("Blocked condition %+v kept after the spec was fixed", c)
	}
}
