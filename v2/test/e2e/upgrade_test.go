package e2e

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/kubeflow/mpi-operator/test/harness"
	"github.com/kubeflow/mpi-operator/test/upstream"
)

// TestUpgrade upgrades each upstream v2beta1 install in place to this
// project's, as v2/README.md says: the install with a running job and its
// children as the upstream operator leaves them, one `kubectl apply -k`
// of the matching overlay, and the binary started with that overlay's
// arguments. The job must go on with the same pods and be this
// operator's: Running, listed under the host names its pods have, and
// growing when scaled. It runs after TestE2E, each path on a cluster
// cleared of what came before.
func TestUpgrade(t *testing.T) {
	for _, path := range []struct {
		name    string
		fixture string // in test/e2e/testdata/upstream
		overlay string
		ns      string // the install's namespace
		service string // the Service, and the workers' subdomain, of upstream's operator
	}{
		{"v0.8.0-deploy-v2beta1", "v0.8.0-deploy-v2beta1.yaml", "v2/manifests/overlays/standalone", "mpi-operator", upgradeJob},
		{"v0.3.0-kustomize", "v0.3.0-kustomize-kubeflow.yaml", "v2/manifests/overlays/kubeflow", "kubeflow", upgradeJob + "-worker"},
	} {
		ok := t.Run(path.name, func(t *testing.T) {
			clearCluster(t)
			if path.ns == "kubeflow" { // the kustomize install expects it
				must(t, "create", "namespace", "kubeflow")
			}
			must(t, "apply", "-f", filepath.Join(suite.Root, "test", "e2e", "testdata", "upstream", path.fixture))
			waitCRD(t)
			waitNamespace(t, upgradeNS)
			upstreamJob(t, path.service)
			before := uids(t, upgradeNS, upgradeJob)

			t.Logf("kubectl apply -k %s:\n%s", path.overlay, must(t, "apply", "-k", path.overlay))
			waitCRD(t)
			must(t, "scale", "deployment/mpi-operator", "-n", path.ns, "--replicas=0")
			op := startOperatorProcess(t, "upgrade-"+path.name+".log", serviceAccountKubeconfig(t, path.ns), installArgs(t, path.ns)...)
			stopAtEnd(t, op)
			waitLeader(t)
			checkUpgraded(t, before)
			stopOperator(t, op, 5*time.Second)
		})
		if !ok {
			return
		}
	}
}

const (
	upgradeNS  = "upgrade"
	upgradeJob = "v2job"
)

// clearCluster removes the MPIJob CRD (and every MPIJob), the namespaces
// and the cluster-scoped objects of any install.
func clearCluster(t *testing.T) {
	t.Helper()
	must(t, "delete", "crd", "mpijobs.kubeflow.org", "--ignore-not-found")
	must(t, "delete", "namespace", jobsNS, upgradeNS, takeoverNS, parityNS, "kubeflow", "mpi-operator", "--ignore-not-found", "--timeout=3m")
	must(t, "delete", "clusterrolebinding", "mpi-operator", "--ignore-not-found")
	must(t, "delete", "clusterrole", "mpi-operator", "kubeflow-mpijobs-admin", "kubeflow-mpijobs-edit", "kubeflow-mpijobs-view", "--ignore-not-found")
}

// upstreamJob creates a v2beta1 job with the children and the status
// upstream's operator gives a running job, and waits for its pods to run.
func upstreamJob(t *testing.T, service string) {
	t.Helper()
	createYAML(t, upstream.V2Job(upgradeNS, upgradeJob))
	uid := strings.TrimSpace(must(t, "get", "mpijob", upgradeJob, "-n", upgradeNS, "-o", "jsonpath={.metadata.uid}"))
	createYAML(t, upstream.V2Children(upgradeNS, upgradeJob, uid, service))
	harness.Eventually(t, poll, settle, "the upstream job's pods to run", func() (bool, string) {
		list, err := pods(upgradeNS, upgradeJob, "")
		if err != nil {
			return false, err.Error()
		}
		n := 0
		for _, p := range list {
			if p.Status.Phase == corev1.PodRunning {
				n++
			}
		}
		return n == upstream.Workers+1 && len(list) == n, describe(list)
	})
	must(t, "patch", "mpijob", upgradeJob, "-n", upgradeNS, "--subresource=status", "--type=merge",
		"-p", upstream.V2RunningStatus(upgradeNS, upgradeJob, time.Now()))
}

