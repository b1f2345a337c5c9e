package reconcile

import (
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"
)

// testNow is the fixed start of every fake clock here.
var testNow = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// annotationDrainingSince stands for an annotation a controller patches.
const annotationDrainingSince = "mpi-operator.kubeflow.org/draining-since"

func TestExpectations(t *testing.T) {
	clk := clocktesting.NewFakeClock(testNow)
	e := NewExpectations(clk)
	if !e.Satisfied("ns/a") {
		t.Fatal("a job with nothing expected is not satisfied")
	}
	e.ExpectCreate("ns/a", "a-worker-0")
	e.ExpectChange("ns/a", "uid-1", ShowsDeletion)
	if e.Satisfied("ns/a") {
		t.Fatal("satisfied with a create and a change pending")
	}
	if !e.Satisfied("ns/b") {
		t.Fatal("another job waits on ns/a's expectations")
	}
	if !e.Changing("ns/a") || e.Changing("ns/b") {
		t.Fatal("changing does not tell the pending change of ns/a alone")
	}
	e.ObserveCreate("ns/a", "a-worker-0")
	e.ObserveGone("ns/a", "uid-other")
	if e.Satisfied("ns/a") {
		t.Fatal("satisfied with a change pending")
	}
	e.ObserveGone("ns/a", "uid-1")
	if !e.Satisfied("ns/a") || e.Changing("ns/a") {
		t.Fatal("not satisfied once every change was observed")
	}
	e.ExpectCreate("ns/a", "a-worker-3")
	if e.Changing("ns/a") {
		t.Fatal("a pending create counts as a change")
	}
	e.Forget("ns/a")

	e.ExpectCreate("ns/a", "a-worker-1")
	e.ExpectChange("ns/a", "uid-2", ShowsDeletion)
	clk.Step(ExpectationsTimeout + time.Second)
	if e.Changing("ns/a") {
		t.Fatal("a missed change event counts past the timeout")
	}
	if !e.Satisfied("ns/a") {
		t.Fatal("a missed event stalls the job past the timeout")
	}
	e.ExpectCreate("ns/a", "a-worker-2")
	e.Forget("ns/a")
	if !e.Satisfied("ns/a") {
		t.Fatal("forget left expectations behind")
	}
}

// TestExpectationsWaitRestarts: every new expectation restarts the job's
// wait, so the timeout runs from the latest change.
func TestExpectationsWaitRestarts(t *testing.T) {
	clk := clocktesting.NewFakeClock(testNow)
	e := NewExpectations(clk)
	e.ExpectChange("ns/a", "uid-1", ShowsDeletion)
	clk.Step(ExpectationsTimeout)
	e.ExpectCreate("ns/a", "a-worker-1")
	clk.Step(ExpectationsTimeout)
	if e.Satisfied("ns/a") || !e.Changing("ns/a") {
		t.Fatal("the wait did not restart with the latest expectation")
	}
	clk.Step(time.Second)
	if !e.Satisfied("ns/a") {
		t.Fatal("not satisfied past the timeout of the latest expectation")
	}
}

// TestOldStateSettlesNothing: an update event that left before the
// controller's change (a status update of the kubelet, say) shows the pod
// without it; only a state that includes the change settles it.
func TestOldStateSettlesNothing(t *testing.T) {
	e := NewExpectations(clocktesting.NewFakeClock(testNow))
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "a-worker-1", UID: "uid-1"}}
	e.ExpectChange("ns/a", pod.UID, ShowsAnnotation(annotationDrainingSince, "t1"))
	e.Observe("ns/a", pod)
	if e.Satisfied("ns/a") {
		t.Fatal("a state without the annotation settled the expected patch")
	}
	other := pod.DeepCopy()
	other.Annotations = map[string]string{annotationDrainingSince: "t0"}
	e.Observe("ns/a", other)
	if e.Satisfied("ns/a") {
		t.Fatal("a state with another value settled the expected patch")
	}
	patched := pod.DeepCopy()
	patched.Annotations = map[string]string{annotationDrainingSince: "t1"}
	e.Observe("ns/a", patched)
	if !e.Satisfied("ns/a") {
		t.Fatal("the patched state did not settle the expectation")
	}

	e.ExpectChange("ns/a", pod.UID, ShowsDeletion)
	e.Observe("ns/a", patched)
	if e.Satisfied("ns/a") {
		t.Fatal("a state that is not terminating settled the expected deletion")
	}
	terminating := patched.DeepCopy()
	terminating.DeletionTimestamp = &metav1.Time{Time: testNow}
	e.Observe("ns/a", terminating)
	if !e.Satisfied("ns/a") {
		t.Fatal("the terminating state did not settle the expected deletion")
	}
}

