package integration

import (
	"context"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/retry"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/ktesting"
	schedclient "sigs.k8s.io/scheduler-plugins/pkg/generated/clientset/versioned"

	"github.com/kubeflow/mpi-operator/test/harness"
	kubeflow "github.com/kubeflow/mpi-operator/v2/pkg/apis/kubeflow/v2beta1"
	clientset "github.com/kubeflow/mpi-operator/v2/pkg/client/clientset/versioned"
	mpiclient "github.com/kubeflow/mpi-operator/v2/pkg/client/clientset/versioned/typed/kubeflow/v2beta1"
	"github.com/kubeflow/mpi-operator/v2/pkg/controller"
)

// waitTimeout bounds every wait of the controller tests for the cluster to
// reach a state.
const waitTimeout = 60 * time.Second

// The labels the v2 controller puts on a job's pods, as upstream v0.8.0
// does.
const (
	labelOperator = "training.kubeflow.org/operator-name"
	labelJobName  = "training.kubeflow.org/job-name"
	labelJobRole  = "training.kubeflow.org/job-role"
	labelIndex    = "training.kubeflow.org/replica-index"
)

// Annotations of the elastic life cycle that the controller writes on
// worker pods.
const (
	annotationDrainingSince = "mpi-operator.kubeflow.org/draining-since"
	annotationReplacedBy    = "mpi-operator.kubeflow.org/replaced-by"
)

// jobNamespace creates a namespace for one test, deleted after it, and
// waits until pods can be created in it: the ServiceAccount admission
// refuses them until the namespace's default ServiceAccount exists.
func jobNamespace(t *testing.T) string {
	t.Helper()
	ns := suite.Namespace(t)
	harness.Eventually(t, poll, waitTimeout, "the default ServiceAccount of "+ns, func() (bool, error) {
		_, err := suite.Kube.CoreV1().ServiceAccounts(ns).Get(context.Background(), "default", metav1.GetOptions{})
		return err == nil, ignoreNotFound(err)
	})
	return ns
}

// holds checks, every 100ms for d, that ok stays true, and fails the test
// as soon as it does not.
func holds(t *testing.T, d time.Duration, what string, ok func() (bool, string)) {
	t.Helper()
	for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
		if good, why := ok(); !good {
			t.Fatalf("%s: %s", what, why)
		}
	}
}

