package controller

import (
	kubeflow "github.com/kubeflow/mpi-operator/pkg/apis/kubeflow/v1"
	"github.com/kubeflow/mpi-operator/pkg/elastic"
	"github.com/kubeflow/mpi-operator/pkg/metrics"
)

// eventDeletingPods is the reason of the event of a finished job's pods
// being deleted; the workers' own events are the engine's.
const eventDeletingPods = "DeletingPods"

func jobKey(job *kubeflow.MPIJob) string { return job.Namespace + "/" + job.Name }

// observeDiscovery records, for workers of job key just listed, how long
// after turning Running they reached discover_hosts.sh.
func (c *MPIJobController) observeDiscovery(key string, ws []elastic.Worker, listed []string) {
	if len(listed) == 0 {
		return
	}
	in := make(map[string]bool, len(listed))
	for _, n := range listed {
		in[n] = true
	}
	now := c.Clock.Now()
	for _, w := range ws {
		if !in[w.Pod.Name] {
			continue
		}
		if since, ok := c.runningSince.take(key, w.Pod.UID); ok {
			metrics.DiscoveryLatency.Observe(now.Sub(since).Seconds())
		}
	}
}
