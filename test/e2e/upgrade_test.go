package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"

	"github.com/kubeflow/mpi-operator/test/harness"
	"github.com/kubeflow/mpi-operator/test/upstream"
)

// TestUpgrade installs each upstream install of testdata/upstream, leaves
// jobs and their children as the upstream operator leaves them, then applies
// this project's install over it exactly as docs/upgrade.md
// says: one kubectl apply, no deletes. It runs after TestE2E and starts each
// path from a cluster without MPIJobs, operators or their namespaces.
func TestUpgrade(t *testing.T) {
	for _, path := range []struct {
		name string
		run  func(*testing.T)
	}{
		{"v0.3.0-deploy-v1", upgradeFromDeployV1},
		{"v0.3.0-kustomize", upgradeFromKustomize},
		{"v0.8.0-deploy-v2beta1", upgradeFromV080},
	} {
		if !t.Run(path.name, path.run) {
			return
		}
	}
}

const (
	// upgradeNS holds the v2beta1 job of the upgrade paths, v2Job.
	upgradeNS = "upgrade"
	v2Job     = "v2job"
	// gcResyncWait is how long a path waits for the garbage collector to
	// have rediscovered the API after a CRD change (its resync period is
	// 30 s), so that a dependent it would remove is gone by then.
	gcResyncWait = 35 * time.Second
)

func fixturePath(name string) string {
	return filepath.Join("test", "e2e", "testdata", "upstream", name)
}

// upgradeFromDeployV1: upstream's v1 operator install, with a running job
// in the namespace it watches, becomes this one with `kubectl apply -k
// manifests/overlays/standalone`; the operator, started with upstream's
// exact arguments, adopts the job without replacing a pod and then grows it.
func upgradeFromDeployV1(t *testing.T) {
	resetCluster(t)
	mustKubectl(t, "apply", "-f", fixturePath("v0.3.0-deploy-v1.yaml"))
	waitServed(t, "v1")
	const ns, name = "mpi-operator", "adopted"
	waitDefaultServiceAccount(t, ns)
	createUpstreamV1Job(t, ns, name)
	selector := "mpi-job-name=" + name
	before := podUIDs(t, ns, selector)

	t.Logf("apply -k manifests/overlays/standalone:\n%s", mustKubectl(t, "apply", "-k", "manifests/overlays/standalone"))
	waitServed(t, "v1")
	// The operator under test runs as a local process (kwok runs no code).
	mustKubectl(t, "scale", "deployment/mpi-operator", "-n", ns, "--replicas=0")
	op := startUpstreamArgs(t, ns, "upgrade-deploy-v1.log",
		"-alsologtostderr", "--kubectl-delivery-image", "mpioperator/kubectl-delivery:latest",
		"--namespace", "mpi-operator", "--lock-namespace", "mpi-operator")

	// Adopted: the running launcher is told of its hosts, and the status
	// gains the scale selector.
	harness.Eventually(t, poll, settleTimeout, "the operator to adopt the job", func() (bool, string) {
		var launcher corev1.Pod
		if err := getJSON([]string{"pod", name + "-launcher", "-n", ns}, &launcher); err != nil {
			return false, err.Error()
		}
		var job mpiJob
		if err := getJSON([]string{"mpijob", name, "-n", ns}, &job); err != nil {
			return false, err.Error()
		}
		hash := launcher.Annotations["mpi-operator.kubeflow.org/hosts-hash"]
		return hash != "" && job.condition("Running") == "True" && job.Status.ReplicaStatuses["Worker"].Active == 2,
			fmt.Sprintf("hosts-hash %q, %s", hash, job.conditionsString())
	})
	if diff := uidChanges(before, podUIDs(t, ns, selector)); diff != "" {
		t.Fatalf("pods changed by the adoption:\n%s", diff)
	}

	// The adopted job is this operator's: it grows, with exec granted to the
	// new worker, and keeps its first pods.
	mustKubectl(t, "scale", "mpijob/"+name, "-n", ns, "--replicas=3")
	harness.Eventually(t, poll, settleTimeout, "the adopted job to list a third worker", func() (bool, string) {
		script := strings.TrimSpace(mustKubectl(t, "get", "configmap", name+"-config", "-n", ns,
			"-o", `jsonpath={.data.discover_hosts\.sh}`))
		return len(discoveredHosts(script)) == 3, script
	})
	var role rbacv1.Role
	mustGetJSON(t, &role, "role", name+"-launcher", "-n", ns)
	wantExec := []string{name + "-worker-0", name + "-worker-1", name + "-worker-2"}
	if len(role.Rules) != 2 || !slices.Equal(role.Rules[1].ResourceNames, wantExec) {
		t.Errorf("launcher Role rules %+v, want exec into exactly %v", role.Rules, wantExec)
	}
	after := podUIDs(t, ns, selector)
	for pod, uid := range before {
		if after[pod] != uid {
			t.Errorf("pod %s: uid %s before the upgrade, %q after growing", pod, uid, after[pod])
		}
	}
	stopUpgradeOperator(t, op)

	// Upstream's Helm chart passes obsolete flags in Go's single-dash
	// style: they are accepted with a warning, and the operator runs.
	op = startUpstreamArgs(t, ns, "upgrade-helm.log",
		"-alsologtostderr", "--gpus-per-node", "8", "-threadiness", "2",
		"--kubectl-delivery-image", "mpioperator/kubectl-delivery:latest", "--lock-namespace", "mpi-operator")
	mustKubectl(t, "scale", "mpijob/"+name, "-n", ns, "--replicas=2")
	harness.Eventually(t, poll, settleTimeout, "the job to take its third worker out of the script", func() (bool, string) {
		script := strings.TrimSpace(mustKubectl(t, "get", "configmap", name+"-config", "-n", ns,
			"-o", `jsonpath={.data.discover_hosts\.sh}`))
		return len(discoveredHosts(script)) == 2, script
	})
	if lines := logLines(op, "Flag --gpus-per-node has been deprecated"); len(lines) != 1 {
		t.Errorf("the log %s does not warn once of --gpus-per-node: %q", op.LogPath, lines)
	}
	stopUpgradeOperator(t, op)
}

