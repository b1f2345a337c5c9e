package plugin

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	common "github.com/kubeflow/common/pkg/apis/common/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	kubeflow "github.com/kubeflow/mpi-operator/pkg/apis/kubeflow/v1"
)

// wantJob is the job BuildJob should make of 2 workers: launcher command,
// worker resources, slots and bounds as given.
func wantJob(command []string, res corev1.ResourceRequirements, slots, lo, hi, drain int32) *kubeflow.MPIJob {
	clean := common.CleanPodPolicyRunning
	return &kubeflow.MPIJob{
		TypeMeta:   metav1.TypeMeta{APIVersion: "kubeflow.org/v1", Kind: "MPIJob"},
		ObjectMeta: metav1.ObjectMeta{Name: "mnist", Namespace: "ml"},
		Spec: kubeflow.MPIJobSpec{
			SlotsPerWorker: &slots,
			CleanPodPolicy: &clean,
			ElasticPolicy:  &kubeflow.ElasticPolicy{MinReplicas: &lo, MaxReplicas: &hi, DrainSeconds: &drain},
			MPIReplicaSpecs: map[common.ReplicaType]*common.ReplicaSpec{
				kubeflow.MPIReplicaTypeLauncher: {
					Replicas: ptrTo[int32](1),
					Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{
						Name: "mpi-launcher", Image: "horovod:1", Command: command,
					}}}},
				},
				kubeflow.MPIReplicaTypeWorker: {
					Replicas: ptrTo[int32](2),
					Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{
						Name: "mpi-worker", Image: "horovod:1", Resources: res,
					}}}},
				},
			},
		},
	}
}

// horovodrun is a v1 launcher's command.
func horovodrun(np, minNP, maxNP string, prog ...string) []string {
	return append([]string{"horovodrun", "-np", np, "--min-np", minNP, "--max-np", maxNP,
		"--host-discovery-script", "/etc/mpi/discover_hosts.sh", "--blacklist-cooldown-range", "10", "100"}, prog...)
}

// horovodrunV2beta1 is a v2beta1 launcher's command, of one slot per worker.
func horovodrunV2beta1(np, minNP, maxNP string, prog ...string) []string {
	return append([]string{"horovodrun", "-np", np, "--min-np", minNP, "--max-np", maxNP,
		"--host-discovery-script", "/etc/mpi/discover_hosts.sh", "--slots-per-host", "1",
		"--blacklist-cooldown-range", "10", "100"}, prog...)
}

func TestBuildJob(t *testing.T) {
	base := JobRequest{Name: "mnist", Namespace: "ml", Image: "horovod:1", Workers: 2, Command: []string{"python", "train.py"}}
	with := func(f func(*JobRequest)) JobRequest {
		r := base
		f(&r)
		return r
	}
	q := resource.MustParse
	cases := []struct {
		name string
		req  JobRequest
		want *kubeflow.MPIJob
	}{{
		name: "defaults: one slot, min 1, max the workers",
		req:  base,
		want: wantJob(horovodrun("2", "1", "2", "python", "train.py"), corev1.ResourceRequirements{}, 1, 1, 2, 30),
	}, {
		name: "GPUs give the slots and the limit",
		req:  with(func(r *JobRequest) { r.GPUs, r.MinWorkers, r.MaxWorkers = 4, 1, 8 }),
		want: wantJob(horovodrun("8", "4", "32", "python", "train.py"), corev1.ResourceRequirements{
			Limits: corev1.ResourceList{"nvidia.com/gpu": q("4")},
		}, 4, 1, 8, 30),
	}, {
		name: "slots, CPU, memory and drain as given",
		req: with(func(r *JobRequest) {
			r.GPUs, r.Slots, r.CPU, r.Memory, r.MinWorkers, r.MaxWorkers, r.DrainSeconds = 1, 2, "500m", "4Gi", 2, 3, ptrTo[int32](0)
		}),
		want: wantJob(horovodrun("4", "4", "6", "python", "train.py"), corev1.ResourceRequirements{
			Limits:   corev1.ResourceList{"cpu": q("500m"), "memory": q("4Gi"), "nvidia.com/gpu": q("1")},
			Requests: corev1.ResourceList{"cpu": q("500m"), "memory": q("4Gi")},
		}, 2, 2, 3, 0),
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := BuildJob(tc.req)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("BuildJob (-want +got):\n%s", diff)
			}
		})
	}
}

