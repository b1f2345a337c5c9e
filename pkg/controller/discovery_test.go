package controller

import (
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	common "github.com/kubeflow/common/pkg/apis/common/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	k8sfake "k8s.io/client-go/kubernetes/fake"
	"k8s.io/klog/v2/ktesting"

	kubeflow "github.com/kubeflow/mpi-operator/pkg/apis/kubeflow/v1"
	"github.com/kubeflow/mpi-operator/pkg/elastic"
	"github.com/kubeflow/mpi-operator/pkg/reconcile"
)

// discover runs one fast-path sync of job; prepare, if given, sees the
// controller first.
func (f *fixture) discover(job *kubeflow.MPIJob, prepare func(*MPIJobController)) error {
	f.t.Helper()
	ctx, c := f.readyController(prepare)
	return c.syncDiscovery(ctx, jobKey(job))
}

// oneOfTwoListed is a running job of two workers whose ConfigMap lists only
// the first, as before the second turned Running.
func oneOfTwoListed(f *fixture) *kubeflow.MPIJob {
	job := runningJob(f, 2)
	two := []string{"pi-worker-0", "pi-worker-1"}
	f.cms[0] = newConfigMap(defaulted(job), elastic.Hosts{Desired: two, Running: two[:1]}, elastic.State{})
	f.pods[2].Annotations[elastic.AnnotationHostsHash] = elastic.HostsHash(f.cms[0].Data[discoverHostsKey])
	return job
}

func TestDiscoveryListsWorkerTurningRunning(t *testing.T) {
	f := newFixture(t)
	job := oneOfTwoListed(f)

	if err := f.discover(job, nil); err != nil {
		t.Fatal(err)
	}
	f.expectKubeWrites(update("configmaps", "pi-config"), patchPod("pi-launcher"))
	f.expectMPIWrites()
	want := "#!/bin/sh\necho pi-worker-0:1\necho pi-worker-1:1\n"
	if got := updatedObject[*corev1.ConfigMap](f, "configmaps", "pi-config").Data[discoverHostsKey]; got != want {
		t.Errorf("discover_hosts.sh %q, want %q", got, want)
	}
}

func TestDiscoveryWritesWhatTheMainSyncWould(t *testing.T) {
	fast, main := newFixture(t), newFixture(t)
	fastJob, mainJob := oneOfTwoListed(fast), oneOfTwoListed(main)
	if err := fast.discover(fastJob, nil); err != nil {
		t.Fatal(err)
	}
	main.sync(mainJob)
	got := updatedObject[*corev1.ConfigMap](fast, "configmaps", "pi-config")
	want := updatedObject[*corev1.ConfigMap](main, "configmaps", "pi-config")
	if got.Data[discoverHostsKey] != want.Data[discoverHostsKey] || got.Data[hostfileKey] != want.Data[hostfileKey] {
		t.Errorf("fast path wrote %q, the main sync %q", got.Data, want.Data)
	}
}

func TestDiscoveryRecordsNextIndexOfListedWorker(t *testing.T) {
	f := newFixture(t)
	job := elasticJob(f, 2, 1)
	job.Spec.MPIReplicaSpecs[kubeflow.MPIReplicaTypeWorker].Replicas = ptr[int32](3)
	f.pods = append(f.pods, existingWorkers(job, corev1.PodRunning, 2)...)

	if err := f.discover(job, nil); err != nil {
		t.Fatal(err)
	}
	cm := updatedObject[*corev1.ConfigMap](f, "configmaps", "pi-config")
	if got := cm.Data[discoverHostsKey]; got != "#!/bin/sh\necho pi-worker-0:1\necho pi-worker-1:1\necho pi-worker-2:1\n" {
		t.Errorf("discover_hosts.sh %q", got)
	}
	if got := cm.Annotations[elastic.AnnotationNextWorkerIndex]; got != "3" {
		t.Errorf("next worker index %q, want 3 once worker 2 is listed", got)
	}
}

func TestDiscoveryWaitsForOwnPodWrites(t *testing.T) {
	f := newFixture(t)
	job := oneOfTwoListed(f)
	err := f.discover(job, func(c *MPIJobController) {
		c.expectations.ExpectChange(jobKey(job), "pi-launcher-uid", reconcile.ShowsDeletion)
	})
	if !errors.Is(err, errNotSettled) {
		t.Errorf("err = %v, want errNotSettled", err)
	}
	f.expectKubeWrites()
}

