package plugin

import (
	"bytes"
	"context"
	"errors"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	common "github.com/kubeflow/common/pkg/apis/common/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	fakediscovery "k8s.io/client-go/discovery/fake"
	clienttesting "k8s.io/client-go/testing"

	"github.com/kubeflow/mpi-operator/pkg/elastic"
)

var now = time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)

func ago(d time.Duration) metav1.Time { return metav1.NewTime(now.Add(-d)) }

// fixture is a job "demo" in namespace "ml" of 3 workers (1 to 4): worker-0
// Running and listed, worker-1 Pending for want of GPUs, worker-2 Running
// and draining; plus a job "fixed" without an elastic policy and a worker
// of another job; all as the operator of the version given makes them.
func fixture(t *testing.T, api API) *fakeCluster {
	t.Helper()
	job, err := buildObject(api, JobRequest{Name: "demo", Namespace: "ml", Image: "img", Workers: 3, MaxWorkers: 4, GPUs: 2, Command: []string{"python"}})
	if err != nil {
		t.Fatal(err)
	}
	job.SetCreationTimestamp(ago(10 * time.Minute))
	job.Object["status"] = toUnstructured(t, &common.JobStatus{
		StartTime: ptrTo(ago(9 * time.Minute)),
		Conditions: []common.JobCondition{
			{Type: common.JobCreated, Status: corev1.ConditionTrue},
			{Type: common.JobRunning, Status: corev1.ConditionTrue},
			{Type: "Resizing", Status: corev1.ConditionTrue},
		},
	}).Object
	fixed := job.DeepCopy()
	fixed.SetName("fixed")
	unstructured.RemoveNestedField(fixed.Object, "spec", "elasticPolicy")
	gpus := corev1.ResourceRequirements{Limits: corev1.ResourceList{ResourceGPU: resource.MustParse("2")}}
	pod := func(name, role string, phase corev1.PodPhase, node string, age time.Duration) *corev1.Pod {
		p := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ml", CreationTimestamp: ago(age),
				Labels: map[string]string{api.LabelJobName: "demo", api.LabelRole: role}},
			Spec:   corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "mpi-" + role}}},
			Status: corev1.PodStatus{Phase: phase},
		}
		if role == roleWorker {
			p.Spec.Containers[0].Resources = gpus
			p.Labels[labelReplicaIndex] = strings.TrimPrefix(name, "demo-worker-")
		}
		return p
	}
	launcher := pod(fixtureLauncher(api), roleLauncher, corev1.PodRunning, "node-a", 9*time.Minute)
	launcher.Status.ContainerStatuses = []corev1.ContainerStatus{{RestartCount: 1}}
	launcher.Spec.InitContainers = []corev1.Container{{Name: "kubectl-delivery"}}
	if api.LauncherJob {
		ofLauncherJob(launcher, "demo-launcher")
	}
	w0 := pod("demo-worker-0", roleWorker, corev1.PodRunning, "node-b", 9*time.Minute)
	w1 := pod("demo-worker-1", roleWorker, corev1.PodPending, "", 2*time.Minute)
	w2 := pod("demo-worker-2", roleWorker, corev1.PodRunning, "node-a", 9*time.Minute)
	w2.Annotations = map[string]string{elastic.AnnotationDrainingSince: "2026-05-01T11:59:30.123456Z"}
	other := pod("other-worker-0", roleWorker, corev1.PodRunning, "node-a", time.Minute)
	other.Labels[api.LabelJobName] = "other"
	host := "demo-worker-0:2"
	if api == APIv2beta1 {
		host = "demo-worker-0.demo.ml.svc"
	}
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "demo-config", Namespace: "ml"},
		Data:       map[string]string{discoverHostsKey: "#!/bin/sh\necho " + host + "\n"},
	}
	event := func(name, msg string, at time.Duration) *corev1.Event {
		return &corev1.Event{
			ObjectMeta:     metav1.ObjectMeta{Name: name + msg, Namespace: "ml"},
			InvolvedObject: corev1.ObjectReference{Kind: "Pod", Name: name},
			Reason:         reasonFailedScheduling, Message: msg, LastTimestamp: ago(at),
		}
	}
	return newFakeCluster(t, api, []runtime.Object{job, fixed, launcher, w0, w1, w2, other, cm,
		event("demo-worker-1", "0/2 nodes: old", time.Minute),
		event("demo-worker-1", "0/2 nodes are available: 2 Insufficient nvidia.com/gpu.", time.Second)})
}

