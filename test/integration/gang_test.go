package integration

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	common "github.com/kubeflow/common/pkg/apis/common/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	volcanov1beta1 "volcano.sh/apis/pkg/apis/scheduling/v1beta1"
	volcanoclient "volcano.sh/apis/pkg/client/clientset/versioned"

	kubeflow "github.com/kubeflow/mpi-operator/pkg/apis/kubeflow/v1"
	"github.com/kubeflow/mpi-operator/pkg/controller"
	"github.com/kubeflow/mpi-operator/test/harness"
)

// podGroupCRD stands in for volcano's CRD: the same group, version, kind and
// resource, which is the whole contract the controller relies on, without
// volcano's schema.
const podGroupCRD = `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: podgroups.scheduling.volcano.sh
spec:
  group: scheduling.volcano.sh
  scope: Namespaced
  names: {kind: PodGroup, listKind: PodGroupList, plural: podgroups, singular: podgroup, shortNames: [pg]}
  versions:
  - name: v1beta1
    served: true
    storage: true
    subresources: {status: {}}
    schema:
      openAPIV3Schema:
        type: object
        x-kubernetes-preserve-unknown-fields: true
`

// installPodGroupCRD installs the stand-in CRD. TestMain does it before
// any test runs, so that the garbage collector, which looks for new
// resources every 30 seconds, knows PodGroups by the time a test needs it.
func installPodGroupCRD(dir string) error {
	path := filepath.Join(dir, "podgroup-crd.yaml")
	if err := os.WriteFile(path, []byte(podGroupCRD), 0o644); err != nil {
		return err
	}
	if out, err := kubectl("apply", "-f", path); err != nil {
		return fmt.Errorf("installing the PodGroup CRD: %w\n%s", err, out)
	}
	return nil
}

// podGroupClient returns a volcano client once PodGroups can be listed.
func podGroupClient(t *testing.T) volcanoclient.Interface {
	t.Helper()
	vc, err := volcanoclient.NewForConfig(env.Config)
	if err != nil {
		t.Fatalf("volcano client: %v", err)
	}
	harness.Eventually(t, poll, waitTimeout, "PodGroups to be served", func() (bool, error) {
		_, err := vc.SchedulingV1beta1().PodGroups("default").List(context.Background(), metav1.ListOptions{})
		return err == nil, nil
	})
	return vc
}

func getPodGroup(vc volcanoclient.Interface, ns, name string) (*volcanov1beta1.PodGroup, error) {
	return vc.SchedulingV1beta1().PodGroups(ns).Get(context.Background(), name, metav1.GetOptions{})
}

// waitForPodGroup waits until the job's PodGroup satisfies check.
func waitForPodGroup(t *testing.T, vc volcanoclient.Interface, ns, name, what string, check func(*volcanov1beta1.PodGroup) bool) *volcanov1beta1.PodGroup {
	t.Helper()
	var pg *volcanov1beta1.PodGroup
	harness.Eventually(t, poll, waitTimeout, "PodGroup "+name+" "+what, func() (bool, error) {
		var err error
		pg, err = getPodGroup(vc, ns, name)
		if err != nil {
			return false, ignoreNotFound(err)
		}
		return check(pg), nil
	})
	return pg
}

func TestGangSchedulingElasticJobAsksForItsMinimum(t *testing.T) {
	vc := podGroupClient(t)
	ns := env.Namespace(t)
	startController(t, controller.Config{Namespace: ns, GangSchedulerName: "volcano"})

	job := newJob(ns, "gang", 3)
	job.Spec.ElasticPolicy = &kubeflow.ElasticPolicy{MinReplicas: ptr[int32](2), MaxReplicas: ptr[int32](4)}
	created := createJob(t, job)

	pg := waitForPodGroup(t, vc, ns, "gang", "to ask for minReplicas + 1 pods", func(pg *volcanov1beta1.PodGroup) bool {
		return pg.Spec.MinMember == 3
	})
	if !metav1.IsControlledBy(pg, created) {
		t.Errorf("PodGroup owner references %v do not name the MPIJob as controller", pg.OwnerReferences)
	}

	// Every pod of the job goes to volcano, in the job's group; nothing
	// schedules them here, so they stay Pending.
	var pods []corev1.Pod
	harness.Eventually(t, poll, waitTimeout, "the launcher and 3 workers", func() (bool, error) {
		list, err := env.Kube.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		pods = list.Items
		return len(pods) == 4, nil
	})
	for _, p := range pods {
		if p.Spec.SchedulerName != "volcano" || p.Annotations["scheduling.k8s.io/group-name"] != "gang" {
			t.Errorf("pod %s: schedulerName %q, group %q; want volcano, gang",
				p.Name, p.Spec.SchedulerName, p.Annotations["scheduling.k8s.io/group-name"])
		}
	}

	// Growing the job leaves the group at the job's minimum.
	scaleWorkers(t, ns, "gang", 4)
	harness.Eventually(t, poll, waitTimeout, "a fifth pod", func() (bool, error) {
		list, err := env.Kube.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{})
		return err == nil && len(list.Items) == 5, err
	})
	if pg, err := getPodGroup(vc, ns, "gang"); err != nil || pg.Spec.MinMember != 3 {
		t.Errorf("after growth: PodGroup %v, err %v; want minMember 3", pg, err)
	}

	// The group goes with the job.
	if err := env.MPI.KubeflowV1().MPIJobs(ns).Delete(context.Background(), "gang", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	harness.Eventually(t, poll, waitTimeout, "the garbage collector to delete the PodGroup", func() (bool, error) {
		_, err := getPodGroup(vc, ns, "gang")
		return err != nil && ignoreNotFound(err) == nil, ignoreNotFound(err)
	})
}

