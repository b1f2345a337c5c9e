package controller

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2/ktesting"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/kubeflow/mpi-operator/pkg/elastic"
)

func TestPodExpectations(t *testing.T) {
	clk := clocktesting.NewFakeClock(testNow)
	e := newPodExpectations(clk)
	if !e.satisfied("ns/a") {
		t.Fatal("a job with nothing expected is not satisfied")
	}
	e.expectCreate("ns/a", "a-worker-0")
	e.expectChange("ns/a", "uid-1", showsDeletion)
	if e.satisfied("ns/a") {
		t.Fatal("satisfied with a create and a change pending")
	}
	if !e.satisfied("ns/b") {
		t.Fatal("another job waits on ns/a's expectations")
	}
	if !e.changing("ns/a") || e.changing("ns/b") {
		t.Fatal("changing does not tell the pending change of ns/a alone")
	}
	e.observeCreate("ns/a", "a-worker-0")
	e.observeGone("ns/a", "uid-other")
	if e.satisfied("ns/a") {
		t.Fatal("satisfied with a change pending")
	}
	e.observeGone("ns/a", "uid-1")
	if !e.satisfied("ns/a") || e.changing("ns/a") {
		t.Fatal("not satisfied once every change was observed")
	}
	e.expectCreate("ns/a", "a-worker-3")
	if e.changing("ns/a") {
		t.Fatal("a pending create counts as a change")
	}
	e.forget("ns/a")

	e.expectCreate("ns/a", "a-worker-1")
	e.expectChange("ns/a", "uid-2", showsDeletion)
	clk.Step(expectationsTimeout + time.Second)
	if e.changing("ns/a") {
		t.Fatal("a missed change event counts past the timeout")
	}
	if !e.satisfied("ns/a") {
		t.Fatal("a missed event stalls the job past the timeout")
	}
	e.expectCreate("ns/a", "a-worker-2")
	e.forget("ns/a")
	if !e.satisfied("ns/a") {
		t.Fatal("forget left expectations behind")
	}
}

// TestOldPodStateSettlesNothing: an update event that left before the
// controller's change (a status update of the kubelet, say) shows the pod
// without it; only a state that includes the change settles it.
func TestOldPodStateSettlesNothing(t *testing.T) {
	e := newPodExpectations(clocktesting.NewFakeClock(testNow))
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "a-worker-1", UID: "uid-1"}}
	e.expectChange("ns/a", pod.UID, showsAnnotation(elastic.AnnotationDrainingSince, "t1"))
	e.observePod("ns/a", pod)
	if e.satisfied("ns/a") {
		t.Fatal("a state without the annotation settled the expected patch")
	}
	other := pod.DeepCopy()
	other.Annotations = map[string]string{elastic.AnnotationDrainingSince: "t0"}
	e.observePod("ns/a", other)
	if e.satisfied("ns/a") {
		t.Fatal("a state with another value settled the expected patch")
	}
	patched := pod.DeepCopy()
	patched.Annotations = map[string]string{elastic.AnnotationDrainingSince: "t1"}
	e.observePod("ns/a", patched)
	if !e.satisfied("ns/a") {
		t.Fatal("the patched state did not settle the expectation")
	}

	e.expectChange("ns/a", pod.UID, showsDeletion)
	e.observePod("ns/a", patched)
	if e.satisfied("ns/a") {
		t.Fatal("a state that is not terminating settled the expected deletion")
	}
	terminating := patched.DeepCopy()
	terminating.DeletionTimestamp = &metav1.Time{Time: testNow}
	e.observePod("ns/a", terminating)
	if !e.satisfied("ns/a") {
		t.Fatal("the terminating state did not settle the expected deletion")
	}
}