// fixtureLauncher is the name of the fixture's launcher pod: under v2beta1
// the Job controller's.
func fixtureLauncher(api API) string {
	if api.LauncherJob {
		return "demo-launcher-x7k2p"
	}
	return "demo-launcher"
}

// ofLauncherJob makes pod a pod of the batch Job named, as the Job
// controller labels and owns it.
func ofLauncherJob(pod *corev1.Pod, job string) {
	pod.Labels["batch.kubernetes.io/job-name"] = job
	pod.Labels["job-name"] = job
	pod.OwnerReferences = []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "Job", Name: job, UID: "job-uid", Controller: ptrTo(true)}}
}

func TestGet(t *testing.T) {
	for _, api := range apis {
		t.Run(api.Version, func(t *testing.T) {
			out, err := run(t, fixture(t, api), "get", "demo", "-o", "wide")
			if err != nil {
				t.Fatal(err)
			}
			want := `Name:        demo
Namespace:   ml
Status:      Running,Resizing
Duration:    9m
Workers:     desired 3, running 1, listed 1 (min 1, max 4)

INSTANCE        ROLE       PHASE     NODE     LISTED   DRAINING SINCE         GPUS   RESTARTS   AGE   IP    REASON
demo-launcher   launcher   Running   node-a   no       -                      0      1          9m    -     -
demo-worker-0   worker     Running   node-b   yes      -                      2      0          9m    -     -
demo-worker-1   worker     Pending   -        no       -                      2      0          2m    -     FailedScheduling: 0/2 nodes are available: 2 Insufficient nvidia.com/gpu.
demo-worker-2   worker     Running   node-a   no       2026-05-01T11:59:30Z   2      0          9m    -     -
`
			if api.LauncherJob {
				want = `Name:        demo
Namespace:   ml
Status:      Running,Resizing
Duration:    9m
Workers:     desired 3, running 1, listed 1 (min 1, max 4)

INSTANCE              ROLE       PHASE     NODE     LISTED   DRAINING SINCE         GPUS   RESTARTS   AGE   IP    REASON
demo-launcher-x7k2p   launcher   Running   node-a   no       -                      0      1          9m    -     -
demo-worker-0         worker     Running   node-b   yes      -                      2      0          9m    -     -
demo-worker-1         worker     Pending   -        no       -                      2      0          2m    -     FailedScheduling: 0/2 nodes are available: 2 Insufficient nvidia.com/gpu.
demo-worker-2         worker     Running   node-a   no       2026-05-01T11:59:30Z   2      0          9m    -     -
`
			}
			if diff := cmp.Diff(want, out); diff != "" {
				t.Errorf("get -o wide (-want +got):\n%s", diff)
			}
		})
	}
}

func TestList(t *testing.T) {
	for _, api := range apis {
		t.Run(api.Version, func(t *testing.T) {
			f := fixture(t, api)
			out, err := run(t, f, "list", "-o", "wide")
			if err != nil {
				t.Fatal(err)
			}
			want := `NAME    STATUS             DESIRED   RUNNING   LISTED   DURATION   MIN   MAX
demo    Running,Resizing   3         1         1        9m         1     4
fixed   Running,Resizing   3         0         0        9m         -     -
`
			if diff := cmp.Diff(want, out); diff != "" {
				t.Errorf("list -o wide (-want +got):\n%s", diff)
			}
			out, err = run(t, f, "list", "-o", "name")
			if err != nil || out != "mpijob.kubeflow.org/demo\nmpijob.kubeflow.org/fixed\n" {
				t.Errorf("list -o name = %q, %v", out, err)
			}
			// -o prints the jobs as served, in their version.
			out, err = run(t, f, "get", "demo", "-o", "jsonpath={.apiVersion} {.spec.mpiReplicaSpecs.Worker.replicas}")
			if want := "kubeflow.org/" + api.Version + " 3"; err != nil || out != want {
				t.Errorf("get -o jsonpath = %q, %v; want %q", out, err, want)
			}
		})
	}
}

