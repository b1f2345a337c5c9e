package v2beta1

// MaxWorkers is the most workers an MPIJob may ask for: the CRD bounds
// spec.mpiReplicaSpecs.Worker.replicas, spec.elasticPolicy.minReplicas and
// spec.elasticPolicy.maxReplicas by it (hack/crdtrim writes it into the
// schema), so that kubectl scale and an autoscaler are held to it too.
//
// It comes from the one object of a job that grows with its workers, the
// ConfigMap <job>-config, which the API server refuses once its data adds
// up to more than 1 MiB. It names every worker twice, by host name:
//
//   - hostfile, one line per worker: "<host> slots=<n>" for OpenMPI,
//     "<host>:<n>" for Intel MPI and MPICH;
//   - discover_hosts.sh, "#!/bin/sh" and then "echo <host>" per Running
//     worker;
//
// where a host is "<job>-worker-<index>.<job>.<namespace>.svc", followed
// by ".<cluster-domain>" when the operator runs with --cluster-domain. With
// runLauncherAsWorker the launcher is listed in both files as well.
//
// The longest names are allowed for: job and namespace names of 63
// characters (both are DNS labels), a worker index of 10 digits (an
// elastic job gives every replacement and every regrown worker an index it
// has never used, so indices can grow past the replica count), a
// slotsPerWorker of 10 digits (the largest int32), and a cluster domain of
// MaxClusterDomain characters. The ConfigMap then holds workersPerConfigMap
// workers (1093), rounded down to the thousand. TestConfigMapAtMaxWorkers
// builds both files for MaxWorkers workers and checks their size.
//
// The operator's other objects do not grow with the workers: workers reach
// each other over SSH, so unlike the v1 operator's there is no Role that
// names each worker for kubectl exec.
const MaxWorkers = int32(workersPerConfigMap / 1000 * 1000)

// MaxClusterDomain is the longest --cluster-domain the operator may accept:
// a DNS name has at most 253 characters. MaxWorkers relies on it.
const MaxClusterDomain = 253

// The figures MaxWorkers is derived from, in bytes.
const (
	configMapDataLimit = 1 << 20           // what the API server allows in a ConfigMap's data
	maxName            = 63                // a job's or a namespace's name: a DNS label
	maxDecimal         = len("2147483647") // digits of the largest int32
	// hostDomain is what follows a pod's name in its host name: the job's
	// headless Service, the namespace, "svc" and the cluster domain.
	hostDomain   = len(".") + maxName + len(".") + maxName + len(".svc") + len(".") + MaxClusterDomain
	workerHost   = maxName + len("-worker-") + maxDecimal + hostDomain
	launcherHost = maxName + len("-launcher") + hostDomain
	// slotsSuffix is OpenMPI's " slots=<n>", longer than the ":<n>" of
	// Intel MPI and MPICH.
	slotsSuffix  = len(" slots=") + maxDecimal
	hostfileLine = workerHost + slotsSuffix + len("\n")
	discoverLine = len("echo ") + workerHost + len("\n")
	// configMapFixed is what does not grow with the workers: the keys
	// (which the API server does not count, but the margin is cheap), the
	// script's first line, and the launcher's lines when it runs as a
	// worker.
	configMapFixed = len("hostfile") + len("discover_hosts.sh") + len("#!/bin/sh\n") +
		launcherHost + slotsSuffix + len("\n") + len("echo ") + launcherHost + len("\n")
	workersPerConfigMap = (configMapDataLimit - configMapFixed) / (hostfileLine + discoverLine)
)

// The ConfigMap of a job of MaxWorkers workers fits; the constant
// conversion fails to compile if it does not.
const _ = uint(configMapDataLimit - configMapFixed - int(MaxWorkers)*(hostfileLine+discoverLine))
