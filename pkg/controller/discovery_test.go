package controller

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2/ktesting"

	kubeflow "github.com/kubeflow/mpi-operator/pkg/apis/kubeflow/v1"
	"github.com/kubeflow/mpi-operator/pkg/elastic"
)

// oneOfTwoListed is a running job of two workers whose ConfigMap lists only
// the first, as before the second turned Running.
func oneOfTwoListed(f *fixture) *kubeflow.MPIJob {
	job := runningJob(f, 2)
	two := []string{"pi-worker-0", "pi-worker-1"}
	f.cms[0] = newConfigMap(defaulted(job), elastic.Hosts{Desired: two, Running: two[:1]}, elastic.State{})
	f.pods[2].Annotations[elastic.AnnotationHostsHash] = elastic.HostsHash(f.cms[0].Data[discoverHostsKey])
	return job
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
		if got := isWorker(tc.pod) && elastic.Discoverable(tc.pod); got != tc.want {
			t.Errorf("%s: discoverable = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// queued reports the priority of the one key c's queue holds, failing the
// test unless it holds exactly one.
func queued(t *testing.T, c *MPIJobController) int {
	t.Helper()
	if n := c.Queue.Len(); n != 1 {
		t.Fatalf("the queue holds %d keys, want 1", n)
	}
	_, priority, _ := c.Queue.GetWithPriority()
	return priority
}

// TestPodEventsAreUrgentWhenDiscoverabilityChanges: every pod event queues
// its job once, ahead of the others when it changes what discover_hosts.sh
// may list.
func TestPodEventsAreUrgentWhenDiscoverabilityChanges(t *testing.T) {
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
		name   string
		event  func(c *MPIJobController)
		urgent bool
	}{
		{"turns Running", func(c *MPIJobController) { c.handlePodUpdate(pending, running) }, true},
		{"marked draining", func(c *MPIJobController) { c.handlePodUpdate(running, draining) }, true},
		{"other change", func(c *MPIJobController) { c.handlePodUpdate(running, relabelled) }, false},
		{"running worker deleted", func(c *MPIJobController) { c.handlePodDelete(running) }, true},
		{"pending worker deleted", func(c *MPIJobController) { c.handlePodDelete(pending) }, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			_, ctx := ktesting.NewTestContext(t)
			c := f.newController(ctx)
			tc.event(c)
			if got := queued(t, c) > 0; got != tc.urgent {
				t.Errorf("urgent = %v, want %v", got, tc.urgent)
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
	if _, err := c.Pods.Annotate(ctx, owner(job), f.pods[2], elastic.AnnotationHostsHash, "same"); err != nil {
		t.Fatal(err)
	}
	if !c.Expectations.Satisfied(jobKey(job)) {
		t.Error("the job waits for an event that a patch without change never brings")
	}
}

// TestReplicaChangesAreUrgent: a job update queues the job once, ahead of
// the others when its worker replicas changed.
func TestReplicaChangesAreUrgent(t *testing.T) {
	old := newTestJob("pi", 4)
	old.ResourceVersion = "1"
	shrunk := old.DeepCopy()
	shrunk.Spec.MPIReplicaSpecs[kubeflow.MPIReplicaTypeWorker].Replicas = ptr[int32](2)
	relabelled := old.DeepCopy()
	relabelled.Labels = map[string]string{"team": "ml"}
	cases := []struct {
		name   string
		new    *kubeflow.MPIJob
		urgent bool
	}{
		{"replicas changed", shrunk, true},
		{"something else changed", relabelled, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			_, ctx := ktesting.NewTestContext(t)
			c := f.newController(ctx)
			c.handleJobUpdate(old, tc.new)
			if got := queued(t, c) > 0; got != tc.urgent {
				t.Errorf("urgent = %v, want %v", got, tc.urgent)
			}
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
	if err := syncOnly(ctx, c, jobKey(job)); err != nil {
		t.Fatal(err)
	}
	f.expectKubeWrites(update("configmaps", "pi-config"), patchPod("pi-launcher"))
	if c.Expectations.Changing(jobKey(job)) || !c.Expectations.Satisfied(jobKey(job)) {
		t.Error("the launcher's refresh is waited for")
	}

	// The cache shows the new files, and the launcher as it was.
	cm := updatedObject[*corev1.ConfigMap](f, "configmaps", "pi-config")
	if err := f.inf.labelled.Core().V1().ConfigMaps().Informer().GetIndexer().Update(cm); err != nil {
		t.Fatal(err)
	}
	f.kubeClient.ClearActions()
	if err := syncOnly(ctx, c, jobKey(job)); err != nil {
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
	if err := syncOnly(ctx, c, jobKey(job)); err != nil {
		t.Fatal(err)
	}
	f.expectKubeWrites(patchPod("pi-launcher"))
}

// syncOnly runs one sync of key on c, for its error alone.
func syncOnly(ctx context.Context, c *MPIJobController, key string) error {
	_, err := c.syncHandler(ctx, key)
	return err
}
