package v1

import (
	common "github.com/kubeflow/common/pkg/apis/common/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Replica types: the keys of spec.mpiReplicaSpecs.
const (
	MPIReplicaTypeLauncher common.ReplicaType = "Launcher"
	MPIReplicaTypeWorker   common.ReplicaType = "Worker"
)

// MPIJob runs an MPI program: one launcher pod that starts the ranks on the
// worker pods through kubectl exec. With an elastic policy, or a plain change
// of the worker replicas, the set of workers may change while the job runs.
//
// +genclient
// +genclient:method=GetScale,verb=get,subresource=scale,result=k8s.io/api/autoscaling/v1.Scale
// +genclient:method=UpdateScale,verb=update,subresource=scale,input=k8s.io/api/autoscaling/v1.Scale,result=k8s.io/api/autoscaling/v1.Scale
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
// +kubebuilder:resource:path=mpijobs,singular=mpijob,shortName=mj;mpij,scope=Namespaced
// +kubebuilder:subresource:status
// +kubebuilder:subresource:scale:specpath=.spec.mpiReplicaSpecs.Worker.replicas,statuspath=.status.replicaStatuses.Worker.active,selectorpath=.status.replicaStatuses.Worker.selector
// +kubebuilder:printcolumn:name="State",type=string,JSONPath=`.status.conditions[-1:].type`,description="The latest condition of the job"
// +kubebuilder:printcolumn:name="Desired",type=integer,JSONPath=`.spec.mpiReplicaSpecs.Worker.replicas`,description="Desired worker replicas"
// +kubebuilder:printcolumn:name="Running",type=integer,JSONPath=`.status.replicaStatuses.Worker.active`,description="Running worker pods"
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:validation:XValidation:rule="size(self.metadata.name) <= 63",message="metadata.name must be no more than 63 characters: it is used as a label value"
// +kubebuilder:validation:XValidation:rule="!has(self.spec) || !has(self.spec.mpiReplicaSpecs) || !has(self.spec.mpiReplicaSpecs.Worker) || !has(self.spec.mpiReplicaSpecs.Worker.template) || !has(self.spec.mpiReplicaSpecs.Worker.template.spec) || ((!has(self.spec.mpiReplicaSpecs.Worker.template.spec.serviceAccountName) || !self.spec.mpiReplicaSpecs.Worker.template.spec.serviceAccountName.endsWith('-launcher') || self.spec.mpiReplicaSpecs.Worker.template.spec.serviceAccountName == self.metadata.name + '-launcher') && (!has(self.spec.mpiReplicaSpecs.Worker.template.spec.serviceAccount) || !self.spec.mpiReplicaSpecs.Worker.template.spec.serviceAccount.endsWith('-launcher') || self.spec.mpiReplicaSpecs.Worker.template.spec.serviceAccount == self.metadata.name + '-launcher'))",message="must not end in -launcher (nor may serviceAccount) unless it is this job's own <name>-launcher: such names are the launcher accounts of MPIJobs, which may exec into their jobs' workers",fieldPath=".spec.mpiReplicaSpecs.Worker.template.spec.serviceAccountName"
type MPIJob struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec MPIJobSpec `json:"spec,omitempty"`
	// +optional
	Status common.JobStatus `json:"status,omitempty"`
}

