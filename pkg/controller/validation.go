package controller

import (
	"fmt"
	"strings"

	common "github.com/kubeflow/common/pkg/apis/common/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	kubeflow "github.com/kubeflow/mpi-operator/pkg/apis/kubeflow/v1"
)

// validateJob checks a defaulted job for what the CRD schema rejects too,
// for clusters whose CRD is older than the controller, and for what a
// schema cannot see. Each error names its field.
func validateJob(job *kubeflow.MPIJob) field.ErrorList {
	var errs field.ErrorList
	if len(job.Name) > validation.LabelValueMaxLength {
		errs = append(errs, field.TooLong(field.NewPath("metadata", "name"), job.Name, validation.LabelValueMaxLength))
	}
	spec := field.NewPath("spec")
	if s := job.Spec.SlotsPerWorker; s != nil && *s < 1 {
		errs = append(errs, field.Invalid(spec.Child("slotsPerWorker"), *s, "must be at least 1"))
	}
	switch p := *job.Spec.CleanPodPolicy; p {
	case common.CleanPodPolicyAll, common.CleanPodPolicyRunning, common.CleanPodPolicyNone:
	default:
		errs = append(errs, field.NotSupported(spec.Child("cleanPodPolicy"), p, []string{"All", "Running", "None"}))
	}
	errs = append(errs, validateReplicaSpecs(job, spec.Child("mpiReplicaSpecs"))...)
	errs = append(errs, validateMainContainer(job, spec.Child("mainContainer"))...)
	errs = append(errs, validateElasticPolicy(job, spec.Child("elasticPolicy"))...)
	return errs
}

func validateReplicaSpecs(job *kubeflow.MPIJob, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	for rt, rs := range job.Spec.MPIReplicaSpecs {
		p := path.Key(string(rt))
		switch rt {
		case kubeflow.MPIReplicaTypeLauncher, kubeflow.MPIReplicaTypeWorker:
		default:
			errs = append(errs, field.NotSupported(path, string(rt), []string{"Launcher", "Worker"}))
			continue
		}
		if rs == nil {
			errs = append(errs, field.Required(p, "must not be null"))
			continue
		}
		switch rs.RestartPolicy {
		case common.RestartPolicyAlways, common.RestartPolicyOnFailure, common.RestartPolicyNever, common.RestartPolicyExitCode:
		default:
			errs = append(errs, field.NotSupported(p.Child("restartPolicy"), rs.RestartPolicy,
				[]string{"Always", "OnFailure", "Never", "ExitCode"}))
		}
		if *rs.Replicas < 0 {
			errs = append(errs, field.Invalid(p.Child("replicas"), *rs.Replicas, "must be 0 or more"))
		}
		if rt == kubeflow.MPIReplicaTypeLauncher && *rs.Replicas != 1 {
			errs = append(errs, field.Invalid(p.Child("replicas"), *rs.Replicas, "must be 1"))
		}
		if len(rs.Template.Spec.Containers) == 0 {
			errs = append(errs, field.Required(p.Child("template", "spec", "containers"), "needs at least one container"))
		}
	}
	if job.Spec.MPIReplicaSpecs[kubeflow.MPIReplicaTypeLauncher] == nil {
		errs = append(errs, field.Required(path.Key(string(kubeflow.MPIReplicaTypeLauncher)), "an MPIJob needs exactly one launcher"))
	}
	return errs
}

func validateElasticPolicy(job *kubeflow.MPIJob, path *field.Path) field.ErrorList {
	ep := job.Spec.ElasticPolicy
	if ep == nil {
		return nil
	}
	var errs field.ErrorList
	minR := *ep.MinReplicas
	if minR < 1 {
		errs = append(errs, field.Invalid(path.Child("minReplicas"), minR, "must be at least 1"))
	}
	if ep.MaxReplicas != nil && *ep.MaxReplicas < minR {
		errs = append(errs, field.Invalid(path.Child("maxReplicas"), *ep.MaxReplicas,
			fmt.Sprintf("must not be less than minReplicas (%d)", minR)))
	}
	if d := *ep.DrainSeconds; d < 0 || d > 3600 {
		errs = append(errs, field.Invalid(path.Child("drainSeconds"), d, "must be between 0 and 3600"))
	}
	if t := *ep.MinReplicasTimeoutSeconds; t < 1 {
		errs = append(errs, field.Invalid(path.Child("minReplicasTimeoutSeconds"), t, "must be at least 1"))
	}
	replicas := int32(desiredWorkers(job))
	workers := field.NewPath("spec", "mpiReplicaSpecs").Key(string(kubeflow.MPIReplicaTypeWorker)).Child("replicas")
	if replicas < minR {
		errs = append(errs, field.Invalid(workers, replicas, fmt.Sprintf("must not be less than spec.elasticPolicy.minReplicas (%d)", minR)))
	}
	if ep.MaxReplicas != nil && replicas > *ep.MaxReplicas {
		errs = append(errs, field.Invalid(workers, replicas, fmt.Sprintf("must not be more than spec.elasticPolicy.maxReplicas (%d)", *ep.MaxReplicas)))
	}
	return errs
}

// validateMainContainer checks that spec.mainContainer, which kubexec.sh
// passes to kubectl exec, names a container of the workers.
func validateMainContainer(job *kubeflow.MPIJob, path *field.Path) field.ErrorList {
	name := job.Spec.MainContainer
	if name == "" {
		return nil
	}
	if msgs := validation.IsDNS1123Label(name); len(msgs) > 0 {
		return field.ErrorList{field.Invalid(path, name, strings.Join(msgs, "; "))}
	}
	worker := job.Spec.MPIReplicaSpecs[kubeflow.MPIReplicaTypeWorker]
	if worker == nil {
		return nil
	}
	for _, c := range worker.Template.Spec.Containers {
		if c.Name == name {
			return nil
		}
	}
	return field.ErrorList{field.Invalid(path, name, "must name a container of the Worker template")}
}