func TestGangSchedulingFollowsSchedulingPolicyAndSize(t *testing.T) {
	vc := podGroupClient(t)
	ns := env.Namespace(t)
	startController(t, controller.Config{Namespace: ns, GangSchedulerName: "volcano"})

	// Without a scheduling policy a fixed job's group holds every pod, and
	// follows its size.
	createJob(t, newJob(ns, "fixed", 2))
	waitForPodGroup(t, vc, ns, "fixed", "to ask for every pod", func(pg *volcanov1beta1.PodGroup) bool {
		return pg.Spec.MinMember == 3
	})
	scaleWorkers(t, ns, "fixed", 4)
	waitForPodGroup(t, vc, ns, "fixed", "to follow the new size", func(pg *volcanov1beta1.PodGroup) bool {
		return pg.Spec.MinMember == 5
	})

	// The run policy's queue and minAvailable go to the group, and so do
	// later changes of them.
	job := newJob(ns, "queued", 2)
	job.Spec.RunPolicy = &common.RunPolicy{SchedulingPolicy: &common.SchedulingPolicy{Queue: "research", MinAvailable: ptr[int32](2)}}
	createJob(t, job)
	waitForPodGroup(t, vc, ns, "queued", "to take queue and minAvailable", func(pg *volcanov1beta1.PodGroup) bool {
		return pg.Spec.MinMember == 2 && pg.Spec.Queue == "research"
	})
	updateJob(t, ns, "queued", func(j *kubeflow.MPIJob) {
		j.Spec.RunPolicy.SchedulingPolicy.Queue = "batch"
	})
	waitForPodGroup(t, vc, ns, "queued", "to move to queue batch", func(pg *volcanov1beta1.PodGroup) bool {
		return pg.Spec.Queue == "batch"
	})
}

// TestGangSchedulingKeepsWhatVolcanoSets: volcano gives a PodGroup created
// without a queue the namespace's queue. The controller neither takes it
// away nor writes a PodGroup that has not changed; once the job has
// finished and its pods are cleaned up, the group goes, as upstream did.
func TestGangSchedulingKeepsWhatVolcanoSets(t *testing.T) {
	vc := podGroupClient(t)
	ns := env.Namespace(t)
	startController(t, controller.Config{Namespace: ns, GangSchedulerName: "volcano"})
	job := newJob(ns, "queued", 1)
	running := common.CleanPodPolicyRunning
	job.Spec.CleanPodPolicy = &running
	createJob(t, job)
	pg := waitForPodGroup(t, vc, ns, "queued", "to be created", func(*volcanov1beta1.PodGroup) bool { return true })

	// What volcano's admission and controller do to it.
	pg.Spec.Queue = "team-a"
	pg.Spec.PriorityClassName = "high"
	set, err := vc.SchedulingV1beta1().PodGroups(ns).Update(context.Background(), pg, metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// The resize brings several syncs; the group is left as it is but for
	// its size. (No volcano scheduler runs: the pods stay Pending.)
	scaleWorkers(t, ns, "queued", 2)
	waitForPodGroup(t, vc, ns, "queued", "to follow the new size", func(pg *volcanov1beta1.PodGroup) bool {
		return pg.Spec.MinMember == 3
	})
	got, err := getPodGroup(vc, ns, "queued")
	if err != nil {
		t.Fatal(err)
	}
	if got.Spec.Queue != "team-a" || got.Spec.PriorityClassName != "high" {
		t.Errorf("PodGroup spec %+v: volcano's queue or priority class was overwritten", got.Spec)
	}
	// One write for the resize, none besides.
	if got.Generation != set.Generation+1 {
		t.Errorf("PodGroup generation %d after one resize from %d: written without a change", got.Generation, set.Generation)
	}

	harness.Eventually(t, poll, waitTimeout, "the launcher to be created", func() (bool, error) {
		_, err := env.Kube.CoreV1().Pods(ns).Get(context.Background(), "queued-launcher", metav1.GetOptions{})
		return err == nil, ignoreNotFound(err)
	})
	finishPod(t, ns, "queued-launcher", corev1.PodSucceeded, 0, "")
	waitForCondition(t, ns, "queued", common.JobSucceeded, "MPIJobSucceeded")
	harness.Eventually(t, poll, waitTimeout, "the finished job's PodGroup to go", func() (bool, error) {
		_, err := getPodGroup(vc, ns, "queued")
		return err != nil && ignoreNotFound(err) == nil, ignoreNotFound(err)
	})
}
