package v2beta1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// MPIJob runs an MPI program: a launcher (a batch/v1 Job) starts the ranks
// on worker pods over SSH, using the hostfile that the operator writes from
// the workers. With an elastic policy, or a plain change of the worker
// replicas, the set of workers may change while the job runs; Horovod
// Elastic follows it through discover_hosts.sh.
//
// +genclient
// +genclient:method=GetScale,verb=get,subresource=scale,result=k8s.io/api/autoscaling/v1.Scale
// +genclient:method=UpdateScale,verb=update,subresource=scale,input=k8s.io/api/autoscaling/v1.Scale,result=k8s.io/api/autoscaling/v1.Scale
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
// +kubebuilder:storageversion
// +kubebuilder:resource:path=mpijobs,singular=mpijob,shortName=mj;mpij,scope=Namespaced
// +kubebuilder:subresource:status
// +kubebuilder:subresource:scale:specpath=.spec.mpiReplicaSpecs.Worker.replicas,statuspath=.status.replicaStatuses.Worker.active,selectorpath=.status.replicaStatuses.Worker.selector
// +kubebuilder:printcolumn:name="State",type=string,JSONPath=`.status.conditions[-1:].type`,description="The latest condition of the job"
// +kubebuilder:printcolumn:name="Desired",type=integer,JSONPath=`.spec.mpiReplicaSpecs.Worker.replicas`,description="Desired worker replicas"
// +kubebuilder:printcolumn:name="Running",type=integer,JSONPath=`.status.replicaStatuses.Worker.active`,description="Running worker pods"
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:validation:XValidation:rule="size(self.metadata.name) <= 63",message="metadata.name must be no more than 63 characters: it is used as a label value and a host name"
type MPIJob struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec MPIJobSpec `json:"spec,omitempty"`
	// +optional
	Status JobStatus `json:"status,omitempty"`
}

// MPIJobList is a list of MPIJobs.
//
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
type MPIJobList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata"`

	Items []MPIJob `json:"items"`
}

// MPIReplicaType is a key of spec.mpiReplicaSpecs.
type MPIReplicaType string

// The replica types of an MPIJob.
const (
	MPIReplicaTypeLauncher MPIReplicaType = "Launcher"
	MPIReplicaTypeWorker   MPIReplicaType = "Worker"
)

// The rules of MPIJobSpec name the field they are about through fieldPath,
// so that the API server's message starts with it
// (spec.mpiReplicaSpecs.Launcher: ...). The Launcher and Worker paths exist
// because the CRD lists the two keys as properties of mpiReplicaSpecs (see
// hack/crdtrim).