// TestChooseAPI: the version is the one asked for when the server serves
// it, else v1 when served, else v2beta1; the commands then read and write
// that version.
func TestChooseAPI(t *testing.T) {
	cases := []struct {
		name    string
		served  []API
		asked   string
		want    API
		wantErr string
	}{
		{name: "both served: v1", served: apis, want: APIv1},
		{name: "v2beta1 only", served: []API{APIv2beta1}, want: APIv2beta1},
		{name: "v2beta1 asked", served: apis, asked: "v2beta1", want: APIv2beta1},
		{name: "asked with the group", served: apis, asked: "kubeflow.org/v1", want: APIv1},
		{name: "asked, not served", served: []API{APIv2beta1}, asked: "v1",
			wantErr: "the server does not serve mpijobs in kubeflow.org/v1 (it serves them in: kubeflow.org/v2beta1)"},
		{name: "none served", wantErr: "the server serves no MPIJobs, neither kubeflow.org/v1 nor kubeflow.org/v2beta1: is an MPI operator's CRD installed?"},
		{name: "unknown version", served: apis, asked: "v3",
			wantErr: `invalid --api-version "v3": must be v1 or v2beta1 (kubeflow.org/v1 or kubeflow.org/v2beta1)`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeCluster(t, APIv1, nil, tc.served...)
			if len(tc.served) == 0 {
				f.kube.Discovery().(*fakediscovery.FakeDiscovery).Resources = nil
			}
			env := f.env()
			env.APIVersion = tc.asked
			c, err := env.Clients()
			switch {
			case tc.wantErr != "":
				if err == nil || err.Error() != tc.wantErr {
					t.Errorf("error = %v, want %q", err, tc.wantErr)
				}
			case err != nil:
				t.Fatal(err)
			case c.API != tc.want:
				t.Errorf("chose %s, want %s", c.API.Version, tc.want.Version)
			}
		})
	}
	// A discovery that fails is an error, not a version not served.
	f := newFakeCluster(t, APIv1, nil)
	f.kube.PrependReactor("get", "resource", func(clienttesting.Action) (bool, runtime.Object, error) {
		return true, nil, errors.New("connection refused")
	})
	if _, err := f.env().Clients(); err == nil || err.Error() != "discovering kubeflow.org/v1: connection refused" {
		t.Errorf("error = %v", err)
	}
}

func TestSubmitCreates(t *testing.T) {
	for _, api := range apis {
		t.Run(api.Version, func(t *testing.T) {
			// The server serves both versions; --api-version picks v2beta1.
			f := newFakeCluster(t, api, nil, apis...)
			out, err := run(t, f, "submit", "mnist", "--api-version", api.Version, "--image", "img", "--workers", "2", "--max-workers", "4",
				"--gpus", "1", "--cpu", "2", "--", "python", "train.py", "--epochs", "3")
			if err != nil || out != "mpijob.kubeflow.org/mnist created\n" {
				t.Fatalf("submit = %q, %v", out, err)
			}
			want, err := buildObject(api, JobRequest{Name: "mnist", Namespace: "ml", Image: "img", Workers: 2, MaxWorkers: 4, GPUs: 1, CPU: "2",
				Command: []string{"python", "train.py", "--epochs", "3"}})
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(want, f.object(t, "mnist")); diff != "" {
				t.Errorf("created job (-want +got):\n%s", diff)
			}
			for _, a := range f.dyn.Actions() {
				if a.GetVerb() == "create" && a.GetResource() != api.GVR() {
					t.Errorf("created %s", a.GetResource())
				}
			}
		})
	}
}

func TestSubmitDryRunCreatesNothing(t *testing.T) {
	f := newFakeCluster(t, APIv1, nil)
	out, err := run(t, f, "submit", "mnist", "--image", "img", "--dry-run=client", "-o", "json", "--", "python")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, `"horovodrun"`) || strings.Contains(out, `"status"`) {
		t.Errorf("dry run printed %s", out)
	}
	for _, a := range f.actions() {
		if v := a.GetVerb(); v != "get" && v != "list" {
			t.Errorf("a dry run sent %s %s", v, a.GetResource().Resource)
		}
	}
}