func ignoreNotFound(err error) error {
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

// runningController is an in-process v2 controller for one namespace.
type runningController struct {
	cancel context.CancelFunc
	done   chan struct{}
	once   sync.Once
}

// startController runs the v2 controller for namespace ns, as the
// operator's binary wires it, with clients of config (the suite's when
// nil), until stop or the end of the test.
func startController(t *testing.T, ns string, config *rest.Config) *runningController {
	t.Helper()
	return runController(t, config, controller.Config{Namespace: ns})
}

// runController runs the v2 controller with cfg, and with the
// scheduler-plugins client that cfg's gang scheduler needs.
func runController(t *testing.T, config *rest.Config, cfg controller.Config) *runningController {
	t.Helper()
	if config == nil {
		config = suite.Config
	}
	kube, err := kubernetes.NewForConfig(config)
	if err != nil {
		t.Fatal(err)
	}
	meta, err := metadata.NewForConfig(config)
	if err != nil {
		t.Fatal(err)
	}
	mpi, err := clientset.NewForConfig(config)
	if err != nil {
		t.Fatal(err)
	}
	// Like the operator binary, list and watch the MPIJobs through a
	// dynamic client, one object at a time.
	if cfg.Clients.Jobs == nil {
		if cfg.Clients.Jobs, err = dynamic.NewForConfig(config); err != nil {
			t.Fatal(err)
		}
	}
	var sched schedclient.Interface
	if cfg.GangSchedulerName != "" {
		if sched, err = schedclient.NewForConfig(config); err != nil {
			t.Fatal(err)
		}
	}
	// The controller's log goes to the test's, shown when it fails.
	logger := ktesting.NewLogger(t, ktesting.NewConfig(ktesting.Verbosity(2)))
	ctx, cancel := context.WithCancel(klog.NewContext(context.Background(), logger))
	inf := controller.NewInformers(kube, meta, mpi, nil, sched, cfg)
	c := controller.NewMPIJobController(ctx, kube, mpi, nil, sched, inf, cfg)
	inf.Start(ctx.Done())
	r := &runningController{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(r.done)
		if err := c.Run(ctx, 2); err != nil {
			t.Errorf("the controller stopped: %v", err)
		}
		inf.Shutdown()
	}()
	t.Cleanup(r.stop)
	return r
}

// controllerTest starts a test of the controller: in parallel with the
// others, in a namespace of its own whose history is recorded from the
// start, with the controller running for that namespace.
func controllerTest(t *testing.T) (string, *history) {
	t.Helper()
	t.Parallel()
	ns := jobNamespace(t)
	h := recordHistory(t, ns)
	startController(t, ns, nil)
	return ns, h
}

// stop cancels the controller's context and waits until its workers and
// informers have stopped, as a replaced operator process would have.
func (r *runningController) stop() {
	r.once.Do(func() {
		r.cancel()
		<-r.done
	})
}

// jobs is the MPIJob client of namespace ns.
func jobs(ns string) mpiclient.MPIJobInterface { return suite.mpi.KubeflowV2beta1().MPIJobs(ns) }

func createJob(t *testing.T, job *kubeflow.MPIJob) *kubeflow.MPIJob {
	t.Helper()
	created, err := jobs(job.Namespace).Create(context.Background(), job, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("creating MPIJob %s: %v", job.Name, err)
	}
	return created
}

func getJob(t *testing.T, ns, name string) *kubeflow.MPIJob {
	t.Helper()
	job, err := jobs(ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("getting MPIJob %s: %v", name, err)
	}
	return job
}

// elasticJob is validJob with an elastic policy.
func elasticJob(ns, name string, workers, minReplicas, maxReplicas, drainSeconds int32) *kubeflow.MPIJob {
	job := validJob(ns, name, workers)
	job.Spec.ElasticPolicy = &kubeflow.ElasticPolicy{
		MinReplicas: int32p(minReplicas), MaxReplicas: int32p(maxReplicas), DrainSeconds: int32p(drainSeconds),
	}
	return job
}

// editJob changes the job with edit and updates it, retrying on a conflict
// with the controller's status writes as kubectl edit would; it returns
// the job as written.
func editJob(t *testing.T, ns, name string, edit func(*kubeflow.MPIJob)) *kubeflow.MPIJob {
	t.Helper()
	var written *kubeflow.MPIJob
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		job, err := jobs(ns).Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		edit(job)
		written, err = jobs(ns).Update(context.Background(), job, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Fatalf("updating MPIJob %s: %v", name, err)
	}
	return written
}

// scaleJob sets the job's workers through the scale subresource, as an
// autoscaler or kubectl scale does, and returns the resourceVersion of the
// job that the scale wrote.
func scaleJob(t *testing.T, ns, name string, replicas int32) string {
	t.Helper()
	ctx := context.Background()
	client := jobs(ns)
	var rv string
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		scale, err := client.GetScale(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		scale.Spec.Replicas = replicas
		scale, err = client.UpdateScale(ctx, name, scale, metav1.UpdateOptions{})
		if err == nil {
			rv = scale.ResourceVersion
		}
		return err
	})
	if err != nil {
		t.Fatalf("scaling %s to %d: %v", name, replicas, err)
	}
	return rv
}

// jobCondition is the job's condition of type ct, nil if it has none.
func jobCondition(job *kubeflow.MPIJob, ct kubeflow.JobConditionType) *kubeflow.JobCondition {
	for i := range job.Status.Conditions {
		if job.Status.Conditions[i].Type == ct {
			return &job.Status.Conditions[i]
		}
	}
	return nil
}

