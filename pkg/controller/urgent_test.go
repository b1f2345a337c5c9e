package controller

import (
	"fmt"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	core "k8s.io/client-go/testing"
	"k8s.io/klog/v2/ktesting"

	kubeflow "github.com/kubeflow/mpi-operator/pkg/apis/kubeflow/v1"
	"github.com/kubeflow/mpi-operator/pkg/elastic"
	"github.com/kubeflow/mpi-operator/pkg/reconcile"
)

// oneOfTwoListed is a running job of two workers whose ConfigMap lists only
// the first, as before the second turned Running.
func oneOfTwoListed(f *fixture) *kubeflow.MPIJob {
	job := runningJob(f, 2)
	two := []string{"pi-worker-0", "pi-worker-1"}
	f.setFiles(job, elastic.Hosts{Desired: two, Running: two[:1]}, elastic.State{})
	return job
}

// TestWorkerTurningRunningIsListed: the sync a Running worker's event
// queues lists it and tells the launcher.
func TestWorkerTurningRunningIsListed(t *testing.T) {
	f := newFixture(t)
	job := oneOfTwoListed(f)
	f.sync(job)
	f.expectListed("pi-worker-0", "pi-worker-1")
	if !slices.Contains(writes(f.kubeClient.Actions()), patchPod("pi-launcher")) {
		t.Error("the launcher is not told of the new script")
	}
}

func TestListedWorkerRecordsNextIndex(t *testing.T) {
	f := newFixture(t)
	job := elasticJob(f, 2, 1)
	job.Spec.MPIReplicaSpecs[kubeflow.MPIReplicaTypeWorker].Replicas = ptr[int32](3)
	f.pods = append(f.pods, existingWorkers(job, corev1.PodRunning, 2)...)

	f.sync(job)
	if got := f.expectListed("pi-worker-0", "pi-worker-1", "pi-worker-2").Annotations[elastic.AnnotationNextWorkerIndex]; got != "3" {
		t.Errorf("next worker index %q, want 3 once worker 2 is listed", got)
	}
}

// TestFilesWaitForOwnPodWrites: while the cache does not show a deletion
// or a drain mark of the controller's, the main sync leaves the files
// alone, since they could list a worker already taken out; created pods not
// in the cache yet do not hold them back, since they are not Running, and
// the launcher is told of the script written.
func TestFilesWaitForOwnPodWrites(t *testing.T) {
	cases := map[string]struct {
		expect func(c *MPIJobController, key string)
		want   []action
	}{
		"a worker's deletion unseen": {expect: func(c *MPIJobController, key string) {
			c.Expectations.ExpectChange(key, "pi-worker-1-uid", reconcile.ShowsDeletion)
		}},
		"the launcher's deletion unseen": {expect: func(c *MPIJobController, key string) {
			c.Expectations.ExpectChange(key, "pi-launcher-uid", reconcile.ShowsDeletion)
		}},
		"a creation unseen": {expect: func(c *MPIJobController, key string) {
			c.Expectations.ExpectCreate(key, "pi-worker-9")
		}, want: []action{update("configmaps", "pi-config"), patchPod("pi-launcher")}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t)
			job := oneOfTwoListed(f)
			if _, err := f.syncPrepared(job, func(c *MPIJobController) { tc.expect(c, jobKey(job)) }); err != nil {
				t.Fatal(err)
			}
			f.expectKubeWrites(tc.want...)
		})
	}
}

// TestWorkersAreListedWhileOthersAreCreated: a job that still has workers
// to create has its running workers listed by the sync that creates them,
// and the hostfile names the planned workers.
func TestWorkersAreListedWhileOthersAreCreated(t *testing.T) {
	f := newFixture(t)
	job := oneOfTwoListed(f)
	job.Spec.MPIReplicaSpecs[kubeflow.MPIReplicaTypeWorker].Replicas = ptr[int32](3)
	f.sync(job)
	hosts := elastic.Hosts{Desired: []string{"pi-worker-0", "pi-worker-1", "pi-worker-2"}, Running: []string{"pi-worker-0", "pi-worker-1"}}
	want := newConfigMap(defaulted(job), hosts, elastic.State{})
	if diff := cmp.Diff(want.Data, updatedObject[*corev1.ConfigMap](f, "configmaps", "pi-config").Data); diff != "" {
		t.Errorf("files (-want +got):\n%s", diff)
	}
	createdObject[*corev1.Pod](f, "pods", "pi-worker-2")
}

