package engine

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/kubeflow/mpi-operator/pkg/elastic"
	"github.com/kubeflow/mpi-operator/pkg/reconcile"
)

// Base is the machinery that the controllers of both operators run on,
// each embedding one: the queue of job keys, the event recorder, the
// expectations of the controller's own pod writes, the engine, what
// /healthz reports, and the informers' handlers that Run waits for.
type Base struct {
	// Queue holds the keys of the jobs to sync, the urgent ones first; it
	// hands a key to one worker at a time.
	Queue    *reconcile.Queue
	Recorder record.EventRecorder
	Clock    clock.Clock
	// Expectations remember the controller's pod writes that the cache
	// does not show yet.
	Expectations *reconcile.Expectations
	// Pods writes pods, telling Expectations of each write.
	Pods reconcile.PodWrites
	// Engine acts on the workers' plans.
	Engine *Engine
	// Health tracks the progress of Run and of the syncs for /healthz.
	Health *reconcile.Health
	// StatusWrites remembers each job's last status write until the cache
	// shows it.
	StatusWrites reconcile.StatusWrites
	// StatusHold holds back the status writes that change the replica
	// counts or the Resizing condition only.
	StatusHold StatusHold

	synced []cache.InformerSynced
}

// NewBase returns the machinery of a controller whose pods kube writes and
// pods lists, as the cache shows them. creations, when not nil, creates the
// workers, under rate limits of its own, so that the creation of a large
// job never delays the writes that list its running workers.
func NewBase(kube, creations kubernetes.Interface, pods corelisters.PodLister, recorder record.EventRecorder, clk clock.Clock) *Base {
	b := &Base{Queue: reconcile.NewQueue(), Recorder: recorder, Clock: clk, Expectations: reconcile.NewExpectations(clk)}
	b.Health = reconcile.NewHealth(clk, b.Queue.Len)
	b.Pods = reconcile.PodWrites{Client: kube, Lister: pods, Expectations: b.Expectations}
	b.Engine = &Engine{Pods: b.Pods, Creations: b.Pods, Pace: &Pace{}, GiveWay: b.Queue.UrgentAgain, Clock: clk}
	if creations != nil {
		b.Engine.Creations.Client = creations
	}
	return b
}

// Stores are the stores of the Base that remember jobs, for the
// controller's reconcile.JobMemory.
func (b *Base) Stores() reconcile.JobMemory {
	return reconcile.JobMemory{b.Expectations, &b.StatusWrites, &b.StatusHold, &b.Engine.Steps, &b.Engine.Launchers, &b.Engine.Running, b.Engine.Pace}
}

// NewRecorder returns a recorder of component's events, which go to the API
// server through events and to the log at V(4), until ctx is done.
func NewRecorder(ctx context.Context, events kubernetes.Interface, component string) record.EventRecorder {
	broadcaster := record.NewBroadcaster(record.WithContext(ctx))
	broadcaster.StartStructuredLogging(4)
	broadcaster.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: events.CoreV1().Events("")})
	return broadcaster.NewRecorder(scheme.Scheme, corev1.EventSource{Component: component})
}

// AddHandler registers h with informer. RunWorkers waits until every
// handler has seen its informer's first list.
func (b *Base) AddHandler(logger klog.Logger, informer cache.SharedIndexInformer, h cache.ResourceEventHandler) {
	b.synced = AddHandler(logger, informer, h, b.synced)
}

// AddHandler registers h with informer and returns synced with the
// registration's HasSynced appended.
func AddHandler(logger klog.Logger, informer cache.SharedIndexInformer, h cache.ResourceEventHandler,
	synced []cache.InformerSynced) []cache.InformerSynced {
	reg, err := informer.AddEventHandler(h)
	if err != nil {
		// Only a stopped informer refuses a handler; before Start it
		// cannot be.
		logger.Error(err, "Adding an event handler")
		return synced
	}
	return append(synced, reg.HasSynced)
}

// GivingWay tells whether the sync of key should write nothing more, its
// status included: the job was queued urgently meanwhile, and the sync
// that change asks for, next, writes the whole of it.
func (b *Base) GivingWay(key string) bool { return b.Queue.UrgentAgain(key) }

// EndSync ends the sync of job key, which returned requeue and err, with
// its one status write, through write: none when the sync gives way
// (GivingWay), nor while the cache, at version cachedVersion of the job,
// does not show the job's last status write (a write from it would only
// conflict; the event of the last one brings the job back). It returns
// when to sync the job again and the errors of the sync and of the write.
func (b *Base) EndSync(key, cachedVersion string, requeue time.Duration, err error, write func() (time.Duration, error)) (time.Duration, error) {
	if b.GivingWay(key) {
		return requeue, err
	}
	if b.StatusWrites.Unseen(key, cachedVersion) {
		return elastic.Sooner(requeue, reconcile.ExpectationsTimeout), err
	}
	due, statusErr := write()
	return elastic.Sooner(requeue, due), errors.Join(err, statusErr)
}

