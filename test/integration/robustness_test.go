package integration

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"

	kubeflow "github.com/kubeflow/mpi-operator/pkg/apis/kubeflow/v1"
	"github.com/kubeflow/mpi-operator/pkg/controller"
	"github.com/kubeflow/mpi-operator/test/harness"
)

// conditionBlocked is the controller's condition for a job that the API
// server, or an object in the way, keeps from progressing.
const conditionBlocked = "Blocked"

func podSpec(container string) corev1.PodSpec {
	return corev1.PodSpec{Containers: []corev1.Container{{Name: container, Image: "busybox"}}}
}

// createBarePod creates a pod of the given name and labels that no
// controller owns.
func createBarePod(t *testing.T, ns, name string, labels map[string]string) {
	t.Helper()
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: labels}, Spec: podSpec("app")}
	if _, err := env.Kube.CoreV1().Pods(ns).Create(context.Background(), pod, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating pod %s: %v", name, err)
	}
}

// createStatefulSet creates a StatefulSet whose pods are named
// <name>-0 ... <name>-(replicas-1), and waits for them to run.
func createStatefulSet(t *testing.T, ns, name string, replicas int32) {
	t.Helper()
	labels := map[string]string{"app": name}
	sts := &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: appsv1.StatefulSetSpec{
			Replicas:            &replicas,
			ServiceName:         name,
			PodManagementPolicy: appsv1.ParallelPodManagement,
			Selector:            &metav1.LabelSelector{MatchLabels: labels},
			Template:            corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: podSpec("app")},
		},
	}
	if _, err := env.Kube.AppsV1().StatefulSets(ns).Create(context.Background(), sts, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating StatefulSet: %v", err)
	}
	for i := range replicas {
		waitForRunning(t, ns, fmt.Sprintf("%s-%d", name, i))
	}
}

// execMatrix returns, for each pod name, whether the job's launcher may
// exec into it, as the API server's authorizer answers.
func execMatrix(t *testing.T, ns, job string, pods []string) map[string]bool {
	t.Helper()
	out := map[string]bool{}
	for _, p := range pods {
		out[p] = canExec(t, ns, job, p)
	}
	return out
}

// checkExecOnly checks that the launcher of job may exec into exactly the
// allowed pods among candidates, and says which are wrong.
func checkExecOnly(t *testing.T, ns, job string, candidates, allowed []string) {
	t.Helper()
	for pod, ok := range execMatrix(t, ns, job, candidates) {
		if ok != slices.Contains(allowed, pod) {
			t.Errorf("launcher of %s may exec into %s: %v, want %v", job, pod, ok, !ok)
		}
	}
}

func waitForBlocked(t *testing.T, ns, name, reason string, mention ...string) *kubeflow.MPIJob {
	t.Helper()
	job := waitForCondition(t, ns, name, conditionBlocked, reason)
	msg := condition(job, conditionBlocked).Message
	for _, m := range mention {
		if !strings.Contains(msg, m) {
			t.Errorf("Blocked message %q does not mention %q", msg, m)
		}
	}
	return job
}

