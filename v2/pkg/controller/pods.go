package controller

import (
	"maps"
	"slices"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubeflow/mpi-operator/pkg/reconcile"
	"github.com/kubeflow/mpi-operator/v2/pkg/apis/kubeflow/v2beta1"
)

// gangKind is the kind of gang scheduler that places the job's pods.
type gangKind string

// The gang schedulers the operator can work with.
const (
	gangNone             gangKind = ""
	gangVolcano          gangKind = "volcano"
	gangSchedulerPlugins gangKind = "scheduler-plugins"
)

// gangScheduler is the operator's gang-scheduling setting. The zero value
// leaves the pods to their templates' scheduler, one by one.
type gangScheduler struct {
	kind gangKind
	// schedulerName is the scheduler the pods ask for; empty keeps the
	// templates'.
	schedulerName string
}

// defaultClusterDomain is Kubernetes' default cluster domain, assumed where
// a full domain name is needed and the operator was not told the domain.
const defaultClusterDomain = "cluster.local"

// sshdCommand runs the SSH server in the foreground, logging to stderr, in a
// worker whose first container has neither a command nor arguments.
var sshdCommand = []string{"/usr/sbin/sshd", "-De"}

// newWorker returns worker pod number index: the Worker template with the
// job's labels, a stable host name under the job's Service, the job's domain
// in its DNS search path, the SSH keys and, when the template's first
// container has neither command nor arguments, an SSH server for the
// launcher to start ranks through. The job must be valid: it has a Worker
// template with a container.
//
// Every worker searches the job's domain, whatever the MPI implementation,
// as the upstream operator's workers do: Intel MPI's and MPICH's hydra
// proxies need it to reach the launcher by its bare hostname, and programs
// and scripts written for upstream's pods may name their peers so too.
func newWorker(job *v2beta1.MPIJob, index int, gang gangScheduler, clusterDomain string) *corev1.Pod {
	spec := job.Spec.MPIReplicaSpecs[v2beta1.MPIReplicaTypeWorker]
	name := workerName(job, index)
	tmpl := newPodTemplate(job, v2beta1.MPIReplicaTypeWorker, roleWorker, gang)
	tmpl.Labels[labelReplicaIndex] = replicaIndexLabel(job, index)
	tmpl.Spec.Hostname = name
	tmpl.Spec.RestartPolicy = reconcile.RestartPolicyOf(spec.RestartPolicy)
	addDNSSearch(&tmpl.Spec, jobDomain(job, clusterDomain))
	main := &tmpl.Spec.Containers[0]
	if len(main.Command) == 0 && len(main.Args) == 0 {
		main.Command = slices.Clone(sshdCommand)
	}
	addEnv(main, corev1.EnvVar{Name: envJobRole, Value: roleWorker})
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name:            name,
			Namespace:       job.Namespace,
			Labels:          tmpl.Labels,
			Annotations:     tmpl.Annotations,
			OwnerReferences: ownerRefs(job),
		},
		Spec: tmpl.Spec,
	}
}

// newPodTemplate copies the replica's template and adds what every pod of
// the job has: the job's labels over the template's, the gang scheduler's
// tags, the job's Service as DNS subdomain, and the SSH keys.
func newPodTemplate(job *v2beta1.MPIJob, rt v2beta1.MPIReplicaType, role string, gang gangScheduler) *corev1.PodTemplateSpec {
	tmpl := job.Spec.MPIReplicaSpecs[rt].Template.DeepCopy()
	tmpl.Labels = withEntries(tmpl.Labels, podLabels(job, role))
	switch gang.kind {
	case gangVolcano:
		tmpl.Annotations = withEntries(tmpl.Annotations, map[string]string{annotationVolcanoGroup: podGroupName(job)})
	case gangSchedulerPlugins:
		tmpl.Labels[labelSchedulerPluginsGroup] = podGroupName(job)
	}
	if gang.kind != gangNone && gang.schedulerName != "" {
		tmpl.Spec.SchedulerName = gang.schedulerName
	}
	spec := &tmpl.Spec
	spec.Subdomain = serviceName(job)
	// On the host's network, ClusterFirst means the node's resolver, which
	// knows none of the job's host names.
	if spec.HostNetwork && (spec.DNSPolicy == "" || spec.DNSPolicy == corev1.DNSClusterFirst) {
		spec.DNSPolicy = corev1.DNSClusterFirstWithHostNet
	}
	addSSHAuth(spec, job)
	return tmpl
}

// withEntries returns m with the entries of add over its own, allocating m
// when it is nil.
func withEntries(m, add map[string]string) map[string]string {
	if m == nil {
		m = make(map[string]string, len(add))
	}
	maps.Copy(m, add)
	return m
}

// jobDomain is the DNS domain of the job's pods, under which their bare
// hostnames resolve: <job>.<namespace>.svc.<domain>. A search domain must
// be complete, so the default cluster domain stands in for an unknown one.
func jobDomain(job *v2beta1.MPIJob, clusterDomain string) string {
	if clusterDomain == "" {
		clusterDomain = defaultClusterDomain
	}
	return serviceName(job) + "." + job.Namespace + ".svc." + clusterDomain
}

// addDNSSearch adds domain to the pod's DNS search path, after the
// template's own domains.
func addDNSSearch(spec *corev1.PodSpec, domain string) {
	if spec.DNSConfig == nil {
		spec.DNSConfig = &corev1.PodDNSConfig{}
	}
	if !slices.Contains(spec.DNSConfig.Searches, domain) {
		spec.DNSConfig.Searches = append(spec.DNSConfig.Searches, domain)
	}
}

// addSSHAuth mounts the job's SSH Secret at sshAuthMountPath in the first
// container, the one that runs sshd or mpirun: the private key as id_rsa and
// the public key both as id_rsa.pub and as authorized_keys, the names
// OpenSSH looks for. At /root/.ssh the files are 0600: they belong to root,
// and ssh refuses a private key of its own user that others can read.
// Elsewhere the user is usually not root and must be able to read files
// owned by root, which ssh accepts at the Secret volume's default mode.
func addSSHAuth(spec *corev1.PodSpec, job *v2beta1.MPIJob) {
	var mode *int32
	if job.Spec.SSHAuthMountPath == v2beta1.DefaultSSHAuthMountPath {
		mode = ptr[int32](0o600)
	}
	spec.Volumes = append(spec.Volumes, corev1.Volume{
		Name: sshAuthVolumeName,
		VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
			SecretName:  sshSecretName(job),
			DefaultMode: mode,
			Items: []corev1.KeyToPath{
				{Key: corev1.SSHAuthPrivateKey, Path: "id_rsa"},
				{Key: sshPublicKeyKey, Path: "id_rsa.pub"},
				{Key: sshPublicKeyKey, Path: "authorized_keys"},
			},
		}},
	})
	main := &spec.Containers[0]
	main.VolumeMounts = append(main.VolumeMounts, corev1.VolumeMount{
		Name: sshAuthVolumeName, MountPath: job.Spec.SSHAuthMountPath,
	})
}

// addEnv appends vars to the container's environment, after the
// template's own, as the upstream operator does: where both set a name,
// the container sees the operator's value (the last definition of a name
// wins), and a template variable that refers to the name before the
// operator's definition sees the template's.
func addEnv(c *corev1.Container, vars ...corev1.EnvVar) {
	c.Env = append(c.Env, vars...)
}

func ptr[T any](v T) *T { return &v }

// clonePtr returns a pointer to a copy of *p, or nil, so that a built object
// shares no memory with the job.
func clonePtr[T any](p *T) *T {
	if p == nil {
		return nil
	}
	return ptr(*p)
}
