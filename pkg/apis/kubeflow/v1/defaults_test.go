package v1

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	common "github.com/kubeflow/common/pkg/apis/common/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

func defaultsTestPtr[T any](v T) *T { return &v }

func TestSetDefaultsMPIJob(t *testing.T) {
	none, all, running := common.CleanPodPolicyNone, common.CleanPodPolicyAll, common.CleanPodPolicyRunning
	tmpl := corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c"}}}}
	cases := []struct {
		name string
		in   MPIJobSpec
		want MPIJobSpec
	}{
		{
			name: "empty spec",
			in:   MPIJobSpec{},
			want: MPIJobSpec{SlotsPerWorker: defaultsTestPtr[int32](1), CleanPodPolicy: &none},
		},
		{
			name: "replica specs: restartPolicy Never and replicas 1 when unset",
			in: MPIJobSpec{MPIReplicaSpecs: map[common.ReplicaType]*common.ReplicaSpec{
				MPIReplicaTypeLauncher: {Template: tmpl},
				MPIReplicaTypeWorker:   {Template: tmpl},
			}},
			want: MPIJobSpec{
				SlotsPerWorker: defaultsTestPtr[int32](1),
				CleanPodPolicy: &none,
				MPIReplicaSpecs: map[common.ReplicaType]*common.ReplicaSpec{
					MPIReplicaTypeLauncher: {Replicas: defaultsTestPtr[int32](1), RestartPolicy: common.RestartPolicyNever, Template: tmpl},
					MPIReplicaTypeWorker:   {Replicas: defaultsTestPtr[int32](1), RestartPolicy: common.RestartPolicyNever, Template: tmpl},
				},
			},
		},
		{
			name: "set values are kept, including replicas 0",
			in: MPIJobSpec{
				SlotsPerWorker: defaultsTestPtr[int32](4),
				CleanPodPolicy: &all,
				MainContainer:  "main",
				MPIReplicaSpecs: map[common.ReplicaType]*common.ReplicaSpec{
					MPIReplicaTypeLauncher: {Replicas: defaultsTestPtr[int32](1), RestartPolicy: common.RestartPolicyOnFailure},
					MPIReplicaTypeWorker:   {Replicas: defaultsTestPtr[int32](0), RestartPolicy: common.RestartPolicyExitCode},
				},
			},
			want: MPIJobSpec{
				SlotsPerWorker: defaultsTestPtr[int32](4),
				CleanPodPolicy: &all,
				MainContainer:  "main",
				MPIReplicaSpecs: map[common.ReplicaType]*common.ReplicaSpec{
					MPIReplicaTypeLauncher: {Replicas: defaultsTestPtr[int32](1), RestartPolicy: common.RestartPolicyOnFailure},
					MPIReplicaTypeWorker:   {Replicas: defaultsTestPtr[int32](0), RestartPolicy: common.RestartPolicyExitCode},
				},
			},
		},
		{
			name: "cleanPodPolicy inherited from runPolicy when unset",
			in:   MPIJobSpec{RunPolicy: &common.RunPolicy{CleanPodPolicy: &running}},
			want: MPIJobSpec{
				SlotsPerWorker: defaultsTestPtr[int32](1),
				CleanPodPolicy: &running,
				RunPolicy:      &common.RunPolicy{CleanPodPolicy: &running},
			},
		},
		{
			name: "top-level cleanPodPolicy wins over runPolicy",
			in:   MPIJobSpec{CleanPodPolicy: &all, RunPolicy: &common.RunPolicy{CleanPodPolicy: &running}},
			want: MPIJobSpec{
				SlotsPerWorker: defaultsTestPtr[int32](1),
				CleanPodPolicy: &all,
				RunPolicy:      &common.RunPolicy{CleanPodPolicy: &running},
			},
		},
		{
			name: "runPolicy without cleanPodPolicy: None",
			in:   MPIJobSpec{RunPolicy: &common.RunPolicy{BackoffLimit: defaultsTestPtr[int32](2)}},
			want: MPIJobSpec{
				SlotsPerWorker: defaultsTestPtr[int32](1),
				CleanPodPolicy: &none,
				RunPolicy:      &common.RunPolicy{BackoffLimit: defaultsTestPtr[int32](2)},
			},
		},
		{
			name: "empty elastic policy",
			in:   MPIJobSpec{ElasticPolicy: &ElasticPolicy{}},
			want: MPIJobSpec{
				SlotsPerWorker: defaultsTestPtr[int32](1),
				CleanPodPolicy: &none,
				ElasticPolicy: &ElasticPolicy{
					MinReplicas:               defaultsTestPtr[int32](1),
					DrainSeconds:              defaultsTestPtr[int32](30),
					MinReplicasTimeoutSeconds: defaultsTestPtr[int32](600),
				},
			},
		},
		{
			name: "elastic policy values are kept, drainSeconds 0 included; maxReplicas stays unbounded",
			in: MPIJobSpec{ElasticPolicy: &ElasticPolicy{
				MinReplicas: defaultsTestPtr[int32](2), DrainSeconds: defaultsTestPtr[int32](0), MinReplicasTimeoutSeconds: defaultsTestPtr[int32](60),
			}},
			want: MPIJobSpec{
				SlotsPerWorker: defaultsTestPtr[int32](1),
				CleanPodPolicy: &none,
				ElasticPolicy: &ElasticPolicy{
					MinReplicas: defaultsTestPtr[int32](2), DrainSeconds: defaultsTestPtr[int32](0), MinReplicasTimeoutSeconds: defaultsTestPtr[int32](60),
				},
			},
		},
		{
			name: "null replica spec and unknown replica type are left alone",
			in: MPIJobSpec{MPIReplicaSpecs: map[common.ReplicaType]*common.ReplicaSpec{
				MPIReplicaTypeWorker: nil,
				"PS":                 {},
			}},
			want: MPIJobSpec{
				SlotsPerWorker: defaultsTestPtr[int32](1),
				CleanPodPolicy: &none,
				MPIReplicaSpecs: map[common.ReplicaType]*common.ReplicaSpec{
					MPIReplicaTypeWorker: nil,
					"PS":                 {},
				},
			},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			job := &MPIJob{ObjectMeta: metav1.ObjectMeta{Name: "job", Namespace: "ns"}, Spec: *tc.in.DeepCopy()}
			SetDefaults_MPIJob(job)
			if diff := cmp.Diff(tc.want, job.Spec); diff != "" {
				t.Errorf("defaulted spec (-want +got):\n%s", diff)
			}
			once := job.DeepCopy()
			SetDefaults_MPIJob(job)
			if diff := cmp.Diff(once, job); diff != "" {
				t.Errorf("defaulting twice differs from once (-once +twice):\n%s", diff)
			}
		})
	}
}