// installArgs are the arguments the applied Deployment gives the
// operator, with the Downward API's $(POD_NAMESPACE) as the pod would have
// it and the suite's monitoring port for the container's.
func installArgs(t *testing.T, ns string) []string {
	t.Helper()
	var command, args []string
	out := must(t, "get", "deployment", "mpi-operator", "-n", ns, "-o", "jsonpath={.spec.template.spec.containers[0].command}")
	if err := json.Unmarshal([]byte(out), &command); err != nil || !slices.Equal(command, []string{"/mpi-operator-v2"}) {
		t.Fatalf("the Deployment's command is %s (%v), want [/mpi-operator-v2]", out, err)
	}
	args = containerArgs(t, ns)
	for i, a := range args {
		a = strings.ReplaceAll(a, "$(POD_NAMESPACE)", ns)
		if strings.HasPrefix(a, "--monitoring-port=") {
			a = fmt.Sprintf("--monitoring-port=%d", monitoringPort)
		}
		args[i] = a
	}
	return args
}

// checkUpgraded: the job stays readable and whole, no pod is replaced, the
// operator reports it Running and lists its workers under the host names
// their pods have, and a scale to 3 adds a worker under the job's own
// Service while the first two stay.
func checkUpgraded(t *testing.T, before map[string]string) {
	t.Helper()
	harness.Eventually(t, poll, settle, "the operator to take the job over", func() (bool, string) {
		j, err := getJob(upgradeNS, upgradeJob)
		if err != nil {
			return false, err.Error()
		}
		w := j.Status.ReplicaStatuses["Worker"]
		// The selector is this operator's: upstream writes none.
		return j.is["Running"] == "True" && w.Active == upstream.Workers && w.Selector != "",
			fmt.Sprintf("%s Worker %+v", j.seen, w)
	})
	hosts := waitDiscovery(t, settle, settle, upgradeNS, upgradeJob, upstream.Workers)
	var want []string
	list, err := pods(upgradeNS, upgradeJob, "worker")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range list {
		want = append(want, hostOf(p))
	}
	if !slices.Equal(hosts, want) {
		t.Errorf("discover_hosts.sh lists %v, want the workers' own names %v", hosts, want)
	}
	if diff := changed(before, uids(t, upgradeNS, upgradeJob)); diff != "" {
		t.Fatalf("pods replaced by the upgrade: %s", diff)
	}
	var spec struct {
		Spec struct {
			SSHAuthMountPath string `json:"sshAuthMountPath"`
		} `json:"spec"`
	}
	mustDecode(t, &spec, "mpijob", upgradeJob, "-n", upgradeNS)
	if spec.Spec.SSHAuthMountPath != "/home/mpiuser/.ssh" {
		t.Errorf("the job's sshAuthMountPath is %q after the upgrade", spec.Spec.SSHAuthMountPath)
	}

	must(t, "scale", "mpijob/"+upgradeJob, "-n", upgradeNS, "--replicas=3")
	hosts = waitDiscovery(t, settle, settle, upgradeNS, upgradeJob, 3)
	added := fmt.Sprintf("%s-worker-2.%s.%s.svc", upgradeJob, upgradeJob, upgradeNS)
	if !slices.Contains(hosts, added) || !slices.Contains(hosts, want[0]) || !slices.Contains(hosts, want[1]) {
		t.Errorf("after the scale to 3, discover_hosts.sh lists %v, want %v and %s", hosts, want, added)
	}
	after := uids(t, upgradeNS, upgradeJob)
	for name, uid := range before {
		if after[name] != uid {
			t.Errorf("pod %s: uid %s before the upgrade, %q after the scale", name, uid, after[name])
		}
	}
}

// changed lists the pods of before that are gone or have another UID in
// after, and the pods new in after.
func changed(before, after map[string]string) string {
	var out []string
	for name, uid := range before {
		if after[name] != uid {
			out = append(out, fmt.Sprintf("%s (uid %s -> %q)", name, uid, after[name]))
		}
	}
	for name := range after {
		if _, ok := before[name]; !ok {
			out = append(out, "new "+name)
		}
	}
	slices.Sort(out)
	return strings.Join(out, ", ")
}
