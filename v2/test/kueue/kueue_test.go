package kueue

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/kubeflow/mpi-operator/test/harness"
	"github.com/kubeflow/mpi-operator/v2/pkg/apis/kubeflow/v2beta1"
)

const (
	queueNameLabel = "kueue.x-k8s.io/queue-name"
	// flavorLabel is a label every kwok node of hack/cluster-up.sh has; the
	// ResourceFlavor's nodeLabels, which Kueue adds to the admitted pods'
	// nodeSelector.
	flavorLabelKey, flavorLabelValue = "type", "kwok"
	// Each job asks for 3 CPUs (a launcher and two workers of 1): the
	// quota fits one job, not two.
	quotaCPU = 4

	labelJobName = "training.kubeflow.org/job-name"
	labelJobRole = "training.kubeflow.org/job-role"
)

// workloads is Kueue's Workload resource, in suite.kueueAPI (set up by
// TestMain's set-up).
var workloads = schema.GroupVersionResource{Group: "kueue.x-k8s.io", Resource: "workloads"}

// TestKueueAdmitsElasticJobsAgainstQuota: of two suspended elastic
// MPIJobs in one LocalQueue whose ClusterQueue has room for one, Kueue
// admits the first (the controller then runs it on the flavor's nodes) and
// keeps the second suspended, without pods, until the first finishes.
func TestKueueAdmitsElasticJobsAgainstQuota(t *testing.T) {
	ns := suite.Namespace(t)
	queue := createQueues(t, ns)

	first := createJob(t, ns, "first", queue)
	firstWL, _ := waitWorkload(t, first, "")
	waitAdmitted(t, first, firstWL)
	checkRunning(t, first, 2)
	t.Logf("%s admitted (Workload %s) and running", first.Name, firstWL)

	second := createJob(t, ns, "second", queue)
	secondWL, secondUID := waitWorkload(t, second, "")
	// Kueue has tried and failed to fit it: QuotaReserved is False.
	harness.Eventually(t, poll, 30*time.Second, "the second job's Workload to be found pending", func() (bool, string) {
		wl := getWorkload(t, ns, secondWL)
		status, reason, msg := condition(wl, "QuotaReserved")
		return status == "False" && reason == "Pending", fmt.Sprintf("QuotaReserved=%q reason %q: %s", status, reason, msg)
	})
	// And it stays so, with no pod and no launcher Job, while the first runs.
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		checkPending(t, second, secondWL)
		time.Sleep(500 * time.Millisecond)
	}
	t.Logf("%s pending (Workload %s) while %s runs", second.Name, secondWL, first.Name)

	// The first job ends: its launcher pod exits 0.
	finishLauncher(t, first)
	waitFinished(t, first, firstWL)
	// Its quota released, the second is admitted and runs.
	waitAdmitted(t, second, secondWL)
	checkRunning(t, second, 2)
	t.Logf("%s admitted and running once %s finished", second.Name, first.Name)

	// A resize of an admitted job: Kueue (v0.12.3 as v0.17.0) sizes a
	// Workload once, so it stops the job, replaces its Workload with one of
	// the new size and admits that; the job runs again with one worker.
	scaleWorkers(t, second, 1)
	resizedWL, _ := waitWorkload(t, second, secondUID)
	waitAdmitted(t, second, resizedWL)
	checkRunning(t, second, 1)
	if n := workerCount(getWorkload(t, ns, resizedWL)); n != 1 {
		t.Errorf("the new Workload %s counts %d workers, want 1", resizedWL, n)
	}
	t.Logf("%s resized to 1 worker through a new Workload", second.Name)
	secondWL = resizedWL

	// An administrator deactivates the second's Workload: Kueue evicts it,
	// suspends the job and takes its flavor back out of the templates; the
	// controller stops every pod.
	deactivate(t, ns, secondWL)
	checkEvicted(t, second, secondWL)
}

// deactivate sets a Workload's spec.active to false.
func deactivate(t *testing.T, ns, workload string) {
	t.Helper()
	if _, err := suite.Dynamic.Resource(workloads).Namespace(ns).Patch(context.Background(), workload,
		types.MergePatchType, []byte(`{"spec":{"active":false}}`), metav1.PatchOptions{}); err != nil {
		t.Fatalf("deactivating Workload %s: %v", workload, err)
	}
}

