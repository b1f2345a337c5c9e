package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"testing"

	common "github.com/kubeflow/common/pkg/apis/common/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	kubeflow "github.com/kubeflow/mpi-operator/pkg/apis/kubeflow/v1"
	"github.com/kubeflow/mpi-operator/pkg/controller"
)

// rawJob is an MPIJob as a client can send it: plain JSON, which may hold
// what no Go type can (nulls, strings for numbers, unknown fields).
type rawJob map[string]any

// newRawJob returns newJob(ns, name, 1) as JSON.
func newRawJob(t *testing.T, ns, name string) rawJob {
	t.Helper()
	data, err := json.Marshal(newJob(ns, name, 1))
	if err != nil {
		t.Fatal(err)
	}
	var obj rawJob
	if err := json.Unmarshal(data, &obj); err != nil {
		t.Fatal(err)
	}
	obj["apiVersion"], obj["kind"] = "kubeflow.org/v1", "MPIJob"
	return obj
}

func (o rawJob) spec() map[string]any { return o["spec"].(map[string]any) }

func (o rawJob) replicaSpecs() map[string]any {
	return o.spec()["mpiReplicaSpecs"].(map[string]any)
}

func (o rawJob) replica(rt string) map[string]any { return o.replicaSpecs()[rt].(map[string]any) }

func (o rawJob) pod(rt string) map[string]any {
	return o.replica(rt)["template"].(map[string]any)["spec"].(map[string]any)
}

// containerOf returns the i-th container of the replica type's template.
func (o rawJob) containerOf(rt string, i int) map[string]any {
	return o.pod(rt)["containers"].([]any)[i].(map[string]any)
}

// addContainers appends containers of the given names to the list (such as
// "containers" or "initContainers") of the replica type's template.
func (o rawJob) addContainers(rt, list string, names ...string) {
	pod := o.pod(rt)
	cs, _ := pod[list].([]any)
	for _, n := range names {
		cs = append(cs, map[string]any{"name": n, "image": "busybox"})
	}
	pod[list] = cs
}

// post creates the job, with the given field validation when not empty.
func (o rawJob) post(t *testing.T, ns, fieldValidation string) error {
	t.Helper()
	body, err := json.Marshal(o)
	if err != nil {
		t.Fatal(err)
	}
	req := env.MPI.KubeflowV1().RESTClient().Post().Namespace(ns).Resource("mpijobs").Body(body)
	if fieldValidation != "" {
		req = req.Param("fieldValidation", fieldValidation)
	}
	return req.Do(context.Background()).Error()
}

// namesField tells whether msg names field as a whole path: "spec.x"
// followed by a colon, a space, an index or the end, not as the start of
// "spec.xy" or "spec.x.y".
func namesField(msg, field string) bool {
	return regexp.MustCompile(`(^|[\s*\[])` + regexp.QuoteMeta(field) + `($|[:\s\[])`).MatchString(msg)
}

// checkRefused checks that err is the API server's refusal of an invalid
// object and that it names field in a form a user can read: no CEL
// evaluation error in place of the rule's message.
func checkRefused(t *testing.T, what string, err error, field string) {
	t.Helper()
	switch {
	case err == nil:
		t.Errorf("%s: accepted by the API server, want a refusal naming %s", what, field)
	case !apierrors.IsInvalid(err):
		t.Errorf("%s: refused with %q (%s), want 422 Invalid", what, err, apierrors.ReasonForError(err))
	case !namesField(err.Error(), field):
		t.Errorf("%s: refused with %q, which does not name %s", what, err, field)
	case strings.Contains(err.Error(), "evaluating rule") || strings.Contains(err.Error(), "no such key"):
		t.Errorf("%s: refused with a CEL evaluation error instead of the rule's message: %q", what, err)
	}
}