// MPIJobSpec is the desired state of an MPIJob.
//
// +kubebuilder:validation:XValidation:rule="has(self.mpiReplicaSpecs.Launcher)",message="is required: an MPIJob needs exactly one launcher",fieldPath=".mpiReplicaSpecs.Launcher",reason=FieldValueRequired
// +kubebuilder:validation:XValidation:rule="!has(self.mpiReplicaSpecs.Launcher) || !has(self.mpiReplicaSpecs.Launcher.replicas) || self.mpiReplicaSpecs.Launcher.replicas == 1",message="must be 1: an MPIJob has exactly one launcher",fieldPath=".mpiReplicaSpecs.Launcher.replicas"
// +kubebuilder:validation:XValidation:rule="!has(self.mpiReplicaSpecs.Launcher) || (has(self.mpiReplicaSpecs.Launcher.template) && has(self.mpiReplicaSpecs.Launcher.template.spec) && size(self.mpiReplicaSpecs.Launcher.template.spec.containers) > 0)",message="must hold the launcher's container",fieldPath=".mpiReplicaSpecs.Launcher.template.spec.containers",reason=FieldValueRequired
// +kubebuilder:validation:XValidation:rule="!has(self.mpiReplicaSpecs.Worker) || (has(self.mpiReplicaSpecs.Worker.template) && has(self.mpiReplicaSpecs.Worker.template.spec) && size(self.mpiReplicaSpecs.Worker.template.spec.containers) > 0)",message="must hold the workers' container",fieldPath=".mpiReplicaSpecs.Worker.template.spec.containers",reason=FieldValueRequired
// +kubebuilder:validation:XValidation:rule="!has(self.mpiReplicaSpecs.Worker) || !has(self.mpiReplicaSpecs.Worker.replicas) || self.mpiReplicaSpecs.Worker.replicas >= 0",message="must be 0 or more",fieldPath=".mpiReplicaSpecs.Worker.replicas"
// +kubebuilder:validation:XValidation:rule="!has(self.elasticPolicy) || has(self.mpiReplicaSpecs.Worker)",message="must be set: an elastic job needs workers",fieldPath=".mpiReplicaSpecs.Worker",reason=FieldValueRequired
// +kubebuilder:validation:XValidation:rule="!has(self.elasticPolicy) || !has(self.mpiReplicaSpecs.Worker) || (has(self.mpiReplicaSpecs.Worker.replicas) ? self.mpiReplicaSpecs.Worker.replicas : 1) >= (has(self.elasticPolicy.minReplicas) ? self.elasticPolicy.minReplicas : 1)",message="must not be less than spec.elasticPolicy.minReplicas (either one unset means 1)",fieldPath=".mpiReplicaSpecs.Worker.replicas"
// +kubebuilder:validation:XValidation:rule="!has(self.elasticPolicy) || !has(self.elasticPolicy.maxReplicas) || !has(self.mpiReplicaSpecs.Worker) || (has(self.mpiReplicaSpecs.Worker.replicas) ? self.mpiReplicaSpecs.Worker.replicas : 1) <= self.elasticPolicy.maxReplicas",message="must not be more than spec.elasticPolicy.maxReplicas (unset replicas mean 1)",fieldPath=".mpiReplicaSpecs.Worker.replicas"
// +kubebuilder:validation:XValidation:rule="!has(oldSelf.elasticPolicy) || has(self.elasticPolicy)",message="cannot be removed once set: the job would turn into a fixed one and could lose running workers (a client that does not know this field must patch the job, not replace it)",fieldPath=".elasticPolicy",reason=FieldValueForbidden
// +kubebuilder:validation:XValidation:rule="(has(self.runPolicy) && has(self.runPolicy.managedBy) && size(self.runPolicy.managedBy) > 0 ? self.runPolicy.managedBy : 'unset') == (has(oldSelf.runPolicy) && has(oldSelf.runPolicy.managedBy) && size(oldSelf.runPolicy.managedBy) > 0 ? oldSelf.runPolicy.managedBy : 'unset')",message="is immutable: it can be set only when the job is created",fieldPath=".runPolicy.managedBy"
type MPIJobSpec struct {
	// SlotsPerWorker is the number of MPI slots each worker offers.
	// Unset means 1.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:default=1
	SlotsPerWorker *int32 `json:"slotsPerWorker,omitempty"`

	// RunLauncherAsWorker makes the launcher a host too: it is listed first
	// in the hostfile and the job's Service selects it. Unset means false.
	// +optional
	// +kubebuilder:default=false
	RunLauncherAsWorker *bool `json:"runLauncherAsWorker,omitempty"`

	// RunPolicy bounds the job and its launcher Job: clean-up, TTL after it
	// finished, an active deadline, a limit on launcher retries,
	// gang-scheduling settings, suspension and the controller that manages
	// the job.
	// +optional
	RunPolicy RunPolicy `json:"runPolicy,omitempty"`

	// MPIReplicaSpecs holds the pod templates: exactly one "Launcher" and
	// any number of "Worker" replicas.
	MPIReplicaSpecs map[MPIReplicaType]*ReplicaSpec `json:"mpiReplicaSpecs"`

	// SSHAuthMountPath is where the job's SSH keys are mounted in every
	// pod. Unset means /root/.ssh.
	// +optional
	// +kubebuilder:default="/root/.ssh"
	SSHAuthMountPath string `json:"sshAuthMountPath,omitempty"`

	// LauncherCreationPolicy says when the launcher Job is created:
	// AtStartup (the default) or WaitForWorkersReady, once every worker is
	// Ready.
	// +optional
	// +kubebuilder:validation:Enum=AtStartup;WaitForWorkersReady
	// +kubebuilder:default=AtStartup
	LauncherCreationPolicy LauncherCreationPolicy `json:"launcherCreationPolicy,omitempty"`

	// MPIImplementation selects the hostfile format and the launcher's
	// environment: OpenMPI (the default), Intel or MPICH.
	// +optional
	// +kubebuilder:validation:Enum=OpenMPI;Intel;MPICH
	// +kubebuilder:default=OpenMPI
	MPIImplementation MPIImplementation `json:"mpiImplementation,omitempty"`

	// ElasticPolicy, when set, makes the job elastic: the worker count may
	// move between its bounds, workers chosen for removal leave
	// discover_hosts.sh before they are deleted, and failed workers are
	// replaced instead of failing the job. An extension of this operator;
	// the upstream operator ignores it. Once set it cannot be removed.
	// +optional
	ElasticPolicy *ElasticPolicy `json:"elasticPolicy,omitempty"`
}

