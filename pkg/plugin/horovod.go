package plugin

import (
	"fmt"
	"maps"
	"slices"
	"strconv"

	common "github.com/kubeflow/common/pkg/apis/common/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation"

	kubeflow "github.com/kubeflow/mpi-operator/pkg/apis/kubeflow/v1"
	"github.com/kubeflow/mpi-operator/pkg/jobdefaults"
)

// jobDefaults are what a built job has where its request leaves it open,
// the same as the Python SDK's builder (docs/job-defaults.md).
var jobDefaults = jobdefaults.Get()

// Names the built job uses for its containers, the discovery script the
// operator mounts into the launcher, and the resource of GPUs.
var (
	LauncherContainer = jobDefaults.Containers.Launcher
	WorkerContainer   = jobDefaults.Containers.Worker
	DiscoverHostsPath = jobDefaults.Horovodrun.HostDiscoveryScript
	ResourceGPU       = corev1.ResourceName(jobDefaults.GPUResource)
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
	// LauncherCPU and LauncherMemory are the launcher's, requests and
	// limits alike; empty for none.
	LauncherCPU, LauncherMemory string
	// PodOptions go into the pod templates of the launcher and the workers
	// alike; their labels and annotations go on the job too.
	PodOptions
	// DrainSeconds of the elastic policy; nil means the default (30).
	DrainSeconds *int32
	// Command is the training program that horovodrun starts on every slot.
	Command []string
}

// BuildJob returns the kubeflow.org/v1 MPIJob of a request: a launcher
// running horovodrun with flags that agree with the elastic policy (-np,
// --min-np and --max-np are the workers, minReplicas and maxReplicas times
// the slots) and the operator's discovery script, and workers of the
// requested size. It refuses a request the API server would refuse or that
// makes no job.
func BuildJob(r JobRequest) (*kubeflow.MPIJob, error) {
	p, err := r.parts(APIv1)
	if err != nil {
		return nil, err
	}
	return &kubeflow.MPIJob{
		TypeMeta:   metav1.TypeMeta{APIVersion: APIv1.GroupVersion().String(), Kind: "MPIJob"},
		ObjectMeta: p.meta,
		Spec: kubeflow.MPIJobSpec{
			SlotsPerWorker:  p.slots,
			CleanPodPolicy:  p.cleanPods,
			ElasticPolicy:   p.elastic,
			MPIReplicaSpecs: p.replicas,
		},
	}, nil
}

// V2beta1Job is the kubeflow.org/v2beta1 MPIJob that submit creates. Its
// JSON is that of the v2 module's types for the fields it sets (the
// elastic policy and the replica specs are spelled as in v1); this module
// does not import them, since the v2 module requires this one.
type V2beta1Job struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              V2beta1JobSpec `json:"spec"`
}

// V2beta1JobSpec is the spec of a V2beta1Job.
type V2beta1JobSpec struct {
	SlotsPerWorker  *int32                                     `json:"slotsPerWorker,omitempty"`
	RunPolicy       V2beta1RunPolicy                           `json:"runPolicy,omitempty"`
	ElasticPolicy   *kubeflow.ElasticPolicy                    `json:"elasticPolicy,omitempty"`
	MPIReplicaSpecs map[common.ReplicaType]*common.ReplicaSpec `json:"mpiReplicaSpecs"`
}

// V2beta1RunPolicy is the run policy of a V2beta1Job.
type V2beta1RunPolicy struct {
	CleanPodPolicy *common.CleanPodPolicy `json:"cleanPodPolicy,omitempty"`
}

// SSHDCommand and SSHDArgs run sshd in the foreground in a v2beta1 worker,
// whose launcher reaches it over SSH: the mpioperator images start it
// themselves, horovod's ships it without starting it. StrictModes is off
// since the operator mounts the job's keys at /root/.ssh from a Secret, a
// directory sshd's checks would refuse.
var (
	SSHDCommand = jobDefaults.V2beta1Worker.Command
	SSHDArgs    = jobDefaults.V2beta1Worker.Args
)

// BuildV2beta1Job returns the kubeflow.org/v2beta1 MPIJob of a request:
// BuildJob's job, but for the workers, which run sshd (SSHDCommand), and
// horovodrun's --slots-per-host, since the version's discovery script
// lists hosts without slots.
func BuildV2beta1Job(r JobRequest) (*V2beta1Job, error) {
	p, err := r.parts(APIv2beta1)
	if err != nil {
		return nil, err
	}
	worker := &p.replicas[kubeflow.MPIReplicaTypeWorker].Template.Spec.Containers[0]
	worker.Command, worker.Args = slices.Clone(SSHDCommand), slices.Clone(SSHDArgs)
	return &V2beta1Job{
		TypeMeta:   metav1.TypeMeta{APIVersion: APIv2beta1.GroupVersion().String(), Kind: "MPIJob"},
		ObjectMeta: p.meta,
		Spec: V2beta1JobSpec{
			SlotsPerWorker:  p.slots,
			RunPolicy:       V2beta1RunPolicy{CleanPodPolicy: p.cleanPods},
			ElasticPolicy:   p.elastic,
			MPIReplicaSpecs: p.replicas,
		},
	}, nil
}