// TestCreationsGiveWayToAnUrgentChange: a sync that creates many workers
// stops between batches once its job is queued urgently (a worker turned
// Running), writes neither its deletions nor its status, and the job comes
// back at once, urgently, for the sync that lists it; without that change
// every planned creation goes out and the status is written.
func TestCreationsGiveWayToAnUrgentChange(t *testing.T) {
	for _, urgent := range []bool{false, true} {
		t.Run(fmt.Sprintf("urgent=%v", urgent), func(t *testing.T) {
			f := newFixture(t)
			job := runningJob(f, 1)
			job.Spec.MPIReplicaSpecs[kubeflow.MPIReplicaTypeWorker].Replicas = ptr[int32](20)
			// A status whose Created condition is missing is written at
			// once (not held back as a change of the counts only).
			job.Status.Conditions = job.Status.Conditions[1:]
			ctx, c := f.readyController(nil)
			key := jobKey(job)
			created := 0
			f.kubeClient.PrependReactor("create", "pods", func(core.Action) (bool, runtime.Object, error) {
				created++
				if urgent && created == 1 {
					reconcile.AddUrgent(c.Queue, key)
				}
				return false, nil, nil
			})
			c.Queue.Add(key)
			c.ProcessNext(ctx, c.syncHandler)
			want := 19
			if urgent {
				want = 1
			}
			if created != want {
				t.Errorf("%d workers created, want %d", created, want)
			}
			statusWritten := slices.Contains(writes(f.mpiClient.Actions()), statusUpdate())
			if statusWritten == urgent {
				t.Errorf("status written: %v, want %v", statusWritten, !urgent)
			}
			queued, priority := c.Queue.Len() == 1, 0
			if queued {
				var k string
				if k, priority, _ = c.Queue.GetWithPriority(); k != key {
					t.Errorf("queued %q, want %q", k, key)
				}
			}
			if urgent && (!queued || priority != 1) {
				t.Errorf("the job is not queued again urgently (queued %v, priority %d)", queued, priority)
			}
		})
	}
}

// TestPodEventsAreUrgentWhenDiscoverabilityChanges: every pod event of a
// job queues it, urgently when the event changes what discover_hosts.sh
// may list.
func TestPodEventsAreUrgentWhenDiscoverabilityChanges(t *testing.T) {
	job := newTestJob("pi", 1)
	running := existingWorkers(job, corev1.PodRunning, 0)[0]
	running.ResourceVersion = "2"
	pending := running.DeepCopy()
	pending.Status.Phase, pending.ResourceVersion = corev1.PodPending, "1"
	failed := running.DeepCopy()
	failed.Status.Phase, failed.ResourceVersion = corev1.PodFailed, "3"
	launcher := existingLauncher(job, corev1.PodPending)
	launcher.ResourceVersion = "1"
	runningLauncher := existingLauncher(job, corev1.PodRunning)
	runningLauncher.ResourceVersion = "2"
	relabelled := running.DeepCopy()
	relabelled.Labels["extra"], relabelled.ResourceVersion = "x", "3"
	draining := running.DeepCopy()
	draining.Annotations, draining.ResourceVersion = map[string]string{elastic.AnnotationDrainingSince: "now"}, "3"

	cases := []struct {
		name  string
		event func(c *MPIJobController)
		want  int
	}{
		{"turns Running", func(c *MPIJobController) { c.podEvents.UpdateFunc(pending, running) }, 1},
		{"marked draining", func(c *MPIJobController) { c.podEvents.UpdateFunc(running, draining) }, 1},
		{"fails", func(c *MPIJobController) { c.podEvents.UpdateFunc(running, failed) }, 1},
		{"other change", func(c *MPIJobController) { c.podEvents.UpdateFunc(running, relabelled) }, 0},
		{"launcher turns Running", func(c *MPIJobController) { c.podEvents.UpdateFunc(launcher, runningLauncher) }, 0},
		{"worker created", func(c *MPIJobController) { c.podEvents.AddFunc(pending) }, 0},
		{"running worker deleted", func(c *MPIJobController) { c.podEvents.DeleteFunc(running) }, 1},
		{"pending worker deleted", func(c *MPIJobController) { c.podEvents.DeleteFunc(pending) }, 0},
		{"deleted as the files waited for", func(c *MPIJobController) {
			c.Expectations.ExpectChange("ns/pi", pending.UID, reconcile.ShowsDeletion)
			c.podEvents.DeleteFunc(pending)
		}, 1},
		{"marked as the files waited for", func(c *MPIJobController) {
			c.Expectations.ExpectChange("ns/pi", relabelled.UID, func(metav1.Object) bool { return true })
			c.podEvents.UpdateFunc(running, relabelled)
		}, 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			expectQueuedAt(t, tc.event, tc.want)
		})
	}
}

