package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	kubeflow "github.com/kubeflow/mpi-operator/v2/pkg/apis/kubeflow/v2beta1"
)

func int32p(v int32) *int32 { return &v }

// validJob is a small job that the CRD accepts: a launcher and workers
// replicas workers.
func validJob(ns, name string, workers int32) *kubeflow.MPIJob {
	pod := func(container string) corev1.PodTemplateSpec {
		return corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{
			Name: container, Image: "mpioperator/mpi-pi:openmpi",
		}}}}
	}
	return &kubeflow.MPIJob{
		TypeMeta:   metav1.TypeMeta{APIVersion: kubeflow.SchemeGroupVersion.String(), Kind: kubeflow.Kind},
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: kubeflow.MPIJobSpec{
			MPIReplicaSpecs: map[kubeflow.MPIReplicaType]*kubeflow.ReplicaSpec{
				kubeflow.MPIReplicaTypeLauncher: {Replicas: int32p(1), Template: pod("launcher")},
				kubeflow.MPIReplicaTypeWorker:   {Replicas: int32p(workers), Template: pod("worker")},
			},
		},
	}
}

// object is a job as JSON that any client could send: it may hold what no
// Go type can (nulls, strings for numbers, unknown fields).
type object map[string]any

func asObject(t *testing.T, job *kubeflow.MPIJob) object {
	t.Helper()
	data, err := json.Marshal(job)
	if err != nil {
		t.Fatal(err)
	}
	var o object
	if err := json.Unmarshal(data, &o); err != nil {
		t.Fatal(err)
	}
	return o
}

// get walks the object along keys, making the maps it lacks on the way,
// and returns the map at the end.
func (o object) get(keys ...string) map[string]any {
	m := map[string]any(o)
	for _, k := range keys {
		next, ok := m[k].(map[string]any)
		if !ok {
			next = map[string]any{}
			m[k] = next
		}
		m = next
	}
	return m
}

func (o object) spec() map[string]any { return o.get("spec") }

func (o object) replica(rt string) map[string]any { return o.get("spec", "mpiReplicaSpecs", rt) }

func (o object) podSpec(rt string) map[string]any {
	return o.get("spec", "mpiReplicaSpecs", rt, "template", "spec")
}

// container returns the i-th container of the replica type's pod.
func (o object) container(rt string, i int) map[string]any {
	return o.podSpec(rt)["containers"].([]any)[i].(map[string]any)
}

// appendContainers adds containers of these names to the list ("containers"
// or "initContainers") of the replica type's pod.
func (o object) appendContainers(rt, list string, names ...string) {
	pod := o.podSpec(rt)
	items, _ := pod[list].([]any)
	for _, name := range names {
		items = append(items, map[string]any{"name": name, "image": "busybox"})
	}
	pod[list] = items
}

// create posts the object, with strict field validation when strict.
func (o object) create(ns string, strict bool) error {
	body, err := json.Marshal(o)
	if err != nil {
		return err
	}
	req := suite.mpi.KubeflowV2beta1().RESTClient().Post().Namespace(ns).Resource(kubeflow.Plural).Body(body)
	if strict {
		req = req.Param("fieldValidation", "Strict")
	}
	return req.Do(context.Background()).Error()
}

// fieldNamed matches a field path as a whole: not "spec.x" in "spec.xy"
// or "spec.x.y".
func fieldNamed(field string) *regexp.Regexp {
	return regexp.MustCompile(`(^|[\s\[*])` + regexp.QuoteMeta(field) + `($|[\s:\[])`)
}

// wantInvalid fails the test unless err is the API server's 422 for an
// invalid object whose message names field, with the rule's own message
// rather than a CEL evaluation error.
func wantInvalid(t *testing.T, what string, err error, field string) {
	t.Helper()
	if err == nil {
		t.Errorf("%s: accepted, want a refusal that names %s", what, field)
		return
	}
	msg := err.Error()
	if !apierrors.IsInvalid(err) {
		t.Errorf("%s: refused as %s (%q), want Invalid", what, apierrors.ReasonForError(err), msg)
	}
	if !fieldNamed(field).MatchString(msg) {
		t.Errorf("%s: the message %q does not name %s", what, msg, field)
	}
	for _, cel := range []string{"evaluating rule", "no such key", "compilation failed"} {
		if strings.Contains(msg, cel) {
			t.Errorf("%s: a CEL error in place of the rule's message: %q", what, msg)
		}
	}
}

