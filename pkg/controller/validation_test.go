package controller

import (
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	common "github.com/kubeflow/common/pkg/apis/common/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	kubeflow "github.com/kubeflow/mpi-operator/pkg/apis/kubeflow/v1"
)

// validationTestJob returns a valid, not yet defaulted job with 2 workers.
func validationTestJob() *kubeflow.MPIJob {
	tmpl := func(name string) corev1.PodTemplateSpec {
		return corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: name, Image: "mpi"}}}}
	}
	return &kubeflow.MPIJob{
		ObjectMeta: metav1.ObjectMeta{Name: "job", Namespace: "ns"},
		Spec: kubeflow.MPIJobSpec{
			MPIReplicaSpecs: map[common.ReplicaType]*common.ReplicaSpec{
				kubeflow.MPIReplicaTypeLauncher: {Template: tmpl("launcher")},
				kubeflow.MPIReplicaTypeWorker:   {Replicas: ptr[int32](2), Template: tmpl("worker")},
			},
		},
	}
}

// validationTestFields returns the distinct field paths of errs, sorted.
func validationTestFields(errs field.ErrorList) []string {
	var out []string
	for _, e := range errs {
		if !slices.Contains(out, e.Field) {
			out = append(out, e.Field)
		}
	}
	slices.Sort(out)
	return out
}