// hasCondition tells whether the job has condition ct with status s and,
// unless reason is empty, that reason.
func hasCondition(job *kubeflow.MPIJob, ct kubeflow.JobConditionType, s corev1.ConditionStatus, reason string) bool {
	c := jobCondition(job, ct)
	return c != nil && c.Status == s && (reason == "" || c.Reason == reason)
}

// waitForCondition waits until the job has condition ct True (with
// reason, unless empty), and returns the job as it then is.
func waitForCondition(t *testing.T, ns, name string, ct kubeflow.JobConditionType, reason string) *kubeflow.MPIJob {
	t.Helper()
	var job *kubeflow.MPIJob
	harness.Eventually(t, poll, waitTimeout, fmt.Sprintf("MPIJob %s to have %s=True %s", name, ct, reason), func() (bool, error) {
		var err error
		job, err = jobs(ns).Get(context.Background(), name, metav1.GetOptions{})
		return err == nil && hasCondition(job, ct, corev1.ConditionTrue, reason), err
	})
	return job
}

// conditionsOf lists a job's conditions in a line, for messages.
func conditionsOf(job *kubeflow.MPIJob) string {
	var out []string
	for _, c := range job.Status.Conditions {
		out = append(out, fmt.Sprintf("%s=%s(%s)", c.Type, c.Status, c.Reason))
	}
	return strings.Join(out, " ")
}

// workerPods returns the job's worker pods, live ones only when live, in
// name order.
func workerPods(t *testing.T, ns, job string, live bool) []corev1.Pod {
	t.Helper()
	list, err := suite.Kube.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{
		LabelSelector: labelJobName + "=" + job + "," + labelJobRole + "=worker",
	})
	if err != nil {
		t.Fatalf("listing the workers of %s: %v", job, err)
	}
	pods := slices.DeleteFunc(list.Items, func(p corev1.Pod) bool { return live && p.DeletionTimestamp != nil })
	slices.SortFunc(pods, func(a, b corev1.Pod) int { return strings.Compare(a.Name, b.Name) })
	return pods
}

// podNames are the names of pods.
func podNames(pods []corev1.Pod) []string {
	names := make([]string, len(pods))
	for i, p := range pods {
		names[i] = p.Name
	}
	return names
}

// workerNames are the names of the job's workers of the given indices, in
// name order.
func workerNames(job string, indices ...int) []string {
	names := make([]string, len(indices))
	for i, index := range indices {
		names[i] = job + "-worker-" + strconv.Itoa(index)
	}
	slices.Sort(names)
	return names
}

// workerIndex is the index in a worker's name; -1 when it has none.
func workerIndex(job, pod string) int {
	suffix, ok := strings.CutPrefix(pod, job+"-worker-")
	if !ok {
		return -1
	}
	i, err := strconv.Atoi(suffix)
	if err != nil {
		return -1
	}
	return i
}

// runningWorkers waits until the job has exactly n live workers, every one
// Running, and discover_hosts.sh lists exactly them; it returns them.
func runningWorkers(t *testing.T, ns, job string, n int) []corev1.Pod {
	t.Helper()
	var pods []corev1.Pod
	var listed []string
	harness.Eventually(t, poll, waitTimeout, fmt.Sprintf("%d Running workers of %s, all listed", n, job), func() (bool, error) {
		pods = workerPods(t, ns, job, true)
		listed = listedWorkers(t, ns, job)
		if len(pods) != n || !slices.Equal(listed, podNames(pods)) {
			return false, nil
		}
		for _, p := range pods {
			if p.Status.Phase != corev1.PodRunning {
				return false, nil
			}
		}
		return true, nil
	})
	return pods
}

// hostName is a worker's host name in the job's files.
func hostName(ns, job, pod string) string { return pod + "." + job + "." + ns + ".svc" }