// MPIJobSpec is the desired state of an MPIJob.
//
// +kubebuilder:validation:XValidation:rule="has(self.mpiReplicaSpecs.Launcher)",message="spec.mpiReplicaSpecs.Launcher is required: an MPIJob needs exactly one launcher"
// +kubebuilder:validation:XValidation:rule="!has(self.mpiReplicaSpecs.Launcher) || !has(self.mpiReplicaSpecs.Launcher.replicas) || self.mpiReplicaSpecs.Launcher.replicas == 1",message="spec.mpiReplicaSpecs.Launcher.replicas must be 1"
// +kubebuilder:validation:XValidation:rule="!has(self.mpiReplicaSpecs.Launcher) || (has(self.mpiReplicaSpecs.Launcher.template) && has(self.mpiReplicaSpecs.Launcher.template.spec) && size(self.mpiReplicaSpecs.Launcher.template.spec.containers) > 0)",message="spec.mpiReplicaSpecs.Launcher.template.spec.containers must hold the launcher's container"
// +kubebuilder:validation:XValidation:rule="!has(self.mpiReplicaSpecs.Worker) || (has(self.mpiReplicaSpecs.Worker.template) && has(self.mpiReplicaSpecs.Worker.template.spec) && size(self.mpiReplicaSpecs.Worker.template.spec.containers) > 0)",message="spec.mpiReplicaSpecs.Worker.template.spec.containers must hold the workers' container"
// +kubebuilder:validation:XValidation:rule="!has(self.mpiReplicaSpecs.Worker) || !has(self.mpiReplicaSpecs.Worker.replicas) || self.mpiReplicaSpecs.Worker.replicas >= 0",message="spec.mpiReplicaSpecs.Worker.replicas must be 0 or more"
// +kubebuilder:validation:XValidation:rule="!has(self.elasticPolicy) || has(self.mpiReplicaSpecs.Worker)",message="must be set: an elastic job needs workers",fieldPath=".mpiReplicaSpecs.Worker"
// +kubebuilder:validation:XValidation:rule="!has(self.elasticPolicy) || !has(self.mpiReplicaSpecs.Worker) || (has(self.mpiReplicaSpecs.Worker.replicas) ? self.mpiReplicaSpecs.Worker.replicas : 1) >= (has(self.elasticPolicy.minReplicas) ? self.elasticPolicy.minReplicas : 1)",message="must not be less than spec.elasticPolicy.minReplicas (either one unset means 1)",fieldPath=".mpiReplicaSpecs.Worker.replicas"
// +kubebuilder:validation:XValidation:rule="!has(self.elasticPolicy) || !has(self.elasticPolicy.maxReplicas) || !has(self.mpiReplicaSpecs.Worker) || (has(self.mpiReplicaSpecs.Worker.replicas) ? self.mpiReplicaSpecs.Worker.replicas : 1) <= self.elasticPolicy.maxReplicas",message="must not be more than spec.elasticPolicy.maxReplicas (unset replicas mean 1)",fieldPath=".mpiReplicaSpecs.Worker.replicas"
// +kubebuilder:validation:XValidation:rule="!has(self.mainContainer) || size(self.mainContainer) == 0 || !has(self.mpiReplicaSpecs.Worker) || !has(self.mpiReplicaSpecs.Worker.template) || !has(self.mpiReplicaSpecs.Worker.template.spec) || self.mpiReplicaSpecs.Worker.template.spec.containers.exists(c, c.name == self.mainContainer)",message="must name a container of spec.mpiReplicaSpecs.Worker.template.spec.containers",fieldPath=".mainContainer"
type MPIJobSpec struct {
	// SlotsPerWorker is the number of MPI slots each worker offers.
	// Unset means 1.
	// +optional
	// +kubebuilder:validation:Minimum=1
	SlotsPerWorker *int32 `json:"slotsPerWorker,omitempty"`

	// CleanPodPolicy says which pods to delete once the job has finished:
	// All, Running or None. It wins over runPolicy.cleanPodPolicy; when both
	// are unset it is None.
	// +optional
	// +kubebuilder:validation:Enum=All;Running;None
	CleanPodPolicy *common.CleanPodPolicy `json:"cleanPodPolicy,omitempty"`

	// MPIReplicaSpecs holds the pod templates: exactly one "Launcher" and
	// any number of "Worker" replicas. The CRD lists the two keys as
	// properties of their own (see hack/crdtrim), so that kubectl explain
	// and field validation reach into them.
	MPIReplicaSpecs map[common.ReplicaType]*common.ReplicaSpec `json:"mpiReplicaSpecs"`

	// MainContainer names the container that the launcher's kubectl exec
	// enters in each worker; it must be one of the Worker template's
	// containers. Unset means the pod's default container.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^([a-z0-9]([-a-z0-9]*[a-z0-9])?)?$`
	MainContainer string `json:"mainContainer,omitempty"`

	// RunPolicy bounds the job: TTL after it finished, an active deadline,
	// a limit on launcher restarts, and gang-scheduling settings. As for a
	// Kubernetes Job, backoffLimit and ttlSecondsAfterFinished are 0 or
	// more and activeDeadlineSeconds is at least 1; cleanPodPolicy is All,
	// Running or None.
	// +optional
	RunPolicy *common.RunPolicy `json:"runPolicy,omitempty"`

	// ElasticPolicy, when set, makes the job elastic: the worker count may
	// move between its bounds, and failed workers are replaced instead of
	// failing the job.
	// +optional
	ElasticPolicy *ElasticPolicy `json:"elasticPolicy,omitempty"`
}

// ElasticPolicy sets the bounds and timings of an elastic job.
//
// +kubebuilder:validation:XValidation:rule="!has(self.minReplicas) || !has(self.maxReplicas) || self.minReplicas <= self.maxReplicas",message="spec.elasticPolicy.minReplicas must not be more than spec.elasticPolicy.maxReplicas"
type ElasticPolicy struct {
	// MinReplicas is the fewest workers the job can train with. The launcher
	// starts once this many workers are ready, and gang scheduling asks for
	// only this many. Unset means 1; at most 5000 (see MaxWorkers).
	// +optional
	// +kubebuilder:validation:Minimum=1
	MinReplicas *int32 `json:"minReplicas,omitempty"`

	// MaxReplicas is the most workers the job may be scaled to. Unset means
	// no bound but the one on every job, 5000 (see MaxWorkers).
	// +optional
	// +kubebuilder:validation:Minimum=1
	MaxReplicas *int32 `json:"maxReplicas,omitempty"`

	// DrainSeconds is how long a worker chosen for removal stays out of
	// discover_hosts.sh before its pod is deleted, so that Horovod drops the
	// host instead of blacklisting it. Unset means 30.
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=3600
	DrainSeconds *int32 `json:"drainSeconds,omitempty"`

	// MinReplicasTimeoutSeconds is how long the job may run with fewer than
	// minReplicas workers before it fails. Unset means 600, Horovod's own
	// elastic timeout.
	// +optional
	// +kubebuilder:validation:Minimum=1
	MinReplicasTimeoutSeconds *int32 `json:"minReplicasTimeoutSeconds,omitempty"`
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
