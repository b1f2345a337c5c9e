package e2e

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"

	"github.com/kubeflow/mpi-operator/test/harness"
)

// Bounds of the waits. Pods on kwok nodes run about half a second after they
// are created, so these leave a wide margin.
const (
	jobRunningTimeout = 90 * time.Second
	settleTimeout     = 30 * time.Second
	// The garbage collector learns of a new CRD only at its next discovery
	// resync (every 30 s); until then it fails, with growing backoff, to map
	// the owners of the jobs' pods. On a cluster this young that can delay
	// the first cascade by 20-40 s.
	gcTimeout         = 2 * time.Minute
	operatorStopLimit = 30 * time.Second
)

const (
	jobNamespace      = "e2e"
	operatorNamespace = "mpi-operator"
	// piJob is the example that the suite finishes and deletes.
	piJob = "pi"
)

// mpiJob is the part of a kubeflow.org/v1 MPIJob that the suite reads. It is
// declared here, from the JSON field names of the API contract, rather than
// taken from the operator's Go types: the suite checks the wire format.
type mpiJob struct {
	APIVersion string            `json:"apiVersion"`
	Kind       string            `json:"kind"`
	Metadata   metav1.ObjectMeta `json:"metadata"`
	Spec       struct {
		SlotsPerWorker *int32 `json:"slotsPerWorker"`
		ElasticPolicy  *struct {
			MinReplicas *int32 `json:"minReplicas"`
			MaxReplicas *int32 `json:"maxReplicas"`
		} `json:"elasticPolicy"`
		MPIReplicaSpecs map[string]struct {
			Replicas *int32 `json:"replicas"`
		} `json:"mpiReplicaSpecs"`
	} `json:"spec"`
	Status struct {
		Conditions []struct {
			Type    string `json:"type"`
			Status  string `json:"status"`
			Reason  string `json:"reason"`
			Message string `json:"message"`
		} `json:"conditions"`
		ReplicaStatuses map[string]struct {
			Active int32 `json:"active"`
		} `json:"replicaStatuses"`
	} `json:"status"`
}

// condition returns the status of a condition type ("" when absent).
func (j *mpiJob) condition(typ string) string {
	for _, c := range j.Status.Conditions {
		if c.Type == typ {
			return c.Status
		}
	}
	return ""
}

func (j *mpiJob) conditionsString() string {
	var parts []string
	for _, c := range j.Status.Conditions {
		parts = append(parts, fmt.Sprintf("%s=%s (%s)", c.Type, c.Status, c.Reason))
	}
	if len(parts) == 0 {
		return "no conditions"
	}
	return strings.Join(parts, ", ")
}

// example is one MPIJob found under examples/.
type example struct {
	file    string // relative to the repository root
	name    string
	workers int   // spec.mpiReplicaSpecs.Worker.replicas, defaulted to 1
	slots   int   // spec.slotsPerWorker, defaulted to 1
	max     int32 // spec.elasticPolicy.maxReplicas; 0 when unset
	// autoscaled: a HorizontalPodAutoscaler of the same file sets its
	// workers, so that the test leaves them alone.
	autoscaled bool
}

// suite carries state from one step to the next.
type suite struct {
	op       *harness.Operator
	examples []example
	// scaled holds the worker count of an example after the elastic step.
	scaled map[string]int
}

// TestE2E runs the user's path as ordered steps that share the cluster. A
// failed step ends the test, since each builds on the ones before.
func TestE2E(t *testing.T) {
	s := &suite{scaled: map[string]int{}}
	t.Cleanup(func() {
		if s.op == nil {
			return
		}
		if t.Failed() {
			t.Logf("last lines of the operator log %s:\n%s", s.op.LogPath, harness.Tail(s.op.LogPath, 60))
		}
		s.op.Terminate(10 * time.Second)
		currentOperator = nil
	})
	steps := []struct {
		name string
		run  func(*testing.T)
	}{
		{"Install", s.install},
		{"StartOperator", s.startOperator},
		{"Examples", s.createExamples},
		{"ElasticScale", s.elasticScale},
		{"FinishPi", s.finishPi},
		{"Metrics", s.checkMetrics},
		{"DeleteJob", s.deleteJob},
		{"StopOperator", s.stopOperator},
		{"CrashRestart", s.crashRestart},
	}
	for _, step := range steps {
		if !t.Run(step.name, step.run) {
			t.Fatalf("step %s failed; skipping the steps after it", step.name)
		}
	}
}

// ---------------------------------------------------------------------------
// Step 1: install the manifests as a user would.