// TestForeignPodsNeverGetExec puts pods that are not a job's on the names
// of its workers before the job exists: two pods of a StatefulSet named
// like the workers, and a bare pod that even carries the job's labels. The
// launcher never may exec into any of them (SubjectAccessReview), the fixed
// job is Blocked naming them and creates only the free worker and no
// launcher, the elastic job runs on other indices; once the names are free
// the fixed job gets its workers and starts.
func TestForeignPodsNeverGetExec(t *testing.T) {
	ns := env.Namespace(t)
	createStatefulSet(t, ns, "fx-worker", 2)
	createBarePod(t, ns, "fx-worker-2", map[string]string{
		"group-name": "kubeflow.org", "mpi-job-name": "fx", "mpi-job-role": "worker",
	})
	createBarePod(t, ns, "el-worker-1", nil)
	startController(t, controller.Config{Namespace: ns})

	createJob(t, newJob(ns, "fx", 4))
	el := newJob(ns, "el", 3)
	el.Spec.ElasticPolicy = &kubeflow.ElasticPolicy{MinReplicas: ptr[int32](1), MaxReplicas: ptr[int32](5)}
	createJob(t, el)

	fxNames := namesOf("fx", 0, 1, 2, 3, 9)
	waitForBlocked(t, ns, "fx", "ErrResourceExists",
		`Pod "fx-worker-0"`, `Pod "fx-worker-1"`, `Pod "fx-worker-2"`)
	waitForEvents(t, ns, "fx", "Warning/ErrResourceExists")
	waitForRunning(t, ns, "fx-worker-3")
	checkExecOnly(t, ns, "fx", fxNames, namesOf("fx", 3))
	if _, err := env.Kube.CoreV1().Pods(ns).Get(context.Background(), "fx-launcher", metav1.GetOptions{}); err == nil {
		t.Error("the fixed job started its launcher while worker names were held")
	}

	waitForHosts(t, ns, "el", hostsOf("el", 0, 2, 3)...)
	checkExecOnly(t, ns, "el", namesOf("el", 0, 1, 2, 3, 4), namesOf("el", 0, 2, 3))
	if c := condition(getJob(t, ns, "el"), conditionBlocked); c != nil {
		t.Errorf("elastic job Blocked: %+v", c)
	}
	for _, name := range []string{"fx-worker-2", "el-worker-1"} {
		if p, err := env.Kube.CoreV1().Pods(ns).Get(context.Background(), name, metav1.GetOptions{}); err != nil || len(p.OwnerReferences) != 0 {
			t.Errorf("foreign pod %s changed: %v %v", name, err, p.OwnerReferences)
		}
	}

	// Free the names: the fixed job takes them and starts.
	if _, err := env.Kube.AppsV1().StatefulSets(ns).Patch(context.Background(), "fx-worker", types.MergePatchType,
		[]byte(`{"spec":{"replicas":0}}`), metav1.PatchOptions{}); err != nil {
		t.Fatalf("scaling the StatefulSet down: %v", err)
	}
	if err := env.Kube.CoreV1().Pods(ns).Delete(context.Background(), "fx-worker-2", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		harness.Eventually(t, poll, waitTimeout, fmt.Sprintf("fx-worker-%d to be the job's", i), func() (bool, error) {
			p, err := env.Kube.CoreV1().Pods(ns).Get(context.Background(), fmt.Sprintf("fx-worker-%d", i), metav1.GetOptions{})
			if err != nil {
				return false, ignoreNotFound(err)
			}
			ref := metav1.GetControllerOf(p)
			return ref != nil && ref.Kind == "MPIJob" && ref.Name == "fx", nil
		})
	}
	harness.Eventually(t, poll, waitTimeout, "the Blocked condition to go", func() (bool, error) {
		return condition(getJob(t, ns, "fx"), conditionBlocked) == nil, nil
	})
	waitForRunning(t, ns, "fx-launcher")
	checkExecOnly(t, ns, "fx", fxNames, namesOf("fx", 0, 1, 2, 3))
}

// TestRefusedChildSurfaces: a launcher the API server refuses as invalid
// (its template mounts a volume of its own at /etc/mpi) gives the job a
// Blocked condition carrying the API server's message and a Warning event.
func TestRefusedChildSurfaces(t *testing.T) {
	ns := env.Namespace(t)
	startController(t, controller.Config{Namespace: ns})
	job := newJob(ns, "clash", 1)
	launcher := &job.Spec.MPIReplicaSpecs[kubeflow.MPIReplicaTypeLauncher].Template.Spec
	launcher.Volumes = []corev1.Volume{{Name: "mine", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}
	launcher.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "mine", MountPath: "/etc/mpi"}}
	createJob(t, job)
	got := waitForBlocked(t, ns, "clash", "Invalid", `Pod "clash-launcher" is invalid`, "mountPath")
	waitForEvents(t, ns, "clash", "Warning/Invalid")
	if c := condition(got, "Failed"); c != nil && c.Status == corev1.ConditionTrue {
		t.Errorf("job failed: %+v", c)
	}
}

// requestCounter counts the requests that pass through it.
type requestCounter struct {
	next  http.RoundTripper
	count atomic.Int64
}

func (r *requestCounter) RoundTrip(req *http.Request) (*http.Response, error) {
	// Watches stay open; only the requests a sync makes are counted.
	if req.URL.Query().Get("watch") != "true" {
		r.count.Add(1)
	}
	return r.next.RoundTrip(req)
}

