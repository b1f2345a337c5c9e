package controller

import (
	"strings"
	"testing"

	"github.com/kubeflow/mpi-operator/v2/pkg/apis/kubeflow/v2beta1"
)

func TestValidateJob(t *testing.T) {
	cases := map[string]struct {
		modify func(*v2beta1.MPIJob)
		want   string // the field of the first error; "" for none
	}{
		"valid":                 {},
		"valid without workers": {modify: func(j *v2beta1.MPIJob) { delete(j.Spec.MPIReplicaSpecs, v2beta1.MPIReplicaTypeWorker) }},
		"zero workers need no container": {modify: func(j *v2beta1.MPIJob) {
			w := j.Spec.MPIReplicaSpecs[v2beta1.MPIReplicaTypeWorker]
			w.Replicas, w.Template.Spec.Containers = ptr[int32](0), nil
		}},
		"no launcher": {modify: func(j *v2beta1.MPIJob) { delete(j.Spec.MPIReplicaSpecs, v2beta1.MPIReplicaTypeLauncher) },
			want: "spec.mpiReplicaSpecs[Launcher]"},
		"two launchers": {modify: func(j *v2beta1.MPIJob) {
			j.Spec.MPIReplicaSpecs[v2beta1.MPIReplicaTypeLauncher].Replicas = ptr[int32](2)
		},
			want: "spec.mpiReplicaSpecs[Launcher].replicas"},
		"workers without a container": {modify: func(j *v2beta1.MPIJob) {
			j.Spec.MPIReplicaSpecs[v2beta1.MPIReplicaTypeWorker].Template.Spec.Containers = nil
		}, want: "spec.mpiReplicaSpecs[Worker].template.spec.containers"},
		"negative workers": {modify: setWorkers(-1), want: "spec.mpiReplicaSpecs[Worker].replicas"},
		"too many workers": {modify: setWorkers(v2beta1.MaxWorkers + 1), want: "spec.mpiReplicaSpecs[Worker].replicas"},
		"an unknown replica type": {modify: func(j *v2beta1.MPIJob) {
			j.Spec.MPIReplicaSpecs["PS"] = &v2beta1.ReplicaSpec{Replicas: ptr[int32](1)}
		}, want: "spec.mpiReplicaSpecs"},
		"no slots":    {modify: func(j *v2beta1.MPIJob) { j.Spec.SlotsPerWorker = ptr[int32](0) }, want: "spec.slotsPerWorker"},
		"a long name": {modify: func(j *v2beta1.MPIJob) { j.Name = strings.Repeat("j", 64) }, want: "metadata.name"},
		"replicas below minReplicas": {modify: func(j *v2beta1.MPIJob) { setWorkers(1)(j); withElastic(2, 4)(j) },
			want: "spec.mpiReplicaSpecs[Worker].replicas"},
		"replicas above maxReplicas": {modify: func(j *v2beta1.MPIJob) { setWorkers(5)(j); withElastic(2, 4)(j) },
			want: "spec.mpiReplicaSpecs[Worker].replicas"},
		"maxReplicas below minReplicas": {modify: withElastic(3, 2), want: "spec.elasticPolicy.maxReplicas"},
		"an elastic job without workers": {modify: func(j *v2beta1.MPIJob) {
			delete(j.Spec.MPIReplicaSpecs, v2beta1.MPIReplicaTypeWorker)
			withElastic(1, 2)(j)
		}, want: "spec.mpiReplicaSpecs[Worker]"},
		"a long drain": {modify: func(j *v2beta1.MPIJob) {
			withElastic(1, 4)(j)
			j.Spec.ElasticPolicy.DrainSeconds = ptr[int32](3601)
		}, want: "spec.elasticPolicy.drainSeconds"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			job := storedJob(2, tc.modify)
			v2beta1.SetDefaults_MPIJob(job)
			errs := validateJob(job)
			got := ""
			if len(errs) > 0 {
				got = errs[0].Field
			}
			if got != tc.want {
				t.Errorf("first error on %q, want %q (all: %v)", got, tc.want, errs)
			}
		})
	}
}
