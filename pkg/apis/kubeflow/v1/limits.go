package v1

// MaxWorkers is the most workers an MPIJob may ask for: the CRD bounds
// spec.mpiReplicaSpecs.Worker.replicas, spec.elasticPolicy.minReplicas and
// spec.elasticPolicy.maxReplicas by it (hack/crdtrim writes it into the
// schema), and the controller checks it too.
//
// It comes from the size of the two objects that name every worker:
//
//   - the job's ConfigMap lists each worker twice, once in the hostfile
//     ("<job>-worker-<i> slots=<n>") and once in discover_hosts.sh
//     ("echo <job>-worker-<i>:<n>"), and the API server refuses a ConfigMap
//     whose data adds up to more than 1 MiB;
//   - the launcher's Role names each worker in the resourceNames of its
//     pods/exec rule, the draining workers included: a job that drains all
//     its workers while their successors start names twice its replicas.
//     The whole Role must fit in one etcd request (1.5 MiB by default); at
//     twice MaxWorkers it takes about 840 KB.
//
// The longest names are allowed for: a 63-character job name, a worker
// index of 10 digits (an elastic job gives every replacement and every
// regrown worker an index it has never used, so indices can grow past the
// replica count) and a slotsPerWorker of 10 digits (the largest int32).
// The ConfigMap is the tighter of the two: it holds workersPerConfigMap
// workers (5317), rounded down to the thousand. TestObjectSizesAtMaxWorkers
// in pkg/controller builds both objects for MaxWorkers workers with the
// controller's own builders and checks their sizes.
const MaxWorkers = int32(workersPerConfigMap / 1000 * 1000)

// The figures MaxWorkers is derived from, in bytes.
const (
	configMapDataLimit = 1 << 20           // what the API server allows in a ConfigMap's data
	etcdRequestLimit   = 3 << 19           // etcd's default --max-request-bytes, 1.5 MiB
	maxJobName         = 63                // the CRD's bound: the name is a label value
	maxDecimal         = len("2147483647") // digits of the largest int32
	maxWorkerName      = maxJobName + len("-worker-") + maxDecimal
	hostfileLine       = maxWorkerName + len(" slots=") + maxDecimal + len("\n")
	discoverLine       = len("echo ") + maxWorkerName + len(":") + maxDecimal + len("\n")
	// configMapFixed is a KiB for what does not grow with the workers: the
	// scripts' headers, the lines of a launcher that asks for a GPU, and
	// kubexec.sh with a 63-character mainContainer (about 350 bytes).
	configMapFixed      = 1 << 10
	workersPerConfigMap = (configMapDataLimit - configMapFixed) / (hostfileLine + discoverLine)
	// roleNameBytes is what one more resourceName adds to a Role in JSON,
	// quotes and comma included; protobuf, which etcd stores, is smaller.
	roleNameBytes = maxWorkerName + len(`"",`)
)

// The Role of a job in the middle of a replacement of all its workers fits
// in an etcd request with a 64 KiB margin; the constant conversion fails
// to compile if it does not.
const _ = uint(etcdRequestLimit - 64<<10 - 2*int(MaxWorkers)*roleNameBytes)
