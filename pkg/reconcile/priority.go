package reconcile

import (
	"sync"
	"time"

	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"
)

// Queue is a controller's one queue of job keys. It hands a key to one
// worker at a time, so that only one sync of a job runs at once, and it
// hands out keys added with [AddUrgent] before the others, so that a change
// that Horovod must see at once (a worker turning Running or going, a
// change of the worker replicas) does not wait behind every other job's
// sync. Both kinds of key run the same sync: there is one list of guards.
//
// It is controller-runtime's priority queue. Its metrics go to
// controller-runtime's registry, which the operators do not serve; the
// queue is named after its controller only in its logs.
type Queue = priorityqueue.PriorityQueue[string]

// urgent is the priority of the keys of AddUrgent; other keys have 0.
const urgent = 1

// NewQueue returns an empty Queue that retries failed syncs with the
// rate limits of client-go's default controller queue.
func NewQueue() Queue {
	return &queue{PriorityQueue: priorityqueue.New("", func(o *priorityqueue.Opts[string]) {
		o.RateLimiter = workqueue.DefaultTypedControllerRateLimiter[string]()
	})}
}

// queue makes ShutDown safe to call more than once, as it is on client-go's
// queues: controller-runtime's panics on the second call.
type queue struct {
	priorityqueue.PriorityQueue[string]
	once sync.Once
}

func (q *queue) ShutDown()          { q.once.Do(q.PriorityQueue.ShutDown) }
func (q *queue) ShutDownWithDrain() { q.ShutDown() }

// AddUrgent queues key ahead of the keys added without urgency. A key
// already queued keeps its place or moves up; one being synced is queued
// again for after that sync, ahead of the others.
func AddUrgent(q Queue, key string) {
	q.AddWithOpts(priorityqueue.AddOpts{Priority: ptr.To(urgent)}, key)
}

// AddUrgentAfter queues key as AddUrgent does, once after has passed.
func AddUrgentAfter(q Queue, key string, after time.Duration) {
	q.AddWithOpts(priorityqueue.AddOpts{Priority: ptr.To(urgent), After: after}, key)
}