func TestDiscoveryDoesNotWaitForCreatedPods(t *testing.T) {
	f := newFixture(t)
	job := oneOfTwoListed(f)
	err := f.discover(job, func(c *MPIJobController) {
		c.expectations.ExpectCreate(jobKey(job), "pi-launcher")
	})
	if err != nil {
		t.Fatal(err)
	}
	f.expectKubeWrites(update("configmaps", "pi-config"), patchPod("pi-launcher"))
}

func TestDiscoveryDrainsScaleInVictimsAsTheMainSyncDoes(t *testing.T) {
	fast, main := newFixture(t), newFixture(t)
	fastJob, mainJob := runningJob(fast, 4), runningJob(main, 4)
	fastJob.Spec.MPIReplicaSpecs[kubeflow.MPIReplicaTypeWorker].Replicas = ptr[int32](2)
	mainJob.Spec.MPIReplicaSpecs[kubeflow.MPIReplicaTypeWorker].Replicas = ptr[int32](2)

	if err := fast.discover(fastJob, nil); err != nil {
		t.Fatal(err)
	}
	// The main sync's writes to the pods and files, in the same order: the
	// victims' drain starts once the files no longer list them and the
	// launcher was told. The status stays with the main sync.
	fast.expectKubeWrites(
		update("configmaps", "pi-config"),
		patchPod("pi-launcher"),
		patchPod("pi-worker-2"),
		patchPod("pi-worker-3"),
	)
	fast.expectMPIWrites()
	main.sync(mainJob)
	got := updatedObject[*corev1.ConfigMap](fast, "configmaps", "pi-config")
	want := updatedObject[*corev1.ConfigMap](main, "configmaps", "pi-config")
	if diff := cmp.Diff(want.Data, got.Data); diff != "" {
		t.Errorf("files of the fast path (-main sync +fast path):\n%s", diff)
	}
}

// TestDiscoveryListsWhileWorkersAreCreated: a job that still has workers to
// create has its running workers listed by the fast path, which creates
// nothing and names the planned workers in the hostfile as the main sync
// does.
func TestDiscoveryListsWhileWorkersAreCreated(t *testing.T) {
	f := newFixture(t)
	job := oneOfTwoListed(f)
	job.Spec.MPIReplicaSpecs[kubeflow.MPIReplicaTypeWorker].Replicas = ptr[int32](3)

	if err := f.discover(job, nil); err != nil {
		t.Fatal(err)
	}
	f.expectKubeWrites(update("configmaps", "pi-config"), patchPod("pi-launcher"))
	f.expectMPIWrites()
	hosts := elastic.Hosts{Desired: []string{"pi-worker-0", "pi-worker-1", "pi-worker-2"}, Running: []string{"pi-worker-0", "pi-worker-1"}}
	want := newConfigMap(defaulted(job), hosts, elastic.State{})
	if diff := cmp.Diff(want.Data, updatedObject[*corev1.ConfigMap](f, "configmaps", "pi-config").Data); diff != "" {
		t.Errorf("files (-want +got):\n%s", diff)
	}
}

func TestDiscoveryLeavesDeletionsToTheMainSync(t *testing.T) {
	f := newFixture(t)
	job := runningJob(f, 2)
	job.Spec.MPIReplicaSpecs[kubeflow.MPIReplicaTypeWorker].Replicas = ptr[int32](1)
	f.pods[1].Annotations = map[string]string{elastic.AnnotationDrainingSince: testNow.Add(-time.Hour).Format(time.RFC3339)}

	if err := f.discover(job, nil); err != nil {
		t.Fatal(err)
	}
	// The drained worker leaves the files; its deletion waits for the
	// main sync.
	f.expectKubeWrites(update("configmaps", "pi-config"), patchPod("pi-launcher"))
	if got := updatedObject[*corev1.ConfigMap](f, "configmaps", "pi-config").Data[discoverHostsKey]; got != "#!/bin/sh\necho pi-worker-0:1\n" {
		t.Errorf("discover_hosts.sh %q", got)
	}
}