// TestSetDefaultsCleanPodPolicyIsACopy: the inherited cleanPodPolicy must not
// share its pointer with runPolicy, or changing one would change the other.
func TestSetDefaultsCleanPodPolicyIsACopy(t *testing.T) {
	running := common.CleanPodPolicyRunning
	job := &MPIJob{Spec: MPIJobSpec{RunPolicy: &common.RunPolicy{CleanPodPolicy: &running}}}
	SetDefaults_MPIJob(job)
	*job.Spec.CleanPodPolicy = common.CleanPodPolicyAll
	if *job.Spec.RunPolicy.CleanPodPolicy != common.CleanPodPolicyRunning {
		t.Errorf("runPolicy.cleanPodPolicy changed to %s with spec.cleanPodPolicy", *job.Spec.RunPolicy.CleanPodPolicy)
	}
}

// TestSchemeDefaulter: the generated defaulter registered in the scheme runs
// SetDefaults_MPIJob, for jobs and for lists.
func TestSchemeDefaulter(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	job := &MPIJob{}
	scheme.Default(job)
	if job.Spec.SlotsPerWorker == nil || *job.Spec.SlotsPerWorker != 1 {
		t.Errorf("scheme.Default did not default the job: %+v", job.Spec)
	}
	list := &MPIJobList{Items: []MPIJob{{}, {}}}
	scheme.Default(list)
	for i, item := range list.Items {
		if item.Spec.CleanPodPolicy == nil || *item.Spec.CleanPodPolicy != common.CleanPodPolicyNone {
			t.Errorf("list item %d not defaulted: %+v", i, item.Spec)
		}
	}
}
