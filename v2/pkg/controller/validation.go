package controller

import (
	"fmt"

	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/kubeflow/mpi-operator/v2/pkg/apis/kubeflow/v2beta1"
)

// validateJob checks a defaulted job for what the controller cannot run:
// what the CRD schema refuses too, for a cluster whose CRD is older than the
// controller or a client that bypassed it, so that a malformed job fails
// with a message instead of crashing the sync. Each error names its field.
func validateJob(job *v2beta1.MPIJob) field.ErrorList {
	var errs field.ErrorList
	if len(job.Name) > validation.LabelValueMaxLength {
		errs = append(errs, field.TooLong(field.NewPath("metadata", "name"), job.Name, validation.LabelValueMaxLength))
	}
	spec := field.NewPath("spec")
	if n := *job.Spec.SlotsPerWorker; n < 1 {
		errs = append(errs, field.Invalid(spec.Child("slotsPerWorker"), n, "must be at least 1"))
	}
	replicas := spec.Child("mpiReplicaSpecs")
	for rt := range job.Spec.MPIReplicaSpecs {
		if rt != v2beta1.MPIReplicaTypeLauncher && rt != v2beta1.MPIReplicaTypeWorker {
			errs = append(errs, field.NotSupported(replicas, string(rt), []string{"Launcher", "Worker"}))
		}
	}
	errs = append(errs, validateLauncher(job.Spec.MPIReplicaSpecs[v2beta1.MPIReplicaTypeLauncher], replicas.Key("Launcher"))...)
	errs = append(errs, validateWorkers(job.Spec.MPIReplicaSpecs[v2beta1.MPIReplicaTypeWorker], replicas.Key("Worker"))...)
	return append(errs, validateElastic(job, spec.Child("elasticPolicy"))...)
}

func validateLauncher(rs *v2beta1.ReplicaSpec, path *field.Path) field.ErrorList {
	if rs == nil {
		return field.ErrorList{field.Required(path, "an MPIJob needs exactly one launcher")}
	}
	var errs field.ErrorList
	if *rs.Replicas != 1 {
		errs = append(errs, field.Invalid(path.Child("replicas"), *rs.Replicas, "must be 1"))
	}
	if len(rs.Template.Spec.Containers) == 0 {
		errs = append(errs, field.Required(path.Child("template", "spec", "containers"), "must hold the launcher's container"))
	}
	return errs
}

func validateWorkers(rs *v2beta1.ReplicaSpec, path *field.Path) field.ErrorList {
	if rs == nil {
		return nil
	}
	var errs field.ErrorList
	if n := *rs.Replicas; n < 0 || n > v2beta1.MaxWorkers {
		errs = append(errs, field.Invalid(path.Child("replicas"), n, fmt.Sprintf("must be between 0 and %d", v2beta1.MaxWorkers)))
	}
	if *rs.Replicas > 0 && len(rs.Template.Spec.Containers) == 0 {
		errs = append(errs, field.Required(path.Child("template", "spec", "containers"), "must hold the workers' container"))
	}
	return errs
}

// validateElastic checks an elastic policy's bounds against each other and
// against the worker replicas.
func validateElastic(job *v2beta1.MPIJob, path *field.Path) field.ErrorList {
	ep := job.Spec.ElasticPolicy
	if ep == nil {
		return nil
	}
	workers := job.Spec.MPIReplicaSpecs[v2beta1.MPIReplicaTypeWorker]
	if workers == nil {
		return field.ErrorList{field.Required(field.NewPath("spec", "mpiReplicaSpecs").Key("Worker"), "an elastic job needs workers")}
	}
	var errs field.ErrorList
	lowest, highest := *ep.MinReplicas, v2beta1.MaxWorkers
	if lowest < 1 || lowest > v2beta1.MaxWorkers {
		errs = append(errs, field.Invalid(path.Child("minReplicas"), lowest, fmt.Sprintf("must be between 1 and %d", v2beta1.MaxWorkers)))
	}
	if ep.MaxReplicas != nil {
		highest = *ep.MaxReplicas
		if highest < lowest || highest > v2beta1.MaxWorkers {
			errs = append(errs, field.Invalid(path.Child("maxReplicas"), highest,
				fmt.Sprintf("must be between minReplicas (%d) and %d", lowest, v2beta1.MaxWorkers)))
		}
	}
	if n := *workers.Replicas; len(errs) == 0 && (n < lowest || n > highest) {
		errs = append(errs, field.Invalid(field.NewPath("spec", "mpiReplicaSpecs").Key("Worker").Child("replicas"), n,
			fmt.Sprintf("must be between spec.elasticPolicy.minReplicas (%d) and maxReplicas (%d)", lowest, highest)))
	}
	if d := *ep.DrainSeconds; d < 0 || d > 3600 {
		errs = append(errs, field.Invalid(path.Child("drainSeconds"), d, "must be between 0 and 3600"))
	}
	if t := *ep.MinReplicasTimeoutSeconds; t < 1 {
		errs = append(errs, field.Invalid(path.Child("minReplicasTimeoutSeconds"), t, "must be at least 1"))
	}
	return errs
}