func TestValidateJob(t *testing.T) {
	launcher := func(j *kubeflow.MPIJob) *common.ReplicaSpec {
		return j.Spec.MPIReplicaSpecs[kubeflow.MPIReplicaTypeLauncher]
	}
	worker := func(j *kubeflow.MPIJob) *common.ReplicaSpec {
		return j.Spec.MPIReplicaSpecs[kubeflow.MPIReplicaTypeWorker]
	}
	cases := []struct {
		name       string
		modify     func(*kubeflow.MPIJob) // applied before defaulting
		wantFields []string
	}{
		{name: "valid fixed job"},
		{
			name: "valid job with every optional field",
			modify: func(j *kubeflow.MPIJob) {
				j.Spec.SlotsPerWorker = ptr[int32](8)
				j.Spec.CleanPodPolicy = ptr(common.CleanPodPolicyRunning)
				j.Spec.MainContainer = "worker"
				j.Spec.RunPolicy = &common.RunPolicy{BackoffLimit: ptr[int32](3)}
				worker(j).RestartPolicy = common.RestartPolicyExitCode
				launcher(j).RestartPolicy = common.RestartPolicyOnFailure
			},
		},
		{
			name: "valid elastic job",
			modify: func(j *kubeflow.MPIJob) {
				j.Spec.ElasticPolicy = &kubeflow.ElasticPolicy{MinReplicas: ptr[int32](1), MaxReplicas: ptr[int32](4)}
			},
		},
		{
			name: "valid elastic job at both bounds",
			modify: func(j *kubeflow.MPIJob) {
				j.Spec.ElasticPolicy = &kubeflow.ElasticPolicy{MinReplicas: ptr[int32](2), MaxReplicas: ptr[int32](2)}
			},
		},
		{
			name:   "valid job without workers",
			modify: func(j *kubeflow.MPIJob) { delete(j.Spec.MPIReplicaSpecs, kubeflow.MPIReplicaTypeWorker) },
		},
		{
			name:   "valid job with zero workers",
			modify: func(j *kubeflow.MPIJob) { worker(j).Replicas = ptr[int32](0) },
		},
		{
			name:   "name of exactly 63 characters is fine",
			modify: func(j *kubeflow.MPIJob) { j.Name = strings.Repeat("a", 63) },
		},
		{
			name: "workers run as the job's own launcher account or any other",
			modify: func(j *kubeflow.MPIJob) {
				worker(j).Template.Spec.ServiceAccountName = j.Name + "-launcher"
				launcher(j).Template.Spec.ServiceAccountName = "trainer"
			},
		},
		{
			name: "workers run as the launcher account of another job",
			modify: func(j *kubeflow.MPIJob) {
				worker(j).Template.Spec.ServiceAccountName = "other-launcher"
				worker(j).Template.Spec.DeprecatedServiceAccount = "third-launcher"
			},
			wantFields: []string{
				"spec.mpiReplicaSpecs[Worker].template.spec.serviceAccount",
				"spec.mpiReplicaSpecs[Worker].template.spec.serviceAccountName",
			},
		},
		{
			name:       "name longer than a label value",
			modify:     func(j *kubeflow.MPIJob) { j.Name = strings.Repeat("a", 64) },
			wantFields: []string{"metadata.name"},
		},
		{
			name:       "slotsPerWorker 0",
			modify:     func(j *kubeflow.MPIJob) { j.Spec.SlotsPerWorker = ptr[int32](0) },
			wantFields: []string{"spec.slotsPerWorker"},
		},
		{
			name:       "negative slotsPerWorker",
			modify:     func(j *kubeflow.MPIJob) { j.Spec.SlotsPerWorker = ptr[int32](-2) },
			wantFields: []string{"spec.slotsPerWorker"},
		},
		{
			name:       "unknown cleanPodPolicy",
			modify:     func(j *kubeflow.MPIJob) { j.Spec.CleanPodPolicy = ptr(common.CleanPodPolicy("Sometimes")) },
			wantFields: []string{"spec.cleanPodPolicy"},
		},
		{
			// spec.cleanPodPolicy is defaulted from it: the error names
			// the field the user wrote.
			name: "unknown cleanPodPolicy in runPolicy",
			modify: func(j *kubeflow.MPIJob) {
				j.Spec.RunPolicy = &common.RunPolicy{CleanPodPolicy: ptr(common.CleanPodPolicy("Sometimes"))}
			},
			wantFields: []string{"spec.runPolicy.cleanPodPolicy"},
		},
		{
			name: "unknown cleanPodPolicy in runPolicy beside a valid one in spec",
			modify: func(j *kubeflow.MPIJob) {
				j.Spec.CleanPodPolicy = ptr(common.CleanPodPolicyAll)
				j.Spec.RunPolicy = &common.RunPolicy{CleanPodPolicy: ptr(common.CleanPodPolicy("all"))}
			},
			wantFields: []string{"spec.runPolicy.cleanPodPolicy"},
		},
		{
			name: "two different unknown cleanPodPolicies",
			modify: func(j *kubeflow.MPIJob) {
				j.Spec.CleanPodPolicy = ptr(common.CleanPodPolicy("Never"))
				j.Spec.RunPolicy = &common.RunPolicy{CleanPodPolicy: ptr(common.CleanPodPolicy("Sometimes"))}
			},
			wantFields: []string{"spec.cleanPodPolicy", "spec.runPolicy.cleanPodPolicy"},
		},
		{
			name: "valid run policy at its bounds",
			modify: func(j *kubeflow.MPIJob) {
				j.Spec.RunPolicy = &common.RunPolicy{
					CleanPodPolicy:          ptr(common.CleanPodPolicyAll),
					BackoffLimit:            ptr[int32](0),
					ActiveDeadlineSeconds:   ptr[int64](1),
					TTLSecondsAfterFinished: ptr[int32](0),
				}
			},
		},
		{
			name:       "negative backoffLimit",
			modify:     func(j *kubeflow.MPIJob) { j.Spec.RunPolicy = &common.RunPolicy{BackoffLimit: ptr[int32](-1)} },
			wantFields: []string{"spec.runPolicy.backoffLimit"},
		},
		{
			name:       "activeDeadlineSeconds 0",
			modify:     func(j *kubeflow.MPIJob) { j.Spec.RunPolicy = &common.RunPolicy{ActiveDeadlineSeconds: ptr[int64](0)} },
			wantFields: []string{"spec.runPolicy.activeDeadlineSeconds"},
		},
		{
			name:       "negative activeDeadlineSeconds",
			modify:     func(j *kubeflow.MPIJob) { j.Spec.RunPolicy = &common.RunPolicy{ActiveDeadlineSeconds: ptr[int64](-60)} },
			wantFields: []string{"spec.runPolicy.activeDeadlineSeconds"},
		},
		{
			name: "negative ttlSecondsAfterFinished",
			modify: func(j *kubeflow.MPIJob) {
				j.Spec.RunPolicy = &common.RunPolicy{TTLSecondsAfterFinished: ptr[int32](-1)}
			},
			wantFields: []string{"spec.runPolicy.ttlSecondsAfterFinished"},
		},
		{
			name:       "worker container name with capitals",
			modify:     func(j *kubeflow.MPIJob) { worker(j).Template.Spec.Containers[0].Name = "Worker" },
			wantFields: []string{"spec.mpiReplicaSpecs[Worker].template.spec.containers[0].name"},
		},
		{
			name: "second launcher container name too long",
			modify: func(j *kubeflow.MPIJob) {
				c := corev1.Container{Name: strings.Repeat("s", 64), Image: "sidecar"}
				launcher(j).Template.Spec.Containers = append(launcher(j).Template.Spec.Containers, c)
			},
			wantFields: []string{"spec.mpiReplicaSpecs[Launcher].template.spec.containers[1].name"},
		},
		{
			name: "container name of exactly 63 characters is fine",
			modify: func(j *kubeflow.MPIJob) {
				worker(j).Template.Spec.Containers[0].Name = strings.Repeat("w", 63)
			},
		},
		{
			name: "empty container name",
			modify: func(j *kubeflow.MPIJob) {
				launcher(j).Template.Spec.Containers[0].Name = ""
			},
			wantFields: []string{"spec.mpiReplicaSpecs[Launcher].template.spec.containers[0].name"},
		},
		{
			name: "init container names",
			modify: func(j *kubeflow.MPIJob) {
				worker(j).Template.Spec.InitContainers = []corev1.Container{{Name: "ok", Image: "i"}, {Name: "not_ok", Image: "i"}}
				launcher(j).Template.Spec.InitContainers = []corev1.Container{{Name: "-dash", Image: "i"}}
			},
			wantFields: []string{
				"spec.mpiReplicaSpecs[Launcher].template.spec.initContainers[0].name",
				"spec.mpiReplicaSpecs[Worker].template.spec.initContainers[1].name",
			},
		},
		{
			name:       "mainContainer naming no worker container",
			modify:     func(j *kubeflow.MPIJob) { j.Spec.MainContainer = "launcher" },
			wantFields: []string{"spec.mainContainer"},
		},
		{
			name:       "mainContainer that is no DNS label",
			modify:     func(j *kubeflow.MPIJob) { j.Spec.MainContainer = "Worker" },
			wantFields: []string{"spec.mainContainer"},
		},
		{
			name: "mainContainer naming a second worker container",
			modify: func(j *kubeflow.MPIJob) {
				worker(j).Template.Spec.Containers = append(worker(j).Template.Spec.Containers, corev1.Container{Name: "trainer", Image: "t"})
				j.Spec.MainContainer = "trainer"
			},
		},
		{
			name:   "MaxWorkers workers",
			modify: func(j *kubeflow.MPIJob) { worker(j).Replicas = ptr(kubeflow.MaxWorkers) },
		},
		{
			name:       "more than MaxWorkers workers",
			modify:     func(j *kubeflow.MPIJob) { worker(j).Replicas = ptr(kubeflow.MaxWorkers + 1) },
			wantFields: []string{"spec.mpiReplicaSpecs[Worker].replicas"},
		},
		{
			name: "elastic bounds at MaxWorkers",
			modify: func(j *kubeflow.MPIJob) {
				j.Spec.ElasticPolicy = &kubeflow.ElasticPolicy{MinReplicas: ptr(kubeflow.MaxWorkers), MaxReplicas: ptr(kubeflow.MaxWorkers)}
				worker(j).Replicas = ptr(kubeflow.MaxWorkers)
			},
		},
		{
			name: "elastic maxReplicas above MaxWorkers",
			modify: func(j *kubeflow.MPIJob) {
				j.Spec.ElasticPolicy = &kubeflow.ElasticPolicy{MaxReplicas: ptr(kubeflow.MaxWorkers + 1)}
			},
			wantFields: []string{"spec.elasticPolicy.maxReplicas"},
		},
		{
			name: "elastic minReplicas above MaxWorkers",
			modify: func(j *kubeflow.MPIJob) {
				j.Spec.ElasticPolicy = &kubeflow.ElasticPolicy{MinReplicas: ptr(kubeflow.MaxWorkers + 1)}
				worker(j).Replicas = ptr(kubeflow.MaxWorkers + 1)
			},
			wantFields: []string{"spec.elasticPolicy.minReplicas", "spec.mpiReplicaSpecs[Worker].replicas"},
		},
		{
			name:       "no launcher",
			modify:     func(j *kubeflow.MPIJob) { delete(j.Spec.MPIReplicaSpecs, kubeflow.MPIReplicaTypeLauncher) },
			wantFields: []string{"spec.mpiReplicaSpecs[Launcher]"},
		},
		{
			name:       "no replica specs at all",
			modify:     func(j *kubeflow.MPIJob) { j.Spec.MPIReplicaSpecs = nil },
			wantFields: []string{"spec.mpiReplicaSpecs[Launcher]"},
		},
		{
			name:       "launcher is null",
			modify:     func(j *kubeflow.MPIJob) { j.Spec.MPIReplicaSpecs[kubeflow.MPIReplicaTypeLauncher] = nil },
			wantFields: []string{"spec.mpiReplicaSpecs[Launcher]"},
		},
		{
			name:       "two launchers",
			modify:     func(j *kubeflow.MPIJob) { launcher(j).Replicas = ptr[int32](2) },
			wantFields: []string{"spec.mpiReplicaSpecs[Launcher].replicas"},
		},
		{
			name:       "zero launchers",
			modify:     func(j *kubeflow.MPIJob) { launcher(j).Replicas = ptr[int32](0) },
			wantFields: []string{"spec.mpiReplicaSpecs[Launcher].replicas"},
		},
		{
			name:       "launcher without containers",
			modify:     func(j *kubeflow.MPIJob) { launcher(j).Template.Spec.Containers = nil },
			wantFields: []string{"spec.mpiReplicaSpecs[Launcher].template.spec.containers"},
		},
		{
			name:       "negative workers",
			modify:     func(j *kubeflow.MPIJob) { worker(j).Replicas = ptr[int32](-1) },
			wantFields: []string{"spec.mpiReplicaSpecs[Worker].replicas"},
		},
		{
			name:       "workers without containers",
			modify:     func(j *kubeflow.MPIJob) { worker(j).Template.Spec.Containers = nil },
			wantFields: []string{"spec.mpiReplicaSpecs[Worker].template.spec.containers"},
		},
		{
			name:       "worker is null",
			modify:     func(j *kubeflow.MPIJob) { j.Spec.MPIReplicaSpecs[kubeflow.MPIReplicaTypeWorker] = nil },
			wantFields: []string{"spec.mpiReplicaSpecs[Worker]"},
		},
		{
			name:       "unknown restartPolicy",
			modify:     func(j *kubeflow.MPIJob) { worker(j).RestartPolicy = "Sometimes" },
			wantFields: []string{"spec.mpiReplicaSpecs[Worker].restartPolicy"},
		},
		{
			name:       "unknown replica type",
			modify:     func(j *kubeflow.MPIJob) { j.Spec.MPIReplicaSpecs["PS"] = &common.ReplicaSpec{} },
			wantFields: []string{"spec.mpiReplicaSpecs"},
		},
		{
			name:       "unknown replica type that is null",
			modify:     func(j *kubeflow.MPIJob) { j.Spec.MPIReplicaSpecs["PS"] = nil },
			wantFields: []string{"spec.mpiReplicaSpecs"},
		},
		{
			name: "elastic minReplicas 0",
			modify: func(j *kubeflow.MPIJob) {
				j.Spec.ElasticPolicy = &kubeflow.ElasticPolicy{MinReplicas: ptr[int32](0), MaxReplicas: ptr[int32](4)}
			},
			wantFields: []string{"spec.elasticPolicy.minReplicas"},
		},
		{
			name: "elastic maxReplicas below minReplicas",
			modify: func(j *kubeflow.MPIJob) {
				j.Spec.ElasticPolicy = &kubeflow.ElasticPolicy{MinReplicas: ptr[int32](2), MaxReplicas: ptr[int32](1)}
				worker(j).Replicas = ptr[int32](2)
			},
			wantFields: []string{"spec.elasticPolicy.maxReplicas", "spec.mpiReplicaSpecs[Worker].replicas"},
		},
		{
			name: "elastic workers below minReplicas",
			modify: func(j *kubeflow.MPIJob) {
				j.Spec.ElasticPolicy = &kubeflow.ElasticPolicy{MinReplicas: ptr[int32](3)}
			},
			wantFields: []string{"spec.mpiReplicaSpecs[Worker].replicas"},
		},
		{
			name: "elastic workers above maxReplicas",
			modify: func(j *kubeflow.MPIJob) {
				j.Spec.ElasticPolicy = &kubeflow.ElasticPolicy{MaxReplicas: ptr[int32](1)}
			},
			wantFields: []string{"spec.mpiReplicaSpecs[Worker].replicas"},
		},
		{
			name: "elastic job without a Worker spec has too few workers",
			modify: func(j *kubeflow.MPIJob) {
				delete(j.Spec.MPIReplicaSpecs, kubeflow.MPIReplicaTypeWorker)
				j.Spec.ElasticPolicy = &kubeflow.ElasticPolicy{}
			},
			wantFields: []string{"spec.mpiReplicaSpecs[Worker].replicas"},
		},
		{
			name:       "negative drainSeconds",
			modify:     func(j *kubeflow.MPIJob) { j.Spec.ElasticPolicy = &kubeflow.ElasticPolicy{DrainSeconds: ptr[int32](-1)} },
			wantFields: []string{"spec.elasticPolicy.drainSeconds"},
		},
		{
			name: "drainSeconds above 3600",
			modify: func(j *kubeflow.MPIJob) {
				j.Spec.ElasticPolicy = &kubeflow.ElasticPolicy{DrainSeconds: ptr[int32](3601)}
			},
			wantFields: []string{"spec.elasticPolicy.drainSeconds"},
		},
		{
			name: "minReplicasTimeoutSeconds 0",
			modify: func(j *kubeflow.MPIJob) {
				j.Spec.ElasticPolicy = &kubeflow.ElasticPolicy{MinReplicasTimeoutSeconds: ptr[int32](0)}
			},
			wantFields: []string{"spec.elasticPolicy.minReplicasTimeoutSeconds"},
		},
		{
			name: "several errors at once",
			modify: func(j *kubeflow.MPIJob) {
				j.Name = strings.Repeat("b", 70)
				j.Spec.SlotsPerWorker = ptr[int32](0)
				launcher(j).Replicas = ptr[int32](3)
				worker(j).Template.Spec.Containers = nil
			},
			wantFields: []string{
				"metadata.name",
				"spec.mpiReplicaSpecs[Launcher].replicas",
				"spec.mpiReplicaSpecs[Worker].template.spec.containers",
				"spec.slotsPerWorker",
			},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			job := validationTestJob()
			if tc.modify != nil {
				tc.modify(job)
			}
			kubeflow.SetDefaults_MPIJob(job)
			errs := validateJob(job)
			if diff := cmp.Diff(tc.wantFields, validationTestFields(errs)); diff != "" {
				t.Errorf("error fields (-want +got):\n%s\nerrors: %v", diff, errs)
			}
			for _, e := range errs {
				if !strings.Contains(e.Error(), e.Field) {
					t.Errorf("error %q does not name its field %q", e.Error(), e.Field)
				}
			}
		})
	}
}

// TestValidateJobNeverPanics feeds validateJob defaulted jobs of odd shapes.
func TestValidateJobNeverPanics(t *testing.T) {
	cases := map[string]*kubeflow.MPIJob{
		"zero job":              {},
		"nil map":               {Spec: kubeflow.MPIJobSpec{}},
		"empty map":             {Spec: kubeflow.MPIJobSpec{MPIReplicaSpecs: map[common.ReplicaType]*common.ReplicaSpec{}}},
		"nil launcher":          {Spec: kubeflow.MPIJobSpec{MPIReplicaSpecs: map[common.ReplicaType]*common.ReplicaSpec{kubeflow.MPIReplicaTypeLauncher: nil}}},
		"nil worker":            {Spec: kubeflow.MPIJobSpec{MPIReplicaSpecs: map[common.ReplicaType]*common.ReplicaSpec{kubeflow.MPIReplicaTypeWorker: nil}}},
		"unknown nil key":       {Spec: kubeflow.MPIJobSpec{MPIReplicaSpecs: map[common.ReplicaType]*common.ReplicaSpec{"PS": nil}}},
		"unknown empty key":     {Spec: kubeflow.MPIJobSpec{MPIReplicaSpecs: map[common.ReplicaType]*common.ReplicaSpec{"PS": {}}}},
		"empty launcher only":   {Spec: kubeflow.MPIJobSpec{MPIReplicaSpecs: map[common.ReplicaType]*common.ReplicaSpec{kubeflow.MPIReplicaTypeLauncher: {}}}},
		"elastic, nothing else": {Spec: kubeflow.MPIJobSpec{ElasticPolicy: &kubeflow.ElasticPolicy{}}},
		"elastic, nil worker": {Spec: kubeflow.MPIJobSpec{
			ElasticPolicy:   &kubeflow.ElasticPolicy{MaxReplicas: ptr[int32](0)},
			MPIReplicaSpecs: map[common.ReplicaType]*common.ReplicaSpec{kubeflow.MPIReplicaTypeWorker: nil},
		}},
		"empty run policy": {Spec: kubeflow.MPIJobSpec{RunPolicy: &common.RunPolicy{SchedulingPolicy: &common.SchedulingPolicy{}}}},
	}
	for name, job := range cases {
		t.Run(name, func(t *testing.T) {
			defer func() {
				if r := recover(); r != nil {
					t.Fatalf("validateJob panicked: %v", r)
				}
			}()
			kubeflow.SetDefaults_MPIJob(job)
			errs := validateJob(job)
			if !slices.Contains(validationTestFields(errs), "spec.mpiReplicaSpecs[Launcher]") &&
				!slices.Contains(validationTestFields(errs), "spec.mpiReplicaSpecs[Launcher].template.spec.containers") {
				t.Errorf("a job without a usable launcher is accepted: %v", errs)
			}
		})
	}
}