// TestBadInput runs commands that must fail with a clear message before
// they change anything.
func TestBadInput(t *testing.T) {
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"get", "nope"}, `mpijob "nope" not found in namespace "ml"`},
		{[]string{"scale-out", "nope", "--count", "1"}, `mpijob "nope" not found in namespace "ml"`},
		{[]string{"scale-out", "demo", "--count", "2"}, `cannot scale out mpijob "demo" by 2: it has 3 workers and maxReplicas 4 (it can take 1 more)`},
		{[]string{"scale-out", "demo", "--count", "0"}, `--count must be at least 1, got 0`},
		{[]string{"scale-out", "fixed"}, `mpijob "fixed" has no elasticPolicy: scale it with kubectl scale`},
		{[]string{"scale-in", "demo", "--count", "3"}, `cannot scale in mpijob "demo" by 3: it has 3 workers and minReplicas 1 (it can lose 2)`},
		{[]string{"scale-in", "demo"}, `give either --count or --pod`},
		{[]string{"scale-in", "demo", "--count", "1", "--pod", "demo-worker-0"}, `give either --count or --pod`},
		{[]string{"scale-in", "demo", "--pod", "other-worker-0"}, `pod "other-worker-0" is not a worker of mpijob "demo" (its workers: demo-worker-0, demo-worker-1, demo-worker-2)`},
		{[]string{"scale-in", "demo", "--pod", "demo-worker-2"}, `worker "demo-worker-2" of mpijob "demo" is already leaving`},
		{[]string{"scale-in", "demo", "--pod", "demo-worker-0"}, `worker "demo-worker-1" of mpijob "demo" is Pending: the operator removes workers that are not Running first, so it would go instead of demo-worker-0`},
		{[]string{"logs", "demo", "--worker", "7"}, `mpijob "demo" has no worker of index 7 (its workers' indices: 0, 1, 2)`},
		{[]string{"logs", "demo", "--launcher", "--worker", "0"}, `give --launcher or --worker, not both`},
		{[]string{"logs", "demo", "-c", "sidecar"}, `pod {launcher} has no container "sidecar" (its containers: mpi-launcher, kubectl-delivery)`},
		{[]string{"delete", "nope"}, `mpijob "nope" not found in namespace "ml"`},
		{[]string{"submit", "x", "--image", "img", "--workers", "3", "--max-workers", "2", "--", "python"}, `--max-workers (2) is below --workers (3)`},
		{[]string{"submit", "x", "--image", "img", "--dry-run=maybe", "--", "python"}, `invalid --dry-run "maybe": must be "none", "client" or "server"`},
		{[]string{"get"}, `get takes exactly one job name, got 0 arguments; see 'kubectl mpijob get --help'`},
		{[]string{"get", "demo", "--api-version", "v2"}, `invalid --api-version "v2": must be v1 or v2beta1 (kubeflow.org/v1 or kubeflow.org/v2beta1)`},
	}
	for _, api := range apis {
		for _, tc := range cases {
			t.Run(api.Version+" "+strings.Join(tc.args, " "), func(t *testing.T) {
				f := fixture(t, api)
				_, err := run(t, f, tc.args...)
				want := strings.ReplaceAll(tc.want, "{launcher}", fixtureLauncher(api))
				if err == nil || err.Error() != want {
					t.Errorf("error = %v\nwant %q", err, want)
				}
				// Reads only; delete's own request is how it learns the
				// job is missing.
				for _, a := range f.actions() {
					v := a.GetVerb()
					if v != "get" && v != "list" && (v != "delete" || tc.args[0] != "delete") {
						t.Errorf("a refused command sent %s %s", v, a.GetResource().Resource)
					}
				}
			})
		}
	}
}

// TestUnknownFormatSendsNothing: an output format no printer knows is
// refused before any request, so that submit creates no job it cannot
// print.
func TestUnknownFormatSendsNothing(t *testing.T) {
	for _, args := range [][]string{
		{"submit", "x", "--image", "img", "-o", "xml", "--", "python"},
		{"get", "demo", "-o", "xml"},
		{"list", "-o", "xml"},
	} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			f := fixture(t, APIv1)
			_, err := run(t, f, args...)
			if err == nil || !strings.Contains(err.Error(), `"xml"`) {
				t.Errorf("error = %v, want the format refused", err)
			}
			if actions := f.actions(); len(actions) > 0 {
				t.Errorf("%d requests sent before the format was refused, the first %s %s",
					len(actions), actions[0].GetVerb(), actions[0].GetResource().Resource)
			}
		})
	}
}

func TestDelete(t *testing.T) {
	for _, api := range apis {
		t.Run(api.Version, func(t *testing.T) {
			f := fixture(t, api)
			out, err := run(t, f, "delete", "demo")
			if err != nil || out != "mpijob.kubeflow.org \"demo\" deleted\n" {
				t.Fatalf("delete = %q, %v", out, err)
			}
			if _, err := f.dyn.Tracker().Get(api.GVR(), "ml", "demo"); err == nil {
				t.Error("the job is still there")
			}
		})
	}
}

