package e2e

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/kubeflow/mpi-operator/test/harness"
)

const (
	jobsNS     = "e2e"
	piJob      = "pi"                       // examples/v2beta1/pi/pi.yaml
	elasticJob = "tensorflow-mnist-elastic" // examples/v2beta1/elastic
	// drainSeconds is elasticJob's spec.elasticPolicy.drainSeconds.
	drainSeconds = 30

	// Pods on kwok nodes run within a second or two of their creation.
	settle = time.Minute
	// The garbage collector maps a new CRD's owners only after its next
	// discovery resync (30 s), with backoff before that.
	gcWait = 2 * time.Minute
	// scriptFollows bounds the time discover_hosts.sh takes to drop the
	// workers of a shrink, well within drainSeconds.
	scriptFollows = 10 * time.Second
)

// TestE2E is the user's path, as steps that build on each other: a failed
// step ends it.
func TestE2E(t *testing.T) {
	var op *harness.Operator
	t.Cleanup(func() {
		if op != nil && op.Alive() {
			t.Logf("last lines of %s:\n%s", op.LogPath, harness.Tail(op.LogPath, 40))
			op.Terminate(10 * time.Second)
		}
		running = nil
	})
	steps := []struct {
		name string
		run  func(*testing.T)
	}{
		{"Install", install},
		{"StartOperator", func(t *testing.T) { op = startUpstreamArgs(t) }},
		{"TenantObjects", func(t *testing.T) { checkTenantObjectsCostLittle(t, op) }},
		{"Pi", createPi},
		{"Elastic", createElastic},
		{"Scale", scaleElastic},
		{"SuspendResume", suspendResume},
		{"Monitoring", checkMonitoring},
		{"DeleteJob", deletePi},
		{"DeleteNamespace", deleteJobsNamespace},
		{"SIGTERM", func(t *testing.T) { stopOperator(t, op, 5*time.Second); checkLeaseReleased(t) }},
	}
	for _, step := range steps {
		if !t.Run(step.name, step.run) {
			t.Fatalf("step %s failed; the steps after it are skipped", step.name)
		}
	}
}

// install applies the standalone overlay as v2/README.md says, and scales
// its Deployment to 0: the operator under test is a local process.
func install(t *testing.T) {
	t.Logf("kubectl apply -k v2/manifests/overlays/standalone:\n%s", must(t, "apply", "-k", "v2/manifests/overlays/standalone"))
	waitCRD(t)
	// kubectl resolves the bare resource to v2beta1, with the scale
	// subresource.
	if out := must(t, "api-resources", "--api-group=kubeflow.org", "-o", "wide"); !strings.Contains(out, "v2beta1") {
		t.Errorf("kubectl api-resources does not list kubeflow.org/v2beta1:\n%s", out)
	}
	checkAccess(t)
	checkPodIdentity(t)
	must(t, "rollout", "status", "deployment/mpi-operator", "-n", "mpi-operator", "--timeout=60s")
	must(t, "scale", "deployment/mpi-operator", "-n", "mpi-operator", "--replicas=0")
}

// startUpstreamArgs runs the binary with upstream v0.8.0's deploy
// arguments, as the ServiceAccount of the install; out of the cluster it
// needs --kubeConfig, and the monitoring port is what the suite reads.
func startUpstreamArgs(t *testing.T) *harness.Operator {
	kubeconfig := serviceAccountKubeconfig(t, "mpi-operator")
	op := startOperatorProcess(t, "operator.log", "",
		"-alsologtostderr", "--lock-namespace=mpi-operator",
		"--kubeConfig", kubeconfig, fmt.Sprintf("--monitoring-port=%d", monitoringPort))
	waitLeader(t)
	holder := strings.TrimSpace(must(t, "get", "lease", "mpi-operator", "-n", "mpi-operator", "-o", "jsonpath={.spec.holderIdentity}"))
	if holder == "" {
		t.Errorf("the operator leads, but Lease mpi-operator/mpi-operator names no holder")
	}
	return op
}

func createPi(t *testing.T) {
	waitNamespace(t, jobsNS)
	must(t, "create", "--validate=strict", "-n", jobsNS, "-f", "examples/v2beta1/pi/pi.yaml")
	waitCondition(t, piJob, "Running", "True")
	waitDiscovery(t, settle, settle, jobsNS, piJob, 2)
	checkChildren(t, jobsNS, piJob, 2)
	// A change of the counts alone may wait up to a second to be written
	// (engine.StatusHold).
	harness.Eventually(t, poll, settle, "the status of "+piJob+" to count 2 active workers, with a selector and a start time", func() (bool, string) {
		j, err := getJob(jobsNS, piJob)
		if err != nil {
			return false, err.Error()
		}
		w := j.Status.ReplicaStatuses["Worker"]
		return w.Active == 2 && w.Selector != "" && j.Status.StartTime != nil, fmt.Sprintf("Worker %+v, startTime %v", w, j.Status.StartTime)
	})
	out := must(t, "get", "mpijob", piJob, "-n", jobsNS)
	t.Logf("kubectl get mpijob %s:\n%s", piJob, out)
}

