// Package metrics defines the operator's Prometheus metrics. The metric names
// are those of the upstream operator, so existing dashboards keep working; the
// elastic metrics are this fork's own.
package metrics

import (
	"github.com/prometheus/client_golang/prometheus"
)

var (
	// JobsCreated counts MPIJobs the controller saw for the first time.
	JobsCreated = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "mpi_operator_jobs_created_total",
		Help: "Counts number of MPI jobs created",
	})
	// JobsSuccessful counts MPIJobs that succeeded.
	JobsSuccessful = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "mpi_operator_jobs_successful_total",
		Help: "Counts number of MPI jobs successful",
	})
	// JobsFailed counts MPIJobs that failed.
	JobsFailed = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "mpi_operator_jobs_failed_total",
		Help: "Counts number of MPI jobs failed",
	})
	// JobInfo has one series per job with its launcher pod's name.
	JobInfo = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "mpi_operator_job_info",
		Help: "Information about MPIJob",
	}, []string{"launcher", "namespace"})
	// IsLeader is 1 while this replica holds the leader lease.
	IsLeader = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "mpi_operator_is_leader",
		Help: "Is this client the leader of this mpi-operator client set?",
	})

	// WorkerResizes counts worker-count changes the controller carried out,
	// by direction (up or down).
	WorkerResizes = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "mpi_operator_worker_resizes_total",
		Help: "Worker resizes carried out, by direction (up, down).",
	}, []string{"direction"})
	// WorkersReplaced counts failed or evicted workers of elastic jobs that
	// were replaced under a new name.
	WorkersReplaced = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "mpi_operator_workers_replaced_total",
		Help: "Failed or evicted workers of elastic jobs replaced by new ones.",
	})
	// DiscoveryLatency observes the time from a worker turning Running to the
	// discovery script listing it.
	DiscoveryLatency = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "mpi_operator_worker_discovery_seconds",
		Help:    "Time from a worker pod turning Running to discover_hosts.sh listing it.",
		Buckets: []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30},
	})
	// SyncSeconds observes each sync of a job, by its key's priority in the
	// queue ("main", or "urgent" for a change that discover_hosts.sh must
	// show at once); its count is the number of syncs, which the
	// benchmarks divide the CPU time by.
	SyncSeconds = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "mpi_operator_sync_duration_seconds",
		Help:    "Time taken by one sync of an MPIJob, by the priority of its key (main, urgent).",
		Buckets: []float64{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5},
	}, []string{"queue"})
	// QueueWaitSeconds observes how long each job key waited in the queue
	// before its sync started, by its priority and by what it waited for:
	// a free worker ("queue") or the end of its own job's sync in flight
	// ("own_sync"), as only one sync of a job runs at a time.
	QueueWaitSeconds = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "mpi_operator_queue_wait_seconds",
		Help:    "Time a job's key waited before its sync, by priority (main, urgent) and cause (queue, own_sync).",
		Buckets: []float64{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5},
	}, []string{"queue", "waited_for"})
	// PacedSyncs counts the syncs whose writes of a job's files and the
	// objects beside them waited for the job's pace.
	PacedSyncs = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "mpi_operator_paced_syncs_total",
		Help: "Syncs whose writes of a job's files, Role and PodGroup were held back to keep the job's write rate.",
	})
	// UndecodableObjects counts the versions of objects that the operator
	// skipped because they cannot be decoded, by resource; each also gets
	// a Warning event.
	UndecodableObjects = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "mpi_operator_undecodable_objects_total",
		Help: "Versions of objects skipped because they cannot be decoded, by resource.",
	}, []string{"resource"})
)

// Register adds every metric to reg. Call it once per registry.
func Register(reg prometheus.Registerer) {
	reg.MustRegister(JobsCreated, JobsSuccessful, JobsFailed, JobInfo, IsLeader,
		WorkerResizes, WorkersReplaced, DiscoveryLatency, SyncSeconds, QueueWaitSeconds, UndecodableObjects, PacedSyncs)
}
