package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubeflow/mpi-operator/test/harness"
)

const (
	// operatorUser is the operator's identity in the API server's audit
	// log: it runs with a token of its ServiceAccount.
	operatorUser = harness.OperatorUser
	// benchRBACName names the ClusterRoleBinding the bench creates.
	benchRBACName = "mpi-operator-bench"
	userAgent     = "mpi-operator-bench"
)

// cluster is the control plane the bench runs on.
type cluster struct {
	*harness.Cluster
	// auditLog is the API server's audit log, or "" when the bench cannot
	// read one (an existing cluster given without --audit-log).
	auditLog string
	// params describes the cluster for the report.
	params string
}

// clusterCapacity is the KWOK node count and pods per node for the run.
func clusterCapacity(o *options) (nodes, podsPerNode int) {
	podsPerNode = o.kwokNodePods
	nodes = o.kwokNodes
	if nodes > 0 {
		return nodes, podsPerNode
	}
	want := 0
	if o.runs(scenarioLatency) {
		want += o.jobs * (o.maxWorkers + 1)
	}
	if o.runs(scenarioLoad) {
		want += o.loadJobs * (o.maxWorkers + 1)
	}
	if o.runs(scenarioBigJob) {
		want += o.bigWorkers + 1
	}
	if o.runs(scenarioMemory) {
		want += o.memPods + o.memJobs()
	}
	// Each scenario's pods are counted as if all were in place at once:
	// the memory scenario deletes the others' namespaces, but may go on
	// before they are gone. 10% spare: the scheduler spreads pods, it
	// does not pack them.
	nodes = (want*11/10 + podsPerNode - 1) / podsPerNode
	return max(nodes, 2), podsPerNode
}

// startCluster starts a fresh cluster with hack/cluster-up.sh, with the API
// server's audit log on for the operator's ServiceAccount.
func startCluster(ctx context.Context, o *options) (*cluster, error) {
	if err := os.MkdirAll(o.localDir, 0o755); err != nil {
		return nil, err
	}
	c := &cluster{}
	policy := filepath.Join(o.localDir, "audit-policy.yaml")
	if err := os.WriteFile(policy, []byte(auditPolicy(operatorUser)), 0o644); err != nil {
		return nil, err
	}
	c.auditLog = filepath.Join(o.localDir, "audit.log")
	if err := os.Remove(c.auditLog); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	nodes, podsPerNode := clusterCapacity(o)
	settings := append([]string{},
		fmt.Sprintf("KWOK_NODES=%d", nodes),
		fmt.Sprintf("KWOK_NODE_PODS=%d", podsPerNode),
		"CLUSTER_UP_TIMEOUT=300",
		// Written as the operator's requests complete; never rotated.
		"APISERVER_EXTRA_ARGS=--audit-policy-file="+policy+" --audit-log-path="+c.auditLog+
			" --audit-log-maxsize=100000 --audit-log-format=json",
		// Neither garbage collection nor binding should be what the
		// operator waits for.
		"CONTROLLER_MANAGER_EXTRA_ARGS=--kube-api-qps=200 --kube-api-burst=400",
		"SCHEDULER_EXTRA_ARGS=--kube-api-qps=200 --kube-api-burst=400",
	)
	if o.api.LauncherJob {
		// The launcher runs for the whole scenario, as a training would.
		settings = append(settings, "KWOK_JOB_PODS_COMPLETE=false")
	}
	c.params = fmt.Sprintf("fresh local control plane (hack/cluster-up.sh): %d kwok nodes x %d pods; "+
		"kube-controller-manager and kube-scheduler at --kube-api-qps=200 --kube-api-burst=400", nodes, podsPerNode)
	logf("starting the cluster: %d kwok nodes x %d pods (hack/cluster-up.sh)", nodes, podsPerNode)
	var err error
	c.Cluster, err = harness.StartCluster(ctx, o.root, o.localDir, userAgent, settings, logf)
	return c, err
}

// useCluster connects to an existing cluster; the bench neither starts nor
// stops it.
func useCluster(ctx context.Context, o *options) (*cluster, error) {
	c := &cluster{auditLog: o.auditLog, params: "existing cluster from " + o.kubeconfig}
	if c.auditLog == "" {
		c.params += " (no audit log: API requests of the operator not counted)"
	}
	var err error
	c.Cluster, err = harness.UseCluster(ctx, o.root, o.localDir, o.kubeconfig, o.kubectl, userAgent, logf)
	return c, err
}

// stop stops a cluster the bench started, unless keep is set. On a
// cluster it did not start, it deletes its namespaces and binding instead
// (without waiting); the CRD and the operator's ServiceAccount stay.
func (c *cluster) stop(keep bool) {
	if c == nil || c.Cluster == nil {
		return
	}
	if c.Started() {
		c.Stop(keep)
		return
	}
	if keep || c.Kube == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, ns := range []string{latencyNamespace, loadNamespace, bigJobNamespace, memoryNamespace} {
		if err := c.Kube.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			logf("deleting namespace %s: %v", ns, err)
		}
	}
	if err := c.Kube.RbacV1().ClusterRoleBindings().Delete(ctx, benchRBACName, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		logf("deleting ClusterRoleBinding %s: %v", benchRBACName, err)
	}
}

// readAudit returns the operator's requests so far, waiting a moment for
// the last ones to reach the file.
func (c *cluster) readAudit() ([]auditEvent, error) {
	if c.auditLog == "" {
		return nil, errors.New("no audit log")
	}
	time.Sleep(time.Second)
	return readAudit(c.auditLog, operatorUser)
}

// componentPID is the PID of a process of the control plane the bench
// started (hack/cluster-up.sh records them in <dir>/pids/<name>.pid), or 0
// on a cluster it did not start or when the file cannot be read.
func (c *cluster) componentPID(name string) int {
	if c == nil || !c.Started() {
		return 0
	}
	b, err := os.ReadFile(filepath.Join(c.Dir, "pids", name+".pid"))
	if err != nil {
		return 0
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		return 0
	}
	return pid
}
