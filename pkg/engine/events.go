// Package engine carries out the elastic plans of package elastic for both
// operators, v1 and v2beta1, so that what they do to a job's workers, and
// what they tell its users about it, is decided in one place. The operators
// bring the API types; the engine knows pods, names and plans.
//
// # Scale events
//
// A scale step is one generation of a job's spec: the replica change that
// made it. Each step is announced once, whatever the number of syncs it
// takes:
//   - [ReasonScalingUp] when its first workers are created, naming every
//     worker the step creates (see [ScaleSteps]);
//   - [ReasonDraining] when its victims leave discover_hosts.sh, saying
//     when they will be deleted;
//   - [ReasonScaledDown] only for workers deleted without draining
//     (finished workers outside a fixed job's range): the deletion of
//     drained workers ends the step that their draining event announced.
//
// A step of a thousand workers names the first [MaxNamesInEvent] and counts
// the rest.
package engine

import (
	"fmt"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kubeflow/mpi-operator/pkg/elastic"
)

// Event reasons of the workers' life cycle.
const (
	ReasonScalingUp  = "WorkersScalingUp"
	ReasonDraining   = "WorkersDraining"
	ReasonScaledDown = "WorkersScaledDown"
)

// MaxNamesInEvent bounds the worker names an event lists.
const MaxNamesInEvent = 10

// Event is a Normal event about a job.
type Event struct {
	Reason, Message string
}

// ScaleSteps remembers, per job, the last scale step announced, so that a
// step whose workers are created over several syncs has one event.
type ScaleSteps struct {
	last sync.Map // job key -> "<uid>/<generation>"
}

// Created returns the event for workers just created in the job's current
// step, or false when that step was announced already. planned names every
// worker the step creates; replicas is the step's worker count.
func (s *ScaleSteps) Created(key string, uid types.UID, generation int64, replicas int, planned []string) (Event, bool) {
	step := fmt.Sprintf("%s/%d", uid, generation)
	prev, loaded := s.last.Swap(key, step)
	if loaded && prev.(string) == step {
		return Event{}, false
	}
	return Event{ReasonScalingUp, fmt.Sprintf("Scaling up to %d worker(s): creating %s", replicas, Summarize(planned))}, true
}

// Forget drops what is remembered of a job that is gone.
func (s *ScaleSteps) Forget(key string) { s.last.Delete(key) }

// Holds tells whether a step of key is remembered.
func (s *ScaleSteps) Holds(key string) bool {
	_, ok := s.last.Load(key)
	return ok
}

// Draining is the event for workers that just left discover_hosts.sh and
// will be deleted after drain.
func Draining(replicas int, names []string, drain time.Duration) Event {
	return Event{ReasonDraining, fmt.Sprintf("Scaling down to %d worker(s): %s left discover_hosts.sh and will be deleted in %v",
		replicas, Summarize(names), drain)}
}

// Deleted returns the event for the deletion of pods, naming those that
// were not drained, or false when every one of them was.
func Deleted(pods []*corev1.Pod) (Event, bool) {
	var unannounced []string
	for _, p := range pods {
		if _, drained := p.Annotations[elastic.AnnotationDrainingSince]; !drained {
			unannounced = append(unannounced, p.Name)
		}
	}
	if len(unannounced) == 0 {
		return Event{}, false
	}
	return Event{ReasonScaledDown, fmt.Sprintf("Deleted %d worker(s): %s", len(unannounced), Summarize(unannounced))}, true
}

// Summarize lists names, the first MaxNamesInEvent of them and a count of
// the rest.
func Summarize(names []string) string {
	if len(names) <= MaxNamesInEvent {
		return strings.Join(names, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(names[:MaxNamesInEvent], ", "), len(names)-MaxNamesInEvent)
}
