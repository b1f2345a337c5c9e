package mpi

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kubeflow/mpi-operator/test/harness"
)

const (
	namespace = "mpi-run"
	job       = "allreduce"
	slots     = 2
	// waitTimeout bounds each wait for the operator or kwok; the machine
	// may be busy with other suites.
	waitTimeout = 90 * time.Second
)

var (
	execGVR = schema.GroupVersionResource{Group: "kwok.x-k8s.io", Version: "v1alpha1", Resource: "execs"}
	logsGVR = schema.GroupVersionResource{Group: "kwok.x-k8s.io", Version: "v1alpha1", Resource: "logs"}
)

// jobManifest is an MPIJob as a user writes it: the launcher runs mpirun
// on the program, the workers only wait. Open MPI refuses to run as root
// unless told; these containers, like this test, run as root. All "pods"
// are processes of this machine, which may have no other interface than
// loopback (that Open MPI's TCP transport leaves out by default).
func jobManifest(program string) string {
	return fmt.Sprintf(`apiVersion: kubeflow.org/v1
kind: MPIJob
metadata:
  name: %[1]s
  namespace: %[2]s
spec:
  slotsPerWorker: %[3]d
  mpiReplicaSpecs:
    Launcher:
      replicas: 1
      template:
        spec:
          containers:
          - name: launcher
            image: debian:bookworm
            command: ["mpirun"]
            args: ["%[4]s"]
            env: &env
            - {name: OMPI_ALLOW_RUN_AS_ROOT, value: "1"}
            - {name: OMPI_ALLOW_RUN_AS_ROOT_CONFIRM, value: "1"}
            - {name: OMPI_MCA_btl_tcp_if_include, value: lo}
            - {name: OMPI_MCA_oob_tcp_if_include, value: lo}
    Worker:
      replicas: 2
      template:
        spec:
          containers:
          - name: worker
            image: debian:bookworm
            env: *env
`, job, namespace, slots, program)
}

