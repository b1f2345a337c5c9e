package controller

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	k8sfake "k8s.io/client-go/kubernetes/fake"
	metadatafake "k8s.io/client-go/metadata/fake"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2/ktesting"

	"github.com/kubeflow/mpi-operator/v2/pkg/apis/kubeflow/v2beta1"
	mpifake "github.com/kubeflow/mpi-operator/v2/pkg/client/clientset/versioned/fake"
)

// TestRunReconcilesThroughTheInformers runs the controller on watching
// informers: a job created through the API gets its workers and status.
func TestRunReconcilesThroughTheInformers(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	kube := k8sfake.NewClientset()
	mpi := mpifake.NewSimpleClientset()
	meta := metadatafake.NewSimpleMetadataClient(metadatafake.NewTestScheme())
	inf := NewInformers(kube, meta, mpi, nil, nil, Config{})
	c := NewMPIJobController(ctx, kube, mpi, nil, nil, inf, Config{})
	inf.Start(ctx.Done())
	done := make(chan error)
	go func() { done <- c.Run(ctx, 2) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
		inf.Shutdown()
	}()

	if _, err := mpi.KubeflowV2beta1().MPIJobs("ns").Create(ctx, storedJob(2), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	err := wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
		j, err := mpi.KubeflowV2beta1().MPIJobs("ns").Get(ctx, "job", metav1.GetOptions{})
		if err != nil || !conditions.Has(j.Status.Conditions, v2beta1.JobCreated) {
			return false, nil
		}
		pods, err := kube.CoreV1().Pods("ns").List(ctx, metav1.ListOptions{})
		return err == nil && len(pods.Items) == 2, nil
	})
	if err != nil {
		t.Fatalf("the job was not reconciled: %v", err)
	}
	if err := c.Healthy(); err != nil {
		t.Errorf("Healthy: %v", err)
	}
}

func TestEventsEnqueueTheirJob(t *testing.T) {
	f := newFixture(t).start(storedJob(1))
	job := newTestJob(1)
	worker := newWorker(job, 0, gangScheduler{}, "")
	launcherPod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "job-launcher-x",
		Labels: podLabels(job, roleLauncher)}}
	slice := &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "job-abc",
		Labels: map[string]string{labelApp: "job"}}}
	cm := newConfigMap(job, nil, nil, nil, "", nil)
	cases := map[string]struct {
		handle func(any)
		obj    any
		want   bool
	}{
		"worker":                  {f.c.podEvents.AddFunc, worker, true},
		"launcher pod":            {f.c.podEvents.AddFunc, launcherPod, true},
		"worker gone (tombstone)": {f.c.podEvents.DeleteFunc, cache.DeletedFinalStateUnknown{Obj: worker}, true},
		"pod of no job":           {f.c.podEvents.AddFunc, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "x"}}, false},
		"slice":                   {func(obj any) { f.c.handleSlice(obj, true) }, slice, true},
		"slice of another app":    {func(obj any) { f.c.handleSlice(obj, true) }, &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Labels: map[string]string{labelApp: "web"}}}, false},
		"stranger on a worker":    {f.c.otherPodEvents.AddFunc, &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "job-worker-3"}}, true},
		"stranger elsewhere":      {f.c.otherPodEvents.AddFunc, &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web-1"}}, false},
		"ConfigMap":               {f.c.ownedEvents.AddFunc, cm, true},
	}
	for name, tc := range cases {
		drain(f)
		tc.handle(tc.obj)
		if got := f.c.Queue.Len() == 1; got != tc.want {
			t.Errorf("%s: enqueued %v, want %v", name, got, tc.want)
		}
	}
}