// LauncherCreationPolicy says when the launcher is created.
type LauncherCreationPolicy string

// The launcher creation policies.
const (
	LauncherCreationPolicyAtStartup           LauncherCreationPolicy = "AtStartup"
	LauncherCreationPolicyWaitForWorkersReady LauncherCreationPolicy = "WaitForWorkersReady"
)

// MPIImplementation is an MPI distribution the launcher runs.
type MPIImplementation string

// The MPI implementations.
const (
	MPIImplementationOpenMPI MPIImplementation = "OpenMPI"
	MPIImplementationIntel   MPIImplementation = "Intel"
	MPIImplementationMPICH   MPIImplementation = "MPICH"
)

// ReplicaSpec describes the pods of one replica type.
type ReplicaSpec struct {
	// Replicas is the number of pods. Unset means 1.
	// +optional
	Replicas *int32 `json:"replicas,omitempty"`

	// Template is the pod template of the replicas; its labels and
	// annotations are carried to every pod.
	// +optional
	Template corev1.PodTemplateSpec `json:"template,omitempty"`

	// RestartPolicy is the pods' restart policy: Always, OnFailure, Never
	// or ExitCode (Never, and the launcher Job retries on a retryable exit
	// code). Unset means OnFailure for the launcher, Never for the workers.
	// +optional
	// +kubebuilder:validation:Enum=Always;OnFailure;Never;ExitCode
	RestartPolicy RestartPolicy `json:"restartPolicy,omitempty"`
}

// RestartPolicy is a replica's restart policy.
type RestartPolicy string

// The restart policies.
const (
	RestartPolicyAlways    RestartPolicy = "Always"
	RestartPolicyOnFailure RestartPolicy = "OnFailure"
	RestartPolicyNever     RestartPolicy = "Never"
	RestartPolicyExitCode  RestartPolicy = "ExitCode"
)

// CleanPodPolicy says which pods to delete once the job has finished.
type CleanPodPolicy string

// The clean-pod policies.
const (
	CleanPodPolicyNone    CleanPodPolicy = "None"
	CleanPodPolicyRunning CleanPodPolicy = "Running"
	CleanPodPolicyAll     CleanPodPolicy = "All"
)

// The values of runPolicy.managedBy this operator knows. A job whose
// managedBy is set and is not KubeflowJobController is left alone.
const (
	KubeflowJobController = "kubeflow.org/mpi-operator"
	MultiKueueController  = "kueue.x-k8s.io/multikueue"
)