// buildObject is the job of a request in the version given, as an object
// to send.
func buildObject(api API, r JobRequest) (*unstructured.Unstructured, error) {
	var job any
	var err error
	if api == APIv2beta1 {
		job, err = BuildV2beta1Job(r)
	} else {
		job, err = BuildJob(r)
	}
	if err != nil {
		return nil, err
	}
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(job)
	if err != nil {
		return nil, err
	}
	// A job not sent yet has neither status nor creation time: leave them
	// out, so that a client dry run prints what can be created as it is.
	unstructured.RemoveNestedField(obj, "status")
	unstructured.RemoveNestedField(obj, "metadata", "creationTimestamp")
	return &unstructured.Unstructured{Object: obj}, nil
}

// jobParts are the pieces of a job that both versions share.
type jobParts struct {
	meta      metav1.ObjectMeta
	slots     *int32
	cleanPods *common.CleanPodPolicy
	elastic   *kubeflow.ElasticPolicy
	replicas  map[common.ReplicaType]*common.ReplicaSpec
}

// parts checks a request for the version given and builds its pieces.
func (r JobRequest) parts(api API) (jobParts, error) {
	r = r.withDefaults()
	if err := r.validate(api); err != nil {
		return jobParts{}, err
	}
	workerResources, err := resources("--cpu", r.CPU, "--memory", r.Memory, r.GPUs)
	if err != nil {
		return jobParts{}, err
	}
	launcherResources, err := resources("--launcher-cpu", r.LauncherCPU, "--launcher-memory", r.LauncherMemory, 0)
	if err != nil {
		return jobParts{}, err
	}
	pod, err := r.podParts(api)
	if err != nil {
		return jobParts{}, err
	}
	launcher := &common.ReplicaSpec{
		Replicas: ptrTo[int32](1),
		Template: pod.template(corev1.Container{
			Name:      LauncherContainer,
			Image:     r.Image,
			Command:   r.horovodrun(api),
			Resources: launcherResources,
		}),
	}
	worker := &common.ReplicaSpec{
		Replicas: ptrTo(r.Workers),
		Template: pod.template(corev1.Container{
			Name:      WorkerContainer,
			Image:     r.Image,
			Resources: workerResources,
		}),
	}
	return jobParts{
		meta: metav1.ObjectMeta{Name: r.Name, Namespace: r.Namespace,
			Labels: maps.Clone(pod.labels), Annotations: maps.Clone(pod.annotations)},
		slots:     ptrTo(r.Slots),
		cleanPods: ptrTo(common.CleanPodPolicy(jobDefaults.CleanPodPolicy)),
		elastic: &kubeflow.ElasticPolicy{
			MinReplicas:  ptrTo(r.MinWorkers),
			MaxReplicas:  ptrTo(r.MaxWorkers),
			DrainSeconds: r.DrainSeconds,
		},
		replicas: map[common.ReplicaType]*common.ReplicaSpec{
			kubeflow.MPIReplicaTypeLauncher: launcher,
			kubeflow.MPIReplicaTypeWorker:   worker,
		},
	}, nil
}

// withDefaults fills in what the request leaves unset.
func (r JobRequest) withDefaults() JobRequest {
	if r.MinWorkers == 0 {
		r.MinWorkers = jobDefaults.ElasticPolicy.MinReplicas
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
		r.DrainSeconds = ptrTo(jobDefaults.ElasticPolicy.DrainSeconds)
	}
	return r
}

const maxInt32 = 1<<31 - 1

// validate checks a request with its defaults filled in, for the version
// given.
func (r JobRequest) validate(api API) error {
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
	case r.MaxWorkers > api.MaxWorkers:
		return fmt.Errorf("--max-workers (%d) is above the most workers a %s job may have (%d)", r.MaxWorkers, api.GroupVersion(), api.MaxWorkers)
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

// horovodrun is the launcher's command: elastic horovodrun over the
// operator's discovery script, its process counts those of the policy.
// v2beta1's script lists hosts without slots: --slots-per-host gives them.
// The blacklist cooldown lets a host that failed once come back.
func (r JobRequest) horovodrun(api API) []string {
	itoa := func(n int64) string { return strconv.FormatInt(n, 10) }
	np := func(workers int32) string { return itoa(int64(workers) * int64(r.Slots)) }
	cmd := []string{
		"horovodrun",
		"-np", np(r.Workers),
		"--min-np", np(r.MinWorkers),
		"--max-np", np(r.MaxWorkers),
		"--host-discovery-script", DiscoverHostsPath,
	}
	if api == APIv2beta1 {
		cmd = append(cmd, "--slots-per-host", itoa(int64(r.Slots)))
	}
	if cooldown := jobDefaults.Horovodrun.BlacklistCooldownRange; len(cooldown) > 0 {
		cmd = append(cmd, "--blacklist-cooldown-range")
		for _, s := range cooldown {
			cmd = append(cmd, itoa(int64(s)))
		}
	}
	return append(cmd, r.Command...)
}

func ptrTo[T any](v T) *T { return &v }