// TestMalformedJobs sends malformed v2beta1 MPIJobs as raw JSON; the CRD
// refuses each with a message that names the field.
func TestMalformedJobs(t *testing.T) {
	ns := suite.Namespace(t)
	tooMany := kubeflow.MaxWorkers + 1
	long := strings.Repeat("c", 64)
	runPolicy := func(key string, value any) func(object) {
		return func(o object) { o.get("spec", "runPolicy")[key] = value }
	}
	scheduling := func(key string, value any) func(object) {
		return func(o object) { o.get("spec", "runPolicy", "schedulingPolicy")[key] = value }
	}
	elastic := func(policy map[string]any, change func(object)) func(object) {
		return func(o object) {
			o.spec()["elasticPolicy"] = policy
			if change != nil {
				change(o)
			}
		}
	}
	specField := func(key string, value any) func(object) {
		return func(o object) { o.spec()[key] = value }
	}
	const (
		launcher = "spec.mpiReplicaSpecs.Launcher"
		worker   = "spec.mpiReplicaSpecs.Worker"
	)

	cases := []struct {
		name   string
		change func(object)
		field  string
	}{
		// The replica specs.
		{"no-launcher", func(o object) { delete(o.get("spec", "mpiReplicaSpecs"), "Launcher") }, launcher},
		{"null-launcher", func(o object) { o.get("spec", "mpiReplicaSpecs")["Launcher"] = nil }, launcher},
		{"two-launchers", func(o object) { o.replica("Launcher")["replicas"] = 2 }, launcher + ".replicas"},
		{"zero-launchers", func(o object) { o.replica("Launcher")["replicas"] = 0 }, launcher + ".replicas"},
		{"no-replica-specs", func(o object) { delete(o.spec(), "mpiReplicaSpecs") }, "spec.mpiReplicaSpecs"},
		{"replica-specs-as-list", func(o object) { o.spec()["mpiReplicaSpecs"] = []any{} }, "spec.mpiReplicaSpecs"},
		{"launcher-without-containers", func(o object) { o.podSpec("Launcher")["containers"] = []any{} }, launcher + ".template.spec.containers"},
		{"launcher-without-template", func(o object) { delete(o.replica("Launcher"), "template") }, launcher + ".template.spec.containers"},
		{"workers-without-containers", func(o object) { o.podSpec("Worker")["containers"] = []any{} }, worker + ".template.spec.containers"},
		{"worker-without-template", func(o object) { delete(o.replica("Worker"), "template") }, worker + ".template.spec.containers"},
		{"bad-worker-restart-policy", func(o object) { o.replica("Worker")["restartPolicy"] = "Sometimes" }, worker + ".restartPolicy"},
		{"bad-launcher-restart-policy", func(o object) { o.replica("Launcher")["restartPolicy"] = "always" }, launcher + ".restartPolicy"},

		// The number of workers.
		{"negative-workers", func(o object) { o.replica("Worker")["replicas"] = -1 }, worker + ".replicas"},
		{"workers-above-max-workers", func(o object) { o.replica("Worker")["replicas"] = tooMany }, worker + ".replicas"},
		{"workers-as-string", func(o object) { o.replica("Worker")["replicas"] = "two" }, worker + ".replicas"},

		// The job's own fields.
		{"name-too-long-for-a-label-value-" + strings.Repeat("n", 40), func(object) {}, "metadata.name"},
		{"zero-slots", specField("slotsPerWorker", 0), "spec.slotsPerWorker"},
		{"negative-slots", specField("slotsPerWorker", -2), "spec.slotsPerWorker"},
		{"launcher-as-worker-string", specField("runLauncherAsWorker", "yes"), "spec.runLauncherAsWorker"},
		{"bad-launcher-creation-policy", specField("launcherCreationPolicy", "Later"), "spec.launcherCreationPolicy"},
		{"bad-mpi-implementation", specField("mpiImplementation", "MVAPICH"), "spec.mpiImplementation"},
		{"lowercase-mpi-implementation", specField("mpiImplementation", "openmpi"), "spec.mpiImplementation"},
		{"ssh-path-as-number", specField("sshAuthMountPath", 7), "spec.sshAuthMountPath"},

		// The run policy.
		{"bad-clean-pod-policy", runPolicy("cleanPodPolicy", "Sometimes"), "spec.runPolicy.cleanPodPolicy"},
		{"lowercase-clean-pod-policy", runPolicy("cleanPodPolicy", "all"), "spec.runPolicy.cleanPodPolicy"},
		{"negative-backoff-limit", runPolicy("backoffLimit", -1), "spec.runPolicy.backoffLimit"},
		{"negative-ttl", runPolicy("ttlSecondsAfterFinished", -1), "spec.runPolicy.ttlSecondsAfterFinished"},
		{"zero-active-deadline", runPolicy("activeDeadlineSeconds", 0), "spec.runPolicy.activeDeadlineSeconds"},
		{"negative-active-deadline", runPolicy("activeDeadlineSeconds", -60), "spec.runPolicy.activeDeadlineSeconds"},
		{"unknown-managed-by", runPolicy("managedBy", "example.com/controller"), "spec.runPolicy.managedBy"},
		{"suspend-as-string", runPolicy("suspend", "true"), "spec.runPolicy.suspend"},
		{"negative-min-available", scheduling("minAvailable", -1), "spec.runPolicy.schedulingPolicy.minAvailable"},
		{"negative-schedule-timeout", scheduling("scheduleTimeoutSeconds", -5), "spec.runPolicy.schedulingPolicy.scheduleTimeoutSeconds"},

		// Container names, which pods require to be DNS labels.
		{"worker-container-capitals", func(o object) { o.container("Worker", 0)["name"] = "Worker" },
			worker + ".template.spec.containers[0].name"},
		{"launcher-container-underscore", func(o object) { o.container("Launcher", 0)["name"] = "mpi_launcher" },
			launcher + ".template.spec.containers[0].name"},
		{"worker-container-name-too-long", func(o object) { o.appendContainers("Worker", "containers", long) },
			worker + ".template.spec.containers[1].name"},
		{"launcher-init-container-capitals", func(o object) { o.appendContainers("Launcher", "initContainers", "Init") },
			launcher + ".template.spec.initContainers[0].name"},
		{"worker-init-container-dots", func(o object) { o.appendContainers("Worker", "initContainers", "fine", "init.db") },
			worker + ".template.spec.initContainers[1].name"},
		{"duplicate-worker-containers", func(o object) { o.appendContainers("Worker", "containers", "worker") },
			worker + ".template.spec.containers[1]"},

		// Elastic jobs.
		{"elastic-without-workers", elastic(map[string]any{}, func(o object) {
			delete(o.get("spec", "mpiReplicaSpecs"), "Worker")
		}), worker},
		{"elastic-min-above-max", elastic(map[string]any{"minReplicas": 4, "maxReplicas": 2}, nil), "spec.elasticPolicy.minReplicas"},
		{"elastic-replicas-below-min", elastic(map[string]any{"minReplicas": 3}, nil), worker + ".replicas"},
		{"elastic-replicas-above-max", elastic(map[string]any{"maxReplicas": 1}, nil), worker + ".replicas"},
		{"elastic-unset-replicas-below-min", elastic(map[string]any{"minReplicas": 2}, func(o object) {
			delete(o.replica("Worker"), "replicas")
		}), worker + ".replicas"},
		{"elastic-zero-min", elastic(map[string]any{"minReplicas": 0}, nil), "spec.elasticPolicy.minReplicas"},
		{"elastic-min-above-max-workers", elastic(map[string]any{"minReplicas": tooMany}, nil), "spec.elasticPolicy.minReplicas"},
		{"elastic-max-above-max-workers", elastic(map[string]any{"maxReplicas": tooMany}, nil), "spec.elasticPolicy.maxReplicas"},
		{"elastic-drain-too-long", elastic(map[string]any{"drainSeconds": 3601}, nil), "spec.elasticPolicy.drainSeconds"},
		{"elastic-zero-timeout", elastic(map[string]any{"minReplicasTimeoutSeconds": 0}, nil), "spec.elasticPolicy.minReplicasTimeoutSeconds"},
	}
	for _, tc := range cases {
		o := asObject(t, validJob(ns, tc.name, 2))
		tc.change(o)
		wantInvalid(t, tc.name, o.create(ns, false), tc.field)
	}
	t.Logf("%d malformed jobs refused", len(cases))

	// An unknown replica type is an unknown field: refused by a strict
	// create, pruned otherwise.
	o := asObject(t, validJob(ns, "parameter-server", 1))
	o.get("spec", "mpiReplicaSpecs")["PS"] = map[string]any{"replicas": 1}
	if err := o.create(ns, true); err == nil || !strings.Contains(err.Error(), `unknown field "spec.mpiReplicaSpecs.PS"`) {
		t.Errorf("a strict create with a PS replica type: %v, want the unknown field named", err)
	}
}

