package integration

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	common "github.com/kubeflow/common/pkg/apis/common/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/retry"
	"k8s.io/klog/v2/ktesting"
	volcanoclient "volcano.sh/apis/pkg/client/clientset/versioned"

	kubeflow "github.com/kubeflow/mpi-operator/pkg/apis/kubeflow/v1"
	clientset "github.com/kubeflow/mpi-operator/pkg/client/clientset/versioned"
	"github.com/kubeflow/mpi-operator/pkg/controller"
	"github.com/kubeflow/mpi-operator/test/harness"
)

const (
	// waitTimeout bounds every wait for the cluster to reach a state.
	waitTimeout = 60 * time.Second
	pollEvery   = 20 * time.Millisecond
)

// startController runs the controller in-process until the test ends, or
// until the returned function stops it. An empty cfg.Namespace watches
// every namespace.
func startController(t *testing.T, cfg controller.Config) (stop func()) {
	t.Helper()
	return startControllerWith(t, cfg, env.Config)
}

// startControllerWith runs the controller with clients of restConfig, so
// that a test can watch the controller's own requests. Like the operator
// binary, it lists and watches the MPIJobs through a dynamic client unless
// cfg names one.
func startControllerWith(t *testing.T, cfg controller.Config, restConfig *rest.Config) (stop func()) {
	t.Helper()
	if cfg.KubectlDeliveryImage == "" {
		cfg.KubectlDeliveryImage = "mpioperator/kubectl-delivery:test"
	}
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	kube, err := kubernetes.NewForConfig(restConfig)
	if err != nil {
		t.Fatal(err)
	}
	meta, err := metadata.NewForConfig(restConfig)
	if err != nil {
		t.Fatal(err)
	}
	mpi, err := clientset.NewForConfig(restConfig)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Clients.Jobs == nil {
		if cfg.Clients.Jobs, err = dynamic.NewForConfig(restConfig); err != nil {
			t.Fatal(err)
		}
	}
	var vc volcanoclient.Interface // a nil interface, not a typed nil pointer
	if cfg.GangSchedulerName != "" {
		client, err := volcanoclient.NewForConfig(restConfig)
		if err != nil {
			t.Fatalf("volcano client: %v", err)
		}
		vc = client
	}
	inf := controller.NewInformers(kube, meta, mpi, vc, cfg)
	c := controller.NewMPIJobController(ctx, kube, mpi, vc, inf, cfg)
	inf.Start(ctx.Done())
	var wg sync.WaitGroup
	wg.Go(func() {
		if err := c.Run(ctx, 2); err != nil {
			t.Errorf("controller: %v", err)
		}
	})
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			wg.Wait()
			inf.Shutdown()
		})
	}
	t.Cleanup(stop)
	return stop
}

// newJob returns an MPIJob with one launcher and the given workers.
func newJob(ns, name string, workers int32) *kubeflow.MPIJob {
	template := func(container string) corev1.PodTemplateSpec {
		return corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{
			Name: container, Image: "mpioperator/mpi-pi:openmpi",
		}}}}
	}
	return &kubeflow.MPIJob{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: kubeflow.MPIJobSpec{
			MPIReplicaSpecs: map[common.ReplicaType]*common.ReplicaSpec{
				kubeflow.MPIReplicaTypeLauncher: {Replicas: ptr[int32](1), Template: template("launcher")},
				kubeflow.MPIReplicaTypeWorker:   {Replicas: ptr(workers), Template: template("worker")},
			},
		},
	}
}

func createJob(t *testing.T, job *kubeflow.MPIJob) *kubeflow.MPIJob {
	t.Helper()
	created, err := env.MPI.KubeflowV1().MPIJobs(job.Namespace).Create(context.Background(), job, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("creating MPIJob: %v", err)
	}
	return created
}

func getJob(t *testing.T, ns, name string) *kubeflow.MPIJob {
	t.Helper()
	job, err := env.MPI.KubeflowV1().MPIJobs(ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("getting MPIJob: %v", err)
	}
	return job
}

func ignoreNotFound(err error) error {
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

// discoveredHosts returns the hosts discover_hosts.sh prints, in order.
func discoveredHosts(t *testing.T, ns, job string) []string {
	t.Helper()
	cm, err := env.Kube.CoreV1().ConfigMaps(ns).Get(context.Background(), job+"-config", metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		t.Fatalf("getting ConfigMap: %v", err)
	}
	var hosts []string
	for _, line := range strings.Split(cm.Data["discover_hosts.sh"], "\n") {
		if h, ok := strings.CutPrefix(line, "echo "); ok {
			hosts = append(hosts, h)
		}
	}
	return hosts
}

func waitForHosts(t *testing.T, ns, job string, want ...string) {
	t.Helper()
	harness.Eventually(t, poll, waitTimeout, fmt.Sprintf("discover_hosts.sh to list %v", want), func() (bool, error) {
		return slices.Equal(discoveredHosts(t, ns, job), want), nil
	})
}

// workerPods returns the names of the job's worker pods that are not being
// deleted, sorted.
func workerPods(t *testing.T, ns, job string) []string {
	t.Helper()
	pods, err := env.Kube.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{
		LabelSelector: "mpi-job-role=worker,mpi-job-name=" + job,
	})
	if err != nil {
		t.Fatalf("listing workers: %v", err)
	}
	var names []string
	for _, p := range pods.Items {
		if p.DeletionTimestamp == nil {
			names = append(names, p.Name)
		}
	}
	slices.Sort(names)
	return names
}

func podPhase(t *testing.T, ns, name string) corev1.PodPhase {
	t.Helper()
	p, err := env.Kube.CoreV1().Pods(ns).Get(context.Background(), name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return ""
	}
	if err != nil {
		t.Fatalf("getting pod %s: %v", name, err)
	}
	return p.Status.Phase
}