// TestStaleCacheRepeatsNoPodWrite syncs twice with one controller whose
// cache has not seen the first sync's pods: the second sync creates nothing
// again, and the pod events that follow let it go on.
func TestStaleCacheRepeatsNoPodWrite(t *testing.T) {
	f := newFixture(t)
	job := newTestJob("pi", 2)
	f.jobs = append(f.jobs, job)
	_, ctx := ktesting.NewTestContext(t)
	c := f.newController(ctx)

	if _, err := c.syncHandler(ctx, "ns/pi"); err != nil {
		t.Fatal(err)
	}
	// The cache catches up with everything but the pods.
	add := func(inf cache.SharedIndexInformer, obj any) {
		if err := inf.GetIndexer().Add(obj); err != nil {
			t.Fatal(err)
		}
	}
	add(f.inf.labelled.Core().V1().ConfigMaps().Informer(), createdObject[*corev1.ConfigMap](f, "configmaps", "pi-config"))
	add(f.inf.labelled.Core().V1().ServiceAccounts().Informer(), createdObject[*corev1.ServiceAccount](f, "serviceaccounts", "pi-launcher"))
	add(f.inf.rbac.Rbac().V1().Roles().Informer(), createdObject[*rbacv1.Role](f, "roles", "pi-launcher"))
	add(f.inf.rbac.Rbac().V1().RoleBindings().Informer(), createdObject[*rbacv1.RoleBinding](f, "rolebindings", "pi-launcher"))
	var pods []*corev1.Pod
	for _, name := range []string{"pi-worker-0", "pi-worker-1", "pi-launcher"} {
		pods = append(pods, createdObject[*corev1.Pod](f, "pods", name))
	}
	f.kubeClient.ClearActions()
	f.mpiClient.ClearActions()
	requeue, err := c.syncHandler(ctx, "ns/pi")
	if err != nil {
		t.Fatal(err)
	}
	if requeue != expectationsTimeout {
		t.Errorf("requeue = %v, want a look again after %v in case the event is lost", requeue, expectationsTimeout)
	}
	for _, a := range writes(f.kubeClient.Actions()) {
		if a.resource == "pods" {
			t.Errorf("second sync on a stale cache wrote %s", a)
		}
	}

	for _, p := range pods {
		c.handlePodAdd(p)
	}
	if !c.expectations.satisfied("ns/pi") {
		t.Error("the pods' add events did not settle the expectations")
	}
}

// TestStatusNotRewrittenFromStaleCache: after a status write, a sync that
// still sees the job's old resourceVersion writes no status (it would only
// conflict); once the cache shows a newer version, it writes again.
func TestStatusNotRewrittenFromStaleCache(t *testing.T) {
	f := newFixture(t)
	// An invalid job: its syncs write a status and nothing else.
	job := newTestJob("pi", 1)
	job.Spec.SlotsPerWorker = ptr[int32](0)
	job.ResourceVersion = "10"
	f.jobs = append(f.jobs, job)
	_, ctx := ktesting.NewTestContext(t)
	c := f.newController(ctx)
	if _, err := c.syncHandler(ctx, "ns/pi"); err != nil {
		t.Fatal(err)
	}
	f.expectMPIWrites(statusUpdate())
	f.mpiClient.ClearActions()
	if _, err := c.syncHandler(ctx, "ns/pi"); err != nil {
		t.Fatal(err)
	}
	f.expectMPIWrites()

	newer := job.DeepCopy()
	newer.ResourceVersion = "11"
	if err := f.inf.jobs.Kubeflow().V1().MPIJobs().Informer().GetIndexer().Update(newer); err != nil {
		t.Fatal(err)
	}
	if _, err := c.syncHandler(ctx, "ns/pi"); err != nil {
		t.Fatal(err)
	}
	f.expectMPIWrites(statusUpdate())
}

// TestFilesWaitForOwnPodChanges: while the cache does not show a pod the
// controller patched or deleted, the main sync leaves the files alone, so
// that it cannot list a worker it has just marked draining.
func TestFilesWaitForOwnPodChanges(t *testing.T) {
	f := newFixture(t)
	job := oneOfTwoListed(f)
	if _, err := f.syncPrepared(job, func(c *MPIJobController) {
		c.expectations.expectChange(jobKey(job), "pi-worker-1-uid", showsDeletion)
	}); err != nil {
		t.Fatal(err)
	}
	f.expectKubeWrites()

	// A pod created and not seen yet is no reason to wait: it is not
	// Running.
	f = newFixture(t)
	job = oneOfTwoListed(f)
	if _, err := f.syncPrepared(job, func(c *MPIJobController) {
		c.expectations.expectCreate(jobKey(job), "pi-worker-7")
	}); err != nil {
		t.Fatal(err)
	}
	f.expectKubeWrites(update("configmaps", "pi-config"))
}