func (s *suite) install(t *testing.T) {
	mustKubectl(t, "create", "namespace", "kubeflow")
	out := mustKubectl(t, "apply", "-k", "manifests/overlays/kubeflow")
	t.Logf("apply -k manifests/overlays/kubeflow:\n%s", out)

	// The overlay's ClusterRoles, each labelled for the Kubeflow role it
	// extends.
	for name, label := range map[string]string{
		"kubeflow-mpijobs-admin": "rbac.authorization.kubeflow.org/aggregate-to-kubeflow-admin",
		"kubeflow-mpijobs-edit":  "rbac.authorization.kubeflow.org/aggregate-to-kubeflow-edit",
		"kubeflow-mpijobs-view":  "rbac.authorization.kubeflow.org/aggregate-to-kubeflow-view",
	} {
		var role rbacv1.ClusterRole
		mustGetJSON(t, &role, "clusterrole", name)
		if role.Labels[label] != "true" {
			t.Errorf("ClusterRole %s lacks the label %s=true; labels: %v", name, label, role.Labels)
		}
	}
	// kubeflow-mpijobs-admin has no rules of its own: the aggregation
	// controller copies those of kubeflow-mpijobs-edit into it.
	harness.Eventually(t, poll, settleTimeout, "kubeflow-mpijobs-admin to aggregate the edit rules", func() (bool, string) {
		var role rbacv1.ClusterRole
		if err := getJSON([]string{"clusterrole", "kubeflow-mpijobs-admin"}, &role); err != nil {
			return false, err.Error()
		}
		for _, r := range role.Rules {
			if slices.Contains(r.APIGroups, "kubeflow.org") && slices.Contains(r.Resources, "mpijobs") &&
				slices.Contains(r.Verbs, "create") {
				return true, ""
			}
		}
		return false, fmt.Sprintf("rules: %+v", role.Rules)
	})

	// A plain client-side apply: kubectl stores the whole CRD in the
	// last-applied annotation, which fails if the CRD is too large.
	out = mustKubectl(t, "apply", "-k", "manifests/overlays/standalone")
	t.Logf("apply -k manifests/overlays/standalone:\n%s", out)
	var crd struct {
		Metadata metav1.ObjectMeta `json:"metadata"`
		Status   struct {
			Conditions []struct{ Type, Status string } `json:"conditions"`
		} `json:"status"`
	}
	harness.Eventually(t, poll, settleTimeout, "the MPIJob CRD to be Established", func() (bool, string) {
		if err := getJSON([]string{"crd", "mpijobs.kubeflow.org"}, &crd); err != nil {
			return false, err.Error()
		}
		for _, c := range crd.Status.Conditions {
			if c.Type == "Established" && c.Status == "True" {
				return true, ""
			}
		}
		return false, fmt.Sprintf("conditions: %+v", crd.Status.Conditions)
	})
	// kubectl explain reaches into the pod templates and documents the
	// MPIJob's own fields.
	harness.Eventually(t, poll, settleTimeout, "kubectl explain to know the MPIJob schema", func() (bool, string) {
		r := kubectl("explain", "mpijob.spec.mpiReplicaSpecs.Worker.template.spec.containers")
		return r.ok() && strings.Contains(r.stdout, "FIELD: containers"), r.String()
	})
	if out := mustKubectl(t, "explain", "mpijob.spec.elasticPolicy.drainSeconds"); !strings.Contains(out, "discover_hosts.sh") {
		t.Errorf("kubectl explain does not document spec.elasticPolicy.drainSeconds:\n%s", out)
	}
	if _, ok := crd.Metadata.Annotations["kubectl.kubernetes.io/last-applied-configuration"]; !ok {
		t.Errorf("the CRD has no last-applied-configuration annotation after kubectl apply")
	}

	// Both overlays pass the server's validation (the Deployment included).
	for _, overlay := range []string{"manifests/overlays/kubeflow", "manifests/overlays/standalone"} {
		out := mustKubectl(t, "apply", "--dry-run=server", "-k", overlay)
		if strings.Contains(out, "kubeflow-mpijobs-admin configured") {
			// Re-applying the overlay sets the aggregated role's rules back
			// to [] until the aggregation controller fills them in again.
			t.Logf("NOTE: re-applying %s would change kubeflow-mpijobs-admin (its rules: [] wipes the aggregated rules):\n%s", overlay, out)
		}
	}

	// The ClusterRoleBinding is cluster-scoped and shared by both overlays:
	// after the standalone overlay it binds the ServiceAccount in
	// mpi-operator, the identity the operator runs as below.
	var crb rbacv1.ClusterRoleBinding
	mustGetJSON(t, &crb, "clusterrolebinding", "mpi-operator")
	bound := false
	for _, sub := range crb.Subjects {
		bound = bound || (sub.Kind == "ServiceAccount" && sub.Name == "mpi-operator" && sub.Namespace == operatorNamespace)
	}
	if !bound || crb.RoleRef.Name != "mpi-operator" {
		t.Fatalf("ClusterRoleBinding mpi-operator does not bind ClusterRole mpi-operator to ServiceAccount %s/mpi-operator: %+v %+v",
			operatorNamespace, crb.RoleRef, crb.Subjects)
	}

	checkAccess(t)

	// The Deployment's pod is admitted and "runs" (kwok runs no code). Scale
	// both Deployments to zero: the operator under test is a local process.
	mustKubectl(t, "rollout", "status", "deployment/mpi-operator", "-n", operatorNamespace, "--timeout=60s")
	for _, ns := range []string{"kubeflow", operatorNamespace} {
		mustKubectl(t, "scale", "deployment/mpi-operator", "-n", ns, "--replicas=0")
	}
}

