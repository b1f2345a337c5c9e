package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	schedv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"
	schedclient "sigs.k8s.io/scheduler-plugins/pkg/generated/clientset/versioned"

	"github.com/kubeflow/mpi-operator/test/harness"
	kubeflow "github.com/kubeflow/mpi-operator/v2/pkg/apis/kubeflow/v2beta1"
	"github.com/kubeflow/mpi-operator/v2/pkg/controller"
)

// gangSchedulerName is the scheduler the coscheduling plugin would run as;
// no such scheduler runs here, so the gang's pods stay Pending, which is
// all the PodGroup tests need.
const gangSchedulerName = "scheduler-plugins-scheduler"

var installPodGroupCRD = sync.OnceValue(func() error {
	// The CRD of the scheduler-plugins version the module builds against,
	// from the module cache (the module is a dependency, so it is there).
	cmd := exec.Command("go", "mod", "download", "-json", "sigs.k8s.io/scheduler-plugins")
	cmd.Dir = suite.module
	out, err := cmd.Output()
	if err != nil {
		return fmt.Errorf("go mod download sigs.k8s.io/scheduler-plugins: %w", err)
	}
	var mod struct{ Dir string }
	if err := json.Unmarshal(out, &mod); err != nil {
		return fmt.Errorf("reading go mod download's answer %q: %w", out, err)
	}
	if mod.Dir == "" {
		return fmt.Errorf("no module directory in %q", out)
	}
	crd := filepath.Join(mod.Dir, "config", "crd", "bases", "scheduling.x-k8s.io_podgroups.yaml")
	if out, err := kubectl("apply", "--server-side", "-f", crd); err != nil {
		return fmt.Errorf("applying %s: %w\n%s", crd, err, out)
	}
	out2, err := kubectl("wait", "--for=condition=Established", "--timeout=60s", "crd/podgroups.scheduling.x-k8s.io")
	if err != nil {
		return fmt.Errorf("waiting for the PodGroup CRD: %w\n%s", err, out2)
	}
	return nil
})

// gangTest is controllerTest with the scheduler-plugins gang scheduler: the
// PodGroup CRD of scheduler-plugins installed on the real API server, and
// the controller writing PodGroups through its generated client.
func gangTest(t *testing.T) (string, schedclient.Interface) {
	t.Helper()
	t.Parallel()
	if err := installPodGroupCRD(); err != nil {
		t.Fatal(err)
	}
	ns := jobNamespace(t)
	runController(t, nil, controller.Config{Namespace: ns, GangSchedulerName: gangSchedulerName})
	sched, err := schedclient.NewForConfig(suite.Config)
	if err != nil {
		t.Fatal(err)
	}
	return ns, sched
}

// podGroupOf waits until the job's PodGroup has minMember, and returns it.
func podGroupOf(t *testing.T, sched schedclient.Interface, ns, job string, minMember int32) *schedv1alpha1.PodGroup {
	t.Helper()
	var pg *schedv1alpha1.PodGroup
	harness.Eventually(t, poll, waitTimeout, fmt.Sprintf("PodGroup %s with minMember %d", job, minMember), func() (bool, error) {
		var err error
		pg, err = sched.SchedulingV1alpha1().PodGroups(ns).Get(context.Background(), job, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		return err == nil && pg.Spec.MinMember == minMember, err
	})
	return pg
}

func withRequests(job *kubeflow.MPIJob, role kubeflow.MPIReplicaType, cpu string) {
	c := &job.Spec.MPIReplicaSpecs[role].Template.Spec.Containers[0]
	c.Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu)}
}

// A fixed-size job's gang is the launcher and every worker, with the sum of
// their requests; its pods name the PodGroup and the gang's scheduler; the
// gang follows a resize, and goes when the job is suspended.
func TestSchedulerPluginsGang(t *testing.T) {
	ns, sched := gangTest(t)
	job := validJob(ns, "gang", 2)
	withRequests(job, kubeflow.MPIReplicaTypeLauncher, "500m")
	withRequests(job, kubeflow.MPIReplicaTypeWorker, "1")
	created := createJob(t, job)

	pg := podGroupOf(t, sched, ns, "gang", 3)
	if !metav1.IsControlledBy(pg, created) {
		t.Errorf("PodGroup owners %v, want the MPIJob", pg.OwnerReferences)
	}
	if got := pg.Spec.MinResources.Cpu(); got.Cmp(resource.MustParse("2500m")) != 0 {
		t.Errorf("PodGroup minResources cpu %s, want 2500m", got)
	}
	harness.Eventually(t, poll, waitTimeout, "two workers of the gang", func() (bool, error) {
		return len(workerPods(t, ns, "gang", true)) == 2, nil
	})
	for _, p := range workerPods(t, ns, "gang", true) {
		if p.Labels["scheduling.x-k8s.io/pod-group"] != "gang" || p.Spec.SchedulerName != gangSchedulerName {
			t.Errorf("worker %s: pod-group label %q, scheduler %q", p.Name, p.Labels["scheduling.x-k8s.io/pod-group"], p.Spec.SchedulerName)
		}
	}

	scaleJob(t, ns, "gang", 3)
	podGroupOf(t, sched, ns, "gang", 4)

	editJob(t, ns, "gang", func(j *kubeflow.MPIJob) { j.Spec.RunPolicy.Suspend = new(true) })
	harness.Eventually(t, poll, waitTimeout, "the suspended job's PodGroup gone", func() (bool, error) {
		_, err := sched.SchedulingV1alpha1().PodGroups(ns).Get(context.Background(), "gang", metav1.GetOptions{})
		return apierrors.IsNotFound(err), ignoreNotFound(err)
	})
}

// An elastic job's gang is the launcher and minReplicas workers, whatever
// its size: the scheduler may start it with fewer workers than it asks
// for.
func TestSchedulerPluginsElasticGang(t *testing.T) {
	ns, sched := gangTest(t)
	createJob(t, elasticJob(ns, "egang", 3, 2, 5, 1))
	podGroupOf(t, sched, ns, "egang", 3)
	scaleJob(t, ns, "egang", 5)
	harness.Eventually(t, poll, waitTimeout, "five workers", func() (bool, error) {
		return len(workerPods(t, ns, "egang", true)) == 5, nil
	})
	holds(t, 2*time.Second, "the gang after the scale-out", func() (bool, string) {
		pg, err := sched.SchedulingV1alpha1().PodGroups(ns).Get(context.Background(), "egang", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return pg.Spec.MinMember == 3, fmt.Sprintf("minMember %d, want 3", pg.Spec.MinMember)
	})
}
