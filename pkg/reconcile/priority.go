package reconcile

import (
	"sync"
	"time"

	"k8s.io/client-go/util/workqueue"

	"github.com/kubeflow/mpi-operator/pkg/metrics"
)

// Queue is a controller's one queue of job keys. Like client-go's work
// queue, it holds a key once however often it is added, and hands a key to
// one worker at a time: a key added while it is being synced is queued again
// once that sync is Done, so only one sync of a job runs at once. Unlike it,
// a key added with AddUrgent is handed out before every key added without
// (but a worker that took an urgent key while a plain one waited takes the
// plain one next), and some workers (GetUrgent) take urgent keys only: a change that Horovod
// must see at once (a worker turning Running or going, a change of the
// worker replicas) then waits neither behind other jobs' keys nor for a
// worker busy with a long sync, such as a new job's. Both kinds of key run
// the same sync: there is one list of guards.
//
// client-go's queue has no priorities, and controller-runtime's priority
// queue cannot keep workers for urgent keys, hence this one.
type Queue struct {
	limiter workqueue.TypedRateLimiter[string]

	mu   sync.Mutex
	cond *sync.Cond
	// urgent and normal hold the queued keys in the order they came; a key
	// moved up from normal stays there as a stale entry, skipped by the
	// level it has in queued.
	urgent, normal []string
	queued         map[string]bool // key -> urgent
	processing     map[string]bool
	// again holds the keys added while being synced, with their urgency.
	again map[string]bool
	// since holds when each queued key, or each key in again, was added
	// at the level it has (an urgent add of a plain key starts it anew);
	// behind holds the keys that waited for their own sync in flight.
	since  map[string]time.Time
	behind map[string]bool
	// owed is set when a worker that takes either kind of key took an
	// urgent one while a plain key waited: the next such worker takes a
	// plain key, so that one job's stream of urgent changes delays other
	// jobs by one sync at most.
	owed     bool
	shutdown bool
}

// NewQueue returns an empty Queue that retries failed syncs with the
// rate limits of client-go's default controller queue.
func NewQueue() *Queue {
	return NewQueueWithRateLimiter(workqueue.DefaultTypedControllerRateLimiter[string]())
}

// NewQueueWithRateLimiter returns an empty Queue whose retries limiter
// delays.
func NewQueueWithRateLimiter(limiter workqueue.TypedRateLimiter[string]) *Queue {
	q := &Queue{limiter: limiter, queued: map[string]bool{}, processing: map[string]bool{}, again: map[string]bool{}, since: map[string]time.Time{}, behind: map[string]bool{}}
	q.cond = sync.NewCond(&q.mu)
	return q
}

// Add queues key without urgency.
func (q *Queue) Add(key string) { q.add(key, false) }

// AddUrgent queues key ahead of the keys added without urgency. A key
// already queued keeps its place or moves up; one being synced is queued
// again for after that sync, urgently.
func AddUrgent(q *Queue, key string) { q.add(key, true) }

// AddUrgentAfter queues key as AddUrgent does, once after has passed.
func AddUrgentAfter(q *Queue, key string, after time.Duration) { q.addAfter(key, true, after) }

// AddAfter queues key without urgency once after has passed.
func (q *Queue) AddAfter(key string, after time.Duration) { q.addAfter(key, false, after) }

// AddRateLimited queues key without urgency after the limiter's backoff.
func (q *Queue) AddRateLimited(key string) { q.addAfter(key, false, q.limiter.When(key)) }

// addRateLimited queues key after the limiter's backoff, urgently or not.
func (q *Queue) addRateLimited(key string, urgent bool) {
	q.addAfter(key, urgent, q.limiter.When(key))
}

func (q *Queue) addAfter(key string, urgent bool, after time.Duration) {
	if after <= 0 {
		q.add(key, urgent)
		return
	}
	time.AfterFunc(after, func() { q.add(key, urgent) })
}

func (q *Queue) add(key string, urgent bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	switch {
	case q.shutdown:
		return
	case q.processing[key]:
		was, ok := q.again[key]
		if !ok || (urgent && !was) {
			q.since[key] = time.Now()
		}
		q.again[key] = was || urgent
		q.behind[key] = true
		return
	}
	was, queued := q.queued[key]
	switch {
	case queued && (was || !urgent):
		return
	case urgent:
		q.urgent = append(q.urgent, key)
	default:
		q.normal = append(q.normal, key)
	}
	if _, ok := q.since[key]; !ok || queued {
		// A key re-queued by Done keeps the time it was added at.
		q.since[key] = time.Now()
	}
	q.queued[key] = urgent
	q.cond.Broadcast()
}