// TestMalformedJobs sends malformed MPIJobs as raw JSON, the way any client
// can. The CRD's schema and CEL rules see everything the controller checks,
// so each one is refused by the API server with a message naming the
// field; the controller's own checks (validateJob) are for objects stored
// before the CRD had these rules. A good job created after them all still
// runs, and the edits that would make it invalid are refused. The
// controller runs in this process and a panic in it would end the test
// binary, so passing also shows that nothing here made it panic.
func TestMalformedJobs(t *testing.T) {
	ns := env.Namespace(t)
	startController(t, controller.Config{Namespace: ns})
	tooMany := kubeflow.MaxWorkers + 1
	long := strings.Repeat("x", 64)
	elastic := func(o rawJob, policy map[string]any) { o.spec()["elasticPolicy"] = policy }
	runPolicy := func(o rawJob, key string, value any) { o.spec()["runPolicy"] = map[string]any{key: value} }

	cases := []struct {
		name   string
		mutate func(o rawJob)
		field  string // what the API server's message names
	}{
		// The replica specs.
		{"no-launcher", func(o rawJob) { delete(o.replicaSpecs(), "Launcher") }, "spec.mpiReplicaSpecs.Launcher"},
		{"null-launcher", func(o rawJob) { o.replicaSpecs()["Launcher"] = nil }, "spec.mpiReplicaSpecs.Launcher"},
		{"two-launchers", func(o rawJob) { o.replica("Launcher")["replicas"] = 2 }, "spec.mpiReplicaSpecs.Launcher.replicas"},
		{"zero-launchers", func(o rawJob) { o.replica("Launcher")["replicas"] = 0 }, "spec.mpiReplicaSpecs.Launcher.replicas"},
		{"no-specs", func(o rawJob) { delete(o.spec(), "mpiReplicaSpecs") }, "spec.mpiReplicaSpecs"},
		{"specs-as-list", func(o rawJob) { o.spec()["mpiReplicaSpecs"] = []any{o.replica("Launcher")} }, "spec.mpiReplicaSpecs"},
		{"launcher-without-containers", func(o rawJob) {
			o.replica("Launcher")["template"] = map[string]any{"spec": map[string]any{"containers": []any{}}}
		}, "spec.mpiReplicaSpecs.Launcher.template.spec.containers"},
		{"launcher-without-template", func(o rawJob) { delete(o.replica("Launcher"), "template") },
			"spec.mpiReplicaSpecs.Launcher.template.spec.containers"},
		{"workers-without-containers", func(o rawJob) { o.pod("Worker")["containers"] = []any{} }, "spec.mpiReplicaSpecs.Worker.template.spec.containers"},
		{"worker-without-template", func(o rawJob) { delete(o.replica("Worker"), "template") },
			"spec.mpiReplicaSpecs.Worker.template.spec.containers"},
		{"bad-restart-policy", func(o rawJob) { o.replica("Worker")["restartPolicy"] = "Maybe" }, "spec.mpiReplicaSpecs.Worker.restartPolicy"},
		{"bad-launcher-restart-policy", func(o rawJob) { o.replica("Launcher")["restartPolicy"] = "Sometimes" }, "spec.mpiReplicaSpecs.Launcher.restartPolicy"},

		// The number of workers.
		{"negative-workers", func(o rawJob) { o.replica("Worker")["replicas"] = -1 }, "spec.mpiReplicaSpecs.Worker.replicas"},
		{"workers-string", func(o rawJob) { o.replica("Worker")["replicas"] = "two" }, "spec.mpiReplicaSpecs.Worker.replicas"},
		{"workers-fraction", func(o rawJob) { o.replica("Worker")["replicas"] = 1.5 }, "spec.mpiReplicaSpecs.Worker.replicas"},
		{"workers-above-max-workers", func(o rawJob) { o.replica("Worker")["replicas"] = tooMany }, "spec.mpiReplicaSpecs.Worker.replicas"},

		// The job's own scalar fields.
		{"name-too-long-for-a-label-value-" + strings.Repeat("x", 40), func(rawJob) {}, "metadata.name"},
		{"zero-slots", func(o rawJob) { o.spec()["slotsPerWorker"] = 0 }, "spec.slotsPerWorker"},
		{"negative-slots", func(o rawJob) { o.spec()["slotsPerWorker"] = -4 }, "spec.slotsPerWorker"},
		{"slots-string", func(o rawJob) { o.spec()["slotsPerWorker"] = "many" }, "spec.slotsPerWorker"},
		{"bad-clean-policy", func(o rawJob) { o.spec()["cleanPodPolicy"] = "Sometimes" }, "spec.cleanPodPolicy"},
		{"lowercase-clean-policy", func(o rawJob) { o.spec()["cleanPodPolicy"] = "all" }, "spec.cleanPodPolicy"},

		// The run policy, held to a Kubernetes Job's rules.
		{"run-policy-clean-policy", func(o rawJob) { runPolicy(o, "cleanPodPolicy", "Sometimes") }, "spec.runPolicy.cleanPodPolicy"},
		{"negative-backoff-limit", func(o rawJob) { runPolicy(o, "backoffLimit", -1) }, "spec.runPolicy.backoffLimit"},
		{"zero-active-deadline", func(o rawJob) { runPolicy(o, "activeDeadlineSeconds", 0) }, "spec.runPolicy.activeDeadlineSeconds"},
		{"negative-active-deadline", func(o rawJob) { runPolicy(o, "activeDeadlineSeconds", -30) }, "spec.runPolicy.activeDeadlineSeconds"},
		{"negative-ttl", func(o rawJob) { runPolicy(o, "ttlSecondsAfterFinished", -1) }, "spec.runPolicy.ttlSecondsAfterFinished"},
		{"run-policy-string", func(o rawJob) { o.spec()["runPolicy"] = "strict" }, "spec.runPolicy"},

		// Container names, which pods require to be DNS labels.
		{"worker-container-capitals", func(o rawJob) { o.containerOf("Worker", 0)["name"] = "Worker" },
			"spec.mpiReplicaSpecs.Worker.template.spec.containers[0].name"},
		{"launcher-container-underscore", func(o rawJob) { o.containerOf("Launcher", 0)["name"] = "mpi_launcher" },
			"spec.mpiReplicaSpecs.Launcher.template.spec.containers[0].name"},
		{"worker-container-name-too-long", func(o rawJob) { o.addContainers("Worker", "containers", long) },
			"spec.mpiReplicaSpecs.Worker.template.spec.containers[1].name"},
		{"launcher-init-container-capitals", func(o rawJob) { o.addContainers("Launcher", "initContainers", "Init") },
			"spec.mpiReplicaSpecs.Launcher.template.spec.initContainers[0].name"},
		{"worker-init-container-dots", func(o rawJob) { o.addContainers("Worker", "initContainers", "ok", "init.db") },
			"spec.mpiReplicaSpecs.Worker.template.spec.initContainers[1].name"},
		{"duplicate-worker-containers", func(o rawJob) { o.addContainers("Worker", "containers", "worker") },
			"spec.mpiReplicaSpecs.Worker.template.spec.containers[1]"},

		// The workers' account: never another job's launcher account, whose
		// Role may exec into that job's workers.
		{"worker-as-another-launcher", func(o rawJob) { o.pod("Worker")["serviceAccountName"] = "victim-launcher" },
			"spec.mpiReplicaSpecs.Worker.template.spec.serviceAccountName"},
		{"worker-deprecated-account-of-another-launcher", func(o rawJob) { o.pod("Worker")["serviceAccount"] = "victim-launcher" },
			"spec.mpiReplicaSpecs.Worker.template.spec.serviceAccountName"},

		// mainContainer, which kubectl exec enters in each worker.
		{"main-container-unknown", func(o rawJob) { o.spec()["mainContainer"] = "trainer" }, "spec.mainContainer"},
		{"main-container-of-the-launcher", func(o rawJob) { o.spec()["mainContainer"] = "launcher" }, "spec.mainContainer"},
		{"main-container-not-a-label", func(o rawJob) { o.spec()["mainContainer"] = "Worker" }, "spec.mainContainer"},
		{"main-container-too-long", func(o rawJob) {
			o.addContainers("Worker", "containers", long[:63])
			o.spec()["mainContainer"] = long
		}, "spec.mainContainer"},

		// Elastic jobs: their workers and bounds.
		{"elastic-null-worker", func(o rawJob) {
			elastic(o, map[string]any{"maxReplicas": 4})
			o.replicaSpecs()["Worker"] = nil
		}, "spec.mpiReplicaSpecs.Worker"},
		{"elastic-no-worker", func(o rawJob) {
			elastic(o, map[string]any{})
			delete(o.replicaSpecs(), "Worker")
		}, "spec.mpiReplicaSpecs.Worker"},
		{"elastic-replicas-unset-below-min", func(o rawJob) {
			elastic(o, map[string]any{"minReplicas": 2})
			delete(o.replica("Worker"), "replicas")
		}, "spec.mpiReplicaSpecs.Worker.replicas"},
		{"elastic-replicas-null-below-min", func(o rawJob) {
			elastic(o, map[string]any{"minReplicas": 3})
			o.replica("Worker")["replicas"] = nil
		}, "spec.mpiReplicaSpecs.Worker.replicas"},
		{"elastic-zero-workers", func(o rawJob) {
			elastic(o, map[string]any{})
			o.replica("Worker")["replicas"] = 0
		}, "spec.mpiReplicaSpecs.Worker.replicas"},
		{"elastic-above-max", func(o rawJob) {
			elastic(o, map[string]any{"maxReplicas": 4})
			o.replica("Worker")["replicas"] = 5
		}, "spec.mpiReplicaSpecs.Worker.replicas"},
		{"min-above-max", func(o rawJob) { elastic(o, map[string]any{"minReplicas": 3, "maxReplicas": 2}) }, "spec.elasticPolicy.minReplicas"},
		{"min-zero", func(o rawJob) { elastic(o, map[string]any{"minReplicas": 0}) }, "spec.elasticPolicy.minReplicas"},
		{"max-above-max-workers", func(o rawJob) { elastic(o, map[string]any{"maxReplicas": tooMany}) }, "spec.elasticPolicy.maxReplicas"},
		{"min-above-max-workers", func(o rawJob) {
			elastic(o, map[string]any{"minReplicas": tooMany})
			o.replica("Worker")["replicas"] = tooMany
		}, "spec.elasticPolicy.minReplicas"},
		{"drain-negative", func(o rawJob) { elastic(o, map[string]any{"drainSeconds": -5}) }, "spec.elasticPolicy.drainSeconds"},
		{"drain-above-an-hour", func(o rawJob) { elastic(o, map[string]any{"drainSeconds": 3601}) }, "spec.elasticPolicy.drainSeconds"},
		{"min-timeout-zero", func(o rawJob) { elastic(o, map[string]any{"minReplicasTimeoutSeconds": 0}) }, "spec.elasticPolicy.minReplicasTimeoutSeconds"},
		{"elastic-policy-bool", func(o rawJob) { o.spec()["elasticPolicy"] = true }, "spec.elasticPolicy"},
	}
	if len(cases) < 40 {
		t.Fatalf("only %d malformed jobs", len(cases))
	}
	for _, tc := range cases {
		obj := newRawJob(t, ns, tc.name)
		tc.mutate(obj)
		err := obj.post(t, ns, "")
		t.Logf("%s: %v", tc.name, err)
		checkRefused(t, tc.name, err, tc.field)
	}

	// An unknown replica type, or a typo inside a pod template, is an
	// unknown field: refused, by name, under strict field validation, as
	// kubectl asks for by default.
	unknown := newRawJob(t, ns, "unknown-replica-type")
	unknown.replicaSpecs()["Master"] = unknown.replica("Worker")
	err := unknown.post(t, ns, "Strict")
	if err == nil || !strings.Contains(err.Error(), "spec.mpiReplicaSpecs.Master") {
		t.Errorf("unknown replica type: error %v, want one naming spec.mpiReplicaSpecs.Master", err)
	}
	typo := newRawJob(t, ns, "typo")
	typo.containerOf("Worker", 0)["imagePullPolice"] = "Always"
	err = typo.post(t, ns, "Strict")
	if err == nil || !strings.Contains(err.Error(), "imagePullPolice") {
		t.Errorf("typo in a pod template: error %v, want one naming imagePullPolice", err)
	}

	// Nothing malformed was stored.
	jobs, err := env.MPI.KubeflowV1().MPIJobs(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(jobs.Items) != 0 {
		t.Errorf("%d malformed jobs were stored, the first %s", len(jobs.Items), jobs.Items[0].Name)
	}

	// The controller still serves good jobs; its workers may run as an
	// account of the user's, or as its own launcher's.
	good := newJob(ns, "good", 1)
	good.Spec.MainContainer = "worker"
	good.Spec.MPIReplicaSpecs[kubeflow.MPIReplicaTypeWorker].Template.Spec.ServiceAccountName = "good-launcher"
	createJob(t, good)
	waitForHosts(t, ns, "good", "good-worker-0:1")
	waitForRunning(t, ns, "good-launcher")
	waitForCondition(t, ns, "good", common.JobRunning, "MPIJobRunning")

	// Edits of the running job that would make it invalid are refused. They
	// are JSON merge patches, which kubectl edit sends for a custom
	// resource: without a resourceVersion, so the controller's status writes
	// cannot make them conflict.
	edits := []struct {
		name  string
		patch string
		field string
	}{
		{"unknown mainContainer", `{"spec":{"mainContainer":"trainer"}}`, "spec.mainContainer"},
		{"worker container renamed away from mainContainer",
			`{"spec":{"mpiReplicaSpecs":{"Worker":{"template":{"spec":{"containers":[{"name":"trainer","image":"mpi"}]}}}}}}`,
			"spec.mainContainer"},
		{"more than MaxWorkers workers", fmt.Sprintf(`{"spec":{"mpiReplicaSpecs":{"Worker":{"replicas":%d}}}}`, tooMany),
			"spec.mpiReplicaSpecs.Worker.replicas"},
		{"negative backoffLimit", `{"spec":{"runPolicy":{"backoffLimit":-1}}}`, "spec.runPolicy.backoffLimit"},
	}
	for _, e := range edits {
		_, err := env.MPI.KubeflowV1().MPIJobs(ns).Patch(context.Background(), "good", types.MergePatchType,
			[]byte(e.patch), metav1.PatchOptions{})
		t.Logf("edit, %s: %v", e.name, err)
		checkRefused(t, "edit: "+e.name, err, e.field)
	}
	job := getJob(t, ns, "good")
	if job.Spec.MainContainer != "worker" || *job.Spec.MPIReplicaSpecs[kubeflow.MPIReplicaTypeWorker].Replicas != 1 {
		t.Errorf("a refused edit changed the job: mainContainer %q, workers %d",
			job.Spec.MainContainer, *job.Spec.MPIReplicaSpecs[kubeflow.MPIReplicaTypeWorker].Replicas)
	}
	if c := condition(job, common.JobFailed); c != nil {
		t.Errorf("the good job failed: %s", c.Message)
	}
}

// TestScaleBeyondBounds: the scale subresource, which kubectl scale and
// the HorizontalPodAutoscaler use, goes through the same schema and rules:
// more than MaxWorkers workers, or more than an elastic job's maxReplicas,
// is refused with a message naming the field and the bound. No controller
// runs here: only admission is under test.
func TestScaleBeyondBounds(t *testing.T) {
	ns := env.Namespace(t)
	ctx := context.Background()
	jobs := env.MPI.KubeflowV1().MPIJobs(ns)
	createJob(t, newJob(ns, "fixed", 1))
	createJob(t, elasticJob(ns, "elastic", 2, 1, 4, 1))

	// Without a controller nothing else writes the jobs: an update from a
	// fresh read cannot conflict.
	scale := func(name string, replicas int32, dryRun bool) error {
		s, err := jobs.GetScale(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		s.Spec.Replicas = replicas
		opts := metav1.UpdateOptions{}
		if dryRun {
			opts.DryRun = []string{metav1.DryRunAll}
		}
		_, err = jobs.UpdateScale(ctx, name, s, opts)
		return err
	}
	const workers = "spec.mpiReplicaSpecs.Worker.replicas"
	bound := fmt.Sprint(kubeflow.MaxWorkers)
	for _, tc := range []struct {
		job      string
		replicas int32
		mention  string // besides the field
	}{
		{"fixed", kubeflow.MaxWorkers + 1, bound},
		{"elastic", kubeflow.MaxWorkers + 1, bound},
		{"elastic", 5, "spec.elasticPolicy.maxReplicas"},
	} {
		what := fmt.Sprintf("scale %s to %d", tc.job, tc.replicas)
		err := scale(tc.job, tc.replicas, false)
		t.Logf("%s: %v", what, err)
		checkRefused(t, what, err, workers)
		if err != nil && !strings.Contains(err.Error(), tc.mention) {
			t.Errorf("%s: refused with %q, which does not mention %s", what, err, tc.mention)
		}
	}
	// The bound itself is allowed (a dry run: nothing is stored).
	if err := scale("fixed", kubeflow.MaxWorkers, true); err != nil {
		t.Errorf("scale to MaxWorkers: %v", err)
	}
	for name, want := range map[string]int32{"fixed": 1, "elastic": 2} {
		if got := *getJob(t, ns, name).Spec.MPIReplicaSpecs[kubeflow.MPIReplicaTypeWorker].Replicas; got != want {
			t.Errorf("%s has %d workers after the refused scales, want %d", name, got, want)
		}
	}

	// kubectl scale shows the user the API server's message.
	out, err := kubectl("-n", ns, "scale", "mpijob/fixed", fmt.Sprintf("--replicas=%d", kubeflow.MaxWorkers+1))
	if err == nil || !namesField(out, workers) || !strings.Contains(out, bound) {
		t.Errorf("kubectl scale beyond MaxWorkers: error %v, output %q; want a refusal naming %s and %s", err, out, workers, bound)
	}
}