// ---------------------------------------------------------------------------
// Step 2: run the operator as the ServiceAccount of the manifests.

func (s *suite) startOperator(t *testing.T) {
	path := operatorKubeconfig(t, operatorNamespace)

	s.op = startOperator(t, path, filepath.Join(env.Dir, "operator.log"))
	waitLeader(t, s.op)
}

// waitLeader waits until the operator answers /healthz and leads, and
// checks that the Lease names a holder.
func waitLeader(t *testing.T, op *harness.Operator) {
	t.Helper()
	t.Logf("operator started: pid %d, monitoring on 127.0.0.1:%d, log %s", op.PID, op.Port, op.LogPath)

	harness.Eventually(t, poll, settleTimeout, "the operator to answer /healthz and lead", func() (bool, string) {
		code, body, err := op.Fetch(context.Background(), "/healthz")
		if err != nil || code != 200 || strings.TrimSpace(body) != "ok" {
			return false, fmt.Sprintf("/healthz: %d %q %v", code, body, err)
		}
		_, body, err = op.Fetch(context.Background(), "/metrics")
		if err != nil {
			return false, err.Error()
		}
		if v, ok := harness.Metric(body, "mpi_operator_is_leader"); !ok || v != 1 {
			return false, fmt.Sprintf("mpi_operator_is_leader %v (present: %v)", v, ok)
		}
		return true, ""
	})
	holder := strings.TrimSpace(mustKubectl(t, "get", "lease", "mpi-operator", "-n", operatorNamespace,
		"-o", "jsonpath={.spec.holderIdentity}"))
	if holder == "" {
		t.Errorf("the operator leads, but Lease %s/mpi-operator names no holder", operatorNamespace)
	}
}

// ---------------------------------------------------------------------------
// Step 3: create every example and check that it runs.

// findExamples lists the MPIJobs of every YAML file under examples/, as
// kubectl parses them.
func findExamples(t *testing.T) []example {
	t.Helper()
	var files []string
	err := filepath.WalkDir(filepath.Join(env.Root, "examples"), func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() || !strings.HasSuffix(path, ".yaml") && !strings.HasSuffix(path, ".yml") {
			return nil
		}
		// Files of other objects only (Kueue's queues, RBAC of other
		// namespaces) are not this cluster's to create.
		if ok, err := holdsV1MPIJob(path); err != nil || !ok {
			return err
		}
		rel, err := filepath.Rel(env.Root, path)
		if err != nil {
			return err
		}
		files = append(files, rel)
		return nil
	})
	if err != nil {
		t.Fatalf("walking examples/: %v", err)
	}
	var found []example
	for _, file := range files {
		out := mustKubectl(t, "create", "--dry-run=client", "-o", "json", "-n", jobNamespace, "-f", file)
		items := printedObjects(t, file, out)
		autoscaled := autoscaledJobs(t, file, items)
		for _, item := range items {
			var job mpiJob
			if err := json.Unmarshal(item, &job); err != nil {
				t.Fatalf("decoding an object of %s: %v", file, err)
			}
			if job.Kind != "MPIJob" || job.APIVersion != "kubeflow.org/v1" {
				continue
			}
			ex := example{file: file, name: job.Metadata.Name, workers: 1, slots: 1, autoscaled: autoscaled[job.Metadata.Name]}
			if w, ok := job.Spec.MPIReplicaSpecs["Worker"]; ok && w.Replicas != nil {
				ex.workers = int(*w.Replicas)
			}
			if job.Spec.SlotsPerWorker != nil {
				ex.slots = int(*job.Spec.SlotsPerWorker)
			}
			if ep := job.Spec.ElasticPolicy; ep != nil && ep.MaxReplicas != nil {
				ex.max = *ep.MaxReplicas
			}
			found = append(found, ex)
		}
	}
	if len(found) == 0 {
		t.Fatalf("no kubeflow.org/v1 MPIJob in the YAML files under examples/: %v", files)
	}
	return found
}

// printedObjects are the objects that kubectl printed as JSON for a file:
// a List's items, or the objects one after the other.
func printedObjects(t *testing.T, file, out string) []json.RawMessage {
	t.Helper()
	var items []json.RawMessage
	dec := json.NewDecoder(strings.NewReader(out))
	for {
		var obj json.RawMessage
		if err := dec.Decode(&obj); errors.Is(err, io.EOF) {
			return items
		} else if err != nil {
			t.Fatalf("decoding the objects of %s: %v", file, err)
		}
		var list struct {
			Kind  string            `json:"kind"`
			Items []json.RawMessage `json:"items"`
		}
		if err := json.Unmarshal(obj, &list); err != nil {
			t.Fatalf("decoding an object of %s: %v", file, err)
		}
		if list.Kind == "List" {
			items = append(items, list.Items...)
		} else {
			items = append(items, obj)
		}
	}
}