// upgradeFromKustomize: upstream's kustomize install (the v2beta1 operator,
// MPIJobs stored as v2beta1) becomes this one with `kubectl apply -k
// manifests/overlays/kubeflow`. The v1 operator leaves the v2beta1 job
// alone and says so; nothing of it changes, and upstream's CRD applies back
// over ours with the job whole.
func upgradeFromKustomize(t *testing.T) {
	resetCluster(t)
	mustKubectl(t, "create", "namespace", "kubeflow")
	fixture := fixturePath("v0.3.0-kustomize-kubeflow.yaml")
	mustKubectl(t, "apply", "-f", fixture)
	waitServed(t, "v2beta1")
	mustKubectl(t, "create", "namespace", upgradeNS)
	waitDefaultServiceAccount(t, upgradeNS)
	const name = v2Job
	createUpstreamV2Job(t, upgradeNS, name, name+"-worker")
	before := snapshotV2Job(t, "v2beta1")

	t.Logf("apply -k manifests/overlays/kubeflow:\n%s", mustKubectl(t, "apply", "-k", "manifests/overlays/kubeflow"))
	waitServed(t, "v1")
	mustKubectl(t, "scale", "deployment/mpi-operator", "-n", "kubeflow", "--replicas=0")
	// Upstream's arguments, with $(lock-namespace) as its ConfigMap gives it.
	op := startUpstreamArgs(t, "kubeflow", "upgrade-kustomize.log", "-alsologtostderr", "--lock-namespace", "kubeflow")

	harness.Eventually(t, poll, settleTimeout, "a Warning event that the v2beta1 job is left alone", func() (bool, string) {
		out := mustKubectl(t, "get", "events", "-n", upgradeNS, "--field-selector", "reason=UnsupportedAPIVersion",
			"-o", "jsonpath={range .items[*]}{.type} {.message}{\"\\n\"}{end}")
		return strings.Contains(out, "Warning MPIJob "+upgradeNS+"/"+name+" was written through kubeflow.org/v2beta1"), out
	})
	time.Sleep(gcResyncWait)
	if diff := before.diff(snapshotV2Job(t, "v1")); diff != "" {
		t.Errorf("the v2beta1 job changed under the v1 operator:\n%s", diff)
	}
	for _, kind := range []string{"pod", "serviceaccount", "role"} {
		if r := kubectl("get", kind, name+"-launcher", "-n", upgradeNS); r.ok() {
			t.Errorf("the v1 operator made a %s for the v2beta1 job:\n%s", kind, r.stdout)
		}
	}
	stopUpgradeOperator(t, op)

	// Nothing of the job was lost: upstream's CRD, applied back, serves it
	// through v2beta1 with the fields v1 does not know.
	mustKubectl(t, "apply", "-f", fixture)
	waitServed(t, "v2beta1")
	checkV2Fields(t, upgradeNS, name)
}