// RunPolicy bounds a job's run.
type RunPolicy struct {
	// CleanPodPolicy says which pods to delete once the job has finished:
	// None (the default), Running or All.
	// +optional
	// +kubebuilder:validation:Enum=None;Running;All
	CleanPodPolicy *CleanPodPolicy `json:"cleanPodPolicy,omitempty"`

	// TTLSecondsAfterFinished is how long a finished job is kept before it
	// is deleted. Unset means forever.
	// +optional
	// +kubebuilder:validation:Minimum=0
	TTLSecondsAfterFinished *int32 `json:"ttlSecondsAfterFinished,omitempty"`

	// ActiveDeadlineSeconds bounds the time the job may run, from its
	// start; the launcher Job gets it too.
	// +optional
	// +kubebuilder:validation:Minimum=1
	ActiveDeadlineSeconds *int64 `json:"activeDeadlineSeconds,omitempty"`

	// BackoffLimit is the number of retries of the launcher Job before the
	// job fails.
	// +optional
	// +kubebuilder:validation:Minimum=0
	BackoffLimit *int32 `json:"backoffLimit,omitempty"`

	// SchedulingPolicy holds the settings of gang scheduling.
	// +optional
	SchedulingPolicy *SchedulingPolicy `json:"schedulingPolicy,omitempty"`

	// Suspend stops the job: its pods are deleted and its launcher Job is
	// suspended, until it is set back to false. Kueue admits jobs through
	// it. Unset means false.
	// +optional
	// +kubebuilder:default=false
	Suspend *bool `json:"suspend,omitempty"`

	// ManagedBy names the controller that reconciles the job: unset, empty
	// or "kubeflow.org/mpi-operator" for this operator, or
	// "kueue.x-k8s.io/multikueue", which this operator leaves alone. It
	// cannot be set, changed or removed after the job is created.
	// +optional
	// +kubebuilder:validation:XValidation:rule="size(self) == 0 || self in ['kubeflow.org/mpi-operator', 'kueue.x-k8s.io/multikueue']",message="must be kubeflow.org/mpi-operator or kueue.x-k8s.io/multikueue, or empty"
	// +kubebuilder:validation:MaxLength=63
	ManagedBy *string `json:"managedBy,omitempty"`
}

// SchedulingPolicy holds the settings of gang scheduling, for volcano or
// the scheduler-plugins' coscheduling.
type SchedulingPolicy struct {
	// MinAvailable is the least number of pods scheduled together. Unset
	// means every pod of the job (the launcher and the workers; for an
	// elastic job, the launcher and minReplicas workers).
	// +optional
	// +kubebuilder:validation:Minimum=0
	MinAvailable *int32 `json:"minAvailable,omitempty"`

	// Queue is the volcano queue of the job's PodGroup.
	// +optional
	Queue string `json:"queue,omitempty"`

	// MinResources are the resources the PodGroup needs before any pod is
	// scheduled. Unset means the sum of the requests of minAvailable pods.
	// +optional
	MinResources *corev1.ResourceList `json:"minResources,omitempty"`

	// PriorityClass is the PodGroup's priority class.
	// +optional
	PriorityClass string `json:"priorityClass,omitempty"`

	// ScheduleTimeoutSeconds bounds the wait for the gang to be scheduled
	// (scheduler-plugins only).
	// +optional
	// +kubebuilder:validation:Minimum=0
	ScheduleTimeoutSeconds *int32 `json:"scheduleTimeoutSeconds,omitempty"`
}