// holdsV1MPIJob tells whether one of a YAML file's documents is a
// kubeflow.org/v1 MPIJob.
func holdsV1MPIJob(path string) (bool, error) {
	f, err := os.Open(path)
	if err != nil {
		return false, err
	}
	defer f.Close()
	dec := utilyaml.NewYAMLOrJSONDecoder(f, 4096)
	for {
		var meta metav1.TypeMeta
		if err := dec.Decode(&meta); errors.Is(err, io.EOF) {
			return false, nil
		} else if err != nil {
			return false, fmt.Errorf("%s: %w", path, err)
		}
		if meta.Kind == "MPIJob" && meta.APIVersion == "kubeflow.org/v1" {
			return true, nil
		}
	}
}

// autoscaledJobs names the MPIJobs that the HorizontalPodAutoscalers among
// a file's objects scale.
func autoscaledJobs(t *testing.T, file string, items []json.RawMessage) map[string]bool {
	t.Helper()
	names := map[string]bool{}
	for _, item := range items {
		var hpa struct {
			Kind string `json:"kind"`
			Spec struct {
				ScaleTargetRef struct {
					Kind string `json:"kind"`
					Name string `json:"name"`
				} `json:"scaleTargetRef"`
			} `json:"spec"`
		}
		if err := json.Unmarshal(item, &hpa); err != nil {
			t.Fatalf("decoding an object of %s: %v", file, err)
		}
		if hpa.Kind == "HorizontalPodAutoscaler" && hpa.Spec.ScaleTargetRef.Kind == "MPIJob" {
			names[hpa.Spec.ScaleTargetRef.Name] = true
		}
	}
	return names
}

func (s *suite) createExamples(t *testing.T) {
	mustKubectl(t, "create", "namespace", jobNamespace)
	// Pods are refused until the namespace's default ServiceAccount exists.
	harness.Eventually(t, poll, settleTimeout, "the default ServiceAccount of namespace "+jobNamespace, func() (bool, string) {
		r := kubectl("get", "serviceaccount", "default", "-n", jobNamespace, "-o", "name")
		return r.ok(), r.String()
	})

	s.examples = findExamples(t)
	files := map[string]bool{}
	for _, ex := range s.examples {
		t.Logf("example %s: MPIJob %s, %d worker(s)", ex.file, ex.name, ex.workers)
		if !files[ex.file] {
			files[ex.file] = true
			mustKubectl(t, "create", "-n", jobNamespace, "-f", ex.file)
		}
	}

	for _, ex := range s.examples {
		waitJobRunning(t, ex.name)
		if pods := waitWorkers(t, ex.name, ex.workers); len(pods) != ex.workers {
			t.Errorf("MPIJob %s has %d worker pods, want %d: %s", ex.name, len(pods), ex.workers, describePods(pods))
		}
		var pods corev1.PodList
		mustGetJSON(t, &pods, "pods", "-n", jobNamespace, "-l", "mpi-job-name="+ex.name+",mpi-job-role=launcher")
		if len(pods.Items) != 1 {
			t.Errorf("MPIJob %s: %d launcher pods, want 1", ex.name, len(pods.Items))
		}
	}

	want := map[string]int{}
	for _, ex := range s.examples {
		want[ex.name] = ex.workers
	}
	waitTable(t, want, "Running")

	// The CRD's short names.
	for _, short := range []string{"mj", "mpij"} {
		out := mustKubectl(t, "get", short, "-n", jobNamespace, "-o", "name")
		if n := len(strings.Fields(out)); n != len(s.examples) {
			t.Errorf("kubectl get %s lists %d jobs, want %d:\n%s", short, n, len(s.examples), out)
		}
	}
}

// waitJobRunning waits until the job's Running condition is True.
func waitJobRunning(t *testing.T, name string) {
	t.Helper()
	harness.Eventually(t, poll, jobRunningTimeout, "MPIJob "+name+" to be Running", func() (bool, string) {
		var job mpiJob
		if err := getJSON([]string{"mpijob", name, "-n", jobNamespace}, &job); err != nil {
			return false, err.Error()
		}
		return job.condition("Running") == "True", job.conditionsString()
	})
}

// workerPods lists the worker pods of a job, ordered by name.
func workerPods(name string) ([]corev1.Pod, error) {
	var pods corev1.PodList
	if err := getJSON([]string{"pods", "-n", jobNamespace, "-l", "mpi-job-name=" + name + ",mpi-job-role=worker"}, &pods); err != nil {
		return nil, err
	}
	sort.Slice(pods.Items, func(i, j int) bool { return pods.Items[i].Name < pods.Items[j].Name })
	return pods.Items, nil
}

func describePods(pods []corev1.Pod) string {
	var parts []string
	for _, p := range pods {
		s := fmt.Sprintf("%s=%s", p.Name, p.Status.Phase)
		if p.DeletionTimestamp != nil {
			s += "(deleting)"
		}
		parts = append(parts, s)
	}
	if len(parts) == 0 {
		return "no pods"
	}
	return strings.Join(parts, " ")
}