// TestExpectationsOfAnyObject: the expectations hold any object with
// metadata, such as a launcher's batch Job, told apart by UID from the
// job's pods.
func TestExpectationsOfAnyObject(t *testing.T) {
	e := NewExpectations(clocktesting.NewFakeClock(testNow))
	launcher := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "a-launcher", UID: "uid-launcher"}}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "a-launcher-xyz", UID: "uid-pod"}}
	e.ExpectChange("ns/a", launcher.UID, ShowsDeletion)
	e.ExpectChange("ns/a", pod.UID, ShowsDeletion)
	gone := launcher.DeepCopy()
	gone.DeletionTimestamp = &metav1.Time{Time: testNow}
	e.Observe("ns/a", gone)
	if !e.Changing("ns/a") {
		t.Fatal("the launcher's deletion settled the pod's too")
	}
	e.ObserveGone("ns/a", pod.UID)
	if !e.Satisfied("ns/a") {
		t.Fatal("not satisfied once both deletions were observed")
	}
}

// TestObserveTellsTheLastChangeSettled: Observe and ObserveGone report the
// event that settles the last change a job waited for, and no other.
func TestObserveTellsTheLastChangeSettled(t *testing.T) {
	e := NewExpectations(clocktesting.NewFakeClock(testNow))
	const key = "ns/job"
	a := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{UID: "a"}}
	b := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{UID: "b"}}
	e.ExpectChange(key, a.UID, ShowsAnnotation(annotationDrainingSince, "now"))
	e.ExpectChange(key, b.UID, ShowsDeletion)
	e.ExpectCreate(key, "c")
	if e.Observe(key, a) {
		t.Error("a state without the change settles it")
	}
	a.Annotations = map[string]string{annotationDrainingSince: "now"}
	if e.Observe(key, a) {
		t.Error("the first of two changes is reported as the last")
	}
	if e.ObserveGone(key, "unknown") {
		t.Error("an object nothing was expected of settles the job")
	}
	if !e.ObserveGone(key, b.UID) {
		t.Error("the last change seen is not reported")
	}
	if e.ObserveGone(key, b.UID) || e.Observe(key, a) {
		t.Error("a change settled already is reported again")
	}
	if e.Changing(key) || e.Satisfied(key) {
		t.Errorf("Changing %v, Satisfied %v; want the creation alone awaited", e.Changing(key), e.Satisfied(key))
	}
}

// TestSeenHoldsUntilTheNextRead: what Seen told before a sync read the pods
// holds for that sync though the events come in meanwhile, and a write the
// sync makes after the read unsettles it (SettledSince) or makes it
// changing (ChangingSince).
func TestSeenHoldsUntilTheNextRead(t *testing.T) {
	e := NewExpectations(clocktesting.NewFakeClock(testNow))
	e.ExpectCreate("ns/a", "a-worker-1")
	e.ExpectChange("ns/a", "uid-0", ShowsDeletion)
	seen := e.Seen("ns/a")
	if seen != (Seen{Settled: false, Changing: true}) {
		t.Fatalf("seen %+v with a create and a deletion pending", seen)
	}
	e.ObserveCreate("ns/a", "a-worker-1")
	e.ObserveGone("ns/a", "uid-0")
	if e.SettledSince(seen, "ns/a") || !e.ChangingSince(seen, "ns/a") {
		t.Error("settled, or done changing, by events that came after the pods were read")
	}
	seen = e.Seen("ns/a")
	if seen != (Seen{Settled: true}) || !e.SettledSince(seen, "ns/a") || e.ChangingSince(seen, "ns/a") {
		t.Fatalf("seen %+v once every write was shown", seen)
	}
	e.ExpectCreate("ns/a", "a-worker-2")
	if e.SettledSince(seen, "ns/a") {
		t.Error("settled with a write of the sync's own pending")
	}
	e.ExpectChange("ns/a", "uid-1", ShowsDeletion)
	if !e.ChangingSince(seen, "ns/a") {
		t.Error("not changing with a deletion of the sync's own pending")
	}
}