// TestMPIRunThroughTheLauncher runs mpirun as the launcher would: with the
// operator's kubexec.sh as Open MPI's rsh agent, its hostfile, and the
// launcher ServiceAccount's token; ranks start in the workers through
// kubectl exec, compute an allreduce and say which pod they ran in. Then
// the job grows from 2 to 4 workers and a second run uses the hosts of
// discover_hosts.sh. Exec into a pod the launcher's Role does not name is
// refused, and kubectl logs of the simulated pods returns what kwok is told.
func TestMPIRunThroughTheLauncher(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	root := t.TempDir()

	if out, err := kubectl(ctx, "create", "namespace", namespace); err != nil {
		t.Fatalf("creating namespace %s: %v\n%s", namespace, err, out)
	}
	manifest := filepath.Join(root, "job.yaml")
	if err := os.WriteFile(manifest, []byte(jobManifest(env.program)), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := kubectl(ctx, "apply", "-f", manifest); err != nil {
		t.Fatalf("kubectl apply -f %s: %v\n%s", manifest, err, out)
	}
	workers := waitForWorkers(ctx, t, 2)

	launcherRoot := filepath.Join(root, "launcher")
	l, err := materialiseLauncher(ctx, namespace, job+"-launcher", launcherRoot)
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range workers {
		serveExec(ctx, t, w, filepath.Join(root, "pods", w))
	}

	// First run: mpirun with the launcher's own command line; the hostfile
	// comes from OMPI_MCA_orte_default_hostfile.
	hostfile, err := os.ReadFile(l.path("/etc/mpi/hostfile"))
	if err != nil {
		t.Fatal(err)
	}
	_, hostfileSlots, err := hostSlots(string(hostfile))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(slotsOf(workers), hostfileSlots); diff != "" {
		t.Fatalf("hostfile (-want +got):\n%s\n%s", diff, hostfile)
	}
	out := runLauncher(ctx, t, l, l.command)
	checkRun(t, out, hostfileSlots)

	t.Run("kubectl logs", func(t *testing.T) {
		checkLogs(ctx, t, root, out, workers)
	})
	t.Run("exec outside the Role is refused", func(t *testing.T) {
		checkRefused(ctx, t, l, root)
	})

	// Grow to 4 workers; the second run takes its hosts from
	// discover_hosts.sh, as Horovod's elastic driver does.
	if out, err := kubectl(ctx, "scale", "-n", namespace, "mpijob/"+job, "--replicas=4"); err != nil {
		t.Fatalf("kubectl scale: %v\n%s", err, out)
	}
	workers = waitForWorkers(ctx, t, 4)
	if l, err = materialiseLauncher(ctx, namespace, job+"-launcher", launcherRoot); err != nil {
		t.Fatal(err)
	}
	for _, w := range workers[2:] {
		serveExec(ctx, t, w, filepath.Join(root, "pods", w))
	}
	discovered, err := l.run(ctx, l.path("/etc/mpi/discover_hosts.sh"))
	if err != nil {
		t.Fatalf("discover_hosts.sh: %v\n%s", err, discovered)
	}
	hosts, discoveredSlots, err := hostSlots(discovered)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(slotsOf(workers), discoveredSlots); diff != "" {
		t.Fatalf("discover_hosts.sh (-want +got):\n%s\n%s", diff, discovered)
	}
	var hostList []string
	total := 0
	for _, h := range hosts {
		hostList = append(hostList, fmt.Sprintf("%s:%d", h, discoveredSlots[h]))
		total += discoveredSlots[h]
	}
	argv := append([]string{l.command[0], "-np", strconv.Itoa(total), "-H", strings.Join(hostList, ",")}, l.command[1:]...)
	checkRun(t, runLauncher(ctx, t, l, argv), discoveredSlots)
}

// waitForWorkers waits until n workers are Running, named in the
// ConfigMap's hostfile and discover_hosts.sh, and granted exec by the
// launcher's Role, and returns their names in index order.
func waitForWorkers(ctx context.Context, t *testing.T, n int) []string {
	t.Helper()
	var names []string
	for i := 0; i < n; i++ {
		names = append(names, fmt.Sprintf("%s-worker-%d", job, i))
	}
	want := slotsOf(names)
	harness.Eventually(t, harness.Poller{Every: 200 * time.Millisecond}, waitTimeout,
		fmt.Sprintf("%d workers Running, listed and granted exec", n), func() (bool, string) {
			pods, err := env.Kube.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{LabelSelector: "mpi-job-role=worker,mpi-job-name=" + job})
			if err != nil {
				return false, err.Error()
			}
			var running []string
			for _, p := range pods.Items {
				if p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil {
					running = append(running, p.Name)
				}
			}
			slices.Sort(running)
			cm, err := env.Kube.CoreV1().ConfigMaps(namespace).Get(ctx, job+"-config", metav1.GetOptions{})
			if err != nil {
				return false, err.Error()
			}
			role, err := env.Kube.RbacV1().Roles(namespace).Get(ctx, job+"-launcher", metav1.GetOptions{})
			if err != nil {
				return false, err.Error()
			}
			granted := execGranted(role.Rules)
			seen := fmt.Sprintf("running %v, exec granted on %v, hostfile:\n%sdiscover_hosts.sh:\n%s",
				running, granted, cm.Data["hostfile"], cm.Data["discover_hosts.sh"])
			_, inHostfile, err1 := hostSlots(cm.Data["hostfile"])
			var echoed []string
			for _, line := range strings.Split(cm.Data["discover_hosts.sh"], "\n") {
				if host, ok := strings.CutPrefix(line, "echo "); ok {
					echoed = append(echoed, host)
				}
			}
			_, discovered, err2 := hostSlots(strings.Join(echoed, "\n"))
			return err1 == nil && err2 == nil && cmp.Equal(running, sortedKeys(want)) &&
				cmp.Equal(inHostfile, want) && cmp.Equal(discovered, want) && cmp.Equal(granted, sortedKeys(want)), seen
		})
	return names
}