// Get hands out the next key, the urgent ones first, waiting for one;
// shutdown is true once the queue is shut down.
func (q *Queue) Get() (key string, shutdown bool) {
	key, _, shutdown = q.GetWithPriority()
	return key, shutdown
}

// GetWithPriority is Get that also tells the key's priority: 1 for urgent,
// 0 for not.
func (q *Queue) GetWithPriority() (key string, priority int, shutdown bool) {
	return q.get(false)
}

// GetUrgent hands out the next urgent key, waiting for one: the call of a
// worker kept for urgent keys.
func (q *Queue) GetUrgent() (key string, shutdown bool) {
	key, _, shutdown = q.get(true)
	return key, shutdown
}

func (q *Queue) get(urgentOnly bool) (string, int, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for {
		if q.shutdown {
			return "", 0, true
		}
		if !urgentOnly && q.owed {
			q.owed = false
			if key, ok := q.pop(&q.normal, false); ok {
				return key, 0, false
			}
		}
		if key, ok := q.pop(&q.urgent, true); ok {
			q.owed = !urgentOnly && q.plainWaiting()
			return key, 1, false
		}
		if !urgentOnly {
			if key, ok := q.pop(&q.normal, false); ok {
				return key, 0, false
			}
		}
		q.cond.Wait()
	}
}

// pop takes the first key of list that is queued at the list's level, and
// marks it processing.
func (q *Queue) pop(list *[]string, urgent bool) (string, bool) {
	for len(*list) > 0 {
		key := (*list)[0]
		*list = (*list)[1:]
		if level, ok := q.queued[key]; ok && level == urgent {
			delete(q.queued, key)
			q.processing[key] = true
			q.observeWait(key, urgent)
			return key, true
		}
	}
	return "", false
}

// observeWait records how long key waited in the queue.
func (q *Queue) observeWait(key string, urgent bool) {
	since, ok := q.since[key]
	behind := q.behind[key]
	delete(q.since, key)
	delete(q.behind, key)
	if !ok {
		return
	}
	metrics.QueueWaitSeconds.WithLabelValues(syncKinds[btoi(urgent)], waitKinds[btoi(behind)]).Observe(time.Since(since).Seconds())
}

// waitKinds label a key's wait by whether its own sync was in flight.
var waitKinds = [2]string{"queue", "own_sync"}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// plainWaiting tells whether a key queued without urgency waits, dropping
// the stale entries ahead of it.
func (q *Queue) plainWaiting() bool {
	for len(q.normal) > 0 {
		if urgent, ok := q.queued[q.normal[0]]; ok && !urgent {
			return true
		}
		q.normal = q.normal[1:]
	}
	return false
}

// Done ends the sync of key; a key added meanwhile is queued again.
func (q *Queue) Done(key string) {
	q.mu.Lock()
	delete(q.processing, key)
	urgent, again := q.again[key]
	delete(q.again, key)
	q.mu.Unlock()
	if again {
		q.add(key, urgent)
	}
}

// UrgentAgain tells whether key, while being synced, was added again
// urgently: a sync that has long work left can give way to the sync that
// change asks for.
func (q *Queue) UrgentAgain(key string) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.processing[key] && q.again[key]
}

// Len is the number of keys queued and not being synced.
func (q *Queue) Len() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.queued)
}

// Forget ends the backoff of key's retries.
func (q *Queue) Forget(key string) { q.limiter.Forget(key) }

// NumRequeues is how many retries of key the backoff counts.
func (q *Queue) NumRequeues(key string) int { return q.limiter.NumRequeues(key) }

// ShutDown makes every Get return shutdown; later adds are dropped. It may
// be called more than once.
func (q *Queue) ShutDown() {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.shutdown = true
	q.cond.Broadcast()
}

// ShutDownWithDrain is ShutDown: the controllers stop without draining.
func (q *Queue) ShutDownWithDrain() { q.ShutDown() }

// ShuttingDown tells whether ShutDown was called.
func (q *Queue) ShuttingDown() bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.shutdown
}

var _ workqueue.TypedRateLimitingInterface[string] = &Queue{}