func TestDiscoveryLeavesJobsToTheMainSync(t *testing.T) {
	cases := map[string]func(f *fixture) *kubeflow.MPIJob{
		"no ConfigMap yet": func(f *fixture) *kubeflow.MPIJob {
			job := oneOfTwoListed(f)
			f.cms = nil
			return job
		},
		"finished": func(f *fixture) *kubeflow.MPIJob {
			job := oneOfTwoListed(f)
			setCondition(&job.Status, common.JobSucceeded, reconcile.ReasonSucceeded, "done", metav1.NewTime(testNow))
			return job
		},
		"invalid spec": func(f *fixture) *kubeflow.MPIJob {
			job := oneOfTwoListed(f)
			job.Spec.SlotsPerWorker = ptr[int32](-1)
			return job
		},
		"below minReplicas for too long": func(f *fixture) *kubeflow.MPIJob {
			job := elasticJob(f, 2, 2)
			f.pods[1].Status.Phase = corev1.PodPending
			f.cms[0].Annotations = elastic.State{NextIndex: 2, BelowMinSince: testNow.Add(-time.Hour)}.Annotations()
			return job
		},
	}
	for name, setup := range cases {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t)
			job := setup(f)
			if err := f.discover(job, nil); err != nil {
				t.Fatal(err)
			}
			f.expectKubeWrites()
			f.expectMPIWrites()
		})
	}
}

func TestDiscoverable(t *testing.T) {
	job := newTestJob("pi", 1)
	worker := func(mutate func(*corev1.Pod)) *corev1.Pod {
		p := existingWorkers(job, corev1.PodRunning, 0)[0]
		mutate(p)
		return p
	}
	deleted := metav1.NewTime(testNow)
	cases := []struct {
		name string
		pod  *corev1.Pod
		want bool
	}{
		{"running worker", worker(func(*corev1.Pod) {}), true},
		{"pending worker", worker(func(p *corev1.Pod) { p.Status.Phase = corev1.PodPending }), false},
		{"failed worker", worker(func(p *corev1.Pod) { p.Status.Phase = corev1.PodFailed }), false},
		{"deleted worker", worker(func(p *corev1.Pod) { p.DeletionTimestamp = &deleted }), false},
		{"draining worker", worker(func(p *corev1.Pod) {
			p.Annotations = map[string]string{elastic.AnnotationDrainingSince: testNow.Format(time.RFC3339)}
		}), false},
		{"running launcher", existingLauncher(job, corev1.PodRunning), false},
	}
	for _, tc := range cases {
		if got := discoverable(tc.pod); got != tc.want {
			t.Errorf("%s: discoverable = %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestPodEventsReachTheFastPathWhenDiscoverabilityChanges(t *testing.T) {
	job := newTestJob("pi", 1)
	running := existingWorkers(job, corev1.PodRunning, 0)[0]
	running.ResourceVersion = "2"
	pending := running.DeepCopy()
	pending.Status.Phase, pending.ResourceVersion = corev1.PodPending, "1"
	relabelled := running.DeepCopy()
	relabelled.Labels["extra"], relabelled.ResourceVersion = "x", "3"
	draining := running.DeepCopy()
	draining.Annotations, draining.ResourceVersion = map[string]string{elastic.AnnotationDrainingSince: "now"}, "3"

	cases := []struct {
		name  string
		event func(c *MPIJobController)
		want  int
	}{
		{"turns Running", func(c *MPIJobController) { c.handlePodUpdate(pending, running) }, 1},
		{"marked draining", func(c *MPIJobController) { c.handlePodUpdate(running, draining) }, 1},
		{"other change", func(c *MPIJobController) { c.handlePodUpdate(running, relabelled) }, 0},
		{"running worker deleted", func(c *MPIJobController) { c.handlePodDelete(running) }, 1},
		{"pending worker deleted", func(c *MPIJobController) { c.handlePodDelete(pending) }, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			_, ctx := ktesting.NewTestContext(t)
			c := f.newController(ctx)
			tc.event(c)
			if got := c.discoveryQueue.Len(); got != tc.want {
				t.Errorf("fast-path queue holds %d keys, want %d", got, tc.want)
			}
			if got := c.queue.Len(); got != 1 {
				t.Errorf("main queue holds %d keys, want 1: it sees every pod event", got)
			}
		})
	}
}

func TestNoOpPodPatchLeavesNothingToWaitFor(t *testing.T) {
	f := newFixture(t)
	job := oneOfTwoListed(f)
	// The pod holds the value already, so the patch changes nothing and
	// no event follows.
	if f.pods[2].Annotations == nil {
		f.pods[2].Annotations = map[string]string{}
	}
	f.pods[2].Annotations[elastic.AnnotationHostsHash] = "same"
	_, ctx := ktesting.NewTestContext(t)
	c := f.newController(ctx)
	if _, err := c.pods.Annotate(ctx, owner(job), f.pods[2], elastic.AnnotationHostsHash, "same"); err != nil {
		t.Fatal(err)
	}
	if !c.expectations.Satisfied(jobKey(job)) {
		t.Error("the job waits for an event that a patch without change never brings")
	}
}

func TestReplicaChangesReachTheFastPath(t *testing.T) {
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
			f := newFixture(t)
			_, ctx := ktesting.NewTestContext(t)
			c := f.newController(ctx)
			c.enqueueResize(old, tc.new)
			if got := c.discoveryQueue.Len(); got != tc.want {
				t.Errorf("fast-path queue holds %d keys, want %d", got, tc.want)
			}
		})
	}
}