// scriptHosts returns the hosts that a discover_hosts.sh prints, in order.
func scriptHosts(script string) []string {
	var hosts []string
	for _, line := range strings.Split(script, "\n") {
		if host, ok := strings.CutPrefix(line, "echo "); ok {
			hosts = append(hosts, host)
		}
	}
	return hosts
}

// scriptWorkers returns the pods that a discover_hosts.sh lists, by name:
// a host name's first label.
func scriptWorkers(script string) []string {
	hosts := scriptHosts(script)
	for i, h := range hosts {
		hosts[i], _, _ = strings.Cut(h, ".")
	}
	return hosts
}

// listedWorkers returns the workers that the job's discover_hosts.sh lists
// now; none while it has no ConfigMap.
func listedWorkers(t *testing.T, ns, job string) []string {
	t.Helper()
	cm, err := suite.Kube.CoreV1().ConfigMaps(ns).Get(context.Background(), job+"-config", metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		t.Fatalf("getting the ConfigMap of %s: %v", job, err)
	}
	return scriptWorkers(cm.Data["discover_hosts.sh"])
}

// jobEvents returns the events about the MPIJob as "Type/Reason: message".
func jobEvents(t *testing.T, ns, name string) []string {
	t.Helper()
	list, err := suite.Kube.CoreV1().Events(ns).List(context.Background(), metav1.ListOptions{
		FieldSelector: "involvedObject.kind=MPIJob,involvedObject.name=" + name,
	})
	if err != nil {
		t.Fatalf("listing the events of %s: %v", name, err)
	}
	out := make([]string, len(list.Items))
	for i, e := range list.Items {
		out[i] = e.Type + "/" + e.Reason + ": " + e.Message
	}
	return out
}

// waitForEvent waits for an event about the MPIJob of the given type and
// reason whose message holds text, and returns its message.
func waitForEvent(t *testing.T, ns, name, eventType, reason, text string) string {
	t.Helper()
	var found string
	harness.Eventually(t, poll, waitTimeout, fmt.Sprintf("a %s event %s about %s that mentions %q", eventType, reason, name, text), func() (bool, error) {
		for _, e := range jobEvents(t, ns, name) {
			if msg, ok := strings.CutPrefix(e, eventType+"/"+reason+": "); ok && strings.Contains(msg, text) {
				found = msg
				return true, nil
			}
		}
		return false, nil
	})
	return found
}

// setPodStatus replaces the status of a pod through the status subresource
// with what change makes of it, as a kubelet reports it.
func setPodStatus(t *testing.T, ns, name string, change func(*corev1.PodStatus)) {
	t.Helper()
	pods := suite.Kube.CoreV1().Pods(ns)
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		p, err := pods.Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		change(&p.Status)
		_, err = pods.UpdateStatus(context.Background(), p, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Fatalf("writing the status of pod %s: %v", name, err)
	}
}

// endContainers ends every container of a pod status as a kubelet reports
// it, with exitCode and reason, and makes the pod not Ready.
func endContainers(s *corev1.PodStatus, exitCode int32, reason string) {
	now := metav1.Now()
	for i := range s.ContainerStatuses {
		c := &s.ContainerStatuses[i]
		started := now
		if c.State.Running != nil {
			started = c.State.Running.StartedAt
		}
		c.State = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
			ExitCode: exitCode, Reason: reason, StartedAt: started, FinishedAt: now,
		}}
		c.Ready, c.Started = false, new(bool)
	}
	for i := range s.Conditions {
		if s.Conditions[i].Type == corev1.PodReady || s.Conditions[i].Type == corev1.ContainersReady {
			s.Conditions[i].Status = corev1.ConditionFalse
			s.Conditions[i].LastTransitionTime = now
		}
	}
}