// waitWorkers waits until the job has at least n worker pods Running (and
// not being deleted), and returns all its worker pods. Callers check the
// exact count: a wait for exactly n would stall on an extra worker, which an
// operator deletes only after draining it.
func waitWorkers(t *testing.T, name string, n int) []corev1.Pod {
	t.Helper()
	var pods []corev1.Pod
	harness.Eventually(t, poll, settleTimeout, fmt.Sprintf("MPIJob %s to have %d Running workers", name, n), func() (bool, string) {
		var err error
		if pods, err = workerPods(name); err != nil {
			return false, err.Error()
		}
		running := 0
		for _, p := range pods {
			if p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil {
				running++
			}
		}
		return running >= n, describePods(pods)
	})
	return pods
}

// waitTable waits until `kubectl get mpijob -n e2e` shows the columns NAME,
// STATE, DESIRED, RUNNING, AGE, and for each job in want the given state
// with DESIRED and RUNNING equal to its worker count.
func waitTable(t *testing.T, want map[string]int, state string) {
	t.Helper()
	wantHeader := []string{"NAME", "STATE", "DESIRED", "RUNNING", "AGE"}
	harness.Eventually(t, poll, settleTimeout, "kubectl get mpijob to show every job "+state, func() (bool, string) {
		r := kubectl("get", "mpijob", "-n", jobNamespace)
		if !r.ok() {
			return false, r.String()
		}
		tb, err := parseTable(r.stdout)
		if err != nil {
			return false, fmt.Sprintf("%v:\n%s", err, r.stdout)
		}
		if !slices.Equal(tb.header, wantHeader) {
			t.Fatalf("kubectl get mpijob prints the columns %v, want %v:\n%s", tb.header, wantHeader, r.stdout)
		}
		for name, n := range want {
			row := tb.row(name)
			if row == nil || row["STATE"] != state || row["DESIRED"] != strconv.Itoa(n) ||
				row["RUNNING"] != strconv.Itoa(n) || row["AGE"] == "" {
				return false, fmt.Sprintf("want %s %s DESIRED=%d RUNNING=%d, got:\n%s", name, state, n, n, r.stdout)
			}
		}
		return true, ""
	})
}

// ---------------------------------------------------------------------------
// Step 4: resize the elastic example with kubectl scale.

func (s *suite) elasticScale(t *testing.T) {
	var ex *example
	for i := range s.examples {
		if s.examples[i].max > 0 && !s.examples[i].autoscaled {
			ex = &s.examples[i]
			break
		}
	}
	if ex == nil {
		t.Fatal("no example MPIJob without an autoscaler has spec.elasticPolicy.maxReplicas")
	}
	target := ex.workers + 1
	if int32(target) > ex.max {
		t.Fatalf("example %s: cannot scale up from %d workers, maxReplicas is %d", ex.name, ex.workers, ex.max)
	}
	before, err := workerPods(ex.name)
	if err != nil {
		t.Fatal(err)
	}
	old := map[string]bool{}
	for _, p := range before {
		old[p.Name] = true
	}

	mustKubectl(t, "scale", "mpijob/"+ex.name, "-n", jobNamespace, fmt.Sprintf("--replicas=%d", target))
	pods := waitWorkers(t, ex.name, target)
	var added []string
	for _, p := range pods {
		if !old[p.Name] {
			added = append(added, p.Name)
		}
	}
	if len(added) == 0 {
		t.Fatalf("after scaling %s from %d to %d workers, no new worker pod: %s", ex.name, ex.workers, target, describePods(pods))
	}
	overCreated := len(pods) != target
	if overCreated {
		t.Errorf("MPIJob %s was scaled from %d to %d workers, but has %d worker pods: %s",
			ex.name, ex.workers, target, len(pods), describePods(pods))
	}
	// The workers wanted are those with the lowest indices.
	sort.Slice(pods, func(i, j int) bool { return workerIndex(pods[i].Name) < workerIndex(pods[j].Name) })
	pods = pods[:target]
	newWorker := pods[target-1].Name
	if old[newWorker] {
		t.Fatalf("after scaling %s up to %d workers, the worker with the highest index %s is an old one: %s", ex.name, target, newWorker, describePods(pods))
	}

	// discover_hosts.sh lists the Running workers, in the order of their
	// index, with the job's slots.
	wantHosts := make([]string, 0, len(pods))
	for _, p := range pods {
		wantHosts = append(wantHosts, fmt.Sprintf("%s:%d", p.Name, ex.slots))
	}
	cm := ex.name + "-config"
	harness.Eventually(t, poll, settleTimeout, fmt.Sprintf("ConfigMap %s to list %d hosts in discover_hosts.sh", cm, target), func() (bool, string) {
		r := kubectl("get", "configmap", cm, "-n", jobNamespace, "-o", `jsonpath={.data.discover_hosts\.sh}`)
		if !r.ok() {
			return false, r.String()
		}
		hosts := discoveredHosts(r.stdout)
		return slices.Equal(hosts, wantHosts), fmt.Sprintf("want hosts %v, discover_hosts.sh is:\n%s", wantHosts, r.stdout)
	})

	// The launcher may exec into the new worker, and into no other pod.
	// kubectl v1.35 asks about one pod's subresource as
	// `pods/NAME --subresource=exec`; `pods/exec/NAME` would ask about the
	// pod named "exec/NAME" of resource pods, without a subresource.
	launcherSA := fmt.Sprintf("system:serviceaccount:%s:%s-launcher", jobNamespace, ex.name)
	canExec := func(pod string) *result {
		return kubectl("auth", "can-i", "create", "pods/"+pod, "--subresource=exec", "--as="+launcherSA, "-n", jobNamespace)
	}
	harness.Eventually(t, poll, settleTimeout, "the launcher to be allowed to exec into "+newWorker, func() (bool, string) {
		r := canExec(newWorker)
		return r.ok() && strings.TrimSpace(r.stdout) == "yes", r.String()
	})
	if r := canExec(ex.name + "-launcher"); strings.TrimSpace(r.stdout) != "no" {
		t.Errorf("the launcher's ServiceAccount may exec into the launcher pod itself, want no\n%s", r)
	}
	// No worker beyond the requested count was created along the way. A
	// correct operator never creates one, so this needs no wait; an extra
	// worker would be drained and deleted only drainSeconds later.
	now, err := workerPods(ex.name)
	if err != nil {
		t.Fatal(err)
	}
	if len(now) != target && !overCreated {
		t.Errorf("MPIJob %s was scaled from %d to %d workers, but has %d worker pods: %s",
			ex.name, ex.workers, target, len(now), describePods(now))
	}
	waitTable(t, map[string]int{ex.name: target}, "Running")

	// Beyond maxReplicas the API server refuses the change.
	over := int(ex.max) + 1
	r := kubectl("scale", "mpijob/"+ex.name, "-n", jobNamespace, fmt.Sprintf("--replicas=%d", over))
	if r.ok() {
		t.Errorf("kubectl scale to %d workers succeeded, but maxReplicas is %d\n%s", over, ex.max, r)
	} else if !strings.Contains(r.output(), "maxReplicas") {
		t.Errorf("kubectl scale to %d workers failed without naming maxReplicas\n%s", over, r)
	}
	replicas := strings.TrimSpace(mustKubectl(t, "get", "mpijob", ex.name, "-n", jobNamespace,
		"-o", "jsonpath={.spec.mpiReplicaSpecs.Worker.replicas}"))
	if replicas != strconv.Itoa(target) {
		t.Errorf("after the refused scale, Worker.replicas is %s, want %d", replicas, target)
	}

	s.scaled[ex.name] = target
}