// execGranted lists the pods the rules let the launcher exec into.
func execGranted(rules []rbacv1.PolicyRule) []string {
	var names []string
	for _, r := range rules {
		if slices.Contains(r.Resources, "pods/exec") && slices.Contains(r.Verbs, "create") {
			names = append(names, r.ResourceNames...)
		}
	}
	slices.Sort(names)
	return names
}

func slotsOf(pods []string) map[string]int {
	m := map[string]int{}
	for _, p := range pods {
		m[p] = slots
	}
	return m
}

func sortedKeys(m map[string]int) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// serveExec tells kwok how to run what is exec'd into pod: a local process
// in dir, with the pod's container environment plus what tells this pod's
// processes from another's on one machine: MPI_TEST_POD, which the program
// prints, and a TMPDIR and shared-memory directory of its own (each
// container has its own /tmp and /dev/shm; Open MPI names its shared-memory
// files after the host name, which all "pods" here share).
func serveExec(ctx context.Context, t *testing.T, pod, dir string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	p, err := env.Kube.CoreV1().Pods(namespace).Get(ctx, pod, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	envs := []any{
		map[string]any{"name": "MPI_TEST_POD", "value": pod},
		map[string]any{"name": "TMPDIR", "value": dir},
		map[string]any{"name": "OMPI_MCA_btl_vader_backing_directory", "value": dir},
	}
	for _, e := range p.Spec.Containers[0].Env {
		envs = append(envs, map[string]any{"name": e.Name, "value": e.Value})
	}
	createKwok(ctx, t, execGVR, pod, map[string]any{
		"execs": []any{map[string]any{"local": map[string]any{"workDir": dir, "envs": envs}}},
	})
	// kwok reads Exec objects through a watch: wait until an exec (as the
	// admin) runs in dir as that pod.
	want := dir + " " + pod
	harness.Eventually(t, poll, waitTimeout, "kwok to serve exec into "+pod, func() (bool, string) {
		out, err := kubectl(ctx, "exec", "-n", namespace, pod, "--", "/bin/sh", "-c", `echo "$(pwd) $MPI_TEST_POD"`)
		return err == nil && out == want, out
	})
}

// poll is how the tests wait.
var poll = harness.Poller{Every: 200 * time.Millisecond}

// createKwok creates a namespaced kwok object named after a pod.
func createKwok(ctx context.Context, t *testing.T, gvr schema.GroupVersionResource, pod string, spec map[string]any) {
	t.Helper()
	kind := map[string]string{"execs": "Exec", "logs": "Logs"}[gvr.Resource]
	obj := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": gvr.GroupVersion().String(),
		"kind":       kind,
		"metadata":   map[string]any{"name": pod, "namespace": namespace},
		"spec":       spec,
	}}
	if _, err := env.Dynamic.Resource(gvr).Namespace(namespace).Create(ctx, obj, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatalf("creating %s %s: %v", kind, pod, err)
	}
}

// runLauncher runs argv in the launcher and fails the test on an error.
func runLauncher(ctx context.Context, t *testing.T, l *launcher, argv []string) string {
	t.Helper()
	runCtx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	start := time.Now()
	out, err := l.run(runCtx, argv...)
	t.Logf("%s (%s):\n%s", strings.Join(argv, " "), time.Since(start).Round(10*time.Millisecond), out)
	if err != nil {
		t.Fatalf("%s: %v", strings.Join(argv, " "), err)
	}
	return out
}

// checkRun compares a run's output with one rank per slot of each host.
func checkRun(t *testing.T, out string, hostSlots map[string]int) {
	t.Helper()
	ranks, err := parseRanks(out)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(expected(hostSlots), summarise(ranks)); diff != "" {
		t.Errorf("the run (-want +got):\n%s", diff)
	}
}