// upgradeFromV080: over upstream v0.8.0's install (v2beta1 only) this
// project's CRD applies (`kubectl apply -f manifests/base/crd.yaml`), and
// the v2beta1 job stays stored as it was, readable through v1 and whole
// through v2beta1, with every child.
func upgradeFromV080(t *testing.T) {
	resetCluster(t)
	mustKubectl(t, "apply", "-f", fixturePath("v0.8.0-deploy-v2beta1.yaml"))
	waitServed(t, "v2beta1")
	mustKubectl(t, "create", "namespace", upgradeNS)
	waitDefaultServiceAccount(t, upgradeNS)
	const name = v2Job
	createUpstreamV2Job(t, upgradeNS, name, name)
	before := snapshotV2Job(t, "v2beta1")

	t.Logf("apply -f manifests/base/crd.yaml:\n%s", mustKubectl(t, "apply", "-f", "manifests/base/crd.yaml"))
	waitServed(t, "v1")
	var job mpiJob
	mustGetJSON(t, &job, "mpijobs.v1.kubeflow.org", name, "-n", upgradeNS)
	if job.Metadata.ResourceVersion != before.job {
		t.Errorf("job resourceVersion %s after the CRD update, %s before: it was rewritten", job.Metadata.ResourceVersion, before.job)
	}
	if w := job.Spec.MPIReplicaSpecs["Worker"].Replicas; w == nil || *w != 2 {
		t.Errorf("Worker replicas read through v1: %v, want 2", w)
	}
	// The children name their owner through v2beta1, which stays served:
	// the garbage collector, once it has rediscovered the API, still finds
	// the owner and keeps them.
	time.Sleep(gcResyncWait)
	if diff := before.diff(snapshotV2Job(t, "v1")); diff != "" {
		t.Errorf("the v2beta1 job changed:\n%s", diff)
	}
	checkV2Fields(t, upgradeNS, name)
}

// resetCluster removes what the suite and earlier paths installed: the
// MPIJob CRD (and with it every MPIJob), the namespaces, and the
// cluster-scoped RBAC objects of the installs.
func resetCluster(t *testing.T) {
	t.Helper()
	for _, args := range [][]string{
		{"delete", "crd", "mpijobs.kubeflow.org", "--ignore-not-found"},
		{"delete", "namespace", jobNamespace, "kubeflow", operatorNamespace, upgradeNS, "--ignore-not-found"},
		{"delete", "clusterrolebinding", "mpi-operator", "--ignore-not-found"},
		{"delete", "clusterrole", "mpi-operator", "kubeflow-mpijobs-admin", "kubeflow-mpijobs-edit",
			"kubeflow-mpijobs-view", "--ignore-not-found"},
	} {
		if r := kubectlWith(4*time.Minute, args...); !r.ok() {
			t.Fatalf("resetting the cluster\n%s", r)
		}
	}
}

// waitServed waits until the MPIJob CRD is established and the API server
// serves the given version of it.
func waitServed(t *testing.T, version string) {
	t.Helper()
	harness.Eventually(t, poll, settleTimeout, "the API server to serve mpijobs."+version+".kubeflow.org", func() (bool, string) {
		r := kubectl("get", "mpijobs."+version+".kubeflow.org", "-A")
		return r.ok(), r.String()
	})
}

// waitDefaultServiceAccount waits for the namespace's default
// ServiceAccount: a pod created before it exists is refused.
func waitDefaultServiceAccount(t *testing.T, ns string) {
	t.Helper()
	harness.Eventually(t, poll, settleTimeout, "the default ServiceAccount of "+ns, func() (bool, string) {
		r := kubectl("get", "serviceaccount", "default", "-n", ns)
		return r.ok(), r.String()
	})
}

// createObjects writes manifest to a file and creates its objects, as a
// controller creates them (not applied: no last-applied annotation).
func createObjects(t *testing.T, manifest string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "objects.yaml")
	if err := os.WriteFile(path, []byte(manifest), 0o644); err != nil {
		t.Fatal(err)
	}
	mustKubectl(t, "create", "-f", path)
}

