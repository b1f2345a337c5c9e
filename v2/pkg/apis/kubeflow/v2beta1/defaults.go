package v2beta1

// Defaults of fields whose absence has a meaning.
const (
	DefaultSlotsPerWorker            int32 = 1
	DefaultSSHAuthMountPath                = "/root/.ssh"
	DefaultDrainSeconds              int32 = 30
	DefaultMinReplicas               int32 = 1
	DefaultMinReplicasTimeoutSeconds int32 = 600

	// DefaultRestartPolicy is the workers' restart policy when unset.
	DefaultRestartPolicy = RestartPolicyNever
	// DefaultLauncherRestartPolicy is the launcher's restart policy when
	// unset: its Job restarts a failed launcher in its pod, within
	// runPolicy.backoffLimit.
	DefaultLauncherRestartPolicy = RestartPolicyOnFailure
)

// SetDefaults_MPIJob fills the fields that the API leaves optional. The
// controller applies it to a copy; it never writes defaults back to the
// object.
//
//nolint:revive,stylecheck // the name is the defaulter-gen convention
func SetDefaults_MPIJob(job *MPIJob) {
	spec := &job.Spec
	setDefault(&spec.SlotsPerWorker, DefaultSlotsPerWorker)
	setDefault(&spec.RunLauncherAsWorker, false)
	setDefault(&spec.RunPolicy.CleanPodPolicy, CleanPodPolicyNone)
	setDefault(&spec.RunPolicy.Suspend, false)
	if spec.SSHAuthMountPath == "" {
		spec.SSHAuthMountPath = DefaultSSHAuthMountPath
	}
	if spec.LauncherCreationPolicy == "" {
		spec.LauncherCreationPolicy = LauncherCreationPolicyAtStartup
	}
	if spec.MPIImplementation == "" {
		spec.MPIImplementation = MPIImplementationOpenMPI
	}
	for rt, restart := range map[MPIReplicaType]RestartPolicy{
		MPIReplicaTypeLauncher: DefaultLauncherRestartPolicy,
		MPIReplicaTypeWorker:   DefaultRestartPolicy,
	} {
		rs := spec.MPIReplicaSpecs[rt]
		if rs == nil {
			continue
		}
		setDefault(&rs.Replicas, 1)
		if rs.RestartPolicy == "" {
			rs.RestartPolicy = restart
		}
	}
	if ep := spec.ElasticPolicy; ep != nil {
		setDefault(&ep.MinReplicas, DefaultMinReplicas)
		setDefault(&ep.DrainSeconds, DefaultDrainSeconds)
		setDefault(&ep.MinReplicasTimeoutSeconds, DefaultMinReplicasTimeoutSeconds)
	}
}

// setDefault points an unset field at v.
func setDefault[T any](field **T, v T) {
	if *field == nil {
		*field = &v
	}
}
