package integration

import (
	"context"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	common "github.com/kubeflow/common/pkg/apis/common/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	kubeflow "github.com/kubeflow/mpi-operator/pkg/apis/kubeflow/v1"
	"github.com/kubeflow/mpi-operator/pkg/controller"
	"github.com/kubeflow/mpi-operator/test/harness"
)

// TestJobLifecycle follows a job from creation to success: the children the
// contract names, workers Running through the scheduler and kwok, the
// discovery script, the conditions and events, and cleanPodPolicy.
func TestJobLifecycle(t *testing.T) {
	ns := env.Namespace(t)
	startController(t, controller.Config{Namespace: ns})
	job := newJob(ns, "pi", 2)
	running := common.CleanPodPolicyRunning
	job.Spec.CleanPodPolicy = &running
	job.Spec.SlotsPerWorker = ptr[int32](2)
	created := createJob(t, job)
	ctx := context.Background()

	waitForHosts(t, ns, "pi", "pi-worker-0:2", "pi-worker-1:2")
	cm, err := env.Kube.CoreV1().ConfigMaps(ns).Get(ctx, "pi-config", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	wantData := map[string]string{
		"hostfile":          "pi-worker-0 slots=2\npi-worker-1 slots=2\n",
		"kubexec.sh":        "#!/bin/sh\nPOD_NAME=$1\nshift\n/opt/kube/kubectl exec ${POD_NAME} -- /bin/sh -c \"$*\"\n",
		"discover_hosts.sh": "#!/bin/sh\necho pi-worker-0:2\necho pi-worker-1:2\n",
	}
	if diff := cmp.Diff(wantData, cm.Data); diff != "" {
		t.Errorf("ConfigMap data (-want +got):\n%s", diff)
	}
	if cm.Labels["app"] != "pi" {
		t.Errorf("ConfigMap labels %v", cm.Labels)
	}
	checkOwner(t, &cm.ObjectMeta, created)

	sa, err := env.Kube.CoreV1().ServiceAccounts(ns).Get(ctx, "pi-launcher", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	checkOwner(t, &sa.ObjectMeta, created)
	role, err := env.Kube.RbacV1().Roles(ns).Get(ctx, "pi-launcher", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	checkOwner(t, &role.ObjectMeta, created)
	wantRules := []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get", "list", "watch"}},
		{APIGroups: []string{""}, Resources: []string{"pods/exec"}, Verbs: []string{"create"}, ResourceNames: []string{"pi-worker-0", "pi-worker-1"}},
	}
	if diff := cmp.Diff(wantRules, role.Rules); diff != "" {
		t.Errorf("Role rules (-want +got):\n%s", diff)
	}
	rb, err := env.Kube.RbacV1().RoleBindings(ns).Get(ctx, "pi-launcher", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	checkOwner(t, &rb.ObjectMeta, created)

	for _, name := range []string{"pi-worker-0", "pi-worker-1"} {
		p, err := env.Kube.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		checkOwner(t, &p.ObjectMeta, created)
		for k, v := range map[string]string{"group-name": "kubeflow.org", "mpi-job-name": "pi", "mpi-job-role": "worker",
			"replica-index": name[len(name)-1:], "training.kubeflow.org/replica-index": name[len(name)-1:]} {
			if p.Labels[k] != v {
				t.Errorf("%s label %s = %q, want %q", name, k, p.Labels[k], v)
			}
		}
		if p.Spec.NodeName == "" {
			t.Errorf("%s was not scheduled", name)
		}
	}
	launcher, err := env.Kube.CoreV1().Pods(ns).Get(ctx, "pi-launcher", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	checkOwner(t, &launcher.ObjectMeta, created)
	if launcher.Spec.ServiceAccountName != "pi-launcher" || launcher.Labels["mpi-job-role"] != "launcher" {
		t.Errorf("launcher serviceAccount %q labels %v", launcher.Spec.ServiceAccountName, launcher.Labels)
	}

	waitForRunning(t, ns, "pi-launcher")
	waitForCondition(t, ns, "pi", common.JobRunning, "MPIJobRunning")

	finishPod(t, ns, "pi-launcher", corev1.PodSucceeded, 0, "")
	done := waitForCondition(t, ns, "pi", common.JobSucceeded, "MPIJobSucceeded")
	if c := condition(done, common.JobRunning); c == nil || c.Status != corev1.ConditionFalse {
		t.Errorf("Running condition after success: %+v", c)
	}
	if done.Status.CompletionTime == nil || done.Status.StartTime == nil {
		t.Errorf("startTime %v completionTime %v", done.Status.StartTime, done.Status.CompletionTime)
	}
	if got := done.Status.ReplicaStatuses[kubeflow.MPIReplicaTypeLauncher]; got == nil || got.Succeeded != 1 {
		t.Errorf("launcher replica status %+v", got)
	}
	// cleanPodPolicy Running: the workers go, the finished launcher stays.
	harness.Eventually(t, poll, waitTimeout, "the workers to be deleted", func() (bool, error) {
		return len(workerPods(t, ns, "pi")) == 0, nil
	})
	if podPhase(t, ns, "pi-launcher") != corev1.PodSucceeded {
		t.Error("the finished launcher was deleted")
	}
	waitForHosts(t, ns, "pi")
	waitForEvents(t, ns, "pi", "Normal/MPIJobCreated", "Normal/MPIJobRunning", "Normal/MPIJobSucceeded")
}

func checkOwner(t *testing.T, meta *metav1.ObjectMeta, job *kubeflow.MPIJob) {
	t.Helper()
	ref := metav1.GetControllerOf(meta)
	if ref == nil || ref.UID != job.UID || ref.Kind != "MPIJob" || ref.APIVersion != "kubeflow.org/v1" ||
		ref.BlockOwnerDeletion == nil || !*ref.BlockOwnerDeletion {
		t.Errorf("%s: controller reference %+v, want MPIJob %s with blockOwnerDeletion", meta.Name, ref, job.UID)
	}
}

// TestLauncherFailure fails the launcher of a job without restarts: the job
// fails with the upstream reason and a Warning event.
func TestLauncherFailure(t *testing.T) {
	ns := env.Namespace(t)
	startController(t, controller.Config{Namespace: ns})
	createJob(t, newJob(ns, "fail", 1))
	waitForRunning(t, ns, "fail-launcher")
	finishPod(t, ns, "fail-launcher", corev1.PodFailed, 3, "")
	job := waitForCondition(t, ns, "fail", common.JobFailed, "MPIJobFailed")
	if c := condition(job, common.JobRunning); c != nil && c.Status == corev1.ConditionTrue {
		t.Errorf("Running still True after failure")
	}
	waitForEvents(t, ns, "fail", "Warning/MPIJobFailed")
}

// TestDeleteGarbageCollectsChildren deletes an MPIJob and waits for the
// garbage collector to remove every child through its owner reference.
func TestDeleteGarbageCollectsChildren(t *testing.T) {
	ns := env.Namespace(t)
	startController(t, controller.Config{Namespace: ns})
	createJob(t, newJob(ns, "gc", 2))
	waitForHosts(t, ns, "gc", "gc-worker-0:1", "gc-worker-1:1")
	waitForRunning(t, ns, "gc-launcher")

	ctx := context.Background()
	if err := env.MPI.KubeflowV1().MPIJobs(ns).Delete(ctx, "gc", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	gone := func(get func() error) func() (bool, error) {
		return func() (bool, error) {
			err := get()
			return apierrors.IsNotFound(err), ignoreNotFound(err)
		}
	}
	harness.Eventually(t, poll, waitTimeout, "the ConfigMap to go", gone(func() error {
		_, err := env.Kube.CoreV1().ConfigMaps(ns).Get(ctx, "gc-config", metav1.GetOptions{})
		return err
	}))
	harness.Eventually(t, poll, waitTimeout, "the ServiceAccount to go", gone(func() error {
		_, err := env.Kube.CoreV1().ServiceAccounts(ns).Get(ctx, "gc-launcher", metav1.GetOptions{})
		return err
	}))
	harness.Eventually(t, poll, waitTimeout, "the Role to go", gone(func() error {
		_, err := env.Kube.RbacV1().Roles(ns).Get(ctx, "gc-launcher", metav1.GetOptions{})
		return err
	}))
	harness.Eventually(t, poll, waitTimeout, "the RoleBinding to go", gone(func() error {
		_, err := env.Kube.RbacV1().RoleBindings(ns).Get(ctx, "gc-launcher", metav1.GetOptions{})
		return err
	}))
	for _, pod := range []string{"gc-launcher", "gc-worker-0", "gc-worker-1"} {
		harness.Eventually(t, poll, waitTimeout, "pod "+pod+" to go", gone(func() error {
			_, err := env.Kube.CoreV1().Pods(ns).Get(ctx, pod, metav1.GetOptions{})
			return err
		}))
	}
}

// TestLauncherExecPermissions asks the real RBAC authorizer what the
// launcher's ServiceAccount may exec into: its own workers, nothing else.
func TestLauncherExecPermissions(t *testing.T) {
	ns := env.Namespace(t)
	startController(t, controller.Config{Namespace: ns})
	createJob(t, newJob(ns, "a", 2))
	createJob(t, newJob(ns, "b", 1))
	waitForHosts(t, ns, "a", "a-worker-0:1", "a-worker-1:1")
	waitForHosts(t, ns, "b", "b-worker-0:1")

	candidates := []string{"a-worker-0", "a-worker-1", "a-worker-2", "a-launcher", "b-worker-0", "b-launcher", "unrelated"}
	waitForExec(t, ns, "a", candidates, []string{"a-worker-0", "a-worker-1"})
	waitForExec(t, ns, "b", candidates, []string{"b-worker-0"})

	// In another namespace, the same pod names are out of reach.
	other := env.Namespace(t)
	if canExecIn(t, ns, "a", other, "a-worker-0") {
		t.Error("launcher a may exec into a pod of another namespace")
	}
}

// canExecIn asks whether the launcher of job in ns may exec into pod in
// podNS.
func canExecIn(t *testing.T, ns, job, podNS, pod string) bool {
	t.Helper()
	return canExecAs(t, "system:serviceaccount:"+ns+":"+job+"-launcher", ns, podNS, pod)
}

// TestZeroWorkersGrantNoExec: a job with no workers gets a Role without any
// exec rule, so its launcher may exec into nothing.
func TestZeroWorkersGrantNoExec(t *testing.T) {
	ns := env.Namespace(t)
	startController(t, controller.Config{Namespace: ns})
	createJob(t, newJob(ns, "none", 0))
	harness.Eventually(t, poll, waitTimeout, "the Role", func() (bool, error) {
		role, err := env.Kube.RbacV1().Roles(ns).Get(context.Background(), "none-launcher", metav1.GetOptions{})
		if err != nil {
			return false, ignoreNotFound(err)
		}
		for _, r := range role.Rules {
			if slices.Contains(r.Resources, "pods/exec") {
				t.Fatalf("Role of a job without workers has an exec rule: %+v", r)
			}
		}
		return true, nil
	})
	createJob(t, newJob(ns, "other", 1))
	waitForHosts(t, ns, "other", "other-worker-0:1")
	waitForExec(t, ns, "none", []string{"other-worker-0", "none-launcher", "other-launcher"}, nil)
}

// TestSameNameInTwoNamespaces runs jobs of one name in two namespaces under
// one controller that watches all namespaces: each sees only its workers.
func TestSameNameInTwoNamespaces(t *testing.T) {
	nsA, nsB := env.Namespace(t), env.Namespace(t)
	startController(t, controller.Config{})
	createJob(t, newJob(nsA, "same", 2))
	createJob(t, newJob(nsB, "same", 3))
	waitForHosts(t, nsA, "same", "same-worker-0:1", "same-worker-1:1")
	waitForHosts(t, nsB, "same", "same-worker-0:1", "same-worker-1:1", "same-worker-2:1")

	// Shrinking one leaves the other alone.
	scaleWorkers(t, nsB, "same", 1)
	waitForHosts(t, nsB, "same", "same-worker-0:1")
	if got := discoveredHosts(t, nsA, "same"); !slices.Equal(got, []string{"same-worker-0:1", "same-worker-1:1"}) {
		t.Errorf("hosts of the job in %s changed to %v", nsA, got)
	}
	if got := workerPods(t, nsA, "same"); len(got) != 2 {
		t.Errorf("workers in %s: %v", nsA, got)
	}
	jobA := getJob(t, nsA, "same")
	if got := jobA.Status.ReplicaStatuses[kubeflow.MPIReplicaTypeWorker]; got == nil || got.Active != 2 {
		t.Errorf("worker status in %s: %+v", nsA, got)
	}
}

// TestTemplateMetadataReachesPods: labels and annotations of both pod
// templates (an Istio opt-out on nearly every Kubeflow job) pass a strict
// create, are stored, and are carried to every pod.
func TestTemplateMetadataReachesPods(t *testing.T) {
	ns := env.Namespace(t)
	startController(t, controller.Config{Namespace: ns})
	job := newJob(ns, "meta", 2)
	for rt, spec := range job.Spec.MPIReplicaSpecs {
		spec.Template.Labels = map[string]string{"team": "vision", "role-label": string(rt)}
		spec.Template.Annotations = map[string]string{"sidecar.istio.io/inject": "false"}
	}
	// kubectl create --validate=strict sends the same field validation.
	created, err := env.MPI.KubeflowV1().MPIJobs(ns).Create(context.Background(), job,
		metav1.CreateOptions{FieldValidation: metav1.FieldValidationStrict})
	if err != nil {
		t.Fatalf("strict create of a job with template metadata: %v", err)
	}
	for rt, spec := range created.Spec.MPIReplicaSpecs {
		want := map[string]string{"team": "vision", "role-label": string(rt)}
		if diff := cmp.Diff(want, spec.Template.Labels); diff != "" {
			t.Errorf("stored %s template labels (-want +got):\n%s", rt, diff)
		}
		if spec.Template.Annotations["sidecar.istio.io/inject"] != "false" {
			t.Errorf("stored %s template annotations %v", rt, spec.Template.Annotations)
		}
	}
	waitForRunning(t, ns, "meta-launcher")
	for _, pod := range []string{"meta-launcher", "meta-worker-0", "meta-worker-1"} {
		p, err := env.Kube.CoreV1().Pods(ns).Get(context.Background(), pod, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		role := map[string]string{"meta-launcher": "Launcher"}[pod]
		if role == "" {
			role = "Worker"
		}
		if p.Labels["team"] != "vision" || p.Labels["role-label"] != role || p.Labels["mpi-job-role"] == "" {
			t.Errorf("pod %s labels %v: the template's and the job's labels expected", pod, p.Labels)
		}
		if p.Annotations["sidecar.istio.io/inject"] != "false" {
			t.Errorf("pod %s annotations %v", pod, p.Annotations)
		}
	}
}