func TestNoOpPodPatchLeavesNothingToWaitFor(t *testing.T) {
	f := newFixture(t)
	job := oneOfTwoListed(f)
	// The pod holds the value already, so the patch changes nothing and
	// no event follows.
	f.pods[2].Annotations[elastic.AnnotationHostsHash] = "same"
	_, ctx := ktesting.NewTestContext(t)
	c := f.newController(ctx)
	if _, err := c.Pods.Annotate(ctx, owner(job), f.pods[2], elastic.AnnotationHostsHash, "same"); err != nil {
		t.Fatal(err)
	}
	if !c.Expectations.Satisfied(jobKey(job)) {
		t.Error("the job waits for an event that a patch without change never brings")
	}
}

// TestReplicaChangesAreUrgent: a change of a job's worker replicas queues
// it urgently, any other change without urgency.
func TestReplicaChangesAreUrgent(t *testing.T) {
	old := newTestJob("pi", 4)
	old.ResourceVersion = "1"
	shrunk := old.DeepCopy()
	shrunk.Spec.MPIReplicaSpecs[kubeflow.MPIReplicaTypeWorker].Replicas = ptr[int32](2)
	relabelled := old.DeepCopy()
	relabelled.Labels = map[string]string{"team": "ml"}
	cases := []struct {
		name string
		new  *kubeflow.MPIJob
		want int
	}{
		{"replicas changed", shrunk, 1},
		{"something else changed", relabelled, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			expectQueuedAt(t, func(c *MPIJobController) { c.jobEvents.UpdateFunc(old, tc.new) }, tc.want)
		})
	}
}

// TestLauncherRefreshIsNoExpectation: the launcher's refresh leaves the
// job nothing to wait for, so the next Running worker is listed at once,
// and a sync on a cache that does not show the refresh yet does not send it
// again.
func TestLauncherRefreshIsNoExpectation(t *testing.T) {
	f := newFixture(t)
	job := oneOfTwoListed(f)
	ctx, c := f.readyController(nil)
	// syncTellsLauncher runs a sync and tells whether it patched the launcher.
	syncTellsLauncher := func() bool {
		f.kubeClient.ClearActions()
		if _, err := c.syncHandler(ctx, jobKey(job)); err != nil {
			t.Fatal(err)
		}
		return slices.Contains(writes(f.kubeClient.Actions()), patchPod("pi-launcher"))
	}
	if !syncTellsLauncher() {
		t.Fatal("the launcher is not told of the new script")
	}
	if c.Expectations.Changing(jobKey(job)) || !c.Expectations.Satisfied(jobKey(job)) {
		t.Error("the launcher's refresh is waited for")
	}

	// The cache shows the new files, and the launcher as it was.
	cm := updatedObject[*corev1.ConfigMap](f, "configmaps", "pi-config")
	if err := f.inf.labelled.Core().V1().ConfigMaps().Informer().GetIndexer().Update(cm); err != nil {
		t.Fatal(err)
	}
	if syncTellsLauncher() {
		t.Error("the launcher is told again of the script it was told of")
	}

	// Once the cache shows another version of the launcher, without the
	// hash (a write of someone else's), it is sent again.
	launcher, err := c.podLister.Pods("ns").Get("pi-launcher")
	if err != nil {
		t.Fatal(err)
	}
	launcher = launcher.DeepCopy()
	launcher.ResourceVersion = "99"
	informer := f.inf.pods.Core().V1().Pods().Informer()
	cached, err := newPodTrimmer(informer.GetIndexer()).Transform(launcher)
	if err != nil {
		t.Fatal(err)
	}
	if err := informer.GetIndexer().Update(cached); err != nil {
		t.Fatal(err)
	}
	if !syncTellsLauncher() {
		t.Error("the launcher is not told again once its hash is gone")
	}
}

// expectQueuedAt checks that event, told to a new controller, queues one
// job at priority want.
func expectQueuedAt(t *testing.T, event func(*MPIJobController), want int) {
	t.Helper()
	_, ctx := ktesting.NewTestContext(t)
	c := newFixture(t).newController(ctx)
	event(c)
	if got := c.Queue.Len(); got != 1 {
		t.Fatalf("the queue holds %d keys, want 1: the event queues its job", got)
	}
	if _, priority, _ := c.Queue.GetWithPriority(); priority != want {
		t.Errorf("queued at priority %d, want %d", priority, want)
	}
}
