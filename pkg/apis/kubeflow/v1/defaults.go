package v1

import (
	common "github.com/kubeflow/common/pkg/apis/common/v1"
)

// Defaults of fields whose absence has a meaning.
const (
	DefaultSlotsPerWorker            int32 = 1
	DefaultDrainSeconds              int32 = 30
	DefaultMinReplicas               int32 = 1
	DefaultMinReplicasTimeoutSeconds int32 = 600
)

// SetDefaults_MPIJob fills the fields that the API leaves optional. The
// controller applies it to a copy; it never writes defaults back to the
// object.
//
//nolint:revive,stylecheck // the name is the defaulter-gen convention
func SetDefaults_MPIJob(job *MPIJob) {
	if job.Spec.SlotsPerWorker == nil {
		job.Spec.SlotsPerWorker = ptr(DefaultSlotsPerWorker)
	}
	if job.Spec.CleanPodPolicy == nil {
		policy := common.CleanPodPolicyNone
		if rp := job.Spec.RunPolicy; rp != nil && rp.CleanPodPolicy != nil {
			policy = *rp.CleanPodPolicy
		}
		job.Spec.CleanPodPolicy = &policy
	}
	for _, rt := range []common.ReplicaType{MPIReplicaTypeLauncher, MPIReplicaTypeWorker} {
		spec := job.Spec.MPIReplicaSpecs[rt]
		if spec == nil {
			continue
		}
		if spec.RestartPolicy == "" {
			spec.RestartPolicy = common.RestartPolicyNever
		}
		if spec.Replicas == nil {
			spec.Replicas = ptr(int32(1))
		}
	}
	if ep := job.Spec.ElasticPolicy; ep != nil {
		if ep.MinReplicas == nil {
			ep.MinReplicas = ptr(DefaultMinReplicas)
		}
		if ep.DrainSeconds == nil {
			ep.DrainSeconds = ptr(DefaultDrainSeconds)
		}
		if ep.MinReplicasTimeoutSeconds == nil {
			ep.MinReplicasTimeoutSeconds = ptr(DefaultMinReplicasTimeoutSeconds)
		}
	}
}

func ptr[T any](v T) *T { return &v }