// checkEvicted waits until Kueue has suspended job, restored its templates
// and released its quota, and the controller has stopped its pods and
// suspended its launcher Job.
func checkEvicted(t *testing.T, job *v2beta1.MPIJob, workload string) {
	t.Helper()
	harness.Eventually(t, poll, 30*time.Second, "Kueue to suspend "+job.Name, func() (bool, string) {
		return ptr.Deref(getJob(t, job).Spec.RunPolicy.Suspend, false), "not suspended"
	})
	harness.Eventually(t, poll, time.Minute, job.Name+"'s pods to be gone", func() (bool, string) {
		var names []string
		for _, p := range jobPods(t, job) {
			names = append(names, p.Name)
		}
		return len(names) == 0, fmt.Sprintf("pods %v", names)
	})
	harness.Eventually(t, poll, 30*time.Second, job.Name+"'s Workload to release its quota", func() (bool, string) {
		wl := getWorkload(t, job.Namespace, workload)
		status, reason, _ := condition(wl, "QuotaReserved")
		_, admitted, _ := unstructured.NestedMap(wl.Object, "status", "admission")
		return status == "False" && !admitted, fmt.Sprintf("QuotaReserved=%q (%s), admission kept: %v", status, reason, admitted)
	})
	got := getJob(t, job)
	for _, rt := range []v2beta1.MPIReplicaType{v2beta1.MPIReplicaTypeLauncher, v2beta1.MPIReplicaTypeWorker} {
		if sel := got.Spec.MPIReplicaSpecs[rt].Template.Spec.NodeSelector; len(sel) > 0 {
			t.Errorf("%s's %s template after eviction: nodeSelector %v, want none (as created)", job.Name, rt, sel)
		}
	}
	if ep := got.Spec.ElasticPolicy; ep == nil || ptr.Deref(ep.MaxReplicas, 0) != 4 {
		t.Errorf("%s's elasticPolicy after eviction: %+v", job.Name, ep)
	}
	launcher, err := suite.Kube.BatchV1().Jobs(job.Namespace).Get(context.Background(), job.Name+"-launcher", metav1.GetOptions{})
	if err == nil && !ptr.Deref(launcher.Spec.Suspend, false) {
		t.Errorf("the launcher Job of the evicted %s is not suspended", job.Name)
	}
}

// createQueues creates a ResourceFlavor (nodeLabels type=kwok), a
// ClusterQueue with quotaCPU CPUs of it and a LocalQueue in ns, and returns
// the LocalQueue's name.
func createQueues(t *testing.T, ns string) string {
	t.Helper()
	name := ns // unique per run: the flavor and the ClusterQueue are cluster-wide
	manifest := fmt.Sprintf(`apiVersion: kueue.x-k8s.io/%[6]s
kind: ResourceFlavor
metadata:
  name: %[1]s
spec:
  nodeLabels:
    %[3]s: %[4]s
---
apiVersion: kueue.x-k8s.io/%[6]s
kind: ClusterQueue
metadata:
  name: %[1]s
spec:
  namespaceSelector: {}
  queueingStrategy: StrictFIFO
  resourceGroups:
  - coveredResources: [cpu]
    flavors:
    - name: %[1]s
      resources:
      - name: cpu
        nominalQuota: %[5]d
---
apiVersion: kueue.x-k8s.io/%[6]s
kind: LocalQueue
metadata:
  name: %[1]s
  namespace: %[2]s
spec:
  clusterQueue: %[1]s
`, name, ns, flavorLabelKey, flavorLabelValue, quotaCPU, suite.kueueAPI)
	cmd := suite.KubectlCmd(context.Background(), "apply", "-f", "-")
	cmd.Stdin = strings.NewReader(manifest)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("creating the queues: %v\n%s", err, out)
	}
	t.Cleanup(func() {
		// The namespace's deletion takes the LocalQueue and the jobs.
		out, err := suite.KubectlCmd(context.Background(), "delete", "--wait=false", "--ignore-not-found",
			"clusterqueue/"+name, "resourceflavor/"+name).CombinedOutput()
		if err != nil {
			t.Logf("deleting the queues: %v\n%s", err, out)
		}
	})
	harness.Eventually(t, poll, time.Minute, "the ClusterQueue and LocalQueue to be Active", func() (bool, string) {
		out, err := suite.KubectlCmd(context.Background(), "get", "clusterqueue/"+name, "localqueue/"+name, "-n", ns, "-o",
			`jsonpath={range .items[*]}{.status.conditions[?(@.type=="Active")].status} {end}`).CombinedOutput()
		return err == nil && strings.TrimSpace(string(out)) == "True True", string(out)
	})
	return name
}