func TestBuildJobRefuses(t *testing.T) {
	base := JobRequest{Name: "mnist", Image: "horovod:1", Workers: 2, Command: []string{"python"}}
	with := func(f func(*JobRequest)) JobRequest {
		r := base
		f(&r)
		return r
	}
	cases := []struct {
		name string
		req  JobRequest
		want string
	}{
		{"bad name", with(func(r *JobRequest) { r.Name = "Mnist_1" }), `invalid job name "Mnist_1": a lowercase DNS-1123 name of at most 63 characters is needed`},
		{"no image", with(func(r *JobRequest) { r.Image = "" }), "--image is required"},
		{"no command", with(func(r *JobRequest) { r.Command = nil }), "a training command is required after --, for example: -- python train.py"},
		{"no workers", with(func(r *JobRequest) { r.Workers = 0 }), "--workers must be at least 1, got 0"},
		{"min above workers", with(func(r *JobRequest) { r.MinWorkers = 3 }), "--min-workers (3) is above --workers (2)"},
		{"max below workers", with(func(r *JobRequest) { r.MaxWorkers = 1 }), "--max-workers (1) is below --workers (2)"},
		{"max above the bound", with(func(r *JobRequest) { r.MaxWorkers = kubeflow.MaxWorkers + 1 }), "--max-workers (5001) is above the most workers a kubeflow.org/v1 job may have (5000)"},
		{"negative GPUs", with(func(r *JobRequest) { r.GPUs = -1 }), "--gpus must not be negative, got -1"},
		{"bad CPU", with(func(r *JobRequest) { r.CPU = "lots" }), `invalid --cpu "lots": quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'`},
		{"zero memory", with(func(r *JobRequest) { r.Memory = "0" }), `invalid --memory "0": must be positive`},
		{"drain too long", with(func(r *JobRequest) { r.DrainSeconds = ptrTo[int32](3601) }), "--drain-seconds must be within 0 and 3600, got 3601"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := BuildJob(tc.req)
			if err == nil || err.Error() != tc.want {
				t.Errorf("BuildJob error = %v, want %q", err, tc.want)
			}
		})
	}
}

// TestBuildV2beta1Job: the v2beta1 job has BuildJob's launcher and
// bounds, its clean-up policy in runPolicy, and workers that run sshd.
func TestBuildV2beta1Job(t *testing.T) {
	got, err := BuildV2beta1Job(JobRequest{Name: "mnist", Namespace: "ml", Image: "horovod:1", Workers: 2, MaxWorkers: 4, GPUs: 1,
		Command: []string{"python", "train.py"}})
	if err != nil {
		t.Fatal(err)
	}
	want := &V2beta1Job{
		TypeMeta:   metav1.TypeMeta{APIVersion: "kubeflow.org/v2beta1", Kind: "MPIJob"},
		ObjectMeta: metav1.ObjectMeta{Name: "mnist", Namespace: "ml"},
		Spec: V2beta1JobSpec{
			SlotsPerWorker: ptrTo[int32](1),
			RunPolicy:      V2beta1RunPolicy{CleanPodPolicy: ptrTo(common.CleanPodPolicyRunning)},
			ElasticPolicy:  &kubeflow.ElasticPolicy{MinReplicas: ptrTo[int32](1), MaxReplicas: ptrTo[int32](4), DrainSeconds: ptrTo[int32](30)},
			MPIReplicaSpecs: map[common.ReplicaType]*common.ReplicaSpec{
				"Launcher": {
					Replicas: ptrTo[int32](1),
					Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{
						Name: "mpi-launcher", Image: "horovod:1", Command: horovodrunV2beta1("2", "1", "4", "python", "train.py"),
					}}}},
				},
				"Worker": {
					Replicas: ptrTo[int32](2),
					Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{
						Name: "mpi-worker", Image: "horovod:1",
						Command:   []string{"/bin/sh", "-c"},
						Args:      []string{"mkdir -p /run/sshd && ssh-keygen -A && exec /usr/sbin/sshd -De -o StrictModes=no"},
						Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("1")}},
					}}}},
				},
			},
		},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("BuildV2beta1Job (-want +got):\n%s", diff)
	}
	// The v2beta1 CRD admits fewer workers.
	_, err = BuildV2beta1Job(JobRequest{Name: "mnist", Image: "horovod:1", Workers: 2, MaxWorkers: 1001, Command: []string{"python"}})
	if want := "--max-workers (1001) is above the most workers a kubeflow.org/v2beta1 job may have (1000)"; err == nil || err.Error() != want {
		t.Errorf("error = %v, want %q", err, want)
	}
}