// jobUID creates the job from manifest and returns its UID.
func jobUID(t *testing.T, manifest, resource, ns, name string) string {
	t.Helper()
	createObjects(t, manifest)
	uid := strings.TrimSpace(mustKubectl(t, "get", resource, name, "-n", ns, "-o", "jsonpath={.metadata.uid}"))
	if uid == "" {
		t.Fatalf("%s %s/%s has no uid", resource, ns, name)
	}
	return uid
}

// createUpstreamV1Job creates a v1 MPIJob of two workers with the children
// and status that upstream's v1 operator gives a running job, and waits for
// its pods to run.
func createUpstreamV1Job(t *testing.T, ns, name string) {
	t.Helper()
	uid := jobUID(t, upstream.JobManifest("kubeflow.org/v1", ns, name, "mpioperator/mpi-pi", "  cleanPodPolicy: Running\n"), "mpijob", ns, name)
	owner := upstream.OwnerRef("kubeflow.org/v1", name, uid)
	var b strings.Builder
	fmt.Fprintf(&b, `apiVersion: v1
kind: ConfigMap
metadata:
  name: %[1]s-config
  namespace: %[2]s
  labels: {app: %[1]s}
%[3]sdata:
  hostfile: |
    %[1]s-worker-0 slots=1
    %[1]s-worker-1 slots=1
  kubexec.sh: |
    #!/bin/sh
    set -x
    POD_NAME=$1
    shift
    /opt/kube/kubectl exec ${POD_NAME} -- /bin/sh -c "$*"
  discover_hosts.sh: |
    #!/bin/sh
    echo %[1]s-worker-0:1
    echo %[1]s-worker-1:1
---
apiVersion: v1
kind: ServiceAccount
metadata:
  name: %[1]s-launcher
  namespace: %[2]s
  labels: {app: %[1]s}
%[3]s---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata:
  name: %[1]s-launcher
  namespace: %[2]s
%[3]srules:
- apiGroups: [""]
  resources: [pods]
  verbs: [get, list, watch]
- apiGroups: [""]
  resources: [pods/exec]
  verbs: [create]
  resourceNames: [%[1]s-worker-0, %[1]s-worker-1]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata:
  name: %[1]s-launcher
  namespace: %[2]s
%[3]sroleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: Role
  name: %[1]s-launcher
subjects:
- kind: ServiceAccount
  name: %[1]s-launcher
  namespace: %[2]s
`, name, ns, owner)
	for i := range 2 {
		fmt.Fprintf(&b, `---
apiVersion: v1
kind: Pod
metadata:
  name: %[1]s-worker-%[4]d
  namespace: %[2]s
  labels: {group-name: kubeflow.org, mpi-job-name: %[1]s, mpi-job-role: worker, replica-index: "%[4]d"}
%[3]sspec:
  restartPolicy: Never
  containers:
  - name: worker
    image: mpioperator/mpi-pi
    command: [sleep]
    args: [365d]
    volumeMounts:
    - {name: mpi-job-config, mountPath: /etc/mpi}
  volumes:
  - name: mpi-job-config
    configMap:
      name: %[1]s-config
      items: [{key: kubexec.sh, path: kubexec.sh, mode: 365}]
`, name, ns, owner, i)
	}
	fmt.Fprintf(&b, `---
apiVersion: v1
kind: Pod
metadata:
  name: %[1]s-launcher
  namespace: %[2]s
  labels: {group-name: kubeflow.org, mpi-job-name: %[1]s, mpi-job-role: launcher}
%[3]sspec:
  restartPolicy: Never
  serviceAccountName: %[1]s-launcher
  initContainers:
  - name: kubectl-delivery
    image: mpioperator/kubectl-delivery:latest
    env:
    - {name: TARGET_DIR, value: /opt/kube}
    - {name: NAMESPACE, value: %[2]s}
    volumeMounts:
    - {name: mpi-job-kubectl, mountPath: /opt/kube}
    - {name: mpi-job-config, mountPath: /etc/mpi}
  containers:
  - name: launcher
    image: mpioperator/mpi-pi
    command: [mpirun, -n, "2", /home/mpiuser/pi]
    env:
    - {name: OMPI_MCA_plm_rsh_agent, value: /etc/mpi/kubexec.sh}
    - {name: OMPI_MCA_orte_default_hostfile, value: /etc/mpi/hostfile}
    volumeMounts:
    - {name: mpi-job-kubectl, mountPath: /opt/kube}
    - {name: mpi-job-config, mountPath: /etc/mpi}
  volumes:
  - name: mpi-job-kubectl
    emptyDir: {}
  - name: mpi-job-config
    configMap:
      name: %[1]s-config
      items:
      - {key: kubexec.sh, path: kubexec.sh, mode: 365}
      - {key: hostfile, path: hostfile, mode: 292}
      - {key: discover_hosts.sh, path: discover_hosts.sh, mode: 365}
`, name, ns, owner)
	createObjects(t, b.String())
	waitPodsRunning(t, ns, "mpi-job-name="+name, 3)
	now := time.Now().UTC().Format(time.RFC3339)
	mustKubectl(t, "patch", "mpijob", name, "-n", ns, "--subresource=status", "--type=merge", "-p", fmt.Sprintf(`{"status":{
		"conditions":[
			{"type":"Created","status":"True","reason":"MPIJobCreated","message":"MPIJob %[2]s/%[1]s is created.","lastUpdateTime":%[3]q,"lastTransitionTime":%[3]q},
			{"type":"Running","status":"True","reason":"MPIJobRunning","message":"MPIJob %[2]s/%[1]s is running.","lastUpdateTime":%[3]q,"lastTransitionTime":%[3]q}],
		"replicaStatuses":{"Launcher":{"active":1},"Worker":{"active":2}},
		"startTime":%[3]q}}`, name, ns, now))
}