func TestVictimCost(t *testing.T) {
	withCost := func(v string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{elastic.AnnotationDeletionCost: v}}}
	}
	cases := []struct {
		name    string
		others  []*corev1.Pod
		want    int32
		wantErr bool
	}{
		{"none", nil, -1, false},
		{"default costs", []*corev1.Pod{{}, withCost("5")}, -1, false},
		{"below the lowest", []*corev1.Pod{withCost("-100"), withCost("7")}, -101, false},
		{"malformed counts as 0", []*corev1.Pod{withCost("cheap")}, -1, false},
		{"no room below", []*corev1.Pod{withCost("-2147483648")}, 0, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := VictimCost(tc.others)
			if got != tc.want || (err != nil) != tc.wantErr {
				t.Errorf("VictimCost = %d, %v; want %d, error %v", got, err, tc.want, tc.wantErr)
			}
		})
	}
}

func TestStatusText(t *testing.T) {
	cond := func(t common.JobConditionType, s corev1.ConditionStatus) common.JobCondition {
		return common.JobCondition{Type: t, Status: s}
	}
	cases := []struct {
		conds []common.JobCondition
		want  string
	}{
		{nil, "Pending"},
		{[]common.JobCondition{cond(common.JobCreated, corev1.ConditionTrue)}, "Created"},
		{[]common.JobCondition{cond(common.JobCreated, corev1.ConditionTrue), cond(common.JobRunning, corev1.ConditionTrue), cond("Blocked", corev1.ConditionTrue)}, "Running,Blocked"},
		{[]common.JobCondition{cond(common.JobRunning, corev1.ConditionFalse), cond(common.JobSucceeded, corev1.ConditionTrue), cond(common.JobRestarting, corev1.ConditionTrue)}, "Succeeded"},
	}
	for _, tc := range cases {
		job := &Job{}
		for _, c := range tc.conds {
			job.Status.Conditions = append(job.Status.Conditions, JobCondition{Type: string(c.Type), Status: c.Status})
		}
		if got := StatusText(job); got != tc.want {
			t.Errorf("StatusText(%v) = %q, want %q", tc.conds, got, tc.want)
		}
	}
}

// TestGetWatch prints the job again when a worker starts running, and
// stops once the job is deleted, not when another job is.
func TestGetWatch(t *testing.T) {
	for _, api := range apis {
		t.Run(api.Version, func(t *testing.T) { testGetWatch(t, api) })
	}
}

func testGetWatch(t *testing.T, api API) {
	f := fixture(t, api)
	ctx := context.Background()
	done := make(chan string)
	var out bytes.Buffer
	env := f.env()
	env.Out, env.ErrOut = &syncWriter{w: &out}, io.Discard
	go func() {
		cmd := newRootCommand(env)
		cmd.SetArgs([]string{"get", "demo", "--watch"})
		if err := cmd.ExecuteContext(ctx); err != nil {
			t.Error(err)
		}
		done <- env.Out.(*syncWriter).String()
	}()
	waitFor := func(want string) {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
			if strings.Contains(env.Out.(*syncWriter).String(), want) {
				return
			}
		}
		t.Fatalf("the watch printed no %q:\n%s", want, env.Out.(*syncWriter).String())
	}
	waitFor("running 1, listed 1")
	jobs := f.dyn.Resource(api.GVR()).Namespace("ml")
	if err := jobs.Delete(ctx, "fixed", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	w1, err := f.kube.CoreV1().Pods("ml").Get(ctx, "demo-worker-1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	w1.Status.Phase = corev1.PodRunning
	if _, err := f.kube.CoreV1().Pods("ml").UpdateStatus(ctx, w1, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor("running 2, listed 1")
	if err := jobs.Delete(ctx, "demo", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	select {
	case got := <-done:
		if !strings.HasSuffix(got, "\nmpijob \"demo\" deleted\n") || strings.Count(got, "Name:        demo\n") < 2 {
			t.Errorf("the watch printed:\n%s", got)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the watch did not end with the job's deletion")
	}
}

// syncWriter is a buffer that a test reads while a command writes it.
type syncWriter struct {
	mu sync.Mutex
	w  *bytes.Buffer
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}

func (s *syncWriter) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.String()
}