// discoveredHosts returns the host:slots entries that discover_hosts.sh
// prints (its `echo host:slots` lines).
func discoveredHosts(script string) []string {
	var hosts []string
	for _, line := range strings.Split(script, "\n") {
		if h, ok := strings.CutPrefix(strings.TrimSpace(line), "echo "); ok {
			hosts = append(hosts, strings.Trim(strings.TrimSpace(h), `"'`))
		}
	}
	return hosts
}

// workerIndex is the number at the end of a worker's name (before any
// ":slots"), or -1.
func workerIndex(host string) int {
	name, _, _ := strings.Cut(host, ":")
	i := strings.LastIndex(name, "-")
	n, err := strconv.Atoi(name[i+1:])
	if err != nil {
		return -1
	}
	return n
}

// ---------------------------------------------------------------------------
// Step 5: the pi launcher exits 0 and the job succeeds.

func (s *suite) finishPi(t *testing.T) {
	if !slices.ContainsFunc(s.examples, func(e example) bool { return e.name == piJob }) {
		t.Fatalf("examples/ has no MPIJob %q", piJob)
	}
	var pods corev1.PodList
	mustGetJSON(t, &pods, "pods", "-n", jobNamespace, "-l", "mpi-job-name="+piJob+",mpi-job-role=launcher")
	if len(pods.Items) != 1 {
		t.Fatalf("MPIJob %s has %d launcher pods, want 1: %s", piJob, len(pods.Items), describePods(pods.Items))
	}
	launcher := pods.Items[0]

	// What the kubelet would report after mpirun exits 0.
	var statuses []map[string]any
	for _, c := range launcher.Spec.Containers {
		statuses = append(statuses, map[string]any{
			"name": c.Name, "image": c.Image, "imageID": "", "ready": false, "restartCount": 0,
			"state": map[string]any{"terminated": map[string]any{"exitCode": 0, "reason": "Completed"}},
		})
	}
	patch, err := json.Marshal(map[string]any{"status": map[string]any{
		"phase": "Succeeded", "containerStatuses": statuses,
	}})
	if err != nil {
		t.Fatal(err)
	}
	mustKubectl(t, "patch", "pod", launcher.Name, "-n", jobNamespace, "--subresource=status", "--type=merge", "-p", string(patch))

	harness.Eventually(t, poll, settleTimeout, "MPIJob "+piJob+" to succeed", func() (bool, string) {
		var job mpiJob
		if err := getJSON([]string{"mpijob", piJob, "-n", jobNamespace}, &job); err != nil {
			return false, err.Error()
		}
		return job.condition("Succeeded") == "True" && job.condition("Running") == "False", job.conditionsString()
	})

	r := kubectl("get", "mpijob", piJob, "-n", jobNamespace)
	tb, err := parseTable(r.stdout)
	if !r.ok() || err != nil {
		t.Fatalf("kubectl get mpijob %s (%v)\n%s", piJob, err, r)
	}
	if row := tb.row(piJob); row == nil || row["STATE"] != "Succeeded" {
		t.Errorf("kubectl get mpijob %s shows STATE %q, want Succeeded:\n%s", piJob, row["STATE"], r.stdout)
	}

	wantReasons := []string{"MPIJobCreated", "MPIJobRunning", "MPIJobSucceeded"}
	var events corev1.EventList
	harness.Eventually(t, poll, settleTimeout, "the events of MPIJob "+piJob, func() (bool, string) {
		if err := getJSON([]string{"events", "-n", jobNamespace, "--field-selector", "involvedObject.name=" + piJob}, &events); err != nil {
			return false, err.Error()
		}
		for _, want := range wantReasons {
			if !slices.ContainsFunc(events.Items, func(e corev1.Event) bool {
				return e.Reason == want && e.InvolvedObject.Kind == "MPIJob"
			}) {
				return false, describeEvents(events.Items)
			}
		}
		return true, ""
	})
	for _, e := range events.Items {
		if slices.Contains(wantReasons, e.Reason) && e.Count > 1 {
			t.Errorf("event %s of MPIJob %s was emitted %d times, want once (events: %s)",
				e.Reason, piJob, e.Count, describeEvents(events.Items))
		}
	}
}