// createUpstreamV2Job creates a v2beta1 MPIJob of two workers with the
// children that upstream's v2beta1 operator gives it (workers' Service
// named service), and waits for its pods to run.
func createUpstreamV2Job(t *testing.T, ns, name, service string) {
	t.Helper()
	uid := jobUID(t, upstream.V2Job(ns, name), "mpijobs.v2beta1.kubeflow.org", ns, name)
	createObjects(t, upstream.V2Children(ns, name, uid, service))
	// kwok completes the pods of batch Jobs at once (its pod-complete
	// stage), so the launcher Job finishes; what is compared later must not
	// be moving any more.
	harness.Eventually(t, poll, jobRunningTimeout, "the workers to run and the launcher Job to complete", func() (bool, string) {
		var list corev1.PodList
		if err := getJSON([]string{"pods", "-n", ns, "-l", "training.kubeflow.org/job-role=worker"}, &list); err != nil {
			return false, err.Error()
		}
		running := 0
		for _, p := range list.Items {
			if p.Status.Phase == corev1.PodRunning {
				running++
			}
		}
		complete := strings.TrimSpace(mustKubectl(t, "get", "job.batch", name+"-launcher", "-n", ns,
			"-o", `jsonpath={.status.conditions[?(@.type=="Complete")].status}`))
		return running == 2 && complete == "True", fmt.Sprintf("Complete=%q; %s", complete, describePods(list.Items))
	})
}

// waitPodsRunning waits until the namespace holds n pods that match
// selector, all Running.
func waitPodsRunning(t *testing.T, ns, selector string, n int) {
	t.Helper()
	harness.Eventually(t, poll, jobRunningTimeout, fmt.Sprintf("%d Running pods %s in %s", n, selector, ns), func() (bool, string) {
		var list corev1.PodList
		if err := getJSON([]string{"pods", "-n", ns, "-l", selector}, &list); err != nil {
			return false, err.Error()
		}
		running := 0
		for _, p := range list.Items {
			if p.Status.Phase == corev1.PodRunning {
				running++
			}
		}
		return running == n && len(list.Items) == n, describePods(list.Items)
	})
}

// podUIDs maps the namespace's pods that match selector to their UIDs.
func podUIDs(t *testing.T, ns, selector string) map[string]string {
	t.Helper()
	var list corev1.PodList
	mustGetJSON(t, &list, "pods", "-n", ns, "-l", selector)
	out := map[string]string{}
	for _, p := range list.Items {
		out[p.Name] = string(p.UID)
	}
	return out
}

// uidChanges describes every pod that is new, gone or replaced between two
// podUIDs maps; "" when there is none.
func uidChanges(before, after map[string]string) string {
	var lines []string
	for name, uid := range before {
		switch now, ok := after[name]; {
		case !ok:
			lines = append(lines, "gone: "+name)
		case now != uid:
			lines = append(lines, fmt.Sprintf("replaced: %s (uid %s -> %s)", name, uid, now))
		}
	}
	for name := range after {
		if _, ok := before[name]; !ok {
			lines = append(lines, "new: "+name)
		}
	}
	slices.Sort(lines)
	return strings.Join(lines, "\n")
}

