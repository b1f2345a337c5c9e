package controller

import (
	"encoding/json"
	"math"
	"strconv"
	"strings"
	"testing"
	"time"

	common "github.com/kubeflow/common/pkg/apis/common/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	kubeflow "github.com/kubeflow/mpi-operator/pkg/apis/kubeflow/v1"
	"github.com/kubeflow/mpi-operator/pkg/elastic"
)

const (
	// boundsConfigMapDataLimit is what the API server allows in a
	// ConfigMap's data, all values together.
	boundsConfigMapDataLimit = 1 << 20
	// boundsEtcdRequestLimit is etcd's default --max-request-bytes: no
	// object can be stored that is larger.
	boundsEtcdRequestLimit = 3 << 19
	// boundsRoleMargin is what kubeflow.MaxWorkers promises to leave free
	// in the Role of a job that names twice its workers.
	boundsRoleMargin = 64 << 10
)

// boundsTestJob is the job whose files are as large as a job's can be:
// names of 63 characters, the largest slotsPerWorker, a GPU launcher (which
// the files list too) and a mainContainer of 63 characters.
func boundsTestJob() *kubeflow.MPIJob {
	main := strings.Repeat("c", 63)
	job := &kubeflow.MPIJob{
		ObjectMeta: metav1.ObjectMeta{
			Name:      strings.Repeat("j", 63),
			Namespace: strings.Repeat("n", 63),
			UID:       "00000000-0000-0000-0000-000000000000",
		},
		Spec: kubeflow.MPIJobSpec{
			SlotsPerWorker: ptr[int32](math.MaxInt32),
			MainContainer:  main,
			ElasticPolicy:  &kubeflow.ElasticPolicy{MaxReplicas: ptr(kubeflow.MaxWorkers)},
			MPIReplicaSpecs: map[common.ReplicaType]*common.ReplicaSpec{
				kubeflow.MPIReplicaTypeLauncher: {Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
					Containers: []corev1.Container{{
						Name: "launcher", Image: "mpi",
						Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{
							"nvidia.com/gpu": resource.MustParse("1"),
						}},
					}},
				}}},
				kubeflow.MPIReplicaTypeWorker: {
					Replicas: ptr(kubeflow.MaxWorkers),
					Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: main, Image: "mpi"}}}},
				},
			},
		},
	}
	kubeflow.SetDefaults_MPIJob(job)
	return job
}

// boundsTestWorkers names n workers of job with indices of 10 digits, the
// widest that kubeflow.MaxWorkers allows for.
func boundsTestWorkers(t *testing.T, job *kubeflow.MPIJob, n int) []string {
	t.Helper()
	first := int(math.Pow10(10)) - n
	if len(strconv.Itoa(first)) != 10 {
		t.Fatalf("index %d does not have 10 digits", first)
	}
	names := make([]string, n)
	for i := range names {
		names[i] = workerName(job, first+i)
	}
	if want := 63 + len(workerInfix) + 10; len(names[0]) != want || len(names[n-1]) != want {
		t.Fatalf("worker names of %d and %d characters, want %d", len(names[0]), len(names[n-1]), want)
	}
	return names
}

func jsonSize(t *testing.T, obj any) int {
	t.Helper()
	data, err := json.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	return len(data)
}

// TestObjectSizesAtMaxWorkers builds, with the controller's own builders,
// the two objects that name every worker of a job of kubeflow.MaxWorkers
// workers with the longest names, and checks that the API server and etcd
// take them: the ConfigMap's files within the ConfigMap data limit, the
// Role of a job that is replacing all its workers (so naming twice as many)
// within etcd's request limit and the margin MaxWorkers promises.
func TestObjectSizesAtMaxWorkers(t *testing.T) {
	job := boundsTestJob()
	if errs := validateJob(job); len(errs) > 0 {
		t.Fatalf("the job is not valid: %v", errs)
	}
	if !isGPULauncher(job) {
		t.Fatal("the launcher does not ask for a GPU: the files would leave out its lines")
	}
	workers := int(kubeflow.MaxWorkers)
	names := boundsTestWorkers(t, job, 2*workers)

	t.Run("ConfigMap", func(t *testing.T) {
		hosts := elastic.Hosts{Desired: names[workers:], Running: names[workers:]}
		cm := newConfigMap(job, hosts, elastic.State{NextIndex: int(math.Pow10(10)), BelowMinSince: time.Now()})
		if got := strings.Count(cm.Data[hostfileKey], " slots=2147483647\n"); got != workers+1 {
			t.Errorf("hostfile has %d lines, want %d workers and the launcher", got, workers)
		}
		if got := strings.Count(cm.Data[discoverHostsKey], ":2147483647\n"); got != workers+1 {
			t.Errorf("discover_hosts.sh lists %d hosts, want %d workers and the launcher", got, workers)
		}
		if !strings.Contains(cm.Data[kubexecKey], "--container "+job.Spec.MainContainer) {
			t.Errorf("kubexec.sh does not name the main container:\n%s", cm.Data[kubexecKey])
		}
		data := 0
		for _, v := range cm.Data {
			data += len(v)
		}
		for _, v := range cm.BinaryData {
			data += len(v)
		}
		t.Logf("ConfigMap data: %d bytes for %d workers, limit %d", data, workers, boundsConfigMapDataLimit)
		if data > boundsConfigMapDataLimit {
			t.Errorf("ConfigMap data of %d bytes is over the API server's limit of %d", data, boundsConfigMapDataLimit)
		}
		if size := jsonSize(t, cm); size > boundsEtcdRequestLimit {
			t.Errorf("ConfigMap of %d bytes is over etcd's request limit of %d", size, boundsEtcdRequestLimit)
		}
	})

	t.Run("Role", func(t *testing.T) {
		role := newLauncherRole(job, names)
		exec := role.Rules[len(role.Rules)-1]
		if len(exec.ResourceNames) != 2*workers || exec.Resources[0] != "pods/exec" {
			t.Fatalf("the last rule is %v on %d names, want pods/exec on %d", exec.Resources, len(exec.ResourceNames), 2*workers)
		}
		size := jsonSize(t, role)
		t.Logf("Role: %d bytes for %d workers, limit %d with a margin of %d", size, 2*workers, boundsEtcdRequestLimit, boundsRoleMargin)
		if size > boundsEtcdRequestLimit-boundsRoleMargin {
			t.Errorf("Role of %d bytes leaves less than %d of etcd's request limit of %d", size, boundsRoleMargin, boundsEtcdRequestLimit)
		}
	})
}