// TestForeignObjectWithoutLabelIsReported: a ConfigMap of the job's name
// without the "app" label is invisible to the controller's informers. The
// job says so with a Blocked condition and a Warning event, and its retries
// back off: the requests it causes stay bounded.
func TestForeignObjectWithoutLabelIsReported(t *testing.T) {
	ns := env.Namespace(t)
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "stuck-config", Namespace: ns}}
	if _, err := env.Kube.CoreV1().ConfigMaps(ns).Create(context.Background(), cm, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	counter := &requestCounter{}
	cfg := rest.CopyConfig(env.Config)
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { counter.next = rt; return counter })
	startControllerWith(t, controller.Config{Namespace: ns}, cfg)
	synced := counter.count.Load() // the informers' lists

	createJob(t, newJob(ns, "stuck", 2))
	start := time.Now()
	waitForBlocked(t, ns, "stuck", "ErrResourceExists", `ConfigMap "stuck-config" already exists and is not managed by MPIJob stuck`)
	waitForEvents(t, ns, "stuck", "Warning/ErrResourceExists")
	if pods := workerPods(t, ns, "stuck"); len(pods) != 0 {
		t.Errorf("workers created while blocked: %v", pods)
	}

	// Measure a minute of being stuck: the first half settles the backoff,
	// the second shows its rate.
	time.Sleep(30*time.Second - time.Since(start))
	half := counter.count.Load()
	time.Sleep(30 * time.Second)
	total, late := counter.count.Load()-synced, counter.count.Load()-half
	t.Logf("requests while stuck: %d in the first minute, %d in its second half", total, late)
	// Each retry costs a create and a read of the ConfigMap; the backoff
	// doubles from 5 ms, so a minute holds about 14 retries, and its
	// second half 1 or 2.
	if total > 60 {
		t.Errorf("%d requests in a minute for a stuck job, want at most 60", total)
	}
	if late > 8 {
		t.Errorf("%d requests in the second half-minute, want at most 8: the retries do not back off", late)
	}
}

// stripLabels takes every label off an object of resource in ns.
func stripLabels(t *testing.T, resource, ns, name string) {
	t.Helper()
	patch := []byte(`{"metadata":{"labels":null}}`)
	var err error
	switch resource {
	case "configmaps":
		_, err = env.Kube.CoreV1().ConfigMaps(ns).Patch(context.Background(), name, types.MergePatchType, patch, metav1.PatchOptions{})
	case "pods":
		_, err = env.Kube.CoreV1().Pods(ns).Patch(context.Background(), name, types.MergePatchType, patch, metav1.PatchOptions{})
	default:
		t.Fatalf("stripLabels: no client for %s", resource)
	}
	if err != nil {
		t.Fatalf("stripping the labels of %s %s: %v", resource, name, err)
	}
}

// TestStrippedChildIsAdopted: a user or a mutating policy takes every label
// off a running job's ConfigMap and off one of its workers. The label-filtered
// informers lose sight of both; the create that finds each gives its labels
// back, the same objects stay (no worker is recreated), the job is never
// Blocked, and it scales on as before.
func TestStrippedChildIsAdopted(t *testing.T) {
	ns := env.Namespace(t)
	startController(t, controller.Config{Namespace: ns})
	createJob(t, newJob(ns, "bare", 2))
	for _, w := range namesOf("bare", 0, 1) {
		waitForRunning(t, ns, w)
	}
	waitForHosts(t, ns, "bare", hostsOf("bare", 0, 1)...)
	worker, err := env.Kube.CoreV1().Pods(ns).Get(context.Background(), "bare-worker-1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}

	stripLabels(t, "configmaps", ns, "bare-config")
	stripLabels(t, "pods", ns, "bare-worker-1")
	harness.Eventually(t, poll, waitTimeout, "the ConfigMap and the worker to get their labels back", func() (bool, error) {
		cm, err := env.Kube.CoreV1().ConfigMaps(ns).Get(context.Background(), "bare-config", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		pod, err := env.Kube.CoreV1().Pods(ns).Get(context.Background(), "bare-worker-1", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return cm.Labels["app"] == "bare" && pod.Labels["mpi-job-role"] == "worker", nil
	})
	pod, err := env.Kube.CoreV1().Pods(ns).Get(context.Background(), "bare-worker-1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if pod.UID != worker.UID {
		t.Errorf("worker 1 was replaced (uid %s, was %s), want the same pod adopted", pod.UID, worker.UID)
	}
	waitForHosts(t, ns, "bare", hostsOf("bare", 0, 1)...)
	if c := condition(getJob(t, ns, "bare"), conditionBlocked); c != nil && c.Status == corev1.ConditionTrue {
		t.Errorf("job Blocked after its children lost their labels: %s", c.Message)
	}

	scaleWorkers(t, ns, "bare", 3)
	waitForRunning(t, ns, "bare-worker-2")
	waitForHosts(t, ns, "bare", hostsOf("bare", 0, 1, 2)...)
}
