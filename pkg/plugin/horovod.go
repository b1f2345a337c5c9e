package plugin

import (
	"fmt"
	"strconv"

	common "github.com/kubeflow/common/pkg/apis/common/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	kubeflow "github.com/kubeflow/mpi-operator/pkg/apis/kubeflow/v1"
)

// Names the built job uses for its containers and the discovery script the
// operator mounts into the launcher.
const (
	LauncherContainer   = "mpi-launcher"
	WorkerContainer     = "mpi-worker"
	DiscoverHostsPath   = "/etc/mpi/discover_hosts.sh"
	ResourceGPU         = corev1.ResourceName("nvidia.com/gpu")
	defaultDrainSeconds = 30
)

// JobRequest is what `kubectl mpijob submit` asks for: an elastic Horovod
// job of Workers workers, each with GPUs GPUs and Slots processes.
type JobRequest struct {
	Name, Namespace string
	Image           string
	Workers         int32
	// MinWorkers and MaxWorkers bound the job's workers; zero means 1 and
	// Workers.
	MinWorkers, MaxWorkers int32
	// GPUs per worker (nvidia.com/gpu limit); zero for none.
	GPUs int64
	// Slots are the processes per worker; zero means GPUs, or 1 without.
	Slots int32
	// CPU and Memory per worker, requests and limits alike; empty for none.
	CPU, Memory string
	// DrainSeconds of the elastic policy; nil means 30.
	DrainSeconds *int32
	// Command is the training program that horovodrun starts on every slot.
	Command []string
}

// BuildJob returns the MPIJob of a request: a launcher running horovodrun
// with flags that agree with the elastic policy (-np, --min-np and
// --max-np are the workers, minReplicas and maxReplicas times the slots)
// and the operator's discovery script, and workers of the requested size.
// It refuses a request the API server would refuse or that makes no job.
func BuildJob(r JobRequest) (*kubeflow.MPIJob, error) {
	r = r.withDefaults()
	if err := r.validate(); err != nil {
		return nil, err
	}
	workerResources, err := r.workerResources()
	if err != nil {
		return nil, err
	}
	launcher := &common.ReplicaSpec{
		Replicas: ptrTo[int32](1),
		Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
			Containers: []corev1.Container{{
				Name:    LauncherContainer,
				Image:   r.Image,
				Command: r.horovodrun(),
			}},
		}},
	}
	worker := &common.ReplicaSpec{
		Replicas: ptrTo(r.Workers),
		Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
			Containers: []corev1.Container{{
				Name:      WorkerContainer,
				Image:     r.Image,
				Resources: workerResources,
			}},
		}},
	}
	cleanPods := common.CleanPodPolicyRunning
	return &kubeflow.MPIJob{
		TypeMeta:   metav1.TypeMeta{APIVersion: kubeflow.SchemeGroupVersion.String(), Kind: "MPIJob"},
		ObjectMeta: metav1.ObjectMeta{Name: r.Name, Namespace: r.Namespace},
		Spec: kubeflow.MPIJobSpec{
			SlotsPerWorker: ptrTo(r.Slots),
			CleanPodPolicy: &cleanPods,
			ElasticPolicy: &kubeflow.ElasticPolicy{
				MinReplicas:  ptrTo(r.MinWorkers),
				MaxReplicas:  ptrTo(r.MaxWorkers),
				DrainSeconds: r.DrainSeconds,
			},
			MPIReplicaSpecs: map[common.ReplicaType]*common.ReplicaSpec{
				kubeflow.MPIReplicaTypeLauncher: launcher,
				kubeflow.MPIReplicaTypeWorker:   worker,
			},
		},
	}, nil
}

// withDefaults fills in what the request leaves unset.
func (r JobRequest) withDefaults() JobRequest {
	if r.MinWorkers == 0 {
		r.MinWorkers = 1
	}
	if r.MaxWorkers == 0 {
		r.MaxWorkers = r.Workers
	}
	if r.Slots == 0 {
		r.Slots = 1
		if r.GPUs > 0 && r.GPUs <= int64(maxInt32) {
			r.Slots = int32(r.GPUs)
		}
	}
	if r.DrainSeconds == nil {
		r.DrainSeconds = ptrTo[int32](defaultDrainSeconds)
	}
	return r
}