// createJob creates a suspended elastic MPIJob with two workers in queue,
// as Kueue's webhook would leave it, after the edits given.
func createJob(t *testing.T, ns, name, queue string, edits ...func(*v2beta1.MPIJob)) *v2beta1.MPIJob {
	t.Helper()
	cpu := corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}}
	template := func(role string) corev1.PodTemplateSpec {
		return corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{
			Name: role, Image: "mpioperator/mpi-pi:openmpi", Command: []string{"sleep", "infinity"}, Resources: cpu,
		}}}}
	}
	job := &v2beta1.MPIJob{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{queueNameLabel: queue}},
		Spec: v2beta1.MPIJobSpec{
			RunPolicy:     v2beta1.RunPolicy{Suspend: ptr.To(true)},
			ElasticPolicy: &v2beta1.ElasticPolicy{MinReplicas: ptr.To[int32](1), MaxReplicas: ptr.To[int32](4)},
			MPIReplicaSpecs: map[v2beta1.MPIReplicaType]*v2beta1.ReplicaSpec{
				v2beta1.MPIReplicaTypeLauncher: {Replicas: ptr.To[int32](1), Template: template("launcher")},
				v2beta1.MPIReplicaTypeWorker:   {Replicas: ptr.To[int32](2), Template: template("worker")},
			},
		},
	}
	for _, edit := range edits {
		edit(job)
	}
	created, err := suite.mpi.KubeflowV2beta1().MPIJobs(ns).Create(context.Background(), job, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("creating MPIJob %s: %v", name, err)
	}
	return created
}

// waitWorkload waits for a Workload of job (one whose controller owner
// reference names it) other than old (a UID) and not being deleted, and
// returns its name and UID. Kueue names a job's Workloads alike: a
// replaced Workload is told apart by its UID.
func waitWorkload(t *testing.T, job *v2beta1.MPIJob, old types.UID) (string, types.UID) {
	t.Helper()
	var name string
	var uid types.UID
	harness.Eventually(t, poll, time.Minute, "Kueue to create a Workload for "+job.Name, func() (bool, string) {
		list, err := suite.Dynamic.Resource(workloads).Namespace(job.Namespace).List(context.Background(), metav1.ListOptions{})
		if err != nil {
			return false, err.Error()
		}
		var seen []string
		for _, wl := range list.Items {
			seen = append(seen, wl.GetName())
			ref := metav1.GetControllerOf(&wl)
			if ref != nil && ref.UID == job.UID && ref.Kind == "MPIJob" && wl.GetUID() != old && wl.GetDeletionTimestamp() == nil {
				name, uid = wl.GetName(), wl.GetUID()
				return true, ""
			}
		}
		return false, fmt.Sprintf("Workloads in the namespace: %v", seen)
	})
	return name, uid
}

// workerCount is the count of a Workload's Worker pod set.
func workerCount(wl *unstructured.Unstructured) int64 {
	sets, _, _ := unstructured.NestedSlice(wl.Object, "spec", "podSets")
	for _, s := range sets {
		if m, ok := s.(map[string]any); ok && m["name"] == "worker" {
			n, _ := m["count"].(int64)
			return n
		}
	}
	return -1
}

// scaleWorkers sets job's worker replicas.
func scaleWorkers(t *testing.T, job *v2beta1.MPIJob, n int) {
	t.Helper()
	patch := fmt.Sprintf(`{"spec":{"mpiReplicaSpecs":{"Worker":{"replicas":%d}}}}`, n)
	if _, err := suite.mpi.KubeflowV2beta1().MPIJobs(job.Namespace).Patch(context.Background(), job.Name,
		types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatalf("scaling %s to %d workers: %v", job.Name, n, err)
	}
}

// waitAdmitted waits until Kueue has admitted job's Workload to the job's
// ClusterQueue (named as its LocalQueue) and resumed the job, and checks
// what Kueue wrote to it: the flavor's node label in both templates, the
// elastic policy kept.
func waitAdmitted(t *testing.T, job *v2beta1.MPIJob, workload string) {
	t.Helper()
	waitAdmittedTo(t, job, workload, job.Labels[queueNameLabel])
	got := getJob(t, job)
	for _, rt := range []v2beta1.MPIReplicaType{v2beta1.MPIReplicaTypeLauncher, v2beta1.MPIReplicaTypeWorker} {
		if v := got.Spec.MPIReplicaSpecs[rt].Template.Spec.NodeSelector[flavorLabelKey]; v != flavorLabelValue {
			t.Errorf("%s's %s template: nodeSelector %v, want the flavor's %s=%s", job.Name, rt,
				got.Spec.MPIReplicaSpecs[rt].Template.Spec.NodeSelector, flavorLabelKey, flavorLabelValue)
		}
	}
	// Kueue's manager knows MPIJobs through upstream's v0.6.0 types; its
	// writes must not drop what those types lack.
	if ep := got.Spec.ElasticPolicy; ep == nil || ptr.Deref(ep.MinReplicas, 0) != 1 || ptr.Deref(ep.MaxReplicas, 0) != 4 {
		t.Errorf("%s's elasticPolicy after admission: %+v, want minReplicas 1, maxReplicas 4", job.Name, ep)
	}
}

