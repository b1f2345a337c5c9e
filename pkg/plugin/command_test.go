package plugin

import (
	"bytes"
	"context"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	common "github.com/kubeflow/common/pkg/apis/common/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubefake "k8s.io/client-go/kubernetes/fake"

	kubeflow "github.com/kubeflow/mpi-operator/pkg/apis/kubeflow/v1"
	mpifake "github.com/kubeflow/mpi-operator/pkg/client/clientset/versioned/fake"
	"github.com/kubeflow/mpi-operator/pkg/elastic"
)

var now = time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)

func ago(d time.Duration) metav1.Time { return metav1.NewTime(now.Add(-d)) }

// fixture is a job "demo" in namespace "ml" of 3 workers (1 to 4): worker-0
// Running and listed, worker-1 Pending for want of GPUs, worker-2 Running
// and draining; plus a job "fixed" without an elastic policy and a worker
// of another job.
func fixture() (*kubefake.Clientset, *mpifake.Clientset) {
	job, err := BuildJob(JobRequest{Name: "demo", Namespace: "ml", Image: "img", Workers: 3, MaxWorkers: 4, GPUs: 2, Command: []string{"python"}})
	if err != nil {
		panic(err)
	}
	job.CreationTimestamp = ago(10 * time.Minute)
	job.Status = common.JobStatus{
		StartTime: ptrTo(ago(9 * time.Minute)),
		Conditions: []common.JobCondition{
			{Type: common.JobCreated, Status: corev1.ConditionTrue},
			{Type: common.JobRunning, Status: corev1.ConditionTrue},
			{Type: "Resizing", Status: corev1.ConditionTrue},
		},
	}
	fixed := job.DeepCopy()
	fixed.Name, fixed.Spec.ElasticPolicy = "fixed", nil
	pod := func(name, role string, phase corev1.PodPhase, node string, age time.Duration) *corev1.Pod {
		p := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ml", CreationTimestamp: ago(age),
				Labels: map[string]string{labelJobName: "demo", labelRole: role}},
			Spec:   corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "mpi-" + role}}},
			Status: corev1.PodStatus{Phase: phase},
		}
		if role == roleWorker {
			p.Spec.Containers[0].Resources = job.Spec.MPIReplicaSpecs[kubeflow.MPIReplicaTypeWorker].Template.Spec.Containers[0].Resources
			p.Labels[labelReplicaIndex] = strings.TrimPrefix(name, "demo-worker-")
		}
		return p
	}
	launcher := pod("demo-launcher", roleLauncher, corev1.PodRunning, "node-a", 9*time.Minute)
	launcher.Status.ContainerStatuses = []corev1.ContainerStatus{{RestartCount: 1}}
	launcher.Spec.InitContainers = []corev1.Container{{Name: "kubectl-delivery"}}
	w0 := pod("demo-worker-0", roleWorker, corev1.PodRunning, "node-b", 9*time.Minute)
	w1 := pod("demo-worker-1", roleWorker, corev1.PodPending, "", 2*time.Minute)
	w2 := pod("demo-worker-2", roleWorker, corev1.PodRunning, "node-a", 9*time.Minute)
	w2.Annotations = map[string]string{elastic.AnnotationDrainingSince: "2026-05-01T11:59:30.123456Z"}
	other := pod("other-worker-0", roleWorker, corev1.PodRunning, "node-a", time.Minute)
	other.Labels[labelJobName] = "other"
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "demo-config", Namespace: "ml"},
		Data:       map[string]string{discoverHostsKey: "#!/bin/sh\necho demo-worker-0:2\n"},
	}
	event := func(name, msg string, at time.Duration) *corev1.Event {
		return &corev1.Event{
			ObjectMeta:     metav1.ObjectMeta{Name: name + msg, Namespace: "ml"},
			InvolvedObject: corev1.ObjectReference{Kind: "Pod", Name: name},
			Reason:         reasonFailedScheduling, Message: msg, LastTimestamp: ago(at),
		}
	}
	kube := kubefake.NewClientset(launcher, w0, w1, w2, other, cm,
		event("demo-worker-1", "0/2 nodes: old", time.Minute),
		event("demo-worker-1", "0/2 nodes are available: 2 Insufficient nvidia.com/gpu.", time.Second))
	return kube, mpifake.NewSimpleClientset(job, fixed)
}

// run runs the plugin on the fixture's clients in namespace ml.
func run(t *testing.T, kube *kubefake.Clientset, mpi *mpifake.Clientset, args ...string) (string, error) {
	t.Helper()
	var out, errOut bytes.Buffer
	env := &Env{
		NewClients: func() (*Clients, error) { return &Clients{Kube: kube, MPI: mpi, Namespace: "ml"}, nil },
		Now:        func() time.Time { return now },
		Poll:       time.Millisecond,
	}
	env.Out, env.ErrOut, env.In = &out, &errOut, strings.NewReader("")
	cmd := newRootCommand(env)
	cmd.SetArgs(args)
	err := cmd.ExecuteContext(context.Background())
	return out.String() + errOut.String(), err
}

func TestGet(t *testing.T) {
	kube, mpi := fixture()
	out, err := run(t, kube, mpi, "get", "demo", "-o", "wide")
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
	if diff := cmp.Diff(want, out); diff != "" {
		t.Errorf("get -o wide (-want +got):\n%s", diff)
	}
}