const maxInt32 = 1<<31 - 1

// validate checks a request with its defaults filled in.
func (r JobRequest) validate() error {
	if msgs := validation.IsDNS1123Subdomain(r.Name); len(msgs) > 0 || len(r.Name) > 63 {
		return fmt.Errorf("invalid job name %q: a lowercase DNS-1123 name of at most 63 characters is needed", r.Name)
	}
	switch {
	case r.Image == "":
		return fmt.Errorf("--image is required")
	case len(r.Command) == 0:
		return fmt.Errorf("a training command is required after --, for example: -- python train.py")
	case r.Workers < 1:
		return fmt.Errorf("--workers must be at least 1, got %d", r.Workers)
	case r.MinWorkers < 1:
		return fmt.Errorf("--min-workers must be at least 1, got %d", r.MinWorkers)
	case r.MinWorkers > r.Workers:
		return fmt.Errorf("--min-workers (%d) is above --workers (%d)", r.MinWorkers, r.Workers)
	case r.MaxWorkers < r.Workers:
		return fmt.Errorf("--max-workers (%d) is below --workers (%d)", r.MaxWorkers, r.Workers)
	case r.MaxWorkers > kubeflow.MaxWorkers:
		return fmt.Errorf("--max-workers (%d) is above the most workers a job may have (%d)", r.MaxWorkers, kubeflow.MaxWorkers)
	case r.GPUs < 0:
		return fmt.Errorf("--gpus must not be negative, got %d", r.GPUs)
	case r.Slots < 1:
		return fmt.Errorf("--slots must be at least 1, got %d", r.Slots)
	case int64(r.MaxWorkers)*int64(r.Slots) > maxInt32:
		return fmt.Errorf("--max-workers times --slots (%d x %d) is too large", r.MaxWorkers, r.Slots)
	case *r.DrainSeconds < 0 || *r.DrainSeconds > 3600:
		return fmt.Errorf("--drain-seconds must be within 0 and 3600, got %d", *r.DrainSeconds)
	}
	return nil
}

// workerResources are the requests and limits of a worker's container.
func (r JobRequest) workerResources() (corev1.ResourceRequirements, error) {
	var res corev1.ResourceRequirements
	set := func(name corev1.ResourceName, flag, value string) error {
		if value == "" {
			return nil
		}
		q, err := resource.ParseQuantity(value)
		if err != nil {
			return fmt.Errorf("invalid %s %q: %w", flag, value, err)
		}
		if q.Sign() <= 0 {
			return fmt.Errorf("invalid %s %q: must be positive", flag, value)
		}
		if res.Limits == nil {
			res.Limits, res.Requests = corev1.ResourceList{}, corev1.ResourceList{}
		}
		res.Limits[name], res.Requests[name] = q, q
		return nil
	}
	if err := set(corev1.ResourceCPU, "--cpu", r.CPU); err != nil {
		return res, err
	}
	if err := set(corev1.ResourceMemory, "--memory", r.Memory); err != nil {
		return res, err
	}
	if r.GPUs > 0 {
		// Extended resources take limits only; the API server copies them
		// into the requests.
		if res.Limits == nil {
			res.Limits = corev1.ResourceList{}
		}
		res.Limits[ResourceGPU] = *resource.NewQuantity(r.GPUs, resource.DecimalSI)
	}
	return res, nil
}

// horovodrun is the launcher's command: elastic horovodrun over the
// operator's discovery script, its process counts those of the policy.
func (r JobRequest) horovodrun() []string {
	np := func(workers int32) string { return strconv.FormatInt(int64(workers)*int64(r.Slots), 10) }
	cmd := []string{
		"horovodrun",
		"-np", np(r.Workers),
		"--min-np", np(r.MinWorkers),
		"--max-np", np(r.MaxWorkers),
		"--host-discovery-script", DiscoverHostsPath,
	}
	return append(cmd, r.Command...)
}

func ptrTo[T any](v T) *T { return &v }
