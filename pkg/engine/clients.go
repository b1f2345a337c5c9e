package engine

import (
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
)

// Clients are the clients a controller uses beside its own, each under rate
// limits of its own. One left nil is the controller's own.
type Clients struct {
	// Events writes the controller's events, so that a burst of events
	// never delays the requests that change the jobs.
	Events kubernetes.Interface
	// Creations creates the workers, so that the creation of a large job
	// never delays the writes that list its running workers.
	Creations kubernetes.Interface
	// Jobs lists and watches the MPIJobs as JSON and decodes each on its
	// own, so that one that cannot be decoded is skipped with a Warning
	// event instead of failing the whole list (pkg/tolerant). Nil means the
	// typed clientset, which decodes a list in one piece.
	Jobs dynamic.Interface
}