func waitForRunning(t *testing.T, ns, name string) {
	t.Helper()
	harness.Eventually(t, poll, waitTimeout, fmt.Sprintf("pod %s to be Running", name), func() (bool, error) {
		return podPhase(t, ns, name) == corev1.PodRunning, nil
	})
}

// finishPod ends a simulated pod as if its main container had exited.
func finishPod(t *testing.T, ns, name string, phase corev1.PodPhase, exitCode int32, reason string) {
	t.Helper()
	ctx := context.Background()
	p, err := env.Kube.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("getting pod %s: %v", name, err)
	}
	p.Status.Phase = phase
	p.Status.Reason = reason
	var statuses []corev1.ContainerStatus
	for _, c := range p.Spec.Containers {
		statuses = append(statuses, corev1.ContainerStatus{
			Name: c.Name, Image: c.Image,
			State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: exitCode, Reason: "Completed"}},
		})
	}
	p.Status.ContainerStatuses = statuses
	for i := range p.Status.Conditions {
		if p.Status.Conditions[i].Type == corev1.PodReady {
			p.Status.Conditions[i].Status = corev1.ConditionFalse
		}
	}
	if _, err := env.Kube.CoreV1().Pods(ns).UpdateStatus(ctx, p, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("finishing pod %s: %v", name, err)
	}
}

// canExec asks the API server's authorizer whether the job's launcher may
// exec into pod.
func canExec(t *testing.T, ns, job, pod string) bool {
	t.Helper()
	return canExecAs(t, "system:serviceaccount:"+ns+":"+job+"-launcher", ns, ns, pod)
}

// canExecAs asks whether user, a ServiceAccount of saNS, may exec into pod
// in podNS.
func canExecAs(t *testing.T, user, saNS, podNS, pod string) bool {
	t.Helper()
	review := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		User:   user,
		Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + saNS, "system:authenticated"},
		ResourceAttributes: &authorizationv1.ResourceAttributes{
			Namespace: podNS, Verb: "create", Resource: "pods", Subresource: "exec", Name: pod,
		},
	}}
	res, err := env.Kube.AuthorizationV1().SubjectAccessReviews().Create(context.Background(), review, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("SubjectAccessReview: %v", err)
	}
	return res.Status.Allowed
}

// waitForExec waits until the launcher may exec into exactly allowed among
// the candidates. The RBAC authorizer sees a Role change a moment after it
// is written.
func waitForExec(t *testing.T, ns, job string, candidates, allowed []string) {
	t.Helper()
	harness.Eventually(t, poll, waitTimeout, fmt.Sprintf("exec allowed on exactly %v", allowed), func() (bool, error) {
		for _, c := range candidates {
			if canExec(t, ns, job, c) != slices.Contains(allowed, c) {
				return false, nil
			}
		}
		return true, nil
	})
}

func condition(job *kubeflow.MPIJob, ct common.JobConditionType) *common.JobCondition {
	for i := range job.Status.Conditions {
		if job.Status.Conditions[i].Type == ct {
			return &job.Status.Conditions[i]
		}
	}
	return nil
}

func waitForCondition(t *testing.T, ns, name string, ct common.JobConditionType, reason string) *kubeflow.MPIJob {
	t.Helper()
	var job *kubeflow.MPIJob
	harness.Eventually(t, poll, waitTimeout, fmt.Sprintf("condition %s=True (%s)", ct, reason), func() (bool, error) {
		job = getJob(t, ns, name)
		c := condition(job, ct)
		return c != nil && c.Status == corev1.ConditionTrue && c.Reason == reason, nil
	})
	return job
}

// eventReasons lists the reasons of the events about the named MPIJob.
func eventReasons(t *testing.T, ns, name string) []string {
	t.Helper()
	events, err := env.Kube.CoreV1().Events(ns).List(context.Background(), metav1.ListOptions{
		FieldSelector: "involvedObject.kind=MPIJob,involvedObject.name=" + name,
	})
	if err != nil {
		t.Fatalf("listing events: %v", err)
	}
	var reasons []string
	for _, e := range events.Items {
		reasons = append(reasons, e.Type+"/"+e.Reason)
	}
	return reasons
}

func waitForEvents(t *testing.T, ns, name string, want ...string) {
	t.Helper()
	harness.Eventually(t, poll, waitTimeout, fmt.Sprintf("events %v", want), func() (bool, error) {
		got := eventReasons(t, ns, name)
		for _, w := range want {
			if !slices.Contains(got, w) {
				return false, nil
			}
		}
		return true, nil
	})
}

func ptr[T any](v T) *T { return &v }

// scaleWorkers sets the job's worker replicas through the scale subresource,
// as kubectl scale does.
func scaleWorkers(t *testing.T, ns, name string, replicas int32) {
	t.Helper()
	ctx := context.Background()
	jobs := env.MPI.KubeflowV1().MPIJobs(ns)
	// The controller writes the status meanwhile; like kubectl, retry on a
	// conflict with the latest version.
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		scale, err := jobs.GetScale(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		scale.Spec.Replicas = replicas
		_, err = jobs.UpdateScale(ctx, name, scale, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Fatalf("scaling %s to %d: %v", name, replicas, err)
	}
}

// updateJob changes the job's spec with change, retrying on a conflict with
// the controller's status writes.
func updateJob(t *testing.T, ns, name string, change func(*kubeflow.MPIJob)) {
	t.Helper()
	ctx := context.Background()
	jobs := env.MPI.KubeflowV1().MPIJobs(ns)
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		job, err := jobs.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		change(job)
		_, err = jobs.Update(ctx, job, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Fatalf("updating %s: %v", name, err)
	}
}
