package controller

import (
	"fmt"
	"strings"

	common "github.com/kubeflow/common/pkg/apis/common/v1"
	corev1 "k8s.io/api/core/v1"
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
	// An unset spec.cleanPodPolicy is defaulted from runPolicy's, which is
	// checked, and named, below.
	if rp := job.Spec.RunPolicy; rp == nil || rp.CleanPodPolicy == nil || *rp.CleanPodPolicy != *job.Spec.CleanPodPolicy {
		errs = append(errs, validateCleanPodPolicy(*job.Spec.CleanPodPolicy, spec.Child("cleanPodPolicy"))...)
	}
	errs = append(errs, validateRunPolicy(job.Spec.RunPolicy, spec.Child("runPolicy"))...)
	errs = append(errs, validateReplicaSpecs(job, spec.Child("mpiReplicaSpecs"))...)
	errs = append(errs, validateMainContainer(job, spec.Child("mainContainer"))...)
	errs = append(errs, validateElasticPolicy(job, spec.Child("elasticPolicy"))...)
	return errs
}

func validateCleanPodPolicy(p common.CleanPodPolicy, path *field.Path) field.ErrorList {
	switch p {
	case common.CleanPodPolicyAll, common.CleanPodPolicyRunning, common.CleanPodPolicyNone:
		return nil
	}
	return field.ErrorList{field.NotSupported(path, p, []string{"All", "Running", "None"})}
}

// validateRunPolicy holds the run policy to a Kubernetes Job's rules: a
// backoffLimit and ttlSecondsAfterFinished of 0 or more, an
// activeDeadlineSeconds of at least 1.
func validateRunPolicy(rp *common.RunPolicy, path *field.Path) field.ErrorList {
	if rp == nil {
		return nil
	}
	var errs field.ErrorList
	if rp.CleanPodPolicy != nil {
		errs = append(errs, validateCleanPodPolicy(*rp.CleanPodPolicy, path.Child("cleanPodPolicy"))...)
	}
	if v := rp.BackoffLimit; v != nil && *v < 0 {
		errs = append(errs, field.Invalid(path.Child("backoffLimit"), *v, "must be 0 or more"))
	}
	if v := rp.ActiveDeadlineSeconds; v != nil && *v < 1 {
		errs = append(errs, field.Invalid(path.Child("activeDeadlineSeconds"), *v, "must be at least 1"))
	}
	if v := rp.TTLSecondsAfterFinished; v != nil && *v < 0 {
		errs = append(errs, field.Invalid(path.Child("ttlSecondsAfterFinished"), *v, "must be 0 or more"))
	}
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
		if rt == kubeflow.MPIReplicaTypeWorker && *rs.Replicas > kubeflow.MaxWorkers {
			errs = append(errs, tooManyWorkers(p.Child("replicas"), *rs.Replicas))
		}
		pod := p.Child("template", "spec")
		if len(rs.Template.Spec.Containers) == 0 {
			errs = append(errs, field.Required(pod.Child("containers"), "needs at least one container"))
		}
		errs = append(errs, validateContainerNames(rs.Template.Spec.Containers, pod.Child("containers"))...)
		errs = append(errs, validateContainerNames(rs.Template.Spec.InitContainers, pod.Child("initContainers"))...)
		if rt == kubeflow.MPIReplicaTypeWorker {
			errs = append(errs, validateWorkerAccount(job, &rs.Template.Spec, pod)...)
		}
	}
	if job.Spec.MPIReplicaSpecs[kubeflow.MPIReplicaTypeLauncher] == nil {
		errs = append(errs, field.Required(path.Key(string(kubeflow.MPIReplicaTypeLauncher)), "an MPIJob needs exactly one launcher"))
	}
	return errs
}

// validateWorkerAccount refuses workers that would run as the launcher
// account of another MPIJob of the namespace: its Role lets it exec into
// that job's workers. (The launcher always runs as its own job's account.)
// The CRD refuses the same at admission.
func validateWorkerAccount(job *kubeflow.MPIJob, spec *corev1.PodSpec, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	for _, f := range []struct{ name, account string }{
		{"serviceAccountName", spec.ServiceAccountName}, {"serviceAccount", spec.DeprecatedServiceAccount},
	} {
		name, account := f.name, f.account
		if strings.HasSuffix(account, launcherSuffix) && account != launcherName(job) {
			errs = append(errs, field.Forbidden(path.Child(name), fmt.Sprintf(
				"must not name %q: names ending in %q are the launcher accounts of MPIJobs, and only this job's own (%s) may be used",
				account, launcherSuffix, launcherName(job))))
		}
	}
	return errs
}

// validateContainerNames checks that each container's name is a DNS-1123
// label, as the API server requires of a pod's containers.
func validateContainerNames(containers []corev1.Container, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	for i, c := range containers {
		if msgs := validation.IsDNS1123Label(c.Name); len(msgs) > 0 {
			errs = append(errs, field.Invalid(path.Index(i).Child("name"), c.Name, strings.Join(msgs, "; ")))
		}
	}
	return errs
}

func tooManyWorkers(path *field.Path, n int32) *field.Error {
	return field.Invalid(path, n, fmt.Sprintf("must not be more than %d, the most workers a job may have", kubeflow.MaxWorkers))
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
	if minR > kubeflow.MaxWorkers {
		errs = append(errs, tooManyWorkers(path.Child("minReplicas"), minR))
	}
	if ep.MaxReplicas != nil && *ep.MaxReplicas < minR {
		errs = append(errs, field.Invalid(path.Child("maxReplicas"), *ep.MaxReplicas,
			fmt.Sprintf("must not be less than minReplicas (%d)", minR)))
	}
	if ep.MaxReplicas != nil && *ep.MaxReplicas > kubeflow.MaxWorkers {
		errs = append(errs, tooManyWorkers(path.Child("maxReplicas"), *ep.MaxReplicas))
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