func describeEvents(events []corev1.Event) string {
	var parts []string
	for _, e := range events {
		parts = append(parts, fmt.Sprintf("%s/%s x%d %q", e.InvolvedObject.Kind, e.Reason, e.Count, e.Message))
	}
	if len(parts) == 0 {
		return "no events"
	}
	return strings.Join(parts, "; ")
}

// ---------------------------------------------------------------------------
// Step 6: the monitoring endpoint.

func (s *suite) checkMetrics(t *testing.T) {
	code, body, err := s.op.Fetch(context.Background(), "/healthz")
	if err != nil || code != 200 || strings.TrimSpace(body) != "ok" {
		t.Errorf("/healthz answered %d %q (%v), want 200 ok", code, body, err)
	}
	code, body, err = s.op.Fetch(context.Background(), "/metrics")
	if err != nil || code != 200 {
		t.Fatalf("/metrics answered %d (%v)", code, err)
	}
	check := func(name string, want float64) bool {
		v, ok := harness.Metric(body, name)
		if !ok {
			t.Errorf("/metrics has no sample %s", name)
			return true
		}
		return v == want
	}
	if !check("mpi_operator_jobs_created_total", float64(len(s.examples))) {
		v, _ := harness.Metric(body, "mpi_operator_jobs_created_total")
		if v > float64(len(s.examples)) {
			// Counted again when the status write that recorded the
			// Created condition lost a conflict and the sync was retried.
			t.Errorf("mpi_operator_jobs_created_total is %v, want %d (the number of examples)", v, len(s.examples))
		} else {
			t.Errorf("mpi_operator_jobs_created_total is %v, want %d (the number of examples)", v, len(s.examples))
		}
	}
	if !check("mpi_operator_is_leader", 1) {
		t.Errorf("mpi_operator_is_leader is not 1")
	}
	if !check("mpi_operator_jobs_failed_total", 0) {
		v, _ := harness.Metric(body, "mpi_operator_jobs_failed_total")
		t.Errorf("mpi_operator_jobs_failed_total is %v, want 0", v)
	}
	if !check("mpi_operator_jobs_successful_total", 1) {
		v, _ := harness.Metric(body, "mpi_operator_jobs_successful_total")
		t.Errorf("mpi_operator_jobs_successful_total is %v after one job (%s) succeeded, want 1", v, piJob)
	}
	want := fmt.Sprintf(`mpi_operator_job_info{launcher="%s-launcher",namespace="%s"} 1`, piJob, jobNamespace)
	if !strings.Contains(body, want) {
		t.Errorf("/metrics lacks %s", want)
	}
}

// ---------------------------------------------------------------------------
// Step 8 (before 7, while the operator runs): delete a job; the garbage
// collector removes what the operator made for it.