// TestDiscoveryWritesThroughTheListingClient: the fast path's writes go
// through the client whose rate limit is theirs, none through the main one.
func TestDiscoveryWritesThroughTheListingClient(t *testing.T) {
	f := newFixture(t)
	job := oneOfTwoListed(f)
	job.Spec.MPIReplicaSpecs[kubeflow.MPIReplicaTypeWorker].Replicas = ptr[int32](1)
	var listing *k8sfake.Clientset
	err := f.discover(job, func(c *MPIJobController) {
		objs := []runtime.Object{f.cms[0]}
		for _, p := range f.pods {
			objs = append(objs, p)
		}
		listing = k8sfake.NewClientset(objs...)
		c.listing = writePath{kube: listing, pods: reconcile.PodWrites{Client: listing, Lister: c.podLister, Expectations: c.expectations}}
	})
	if err != nil {
		t.Fatal(err)
	}
	f.expectKubeWrites()
	// The script lists worker 0 alone, as before: the launcher is not patched.
	want := []action{update("configmaps", "pi-config"), patchPod("pi-worker-1")}
	if diff := cmp.Diff(inIssueOrder(want), inIssueOrder(writes(listing.Actions())), cmp.AllowUnexported(action{})); diff != "" {
		t.Errorf("writes of the listing client (-want +got):\n%s", diff)
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
	if err := c.syncDiscovery(ctx, jobKey(job)); err != nil {
		t.Fatal(err)
	}
	f.expectKubeWrites(update("configmaps", "pi-config"), patchPod("pi-launcher"))
	if c.expectations.Changing(jobKey(job)) || !c.expectations.Satisfied(jobKey(job)) {
		t.Error("the launcher's refresh is waited for")
	}

	// The cache shows the new files, and the launcher as it was.
	cm := updatedObject[*corev1.ConfigMap](f, "configmaps", "pi-config")
	if err := f.inf.labelled.Core().V1().ConfigMaps().Informer().GetIndexer().Update(cm); err != nil {
		t.Fatal(err)
	}
	f.kubeClient.ClearActions()
	if err := c.syncDiscovery(ctx, jobKey(job)); err != nil {
		t.Fatal(err)
	}
	f.expectKubeWrites()

	// Once the cache shows another version of the launcher, without the
	// hash (a write of someone else's), it is sent again.
	launcher, err := c.podLister.Pods("ns").Get("pi-launcher")
	if err != nil {
		t.Fatal(err)
	}
	launcher = launcher.DeepCopy()
	launcher.ResourceVersion = "99"
	informer := f.inf.pods.Core().V1().Pods().Informer()
	cached, err := newPodTrimmer(informer.GetIndexer()).trim(launcher)
	if err != nil {
		t.Fatal(err)
	}
	if err := informer.GetIndexer().Update(cached); err != nil {
		t.Fatal(err)
	}
	if err := c.syncDiscovery(ctx, jobKey(job)); err != nil {
		t.Fatal(err)
	}
	f.expectKubeWrites(patchPod("pi-launcher"))
}