func createElastic(t *testing.T) {
	must(t, "create", "--validate=strict", "-n", jobsNS, "-f", "examples/v2beta1/elastic/tensorflow-mnist-elastic.yaml")
	waitCondition(t, elasticJob, "Running", "True")
	waitDiscovery(t, settle, settle, jobsNS, elasticJob, 2)
	checkChildren(t, jobsNS, elasticJob, 2)
	checkSSHD(t, jobsNS, elasticJob+"-worker-0")
}

// checkSSHD checks that the worker pod's first container runs sshd in the
// foreground: its image (horovod's) does not, so without a command of the
// example's own the launcher's horovodrun would find no SSH server.
func checkSSHD(t *testing.T, ns, pod string) {
	t.Helper()
	cmd := must(t, "get", "pod", pod, "-n", ns, "-o", "jsonpath={.spec.containers[0].command} {.spec.containers[0].args}")
	if !strings.Contains(cmd, "/usr/sbin/sshd -De") {
		t.Errorf("worker %s runs %q, want /usr/sbin/sshd -De in the foreground", pod, cmd)
	}
}

// scaleElastic grows the elastic job to 4 workers and shrinks it to 1 with
// kubectl scale: discover_hosts.sh follows, and never lists a worker that
// is being deleted.
func scaleElastic(t *testing.T) {
	before := uids(t, jobsNS, elasticJob)
	must(t, "scale", "mpijob/"+elasticJob, "-n", jobsNS, "--replicas=4")
	hosts := waitDiscovery(t, settle, settle, jobsNS, elasticJob, 4)
	t.Logf("after the scale to 4: %v", hosts)
	for name, uid := range uids(t, jobsNS, elasticJob) {
		if old, ok := before[name]; ok && old != uid {
			t.Errorf("pod %s was replaced by the scale up", name)
		}
	}
	waitCondition(t, elasticJob, "Running", "True")

	must(t, "scale", "mpijob/"+elasticJob, "-n", jobsNS, "--replicas=1")
	// The removed workers leave the script at once, and their pods go
	// after drainSeconds.
	hosts = waitDiscovery(t, scriptFollows, drainSeconds*time.Second+settle, jobsNS, elasticJob, 1)
	if want := fmt.Sprintf("%s-worker-0.%s.%s.svc", elasticJob, elasticJob, jobsNS); len(hosts) != 1 || hosts[0] != want {
		t.Errorf("after the scale to 1, discover_hosts.sh lists %v, want the lowest index, [%s]", hosts, want)
	}
	// The counts and the end of Resizing may wait up to a second to be
	// written with the rest of the status (engine.StatusHold).
	harness.Eventually(t, poll, settle, "the status to count 1 worker, Running and no longer Resizing", func() (bool, string) {
		j, err := getJob(jobsNS, elasticJob)
		if err != nil {
			return false, err.Error()
		}
		w := j.Status.ReplicaStatuses["Worker"]
		return j.is["Running"] == "True" && j.is["Resizing"] == "" && w.Active == 1, fmt.Sprintf("%s, Worker %+v", j.seen, w)
	})
}

// suspendResume suspends the elastic job through runPolicy.suspend, as
// Kueue does: its pods go; resumed, they come back and run.
func suspendResume(t *testing.T) {
	patch := func(suspend bool) {
		must(t, "patch", "mpijob", elasticJob, "-n", jobsNS, "--type=merge",
			"-p", fmt.Sprintf(`{"spec":{"runPolicy":{"suspend":%t}}}`, suspend))
	}
	before := uids(t, jobsNS, elasticJob)
	patch(true)
	harness.Eventually(t, poll, settle, elasticJob+" to be Suspended with no pod left", func() (bool, string) {
		j, err := getJob(jobsNS, elasticJob)
		if err != nil {
			return false, err.Error()
		}
		list, err := pods(jobsNS, elasticJob, "")
		if err != nil {
			return false, err.Error()
		}
		return j.is["Suspended"] == "True" && j.is["Running"] == "False" && len(list) == 0,
			j.seen + " pods " + describe(list)
	})
	if s := strings.TrimSpace(must(t, "get", "job.batch", elasticJob+"-launcher", "-n", jobsNS, "-o", "jsonpath={.spec.suspend}")); s != "true" {
		t.Errorf("the launcher Job of the suspended job has spec.suspend %q, want true", s)
	}

	patch(false)
	waitCondition(t, elasticJob, "Running", "True")
	waitCondition(t, elasticJob, "Suspended", "False")
	waitDiscovery(t, settle, settle, jobsNS, elasticJob, 1)
	harness.Eventually(t, poll, settle, "the launcher of "+elasticJob+" to run again", func() (bool, string) {
		list, err := pods(jobsNS, elasticJob, "launcher")
		return err == nil && len(list) == 1 && list[0].Status.Phase == "Running", describe(list)
	})
	for name, uid := range uids(t, jobsNS, elasticJob) {
		if before[name] == uid {
			t.Errorf("pod %s outlived the suspension", name)
		}
	}
}