// EnqueueChange queues key for an event that may change what the job's
// files list (changed: a worker turning Running or going, a drain mark, a
// change of the worker replicas, in v2 an EndpointSlice) or that showed the
// last of the controller's own pod writes the job waited for (settled). A
// settled job is queued urgently at once: its next pod writes waited for
// that event. A change is queued urgently once the job's pace lets its
// files and the objects beside them be written again (Pace): a sync before
// then could write none of them, and a job of thousands of workers turning
// Running a few at a time would be synced, at the cost of planning all of
// them, once per event for nothing. For a job of a few workers that wait is
// a few milliseconds, and a sync that it spares would only have been put
// back for the same time.
//
// Urgent keys. Horovod asks discover_hosts.sh for hosts every second, so a
// worker that turns Running, or stops being usable, and the victims of a
// scale-in, should reach the script at once, while a burst of job creations
// fills the queue for seconds. The controllers therefore queue a job
// urgently on the events that change what its script may list: a worker
// turning Running or ending, a drain mark, a change of the worker replicas,
// in v2 an EndpointSlice of the job's Service, and the pod event that shows
// the last of the controller's own pod changes the job's files waited for.
// Urgent keys are handed out before all others, and UrgentWorkers workers
// take urgent keys only.
//
// An urgent key runs the same sync as any other, through the same guards:
// there is no second path. The queue hands a key to one worker at a time,
// so only one sync of a job runs at once, and each sync sees the previous
// one's writes through the expectations and the cache. Once its files are
// written, a sync whose own job was queued urgently meanwhile gives way at
// its next step (Engine.GiveWay, GivingWay): it creates no more, deletes
// nothing and leaves its status unwritten, and the sync that change asks
// for runs next, lists the worker that turned Running, and carries on with
// the whole of what is left. Without that, a worker turning Running waited
// for every write of its job's sync in flight. A write that conflicted
// because the cache was a moment behind is retried at the priority its key
// had (reconcile.Settle).
func (b *Base) EnqueueChange(key string, changed, settled bool) {
	switch {
	case settled:
		reconcile.AddUrgent(b.Queue, key)
	case changed:
		reconcile.AddUrgentAfter(b.Queue, key, b.Engine.Pace.Wait(key, b.Clock.Now()))
	default:
		b.Queue.Add(key)
	}
}

// Resized tells whether a job update, from oldObj to newObj, changes the
// worker replicas as replicas reads them from a job of type J, and with
// them the victims of a scale-in or the workers of a scale-out: the update
// is then urgent.
func Resized[J any, R comparable](oldObj, newObj any, replicas func(J) R) bool {
	oldJob, okOld := oldObj.(J)
	newJob, okNew := newObj.(J)
	return okOld && okNew && replicas(oldJob) != replicas(newJob)
}

// UrgentWorkers is how many workers run, beside the --threadiness workers
// that take every key (the urgent ones first), for urgent keys only: while
// a burst of new jobs keeps every other worker busy, a worker turning
// Running still has its job synced at once.
const UrgentWorkers = 8

// RunWorkers waits for the caches, then runs threadiness workers and
// UrgentWorkers more for urgent keys, which sync the queue's keys with
// syncJob until ctx is done, and returns once they have stopped.
func (b *Base) RunWorkers(ctx context.Context, threadiness int, syncJob reconcile.SyncFunc) error {
	defer utilruntime.HandleCrashWithContext(ctx)
	defer b.Queue.ShutDown()
	logger := klog.FromContext(ctx)
	b.Health.Starting(threadiness + UrgentWorkers)
	logger.Info("Waiting for informer caches to sync")
	if !cache.WaitForNamedCacheSyncWithContext(ctx, b.synced...) {
		return fmt.Errorf("informer caches did not sync")
	}
	b.Health.CachesSynced()
	logger.Info("Starting workers", "count", threadiness, "urgent", UrgentWorkers)
	var wg sync.WaitGroup
	run := func(next func(context.Context, *reconcile.Queue, *reconcile.Health, reconcile.SyncFunc) bool) {
		wg.Go(func() {
			wait.UntilWithContext(ctx, func(ctx context.Context) {
				for next(ctx, b.Queue, b.Health, syncJob) {
				}
			}, time.Second)
		})
	}
	for range threadiness {
		run(reconcile.ProcessNext)
	}
	for range UrgentWorkers {
		run(reconcile.ProcessNextUrgent)
	}
	<-ctx.Done()
	logger.Info("Shutting down workers")
	b.Queue.ShutDown()
	wg.Wait()
	return nil
}

// ProcessNext syncs the next key of the queue with syncJob; false once the
// queue shuts down.
func (b *Base) ProcessNext(ctx context.Context, syncJob reconcile.SyncFunc) bool {
	return reconcile.ProcessNext(ctx, b.Queue, b.Health, syncJob)
}

// Healthy returns nil unless the controller is stuck, and otherwise a
// one-line reason; /healthz serves it, so that a liveness probe restarts a
// stuck operator.
func (b *Base) Healthy() error {
	return b.Health.Healthy(b.Clock.Now())
}