// v2JobSnapshot is what must not change of a v2beta1 job under the v1
// operator: the stored job and each child.
type v2JobSnapshot struct {
	job      string            // resourceVersion
	children map[string]string // kind/name -> resourceVersion
	pods     map[string]string // name -> uid
}

// snapshotV2Job reads the v2beta1 job (v2Job in upgradeNS) through the
// given API version.
func snapshotV2Job(t *testing.T, version string) v2JobSnapshot {
	t.Helper()
	ns, name := upgradeNS, v2Job
	s := v2JobSnapshot{
		job: strings.TrimSpace(mustKubectl(t, "get", "mpijobs."+version+".kubeflow.org", name, "-n", ns,
			"-o", "jsonpath={.metadata.resourceVersion}")),
		children: map[string]string{},
		pods:     podUIDs(t, ns, "training.kubeflow.org/job-name="+name),
	}
	out := mustKubectl(t, "get", "configmaps,secrets,services,jobs.batch,serviceaccounts,roles,rolebindings", "-n", ns,
		"-o", `jsonpath={range .items[*]}{.kind}/{.metadata.name}={.metadata.resourceVersion}{"\n"}{end}`)
	for _, line := range strings.Fields(out) {
		if k, v, ok := strings.Cut(line, "="); ok && !strings.HasSuffix(k, "/default") && !strings.HasSuffix(k, "/kube-root-ca.crt") {
			s.children[k] = v
		}
	}
	return s
}

func (s v2JobSnapshot) diff(now v2JobSnapshot) string {
	var lines []string
	if s.job != now.job {
		lines = append(lines, fmt.Sprintf("MPIJob resourceVersion %s -> %s", s.job, now.job))
	}
	if d := uidChanges(s.children, now.children); d != "" {
		lines = append(lines, "children:\n"+d)
	}
	if d := uidChanges(s.pods, now.pods); d != "" {
		lines = append(lines, "pods:\n"+d)
	}
	return strings.Join(lines, "\n")
}

// checkV2Fields reads the job through v2beta1 and checks the fields that
// v1 does not have.
func checkV2Fields(t *testing.T, ns, name string) {
	t.Helper()
	var job struct {
		Spec struct {
			SSHAuthMountPath  string `json:"sshAuthMountPath"`
			MPIImplementation string `json:"mpiImplementation"`
			RunPolicy         struct {
				CleanPodPolicy string `json:"cleanPodPolicy"`
			} `json:"runPolicy"`
		} `json:"spec"`
	}
	mustGetJSON(t, &job, "mpijobs.v2beta1.kubeflow.org", name, "-n", ns)
	if job.Spec.SSHAuthMountPath != "/home/mpiuser/.ssh" || job.Spec.MPIImplementation != "OpenMPI" ||
		job.Spec.RunPolicy.CleanPodPolicy != "Running" {
		t.Errorf("v2beta1 fields after the round trip: %+v", job.Spec)
	}
}

// startUpstreamArgs runs the operator binary with exactly the arguments of
// an upstream manifest; the ServiceAccount mpi-operator of ns gives it its
// identity through KUBECONFIG, as the in-cluster configuration would.
func startUpstreamArgs(t *testing.T, ns, logName string, args ...string) *harness.Operator {
	t.Helper()
	op := runOperator(t, harness.OperatorConfig{Kubeconfig: operatorKubeconfig(t, ns),
		LogPath: filepath.Join(env.Dir, logName), Args: args, ExactArgs: true})
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("last lines of the operator log %s:\n%s", op.LogPath, harness.Tail(op.LogPath, 60))
		}
		op.Terminate(10 * time.Second)
		currentOperator = nil
	})
	t.Logf("operator started with upstream's arguments %q: pid %d, log %s", args, op.PID, op.LogPath)
	return op
}

// stopUpgradeOperator stops the operator gracefully and fails on any error
// it logged.
func stopUpgradeOperator(t *testing.T, op *harness.Operator) {
	t.Helper()
	if code, took := op.Terminate(operatorStopLimit); code != 0 {
		t.Errorf("stopping the operator: exit code %d after %s (-1: killed)", code, took)
	}
	currentOperator = nil
	if lines := errorLines(op); len(lines) > 0 {
		t.Errorf("the operator log %s shows errors:\n%s", op.LogPath, strings.Join(lines, "\n"))
	}
}