func checkMonitoring(t *testing.T) {
	code, body, err := running.Fetch(context.Background(), "/healthz")
	if err != nil || code != http.StatusOK || strings.TrimSpace(body) != "ok" {
		t.Errorf("/healthz: %d %q %v, want 200 ok", code, body, err)
	}
	code, body, err = running.Fetch(context.Background(), "/metrics")
	if err != nil || code != http.StatusOK {
		t.Fatalf("/metrics: %d %v", code, err)
	}
	for series, want := range map[string]float64{
		"mpi_operator_jobs_created_total":    2,
		"mpi_operator_jobs_successful_total": 0,
		"mpi_operator_jobs_failed_total":     0,
		"mpi_operator_is_leader":             1,
		fmt.Sprintf(`mpi_operator_job_info{launcher="%s-launcher",namespace="%s"}`, piJob, jobsNS):      1,
		fmt.Sprintf(`mpi_operator_job_info{launcher="%s-launcher",namespace="%s"}`, elasticJob, jobsNS): 1,
	} {
		if v, ok := harness.Metric(body, series); !ok || v != want {
			t.Errorf("/metrics: %s is %v (present: %v), want %v", series, v, ok, want)
		}
	}
}

// deletePi deletes a job with kubectl: the garbage collector removes every
// child, which the job controls through kubeflow.org/v2beta1.
func deletePi(t *testing.T) {
	must(t, "delete", "mpijob", piJob, "-n", jobsNS, "--timeout=2m")
	children := []string{"service/" + piJob, "secret/" + piJob + "-ssh", "configmap/" + piJob + "-config", "job.batch/" + piJob + "-launcher"}
	harness.Eventually(t, poll, gcWait, "the garbage collector to remove the children of "+piJob, func() (bool, string) {
		left, err := kubectl(append([]string{"get", "-n", jobsNS, "--ignore-not-found", "-o", "name"}, children...)...)
		if err != nil {
			return false, err.Error()
		}
		list, err := pods(jobsNS, piJob, "")
		if err != nil {
			return false, err.Error()
		}
		return strings.TrimSpace(left) == "" && len(list) == 0, "left: " + strings.TrimSpace(left) + " pods " + describe(list)
	})
	if list, err := pods(jobsNS, elasticJob, "worker"); err != nil || len(list) != 1 {
		t.Errorf("after deleting %s, %s has workers %s (%v), want 1", piJob, elasticJob, describe(list), err)
	}
}

// deleteJobsNamespace deletes the jobs' namespace while the elastic job
// runs: the namespace goes, as whoever deletes it expects. The launcher
// Job's pod carries the Job controller's finalizer until it ends, and the
// namespace controller deletes the rest of a namespace only once its pods
// are gone: a pod that never ended would keep the namespace Terminating.
func deleteJobsNamespace(t *testing.T) {
	launchers, err := pods(jobsNS, elasticJob, "launcher")
	if err != nil || len(launchers) != 1 || launchers[0].Status.Phase != corev1.PodRunning || len(launchers[0].Finalizers) == 0 {
		t.Fatalf("want the launcher pod of %s Running, with a finalizer; got %s (%v)", elasticJob, describe(launchers), err)
	}
	must(t, "delete", "namespace", jobsNS, "--wait=false")
	harness.Eventually(t, poll, gcWait, "namespace "+jobsNS+" to be deleted", func() (bool, string) {
		phase, err := kubectl("get", "namespace", jobsNS, "--ignore-not-found", "-o", "jsonpath={.status.phase}")
		if err != nil {
			return false, err.Error()
		}
		left, err := kubectl("get", "-n", jobsNS, "pods,jobs.batch,mpijobs.kubeflow.org", "-o", "name")
		return strings.TrimSpace(phase) == "", fmt.Sprintf("phase %s; left (%v):\n%s", phase, err, left)
	})
}

// checkLeaseReleased: a graceful stop gives the leader Lease up.
func checkLeaseReleased(t *testing.T) {
	var lease coordinationv1.Lease
	mustDecode(t, &lease, "lease", "mpi-operator", "-n", "mpi-operator")
	if h := lease.Spec.HolderIdentity; h != nil && *h != "" {
		t.Errorf("Lease mpi-operator/mpi-operator still names %q after SIGTERM", *h)
	}
}