// waitAdmittedTo waits until Kueue has admitted job's Workload to
// clusterQueue and resumed the job.
func waitAdmittedTo(t *testing.T, job *v2beta1.MPIJob, workload, clusterQueue string) {
	t.Helper()
	harness.Eventually(t, poll, time.Minute, job.Name+"'s Workload to be admitted", func() (bool, string) {
		wl := getWorkload(t, job.Namespace, workload)
		cq, _, _ := unstructured.NestedString(wl.Object, "status", "admission", "clusterQueue")
		status, reason, msg := condition(wl, "Admitted")
		return status == "True" && cq == clusterQueue,
			fmt.Sprintf("Admitted=%q (%s: %s), admitted to %q", status, reason, msg, cq)
	})
	harness.Eventually(t, poll, 30*time.Second, "Kueue to resume "+job.Name, func() (bool, string) {
		got := getJob(t, job)
		return !ptr.Deref(got.Spec.RunPolicy.Suspend, true), "still suspended"
	})
}

// checkRunning waits until an admitted job runs: n workers and the
// launcher Running on kwok nodes with the flavor's nodeSelector, its
// launcher Job resumed with that nodeSelector, and discover_hosts.sh
// listing the Running workers.
func checkRunning(t *testing.T, job *v2beta1.MPIJob, n int) {
	t.Helper()
	checkRunningWith(t, job, n, map[string]string{flavorLabelKey: flavorLabelValue})
}