// TestSchemaDefaults: a job created without the fields that upstream's CRD
// defaults reads back with upstream's defaults in them, as clients of
// upstream's API expect.
func TestSchemaDefaults(t *testing.T) {
	ns := suite.Namespace(t)
	created, err := suite.mpi.KubeflowV2beta1().MPIJobs(ns).Create(context.Background(), validJob(ns, "defaulted", 1), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want := validJob(ns, "defaulted", 1).Spec
	want.SlotsPerWorker = int32p(1)
	want.RunLauncherAsWorker = new(false)
	want.SSHAuthMountPath = "/root/.ssh"
	want.LauncherCreationPolicy = kubeflow.LauncherCreationPolicyAtStartup
	want.MPIImplementation = kubeflow.MPIImplementationOpenMPI
	want.RunPolicy.Suspend = new(false)
	if diff := cmp.Diff(want, created.Spec); diff != "" {
		t.Errorf("the spec as created (-want +got):\n%s", diff)
	}
}

// TestBadEdits changes a valid job in ways the CRD refuses: managedBy,
// which is immutable, the replica bounds, and the removal of an elastic
// policy.
func TestBadEdits(t *testing.T) {
	ns := suite.Namespace(t)
	ctx := context.Background()
	jobs := suite.mpi.KubeflowV2beta1().MPIJobs(ns)
	create := func(name, managedBy string) *kubeflow.MPIJob {
		t.Helper()
		job := validJob(ns, name, 2)
		if managedBy != "" {
			job.Spec.RunPolicy.ManagedBy = &managedBy
		}
		job, err := jobs.Create(ctx, job, metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("creating %s: %v", name, err)
		}
		return job
	}
	mk := kubeflow.MultiKueueController

	edits := []struct {
		name      string
		managedBy string // at creation
		edit      func(*kubeflow.MPIJob)
		field     string
	}{
		{"managed-by-changed", kubeflow.KubeflowJobController, func(j *kubeflow.MPIJob) { j.Spec.RunPolicy.ManagedBy = &mk },
			"spec.runPolicy.managedBy"},
		{"managed-by-set", "", func(j *kubeflow.MPIJob) { j.Spec.RunPolicy.ManagedBy = &mk }, "spec.runPolicy.managedBy"},
		{"managed-by-removed", mk, func(j *kubeflow.MPIJob) { j.Spec.RunPolicy.ManagedBy = nil }, "spec.runPolicy.managedBy"},
		{"second-launcher", "", func(j *kubeflow.MPIJob) {
			j.Spec.MPIReplicaSpecs[kubeflow.MPIReplicaTypeLauncher].Replicas = int32p(2)
		}, "spec.mpiReplicaSpecs.Launcher.replicas"},
		{"too-many-workers", "", func(j *kubeflow.MPIJob) {
			j.Spec.MPIReplicaSpecs[kubeflow.MPIReplicaTypeWorker].Replicas = int32p(kubeflow.MaxWorkers + 1)
		}, "spec.mpiReplicaSpecs.Worker.replicas"},
	}
	for _, e := range edits {
		job := create(e.name, e.managedBy)
		e.edit(job)
		_, err := jobs.Update(ctx, job, metav1.UpdateOptions{})
		wantInvalid(t, e.name, err, e.field)
	}

	// A job's elastic policy cannot be removed, as a replace by a client
	// built on upstream's types, which lack the field, would.
	elastic, err := jobs.Create(ctx, elasticJob(ns, "elastic-policy-removed", 2, 1, 4, 0), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	elastic.Spec.ElasticPolicy = nil
	_, err = jobs.Update(ctx, elastic, metav1.UpdateOptions{})
	wantInvalid(t, "elastic-policy-removed", err, "spec.elasticPolicy")
	if err != nil && !strings.Contains(err.Error(), "cannot be removed once set") {
		t.Errorf("elastic-policy-removed: the message %q does not say why", err)
	}

	// Edits that keep managedBy as it is still go through.
	job := create("managed-by-kept", mk)
	job.Spec.MPIReplicaSpecs[kubeflow.MPIReplicaTypeWorker].Replicas = int32p(3)
	if _, err := jobs.Update(ctx, job, metav1.UpdateOptions{}); err != nil {
		t.Errorf("an edit that keeps managedBy: %v", err)
	}
}

// TestTemplateMetadataKept creates, with strict field validation, a job
// whose templates carry labels and annotations: the schema declares them,
// so they are neither refused nor pruned.
func TestTemplateMetadataKept(t *testing.T) {
	ns := suite.Namespace(t)
	ctx := context.Background()
	job := validJob(ns, "labelled", 2)
	for _, rt := range []kubeflow.MPIReplicaType{kubeflow.MPIReplicaTypeLauncher, kubeflow.MPIReplicaTypeWorker} {
		job.Spec.MPIReplicaSpecs[rt].Template.Labels = map[string]string{"team": "hpc", "role": strings.ToLower(string(rt))}
		job.Spec.MPIReplicaSpecs[rt].Template.Annotations = map[string]string{"sidecar.istio.io/inject": "false"}
	}
	job.Spec.ElasticPolicy = &kubeflow.ElasticPolicy{MinReplicas: int32p(1), MaxReplicas: int32p(4)}
	created, err := suite.mpi.KubeflowV2beta1().MPIJobs(ns).Create(ctx, job, metav1.CreateOptions{FieldValidation: "Strict"})
	if err != nil {
		t.Fatalf("strict create: %v", err)
	}
	got, err := suite.mpi.KubeflowV2beta1().MPIJobs(ns).Get(ctx, created.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for rt, spec := range job.Spec.MPIReplicaSpecs {
		kept := got.Spec.MPIReplicaSpecs[rt].Template.ObjectMeta
		if fmt.Sprint(kept.Labels) != fmt.Sprint(spec.Template.Labels) ||
			fmt.Sprint(kept.Annotations) != fmt.Sprint(spec.Template.Annotations) {
			t.Errorf("%s template metadata stored as %+v, want labels %v and annotations %v",
				rt, kept, spec.Template.Labels, spec.Template.Annotations)
		}
	}
	if got.Spec.ElasticPolicy == nil || *got.Spec.ElasticPolicy.MaxReplicas != 4 {
		t.Errorf("elasticPolicy stored as %+v", got.Spec.ElasticPolicy)
	}
}

// upstreamPi is a job as upstream v0.8.0's pi example writes it, and as
// Kueue's users send it: every v0.8.0 field this operator knows.
const upstreamPi = `
apiVersion: kubeflow.org/v2beta1
kind: MPIJob
metadata:
  name: pi
spec:
  slotsPerWorker: 1
  runPolicy:
    cleanPodPolicy: Running
    ttlSecondsAfterFinished: 60
    backoffLimit: 3
    suspend: false
    managedBy: kubeflow.org/mpi-operator
    schedulingPolicy:
      minAvailable: 3
      queue: default
      priorityClass: high
      scheduleTimeoutSeconds: 100
      minResources:
        cpu: "3"
  sshAuthMountPath: /home/mpiuser/.ssh
  launcherCreationPolicy: WaitForWorkersReady
  mpiImplementation: OpenMPI
  runLauncherAsWorker: false
  mpiReplicaSpecs:
    Launcher:
      replicas: 1
      restartPolicy: OnFailure
      template:
        metadata:
          labels:
            app: pi
        spec:
          containers:
          - image: mpioperator/mpi-pi:openmpi
            name: mpi-launcher
            securityContext:
              runAsUser: 1000
            command:
            - mpirun
            args:
            - -n
            - "2"
            - /home/mpiuser/pi
            resources:
              limits:
                cpu: 1
                memory: 1Gi
    Worker:
      replicas: 2
      template:
        spec:
          containers:
          - image: mpioperator/mpi-pi:openmpi
            name: mpi-worker
            securityContext:
              runAsUser: 1000
            command:
            - /usr/sbin/sshd
            args:
            - -De
            - -f
            - /home/mpiuser/.sshd_config
            resources:
              limits:
                cpu: 1
                memory: 1Gi
`

// TestUpstreamJobsAccepted applies upstream-style jobs with kubectl's
// strict validation: the pi example, and its Intel and MPICH variants.
func TestUpstreamJobsAccepted(t *testing.T) {
	ns := suite.Namespace(t)
	variants := map[string]string{
		"pi":       upstreamPi,
		"pi-intel": strings.Replace(strings.Replace(upstreamPi, "name: pi\n", "name: pi-intel\n", 1), "OpenMPI", "Intel", 1),
		"pi-mpich": strings.Replace(strings.Replace(upstreamPi, "name: pi\n", "name: pi-mpich\n", 1), "OpenMPI", "MPICH", 1),
	}
	for name, manifest := range variants {
		if out, err := kubectlStdin(manifest, "apply", "--validate=strict", "-n", ns, "-f", "-"); err != nil {
			t.Errorf("%s: kubectl apply: %v\n%s", name, err, out)
		}
	}
	job, err := suite.mpi.KubeflowV2beta1().MPIJobs(ns).Get(context.Background(), "pi", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if job.Spec.LauncherCreationPolicy != kubeflow.LauncherCreationPolicyWaitForWorkersReady ||
		job.Spec.SSHAuthMountPath != "/home/mpiuser/.ssh" ||
		job.Spec.RunPolicy.SchedulingPolicy == nil || job.Spec.RunPolicy.SchedulingPolicy.Queue != "default" ||
		job.Spec.MPIReplicaSpecs[kubeflow.MPIReplicaTypeLauncher].Template.Labels["app"] != "pi" {
		t.Errorf("the pi job was not stored as sent: %+v", job.Spec)
	}
}

// TestScale drives Worker.replicas through the scale subresource, with the
// generated client and with kubectl scale, within and past the bounds.
func TestScale(t *testing.T) {
	ns := suite.Namespace(t)
	ctx := context.Background()
	jobs := suite.mpi.KubeflowV2beta1().MPIJobs(ns)
	job := validJob(ns, "scaled", 2)
	job.Spec.ElasticPolicy = &kubeflow.ElasticPolicy{MinReplicas: int32p(1), MaxReplicas: int32p(6)}
	job, err := jobs.Create(ctx, job, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// The status gives the scale its selector, as the controller writes it.
	job.Status.ReplicaStatuses = map[kubeflow.MPIReplicaType]*kubeflow.ReplicaStatus{
		kubeflow.MPIReplicaTypeWorker: {Active: 2, Selector: "training.kubeflow.org/job-name=scaled,training.kubeflow.org/job-role=worker"},
	}
	if _, err := jobs.UpdateStatus(ctx, job, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}

	scale, err := jobs.GetScale(ctx, "scaled", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if scale.Spec.Replicas != 2 || scale.Status.Replicas != 2 ||
		scale.Status.Selector != "training.kubeflow.org/job-name=scaled,training.kubeflow.org/job-role=worker" {
		t.Errorf("scale %+v, want 2 replicas and the workers' selector", scale)
	}

	setScale := func(n int32) error {
		s, err := jobs.GetScale(ctx, "scaled", metav1.GetOptions{})
		if err != nil {
			return err
		}
		s.Spec.Replicas = n
		_, err = jobs.UpdateScale(ctx, "scaled", s, metav1.UpdateOptions{})
		return err
	}
	if err := setScale(5); err != nil {
		t.Errorf("UpdateScale to 5: %v", err)
	}
	// Past elasticPolicy.maxReplicas, below minReplicas, past MaxWorkers.
	wantInvalid(t, "UpdateScale to 7", setScale(7), "spec.mpiReplicaSpecs.Worker.replicas")
	wantInvalid(t, "UpdateScale to 0", setScale(0), "spec.mpiReplicaSpecs.Worker.replicas")
	wantInvalid(t, "UpdateScale past MaxWorkers", setScale(kubeflow.MaxWorkers+1), "spec.mpiReplicaSpecs.Worker.replicas")

	// kubectl resolves a bare "mpijob" to v2beta1, the one version served
	// (with a discovery cache of its own, as other tests change the CRD).
	cache := t.TempDir()
	resource := "mpijob/scaled"
	if out, err := kubectl("--cache-dir", cache, "scale", "-n", ns, resource, "--replicas=3"); err != nil {
		t.Errorf("kubectl scale --replicas=3: %v\n%s", err, out)
	}
	out, err := kubectl("--cache-dir", cache, "scale", "-n", ns, resource, fmt.Sprintf("--replicas=%d", kubeflow.MaxWorkers+1))
	if err == nil || !fieldNamed("spec.mpiReplicaSpecs.Worker.replicas").MatchString(out) {
		t.Errorf("kubectl scale past MaxWorkers: %v\n%s", err, out)
	}
	got, err := jobs.Get(ctx, "scaled", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if r := got.Spec.MPIReplicaSpecs[kubeflow.MPIReplicaTypeWorker].Replicas; r == nil || *r != 3 {
		t.Errorf("Worker.replicas is %v after the scaling, want 3", r)
	}

	// A job without an elastic policy scales up to MaxWorkers.
	plain, err := jobs.Create(ctx, validJob(ns, "plain", 1), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	_, err = jobs.UpdateScale(ctx, plain.Name, &autoscalingv1.Scale{
		ObjectMeta: metav1.ObjectMeta{Name: plain.Name, Namespace: ns},
		Spec:       autoscalingv1.ScaleSpec{Replicas: kubeflow.MaxWorkers},
	}, metav1.UpdateOptions{})
	if err != nil {
		t.Errorf("UpdateScale of a fixed job to MaxWorkers: %v", err)
	}
}

// TestExplain reads the schema through kubectl explain: the pod template
// below the replica map, and the descriptions of the job's own fields.
func TestExplain(t *testing.T) {
	for field, want := range map[string][]string{
		"mpijob.spec.mpiReplicaSpecs.Worker.template": {"metadata", "spec", "labels" /* of the template's metadata */},
		"mpijob.spec.mpiReplicaSpecs.Worker":          {"over SSH", "replicas may be 0 to 1000", "restartPolicy"},
		"mpijob.spec.elasticPolicy":                   {"drainSeconds", "discover_hosts.sh"},
		"mpijob.spec.runPolicy.managedBy":             {"cannot be set, changed or removed"},
	} {
		args := []string{"explain", field, "--api-version=kubeflow.org/v2beta1"}
		if strings.HasSuffix(field, ".template") {
			args = append(args, "--recursive")
		}
		out, err := kubectl(args...)
		if err != nil {
			t.Errorf("kubectl explain %s: %v\n%s", field, err, out)
			continue
		}
		flat := strings.Join(strings.Fields(out), " ")
		for _, w := range want {
			if !strings.Contains(flat, w) {
				t.Errorf("kubectl explain %s does not mention %q:\n%s", field, w, out)
			}
		}
	}
}