func (s *suite) deleteJob(t *testing.T) {
	r := kubectlWith(gcTimeout+10*time.Second, "delete", "mpijob", piJob, "-n", jobNamespace, fmt.Sprintf("--timeout=%s", gcTimeout))
	if !r.ok() {
		t.Fatalf("kubectl delete failed\n%s", r)
	}
	children := []string{"configmap/" + piJob + "-config", "serviceaccount/" + piJob + "-launcher",
		"role/" + piJob + "-launcher", "rolebinding/" + piJob + "-launcher"}
	harness.Eventually(t, poll, gcTimeout, "the pods and ConfigMap of MPIJob "+piJob+" to be gone", func() (bool, string) {
		pods := kubectl("get", "pods", "-n", jobNamespace, "-l", "mpi-job-name="+piJob, "-o", "name")
		left := kubectl(append([]string{"get", "-n", jobNamespace, "--ignore-not-found", "-o", "name"}, children...)...)
		if !pods.ok() || !left.ok() {
			return false, pods.String() + "\n" + left.String()
		}
		rest := strings.TrimSpace(strings.TrimSpace(pods.stdout) + "\n" + strings.TrimSpace(left.stdout))
		return rest == "", "still there:\n" + rest
	})
	// The other jobs keep their workers.
	for _, ex := range s.examples {
		if ex.name == piJob {
			continue
		}
		n := ex.workers
		if m, ok := s.scaled[ex.name]; ok {
			n = m
		}
		if pods, err := workerPods(ex.name); err != nil || len(pods) != n {
			t.Errorf("after deleting %s, MPIJob %s has worker pods %s (%v), want %d", piJob, ex.name, describePods(pods), err, n)
		}
	}
}

// ---------------------------------------------------------------------------
// Step 7: a graceful stop releases the Lease.

func (s *suite) stopOperator(t *testing.T) {
	code, took := s.op.Terminate(operatorStopLimit)
	currentOperator = nil
	if code == -1 {
		t.Fatalf("the operator did not exit within %s of SIGTERM; killed it", operatorStopLimit)
	}
	t.Logf("the operator exited with code %d %s after SIGTERM", code, took.Round(time.Millisecond))
	if code != 0 {
		t.Errorf("the operator exited with code %d after SIGTERM, want 0", code)
	}

	var lease coordinationv1.Lease
	mustGetJSON(t, &lease, "lease", "mpi-operator", "-n", operatorNamespace)
	if h := lease.Spec.HolderIdentity; h != nil && *h != "" {
		t.Errorf("Lease %s/mpi-operator still names holder %q after a graceful stop", operatorNamespace, *h)
	}

	// Least privilege held up: the API server refused the operator nothing,
	// and nothing panicked.
	if lines := logLines(s.op, "forbidden", "panic"); len(lines) > 0 {
		t.Errorf("the operator log %s shows refusals or panics:\n%s", s.op.LogPath, strings.Join(lines, "\n"))
	}
	// Nor did any of its requests fail: every step is one a healthy
	// cluster serves.
	if lines := errorLines(s.op); len(lines) > 0 {
		t.Errorf("the operator log %s shows errors:\n%s", s.op.LogPath, strings.Join(lines, "\n"))
	}
}

// operatorKubeconfig writes a kubeconfig for the mpi-operator
// ServiceAccount of namespace, which the manifests bind to the operator's
// ClusterRole, and returns its path.
func operatorKubeconfig(t *testing.T, namespace string) string {
	t.Helper()
	token := strings.TrimSpace(mustKubectl(t, "-n", namespace, "create", "token", "mpi-operator", "--duration=2h"))
	if token == "" {
		t.Fatal("kubectl create token printed no token")
	}

	// The cluster's address and CA, from the admin kubeconfig.
	var admin struct {
		Clusters []struct {
			Cluster struct {
				Server string `json:"server"`
				CAData string `json:"certificate-authority-data"`
			} `json:"cluster"`
		} `json:"clusters"`
	}
	r := kubectl("config", "view", "--raw", "--minify", "-o", "json")
	if !r.ok() {
		t.Fatalf("reading the admin kubeconfig\n%s", r)
	}
	if err := json.Unmarshal([]byte(r.stdout), &admin); err != nil || len(admin.Clusters) != 1 {
		t.Fatalf("decoding the admin kubeconfig (%v)\n%s", err, r)
	}
	cluster := admin.Clusters[0].Cluster
	if cluster.Server == "" || cluster.CAData == "" {
		t.Fatalf("the admin kubeconfig lacks the server or the CA data: %+v", cluster)
	}
	if _, err := base64.StdEncoding.DecodeString(cluster.CAData); err != nil {
		t.Fatalf("the CA data of the admin kubeconfig is not base64: %v", err)
	}
	kubeconfig := map[string]any{
		"apiVersion": "v1",
		"kind":       "Config",
		"clusters": []any{map[string]any{"name": "e2e", "cluster": map[string]any{
			"server": cluster.Server, "certificate-authority-data": cluster.CAData,
		}}},
		"users":           []any{map[string]any{"name": "mpi-operator", "user": map[string]any{"token": token}}},
		"contexts":        []any{map[string]any{"name": "e2e", "context": map[string]any{"cluster": "e2e", "user": "mpi-operator"}}},
		"current-context": "e2e",
	}
	data, err := json.MarshalIndent(kubeconfig, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(env.Dir, "operator.kubeconfig")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	who := strings.TrimSpace(mustKubectl(t, "--kubeconfig", path, "auth", "whoami", "-o", "jsonpath={.status.userInfo.username}"))
	if want := "system:serviceaccount:" + namespace + ":mpi-operator"; who != want {
		t.Fatalf("the operator's kubeconfig authenticates as %q, want %q", who, want)
	}
	return path
}
