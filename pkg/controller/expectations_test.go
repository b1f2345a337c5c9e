package controller

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2/ktesting"

	"github.com/kubeflow/mpi-operator/pkg/reconcile"
)

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
	if requeue != reconcile.ExpectationsTimeout {
		t.Errorf("requeue = %v, want a look again after %v in case the event is lost", requeue, reconcile.ExpectationsTimeout)
	}
	for _, a := range writes(f.kubeClient.Actions()) {
		if a.Resource == "pods" {
			t.Errorf("second sync on a stale cache wrote %s", a)
		}
	}

	for _, p := range pods {
		c.podEvents.AddFunc(p)
	}
	if !c.Expectations.Satisfied("ns/pi") {
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

// TestRoleWaitsForOwnDeletions: while the cache shows only some of the
// workers the controller deleted, the Role keeps naming them all; once the
// cache shows every deletion, one update takes them out.
func TestRoleWaitsForOwnDeletions(t *testing.T) {
	setUp := func(f *fixture) {
		job := runningJob(f, 2)
		f.roles[0] = newLauncherRole(defaulted(job), []string{"pi-worker-0", "pi-worker-1", "pi-worker-2", "pi-worker-3"})
	}
	f := newFixture(t)
	setUp(f)
	if _, err := f.syncPrepared(f.jobs[0], func(c *MPIJobController) {
		c.Expectations.ExpectChange("ns/pi", "pi-worker-3-uid", reconcile.ShowsDeletion)
	}); err != nil {
		t.Fatal(err)
	}
	f.expectKubeWrites()

	f = newFixture(t)
	setUp(f)
	f.sync(f.jobs[0])
	f.expectKubeWrites(update("roles", "pi-launcher"))
}
