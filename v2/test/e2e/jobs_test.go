package e2e

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubeflow/mpi-operator/test/harness"
)

// job is what the suite reads of a kubeflow.org/v2beta1 MPIJob, declared
// from the API's JSON field names rather than taken from the Go types: the
// suite checks the wire format.
type job struct {
	Status struct {
		Conditions []struct {
			Type, Status, Reason string
		} `json:"conditions"`
		ReplicaStatuses map[string]struct {
			Active   int32  `json:"active"`
			Selector string `json:"selector"`
		} `json:"replicaStatuses"`
		StartTime *metav1.Time `json:"startTime"`
	} `json:"status"`

	// is maps each condition type to its status; seen lists them all with
	// their reasons, for messages.
	is   map[string]string
	seen string
}

// getJob reads an MPIJob.
func getJob(ns, name string) (*job, error) {
	var j job
	if err := decode(&j, "mpijob", name, "-n", ns); err != nil {
		return nil, err
	}
	j.is = map[string]string{}
	var seen []string
	for _, c := range j.Status.Conditions {
		j.is[c.Type] = c.Status
		seen = append(seen, c.Type+"="+c.Status+"("+c.Reason+")")
	}
	j.seen = "conditions [" + strings.Join(seen, " ") + "]"
	return &j, nil
}

// waitCondition waits until the condition typ of the job name of the
// suite's namespace has status want.
func waitCondition(t *testing.T, name, typ, want string) {
	t.Helper()
	harness.Eventually(t, poll, settle, fmt.Sprintf("MPIJob %s: %s=%s", name, typ, want), func() (bool, string) {
		j, err := getJob(jobsNS, name)
		if err != nil {
			return false, err.Error()
		}
		return j.is[typ] == want, j.seen
	})
}

// pods lists the job's pods of a role ("" for all), by name.
func pods(ns, name, role string) ([]corev1.Pod, error) {
	selector := "training.kubeflow.org/job-name=" + name
	if role != "" {
		selector += ",training.kubeflow.org/job-role=" + role
	}
	var list corev1.PodList
	if err := decode(&list, "pods", "-n", ns, "-l", selector); err != nil {
		return nil, err
	}
	slices.SortFunc(list.Items, func(a, b corev1.Pod) int { return strings.Compare(a.Name, b.Name) })
	return list.Items, nil
}

func describe(list []corev1.Pod) string {
	var parts []string
	for _, p := range list {
		s := p.Name + "=" + string(p.Status.Phase)
		if p.DeletionTimestamp != nil {
			s += "(deleting)"
		}
		parts = append(parts, s)
	}
	return "[" + strings.Join(parts, " ") + "]"
}

// uids maps the job's pods to their UIDs.
func uids(t *testing.T, ns, name string) map[string]string {
	t.Helper()
	list, err := pods(ns, name, "")
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, p := range list {
		out[p.Name] = string(p.UID)
	}
	return out
}

// hostOf is the DNS name a pod has under its own subdomain, as
// discover_hosts.sh must print it.
func hostOf(p corev1.Pod) string {
	return p.Spec.Hostname + "." + p.Spec.Subdomain + "." + p.Namespace + ".svc"
}

// script is the job's discover_hosts.sh and the hosts it prints.
func script(ns, name string) (string, []string, error) {
	out, err := kubectl("get", "configmap", name+"-config", "-n", ns, "-o", `jsonpath={.data.discover_hosts\.sh}`)
	if err != nil {
		return "", nil, err
	}
	var hosts []string
	for _, line := range strings.Split(out, "\n") {
		if h, ok := strings.CutPrefix(strings.TrimSpace(line), "echo "); ok {
			hosts = append(hosts, strings.TrimSpace(h))
		}
	}
	return out, hosts, nil
}

// discovery compares discover_hosts.sh with the job's workers. It returns
// the hosts it lists and the hosts of the Running workers that are not
// being deleted, both sorted, the listed hosts that belong to no worker or
// to one being deleted (those a launcher must never be given), and the
// number of worker pods.
func discovery(ns, name string) (listed, runningHosts, wrong []string, seen string, workerPods int, err error) {
	text, listed, err := script(ns, name)
	if err != nil {
		return nil, nil, nil, "", 0, err
	}
	// The pods after the script: a worker leaves the script before its
	// deletion starts, so a listed host must still be a live worker.
	workers, err := pods(ns, name, "worker")
	if err != nil {
		return nil, nil, nil, "", 0, err
	}
	live := map[string]bool{}
	for _, p := range workers {
		if p.DeletionTimestamp == nil {
			live[hostOf(p)] = true
			if p.Status.Phase == corev1.PodRunning {
				runningHosts = append(runningHosts, hostOf(p))
			}
		}
	}
	for _, h := range listed {
		if !live[h] {
			wrong = append(wrong, h)
		}
	}
	slices.Sort(listed)
	slices.Sort(runningHosts)
	return listed, runningHosts, wrong, fmt.Sprintf("workers %s; discover_hosts.sh:\n%s", describe(workers), text), len(workers), nil
}