func TestList(t *testing.T) {
	kube, mpi := fixture()
	out, err := run(t, kube, mpi, "list", "-o", "wide")
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
	out, err = run(t, kube, mpi, "list", "-o", "name")
	if err != nil || out != "mpijob.kubeflow.org/demo\nmpijob.kubeflow.org/fixed\n" {
		t.Errorf("list -o name = %q, %v", out, err)
	}
}

func TestSubmitCreates(t *testing.T) {
	kube, mpi := kubefake.NewClientset(), mpifake.NewSimpleClientset()
	out, err := run(t, kube, mpi, "submit", "mnist", "--image", "img", "--workers", "2", "--max-workers", "4",
		"--gpus", "1", "--cpu", "2", "--", "python", "train.py", "--epochs", "3")
	if err != nil || out != "mpijob.kubeflow.org/mnist created\n" {
		t.Fatalf("submit = %q, %v", out, err)
	}
	got, err := mpi.KubeflowV1().MPIJobs("ml").Get(context.Background(), "mnist", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want, err := BuildJob(JobRequest{Name: "mnist", Namespace: "ml", Image: "img", Workers: 2, MaxWorkers: 4, GPUs: 1, CPU: "2",
		Command: []string{"python", "train.py", "--epochs", "3"}})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("created job (-want +got):\n%s", diff)
	}
}

func TestSubmitDryRunCreatesNothing(t *testing.T) {
	kube, mpi := kubefake.NewClientset(), mpifake.NewSimpleClientset()
	out, err := run(t, kube, mpi, "submit", "mnist", "--image", "img", "--dry-run=client", "-o", "json", "--", "python")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, `"horovodrun"`) || strings.Contains(out, `"status"`) {
		t.Errorf("dry run printed %s", out)
	}
	if jobs, _ := mpi.KubeflowV1().MPIJobs("ml").List(context.Background(), metav1.ListOptions{}); len(jobs.Items) != 0 {
		t.Errorf("a dry run created %d jobs", len(jobs.Items))
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
		{[]string{"logs", "demo", "-c", "sidecar"}, `pod demo-launcher has no container "sidecar" (its containers: mpi-launcher, kubectl-delivery)`},
		{[]string{"delete", "nope"}, `mpijob "nope" not found in namespace "ml"`},
		{[]string{"submit", "x", "--image", "img", "--workers", "3", "--max-workers", "2", "--", "python"}, `--max-workers (2) is below --workers (3)`},
		{[]string{"submit", "x", "--image", "img", "--dry-run=maybe", "--", "python"}, `invalid --dry-run "maybe": must be "none", "client" or "server"`},
		{[]string{"get"}, `get takes exactly one job name, got 0 arguments; see 'kubectl mpijob get --help'`},
	}
	for _, tc := range cases {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			kube, mpi := fixture()
			_, err := run(t, kube, mpi, tc.args...)
			if err == nil || err.Error() != tc.want {
				t.Errorf("error = %v\nwant %q", err, tc.want)
			}
			// Reads only; delete's own request is how it learns the
			// job is missing.
			for _, a := range append(kube.Actions(), mpi.Actions()...) {
				v := a.GetVerb()
				if v != "get" && v != "list" && (v != "delete" || tc.args[0] != "delete") {
					t.Errorf("a refused command sent %s %s", v, a.GetResource().Resource)
				}
			}
		})
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
			kube, mpi := fixture()
			_, err := run(t, kube, mpi, args...)
			if err == nil || !strings.Contains(err.Error(), `"xml"`) {
				t.Errorf("error = %v, want the format refused", err)
			}
			if actions := append(kube.Actions(), mpi.Actions()...); len(actions) > 0 {
				t.Errorf("%d requests sent before the format was refused, the first %s %s",
					len(actions), actions[0].GetVerb(), actions[0].GetResource().Resource)
			}
		})
	}
}

func TestDelete(t *testing.T) {
	kube, mpi := fixture()
	out, err := run(t, kube, mpi, "delete", "demo")
	if err != nil || out != "mpijob.kubeflow.org \"demo\" deleted\n" {
		t.Fatalf("delete = %q, %v", out, err)
	}
	if _, err := mpi.KubeflowV1().MPIJobs("ml").Get(context.Background(), "demo", metav1.GetOptions{}); err == nil {
		t.Error("the job is still there")
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

func TestJobStatus(t *testing.T) {
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
		job := &kubeflow.MPIJob{Status: common.JobStatus{Conditions: tc.conds}}
		if got := JobStatus(job); got != tc.want {
			t.Errorf("JobStatus(%v) = %q, want %q", tc.conds, got, tc.want)
		}
	}
}

// TestGetWatch prints the job again when a worker starts running, and
// stops once the job is deleted.
func TestGetWatch(t *testing.T) {
	kube, mpi := fixture()
	ctx := context.Background()
	done := make(chan string)
	var out bytes.Buffer
	env := &Env{
		NewClients: func() (*Clients, error) { return &Clients{Kube: kube, MPI: mpi, Namespace: "ml"}, nil },
		Now:        func() time.Time { return now },
	}
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
	w1, err := kube.CoreV1().Pods("ml").Get(ctx, "demo-worker-1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	w1.Status.Phase = corev1.PodRunning
	if _, err := kube.CoreV1().Pods("ml").UpdateStatus(ctx, w1, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor("running 2, listed 1")
	if err := mpi.KubeflowV1().MPIJobs("ml").Delete(ctx, "demo", metav1.DeleteOptions{}); err != nil {
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
