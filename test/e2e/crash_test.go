package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"

	"github.com/kubeflow/mpi-operator/test/harness"
)

const crashJobYAML = `apiVersion: kubeflow.org/v1
kind: MPIJob
metadata:
  name: crash
spec:
  elasticPolicy:
    minReplicas: 1
    maxReplicas: 8
    drainSeconds: 1
  mpiReplicaSpecs:
    Launcher:
      template:
        spec:
          containers:
          - name: launcher
            image: mpioperator/mpi-pi:openmpi
    Worker:
      replicas: 2
      template:
        spec:
          containers:
          - name: worker
            image: mpioperator/mpi-pi:openmpi
`

// crashRestart kills the operator with SIGKILL at varying moments while an
// elastic job is being resized, starts it again each time, and checks that
// the job converges to exactly what it asks for: everything the operator
// knows is derived from the cluster, so nothing is duplicated, orphaned or
// lost. Leader election is off here so that a restart need not wait for the
// dead process's Lease to expire.
func (s *suite) crashRestart(t *testing.T) {
	path := filepath.Join(env.Dir, "crash-job.yaml")
	if err := os.WriteFile(path, []byte(crashJobYAML), 0o644); err != nil {
		t.Fatal(err)
	}
	kubeconfig := filepath.Join(env.Dir, "operator.kubeconfig")
	runs := 0
	start := func() {
		t.Helper()
		runs++
		s.op = startOperator(t, kubeconfig, filepath.Join(env.Dir, fmt.Sprintf("operator-crash-%d.log", runs)), "--leader-elect=false")
	}
	start()
	mustKubectl(t, "create", "-n", jobNamespace, "-f", path)
	waitJobRunning(t, "crash")

	sizes := []int{5, 1, 6, 2, 4, 1, 6, 3}
	for i, n := range sizes {
		mustKubectl(t, "scale", "mpijob/crash", "-n", jobNamespace, fmt.Sprintf("--replicas=%d", n))
		// Somewhere between right away and well into the resize.
		time.Sleep(time.Duration(i*53%250) * time.Millisecond)
		if !s.op.Kill() {
			t.Fatalf("SIGKILL: the operator had exited already (%s)", s.op.Status())
		}
		start()
	}
	want := sizes[len(sizes)-1]

	var workers []string
	harness.Eventually(t, poll, 2*settleTimeout, fmt.Sprintf("MPIJob crash to settle on %d Running workers", want), func() (bool, string) {
		pods, err := workerPods("crash")
		if err != nil {
			return false, err.Error()
		}
		workers = workers[:0]
		for _, p := range pods {
			if p.DeletionTimestamp != nil || p.Status.Phase != corev1.PodRunning {
				return false, "not settled: " + describePods(pods)
			}
			workers = append(workers, p.Name)
		}
		return len(workers) == want, describePods(pods)
	})
	sort.Slice(workers, func(i, j int) bool { return workerIndex(workers[i]) < workerIndex(workers[j]) })

	var hosts []string
	for _, w := range workers {
		hosts = append(hosts, w+":1")
	}
	harness.Eventually(t, poll, settleTimeout, "discover_hosts.sh, the hostfile and the Role to name exactly the workers", func() (bool, string) {
		var cm corev1.ConfigMap
		if err := getJSON([]string{"configmap", "crash-config", "-n", jobNamespace}, &cm); err != nil {
			return false, err.Error()
		}
		var role rbacv1.Role
		if err := getJSON([]string{"role", "crash-launcher", "-n", jobNamespace}, &role); err != nil {
			return false, err.Error()
		}
		var exec []string
		for _, r := range role.Rules {
			if slices.Contains(r.Resources, "pods/exec") {
				exec = append(exec, r.ResourceNames...)
			}
		}
		var hostfile []string
		for _, line := range strings.Split(strings.TrimSpace(cm.Data["hostfile"]), "\n") {
			hostfile = append(hostfile, strings.Fields(line)[0])
		}
		seen := fmt.Sprintf("workers %v; discover_hosts.sh %v; hostfile %v; exec %v",
			workers, discoveredHosts(cm.Data["discover_hosts.sh"]), hostfile, exec)
		return slices.Equal(discoveredHosts(cm.Data["discover_hosts.sh"]), hosts) &&
			slices.Equal(hostfile, workers) && slices.Equal(exec, workers), seen
	})

	// One launcher, and the high-water mark above every worker so that no
	// name is given out twice.
	var launchers corev1.PodList
	mustGetJSON(t, &launchers, "pods", "-n", jobNamespace, "-l", "mpi-job-name=crash,mpi-job-role=launcher")
	if len(launchers.Items) != 1 {
		t.Errorf("MPIJob crash has %d launcher pods, want 1", len(launchers.Items))
	}
	var cm corev1.ConfigMap
	mustGetJSON(t, &cm, "configmap", "crash-config", "-n", jobNamespace)
	next, err := strconv.Atoi(cm.Annotations["mpi-operator.kubeflow.org/next-worker-index"])
	if err != nil || next <= workerIndex(workers[len(workers)-1]) {
		t.Errorf("next worker index %q, want one above every worker %v", cm.Annotations["mpi-operator.kubeflow.org/next-worker-index"], workers)
	}
	var job mpiJob
	mustGetJSON(t, &job, "mpijob", "crash", "-n", jobNamespace)
	if got := job.condition("Running"); got != "True" {
		t.Errorf("MPIJob crash is not Running after the restarts: %s", job.conditionsString())
	}
	raw, _ := json.Marshal(job.Status)
	t.Logf("after %d SIGKILLs: workers %v, status %s", len(sizes), workers, raw)

	if code, _ := s.op.Terminate(30 * time.Second); code != 0 {
		t.Errorf("the last operator stopped with code %d (-1: killed after 30 s)", code)
	}
}