// evict fails a pod as the kubelet does when it evicts it under node
// pressure: phase Failed, reason Evicted, a DisruptionTarget condition and
// containers killed.
func evict(s *corev1.PodStatus) {
	endContainers(s, 137, "Error")
	s.Phase = corev1.PodFailed
	s.Reason = "Evicted"
	s.Message = "The node was low on resource: memory."
	s.Conditions = append(s.Conditions, corev1.PodCondition{
		Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue, Reason: "TerminationByKubelet",
		Message: s.Message, LastTransitionTime: metav1.Now(),
	})
}

// objectsOf lists what namespace ns holds besides its own defaults (the
// default ServiceAccount, the root CA ConfigMap) and the MPIJobs, as
// "Kind/name", sorted: every object a controller could have made.
func objectsOf(t *testing.T, ns string) []string {
	t.Helper()
	ctx := context.Background()
	core := suite.Kube.CoreV1()
	var out []string
	add := func(kind string, names ...string) {
		for _, n := range names {
			out = append(out, kind+"/"+n)
		}
	}
	pods, err := core.Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	add("Pod", podNames(pods.Items)...)
	services, err := core.Services(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range services.Items {
		add("Service", s.Name)
	}
	cms, err := core.ConfigMaps(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cms.Items {
		if c.Name != "kube-root-ca.crt" {
			add("ConfigMap", c.Name)
		}
	}
	secrets, err := core.Secrets(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range secrets.Items {
		add("Secret", s.Name)
	}
	batchJobs, err := suite.Kube.BatchV1().Jobs(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, j := range batchJobs.Items {
		add("Job", j.Name)
	}
	slices.Sort(out)
	return out
}

// ownedBy keeps, of objectsOf's list, the objects of job: its name or
// "<job>-..." after the kind.
func ownedBy(objects []string, job string) []string {
	return slices.DeleteFunc(slices.Clone(objects), func(o string) bool {
		_, name, _ := strings.Cut(o, "/")
		return name != job && !strings.HasPrefix(name, job+"-")
	})
}

// sameLabels tells whether got holds every label of want with its value.
func sameLabels(got, want map[string]string) bool {
	sub := maps.Clone(got)
	maps.DeleteFunc(sub, func(k, _ string) bool { _, ok := want[k]; return !ok })
	return maps.Equal(sub, want)
}

// requestLog wraps the controller's client: it records the requests that
// write, and may hold the responses to pod creations back, so that a test
// can stop the controller while some of them are in flight.
type requestLog struct {
	// holdCreates is how long the response to a pod creation is held
	// back once the API server has answered it.
	holdCreates time.Duration

	mu     sync.Mutex
	writes []string // "METHOD <path below the namespace> <status>"
}

// config is the suite's client configuration, wrapped.
func (l *requestLog) config() *rest.Config {
	c := rest.CopyConfig(suite.Config)
	c.Wrap(func(next http.RoundTripper) http.RoundTripper {
		return roundTripper(func(req *http.Request) (*http.Response, error) {
			resp, err := next.RoundTrip(req)
			if req.Method == http.MethodGet {
				return resp, err
			}
			status := "error"
			if err == nil {
				status = strconv.Itoa(resp.StatusCode)
			}
			path := req.URL.Path
			if _, below, ok := strings.Cut(path, "/namespaces/"); ok {
				_, path, _ = strings.Cut(below, "/")
			}
			l.mu.Lock()
			l.writes = append(l.writes, req.Method+" "+path+" "+status)
			l.mu.Unlock()
			if l.holdCreates > 0 && req.Method == http.MethodPost && path == "pods" {
				select {
				case <-time.After(l.holdCreates):
				case <-req.Context().Done():
				}
			}
			return resp, err
		})
	})
	return c
}

// creates returns the creations recorded but the events'.
func (l *requestLog) creates() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, w := range l.writes {
		if strings.HasPrefix(w, http.MethodPost+" ") && !strings.HasPrefix(w, http.MethodPost+" events ") {
			out = append(out, w)
		}
	}
	return out
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }
