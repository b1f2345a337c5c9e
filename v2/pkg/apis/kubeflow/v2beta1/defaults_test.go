package v2beta1

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

func ptrTo[T any](v T) *T { return &v }

// defaulted is the spec that SetDefaults_MPIJob makes of an empty one;
// the cases below start from it and change what they expect otherwise.
func defaulted(change func(*MPIJobSpec)) MPIJobSpec {
	s := MPIJobSpec{
		SlotsPerWorker:         ptrTo[int32](1),
		RunLauncherAsWorker:    ptrTo(false),
		RunPolicy:              RunPolicy{CleanPodPolicy: ptrTo(CleanPodPolicyNone), Suspend: ptrTo(false)},
		SSHAuthMountPath:       "/root/.ssh",
		LauncherCreationPolicy: LauncherCreationPolicyAtStartup,
		MPIImplementation:      MPIImplementationOpenMPI,
	}
	if change != nil {
		change(&s)
	}
	return s
}

// everythingSet is a spec that sets every field that has a default, each
// to a value other than the default.
func everythingSet() MPIJobSpec {
	return MPIJobSpec{
		SlotsPerWorker:         ptrTo[int32](8),
		RunLauncherAsWorker:    ptrTo(true),
		RunPolicy:              RunPolicy{CleanPodPolicy: ptrTo(CleanPodPolicyRunning), Suspend: ptrTo(true), BackoffLimit: ptrTo[int32](0)},
		SSHAuthMountPath:       "/home/mpiuser/.ssh",
		LauncherCreationPolicy: LauncherCreationPolicyWaitForWorkersReady,
		MPIImplementation:      MPIImplementationMPICH,
		MPIReplicaSpecs: map[MPIReplicaType]*ReplicaSpec{
			MPIReplicaTypeLauncher: {Replicas: ptrTo[int32](1), RestartPolicy: RestartPolicyOnFailure},
			MPIReplicaTypeWorker:   {Replicas: ptrTo[int32](0), RestartPolicy: RestartPolicyExitCode},
		},
		ElasticPolicy: &ElasticPolicy{
			MinReplicas: ptrTo[int32](2), DrainSeconds: ptrTo[int32](0), MinReplicasTimeoutSeconds: ptrTo[int32](60),
		},
	}
}

func TestSetDefaultsMPIJob(t *testing.T) {
	tmpl := corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c"}}}}
	cases := []struct {
		name string
		in   MPIJobSpec
		want MPIJobSpec
	}{
		{
			name: "empty spec",
			want: defaulted(nil),
		},
		{
			name: "replicas 1 and restartPolicy OnFailure for the launcher, Never for the workers when unset",
			in: MPIJobSpec{MPIReplicaSpecs: map[MPIReplicaType]*ReplicaSpec{
				MPIReplicaTypeLauncher: {Template: tmpl},
				MPIReplicaTypeWorker:   {Template: tmpl},
			}},
			want: defaulted(func(s *MPIJobSpec) {
				s.MPIReplicaSpecs = map[MPIReplicaType]*ReplicaSpec{
					MPIReplicaTypeLauncher: {Replicas: ptrTo[int32](1), RestartPolicy: RestartPolicyOnFailure, Template: tmpl},
					MPIReplicaTypeWorker:   {Replicas: ptrTo[int32](1), RestartPolicy: RestartPolicyNever, Template: tmpl},
				}
			}),
		},
		{
			name: "set values are kept, zero workers and true booleans included",
			in:   everythingSet(),
			want: everythingSet(),
		},
		{
			name: "Intel keeps its implementation; an explicit None cleanPodPolicy stays",
			in: MPIJobSpec{
				MPIImplementation: MPIImplementationIntel,
				RunPolicy:         RunPolicy{CleanPodPolicy: ptrTo(CleanPodPolicyNone)},
			},
			want: defaulted(func(s *MPIJobSpec) { s.MPIImplementation = MPIImplementationIntel }),
		},
		{
			name: "the rest of runPolicy is left unset",
			in: MPIJobSpec{RunPolicy: RunPolicy{
				ManagedBy:        ptrTo(MultiKueueController),
				SchedulingPolicy: &SchedulingPolicy{Queue: "q"},
			}},
			want: defaulted(func(s *MPIJobSpec) {
				s.RunPolicy.ManagedBy = ptrTo(MultiKueueController)
				s.RunPolicy.SchedulingPolicy = &SchedulingPolicy{Queue: "q"}
			}),
		},
		{
			name: "empty elastic policy",
			in:   MPIJobSpec{ElasticPolicy: &ElasticPolicy{}},
			want: defaulted(func(s *MPIJobSpec) {
				s.ElasticPolicy = &ElasticPolicy{
					MinReplicas:               ptrTo[int32](1),
					DrainSeconds:              ptrTo[int32](30),
					MinReplicasTimeoutSeconds: ptrTo[int32](600),
				}
			}),
		},
		{
			name: "elastic values are kept, drainSeconds 0 included; maxReplicas stays unset",
			in: MPIJobSpec{ElasticPolicy: &ElasticPolicy{
				MinReplicas: ptrTo[int32](2), DrainSeconds: ptrTo[int32](0), MinReplicasTimeoutSeconds: ptrTo[int32](60),
			}},
			want: defaulted(func(s *MPIJobSpec) {
				s.ElasticPolicy = &ElasticPolicy{
					MinReplicas: ptrTo[int32](2), DrainSeconds: ptrTo[int32](0), MinReplicasTimeoutSeconds: ptrTo[int32](60),
				}
			}),
		},
		{
			name: "a null replica spec and an unknown replica type are left alone",
			in: MPIJobSpec{MPIReplicaSpecs: map[MPIReplicaType]*ReplicaSpec{
				MPIReplicaTypeWorker: nil,
				"PS":                 {},
			}},
			want: defaulted(func(s *MPIJobSpec) {
				s.MPIReplicaSpecs = map[MPIReplicaType]*ReplicaSpec{MPIReplicaTypeWorker: nil, "PS": {}}
			}),
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			job := &MPIJob{Spec: tc.in}
			SetDefaults_MPIJob(job)
			if diff := cmp.Diff(tc.want, job.Spec); diff != "" {
				t.Errorf("spec after defaulting (-want +got):\n%s", diff)
			}
			// Defaulting twice changes nothing.
			again := job.DeepCopy()
			SetDefaults_MPIJob(again)
			if diff := cmp.Diff(job.Spec, again.Spec); diff != "" {
				t.Errorf("a second defaulting changed the spec (-first +second):\n%s", diff)
			}
		})
	}
}

// TestSchemeDefaults checks that the scheme's defaulter, which
// defaulter-gen registers, calls SetDefaults_MPIJob for jobs and lists.
func TestSchemeDefaults(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	list := &MPIJobList{Items: []MPIJob{{}, {}}}
	scheme.Default(list)
	for i, job := range list.Items {
		if diff := cmp.Diff(defaulted(nil), job.Spec); diff != "" {
			t.Errorf("item %d after the scheme's defaulting (-want +got):\n%s", i, diff)
		}
	}
}