// checkRunningWith is checkRunning for a flavor of the node labels given
// (none for a flavor of every node).
func checkRunningWith(t *testing.T, job *v2beta1.MPIJob, n int, flavorLabels map[string]string) {
	t.Helper()
	ctx := context.Background()
	var workers []string
	harness.Eventually(t, poll, time.Minute, fmt.Sprintf("%s's %d workers and launcher to be Running", job.Name, n), func() (bool, string) {
		var launchers, others []string
		workers = nil
		for _, p := range jobPods(t, job) {
			switch {
			case p.DeletionTimestamp != nil || p.Status.Phase != corev1.PodRunning ||
				!strings.HasPrefix(p.Spec.NodeName, "kwok-node-"):
				others = append(others, p.Name)
			case p.Labels[labelJobRole] == "worker":
				workers = append(workers, p.Name)
			default:
				launchers = append(launchers, p.Name)
			}
		}
		sort.Strings(workers)
		return len(workers) == n && len(launchers) == 1 && len(others) == 0,
			fmt.Sprintf("Running workers %v, launchers %v; other pods %v", workers, launchers, others)
	})
	for _, p := range jobPods(t, job) {
		for key, value := range flavorLabels {
			if v := p.Spec.NodeSelector[key]; v != value {
				t.Errorf("pod %s: nodeSelector %v, want the flavor's %s=%s", p.Name, p.Spec.NodeSelector, key, value)
			}
		}
	}
	launcher, err := suite.Kube.BatchV1().Jobs(job.Namespace).Get(ctx, job.Name+"-launcher", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the launcher Job of %s: %v", job.Name, err)
	}
	if ptr.Deref(launcher.Spec.Suspend, false) {
		t.Errorf("launcher Job %s is still suspended", launcher.Name)
	}
	for key, value := range flavorLabels {
		if v := launcher.Spec.Template.Spec.NodeSelector[key]; v != value {
			t.Errorf("launcher Job %s: pod template's nodeSelector %v, want the flavor's %s=%s", launcher.Name,
				launcher.Spec.Template.Spec.NodeSelector, key, value)
		}
	}
	harness.Eventually(t, poll, 30*time.Second, "discover_hosts.sh of "+job.Name+" to list its workers", func() (bool, string) {
		cm, err := suite.Kube.CoreV1().ConfigMaps(job.Namespace).Get(ctx, job.Name+"-config", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		script := cm.Data["discover_hosts.sh"]
		for _, w := range workers {
			if !strings.Contains(script, w+".") {
				return false, script
			}
		}
		return strings.Count(script, job.Name+"-worker-") == n, script
	})
}

// checkPending checks that a job Kueue has not admitted is as it was
// created: suspended, without pods or launcher Job, its Workload without
// admission.
func checkPending(t *testing.T, job *v2beta1.MPIJob, workload string) {
	t.Helper()
	if got := getJob(t, job); !ptr.Deref(got.Spec.RunPolicy.Suspend, false) {
		t.Fatalf("%s was resumed without quota", job.Name)
	}
	if pods := jobPods(t, job); len(pods) > 0 {
		t.Fatalf("%s, not admitted, has %d pods", job.Name, len(pods))
	}
	_, err := suite.Kube.BatchV1().Jobs(job.Namespace).Get(context.Background(), job.Name+"-launcher", metav1.GetOptions{})
	if err == nil {
		t.Fatalf("%s, not admitted, has a launcher Job", job.Name)
	}
	wl := getWorkload(t, job.Namespace, workload)
	if adm, found, _ := unstructured.NestedMap(wl.Object, "status", "admission"); found {
		t.Fatalf("%s's Workload, over the quota, was admitted: %v", job.Name, adm)
	}
}

// finishLauncher ends job's running launcher pod with exit code 0, as kwok
// never does on its own here.
func finishLauncher(t *testing.T, job *v2beta1.MPIJob) {
	t.Helper()
	endLauncher(t, job, corev1.PodSucceeded, 0, "Completed")
}

// endLauncher ends job's running launcher pod: it takes the phase given,
// its container terminated with exitCode and reason, through the pod's
// status as the kubelet would write it. It returns the pod as it was.
func endLauncher(t *testing.T, job *v2beta1.MPIJob, phase corev1.PodPhase, exitCode int32, reason string) corev1.Pod {
	t.Helper()
	for _, p := range jobPods(t, job) {
		if p.Labels[labelJobRole] != "launcher" || p.Status.Phase != corev1.PodRunning || p.DeletionTimestamp != nil {
			continue
		}
		ended := p.DeepCopy()
		ended.Status.Phase = phase
		ended.Status.Conditions = nil
		ended.Status.ContainerStatuses = []corev1.ContainerStatus{{
			Name: p.Spec.Containers[0].Name, Image: p.Spec.Containers[0].Image,
			State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: exitCode, Reason: reason}},
		}}
		if _, err := suite.Kube.CoreV1().Pods(job.Namespace).UpdateStatus(context.Background(), ended, metav1.UpdateOptions{}); err != nil {
			t.Fatalf("ending launcher pod %s (%s, exit code %d): %v", p.Name, phase, exitCode, err)
		}
		return p
	}
	t.Fatalf("%s has no running launcher pod", job.Name)
	return corev1.Pod{}
}

func getJob(t *testing.T, job *v2beta1.MPIJob) *v2beta1.MPIJob {
	t.Helper()
	got, err := suite.mpi.KubeflowV2beta1().MPIJobs(job.Namespace).Get(context.Background(), job.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("getting MPIJob %s: %v", job.Name, err)
	}
	return got
}

func getWorkload(t *testing.T, ns, name string) *unstructured.Unstructured {
	t.Helper()
	wl, err := suite.Dynamic.Resource(workloads).Namespace(ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("getting Workload %s: %v", name, err)
	}
	return wl
}

// jobPods are the pods the controller made for job, launcher's included.
func jobPods(t *testing.T, job *v2beta1.MPIJob) []corev1.Pod {
	t.Helper()
	list, err := suite.Kube.CoreV1().Pods(job.Namespace).List(context.Background(), metav1.ListOptions{
		LabelSelector: labels.SelectorFromSet(labels.Set{labelJobName: job.Name}).String(),
	})
	if err != nil {
		t.Fatalf("listing the pods of %s: %v", job.Name, err)
	}
	return list.Items
}

// condition returns the status, reason and message of a Workload's
// condition; empty strings when it has none of that type.
func condition(wl *unstructured.Unstructured, condType string) (status, reason, message string) {
	conds, _, _ := unstructured.NestedSlice(wl.Object, "status", "conditions")
	for _, c := range conds {
		m, ok := c.(map[string]any)
		if !ok || m["type"] != condType {
			continue
		}
		status, _ = m["status"].(string)
		reason, _ = m["reason"].(string)
		message, _ = m["message"].(string)
		return status, reason, message
	}
	return "", "", ""
}