// waitDiscovery waits, at most follow, until discover_hosts.sh lists
// exactly n hosts, each a Running worker; then, at most settleIn, until
// the job has exactly those n worker pods (removed workers are deleted
// only after their drain). Every look on the way checks that no listed
// host is gone or being deleted. It returns the hosts listed.
func waitDiscovery(t *testing.T, follow, settleIn time.Duration, ns, name string, n int) []string {
	t.Helper()
	var hosts []string
	look := func(done func(listed, runningHosts []string, workers int) bool) func() (bool, string) {
		return func() (bool, string) {
			listed, runningHosts, wrong, seen, workers, err := discovery(ns, name)
			if err != nil {
				return false, err.Error()
			}
			if len(wrong) > 0 {
				t.Errorf("discover_hosts.sh of %s lists %v, which are gone or being deleted; %s", name, wrong, seen)
			}
			hosts = listed
			return done(listed, runningHosts, workers), seen
		}
	}
	harness.Eventually(t, poll, follow, fmt.Sprintf("discover_hosts.sh of %s to list %d Running workers", name, n),
		look(func(listed, runningHosts []string, _ int) bool {
			return len(listed) == n && !slices.ContainsFunc(listed, func(h string) bool { return !slices.Contains(runningHosts, h) })
		}))
	harness.Eventually(t, poll, settleIn, fmt.Sprintf("%s to have exactly the %d workers listed", name, n),
		look(func(listed, runningHosts []string, workers int) bool {
			return workers == n && slices.Equal(listed, runningHosts)
		}))
	return hosts
}

// ownedByJob checks that meta has exactly one controller reference, to the
// MPIJob name through kubeflow.org/v2beta1.
func ownedByJob(t *testing.T, what string, meta metav1.ObjectMeta, name string) {
	t.Helper()
	ref := metav1.GetControllerOfNoCopy(&meta)
	if ref == nil || ref.APIVersion != "kubeflow.org/v2beta1" || ref.Kind != "MPIJob" || ref.Name != name {
		t.Errorf("%s %s: controller reference %+v, want MPIJob %s through kubeflow.org/v2beta1", what, meta.Name, ref, name)
	}
}

// checkChildren checks the children of a running job of the given workers:
// the headless Service <job>, the SSH Secret, the ConfigMap with its
// hostfile, the launcher batch/v1 Job and its pod, and the workers with
// their labels and host names; each controlled by the job.
func checkChildren(t *testing.T, ns, name string, workers int) {
	t.Helper()
	var svc corev1.Service
	mustDecode(t, &svc, "service", name, "-n", ns)
	ownedByJob(t, "Service", svc.ObjectMeta, name)
	if svc.Spec.ClusterIP != corev1.ClusterIPNone || svc.Spec.Selector["training.kubeflow.org/job-name"] != name {
		t.Errorf("Service %s: clusterIP %q, selector %v; want a headless Service of the job's pods", name, svc.Spec.ClusterIP, svc.Spec.Selector)
	}

	var secret corev1.Secret
	mustDecode(t, &secret, "secret", name+"-ssh", "-n", ns)
	ownedByJob(t, "Secret", secret.ObjectMeta, name)
	if secret.Type != corev1.SecretTypeSSHAuth || len(secret.Data["ssh-privatekey"]) == 0 ||
		!strings.HasPrefix(string(secret.Data["ssh-publickey"]), "ecdsa-sha2-nistp521 ") {
		t.Errorf("Secret %s-ssh: type %s, keys %d/%q; want kubernetes.io/ssh-auth with an ECDSA P-521 key pair",
			name, secret.Type, len(secret.Data["ssh-privatekey"]), secret.Data["ssh-publickey"])
	}

	var cm corev1.ConfigMap
	mustDecode(t, &cm, "configmap", name+"-config", "-n", ns)
	ownedByJob(t, "ConfigMap", cm.ObjectMeta, name)
	var want strings.Builder
	for i := range workers {
		fmt.Fprintf(&want, "%s-worker-%d.%s.%s.svc slots=1\n", name, i, name, ns)
	}
	if cm.Data["hostfile"] != want.String() {
		t.Errorf("hostfile of %s:\n%s\nwant:\n%s", name, cm.Data["hostfile"], want.String())
	}

	var launcher batchv1.Job
	mustDecode(t, &launcher, "job.batch", name+"-launcher", "-n", ns)
	ownedByJob(t, "Job", launcher.ObjectMeta, name)
	launchers, err := pods(ns, name, "launcher")
	if err != nil {
		t.Fatal(err)
	}
	if len(launchers) != 1 || launchers[0].Status.Phase != corev1.PodRunning ||
		launchers[0].Spec.Hostname != name+"-launcher" || launchers[0].Spec.Subdomain != name {
		t.Errorf("launcher pods of %s: %s, want one Running with host name %s-launcher.%s", name, describe(launchers), name, name)
	}

	list, err := pods(ns, name, "worker")
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != workers {
		t.Fatalf("worker pods of %s: %s, want %d", name, describe(list), workers)
	}
	for i, p := range list {
		ownedByJob(t, "Pod", p.ObjectMeta, name)
		wantName := fmt.Sprintf("%s-worker-%d", name, i)
		if p.Name != wantName || p.Spec.Hostname != wantName || p.Spec.Subdomain != name ||
			p.Labels["training.kubeflow.org/operator-name"] != "mpi-operator" ||
			p.Labels["training.kubeflow.org/replica-index"] != fmt.Sprint(i) {
			t.Errorf("worker %s: hostname %q, subdomain %q, labels %v; want %s under %s with upstream's labels",
				p.Name, p.Spec.Hostname, p.Spec.Subdomain, p.Labels, wantName, name)
		}
	}
}