// ElasticPolicy sets the bounds and timings of an elastic job.
//
// +kubebuilder:validation:XValidation:rule="!has(self.minReplicas) || !has(self.maxReplicas) || self.minReplicas <= self.maxReplicas",message="must not be more than spec.elasticPolicy.maxReplicas",fieldPath=".minReplicas"
type ElasticPolicy struct {
	// MinReplicas is the fewest workers the job can train with; gang
	// scheduling asks for only this many. Unset means 1; at most 1000 (see
	// MaxWorkers).
	// +optional
	// +kubebuilder:validation:Minimum=1
	MinReplicas *int32 `json:"minReplicas,omitempty"`

	// MaxReplicas is the most workers the job may be scaled to. Unset
	// means no bound but the one on every job, 1000 (see MaxWorkers).
	// +optional
	// +kubebuilder:validation:Minimum=1
	MaxReplicas *int32 `json:"maxReplicas,omitempty"`

	// DrainSeconds is how long a worker chosen for removal stays out of
	// discover_hosts.sh before its pod is deleted, so that Horovod drops
	// the host instead of blacklisting it. Unset means 30.
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=3600
	DrainSeconds *int32 `json:"drainSeconds,omitempty"`

	// MinReplicasTimeoutSeconds is how long the job may run with fewer
	// than minReplicas workers before it fails. Unset means 600, Horovod's
	// own elastic timeout.
	// +optional
	// +kubebuilder:validation:Minimum=1
	MinReplicasTimeoutSeconds *int32 `json:"minReplicasTimeoutSeconds,omitempty"`
}

// JobStatus is the observed state of an MPIJob.
type JobStatus struct {
	// Conditions are the job's current conditions.
	// +optional
	Conditions []JobCondition `json:"conditions,omitempty"`

	// ReplicaStatuses counts the pods of each replica type.
	// +optional
	ReplicaStatuses map[MPIReplicaType]*ReplicaStatus `json:"replicaStatuses,omitempty"`

	// StartTime is when the job started: when it was first seen, or when
	// it was last resumed. It is not set while the job is suspended.
	// +optional
	StartTime *metav1.Time `json:"startTime,omitempty"`

	// CompletionTime is when the job finished.
	// +optional
	CompletionTime *metav1.Time `json:"completionTime,omitempty"`

	// LastReconcileTime is when the job was last reconciled.
	// +optional
	LastReconcileTime *metav1.Time `json:"lastReconcileTime,omitempty"`
}

// ReplicaStatus counts the pods of a replica type.
type ReplicaStatus struct {
	// Active is the number of running pods.
	// +optional
	Active int32 `json:"active,omitempty"`

	// Succeeded is the number of pods that succeeded.
	// +optional
	Succeeded int32 `json:"succeeded,omitempty"`

	// Failed is the number of pods that failed.
	// +optional
	Failed int32 `json:"failed,omitempty"`

	// LabelSelector selects the pods of the replica type.
	// +optional
	LabelSelector *metav1.LabelSelector `json:"labelSelector,omitempty"`

	// Selector is LabelSelector in its string form, for the scale
	// subresource.
	// +optional
	Selector string `json:"selector,omitempty"`
}

// JobConditionType is the type of a job condition.
type JobConditionType string

// The condition types of an MPIJob.
const (
	JobCreated    JobConditionType = "Created"
	JobRunning    JobConditionType = "Running"
	JobRestarting JobConditionType = "Restarting"
	JobSucceeded  JobConditionType = "Succeeded"
	JobSuspended  JobConditionType = "Suspended"
	JobFailed     JobConditionType = "Failed"
)

// JobCondition is one condition of a job.
type JobCondition struct {
	// Type is the condition's type.
	Type JobConditionType `json:"type"`
	// Status is True, False or Unknown.
	Status corev1.ConditionStatus `json:"status"`
	// Reason is a CamelCase word for the last transition.
	// +optional
	Reason string `json:"reason,omitempty"`
	// Message tells the last transition in words.
	// +optional
	Message string `json:"message,omitempty"`
	// LastUpdateTime is when the condition was last written.
	// +optional
	LastUpdateTime metav1.Time `json:"lastUpdateTime,omitempty"`
	// LastTransitionTime is when the status last changed.
	// +optional
	LastTransitionTime metav1.Time `json:"lastTransitionTime,omitempty"`
}
