package reconcile

import (
	"context"
	"errors"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/klog/v2"

	"github.com/kubeflow/mpi-operator/pkg/metrics"
)

// SyncFunc reconciles the job of key and says how long to wait before it
// needs another look, if it does.
type SyncFunc func(ctx context.Context, key string) (time.Duration, error)

// ProcessNext takes the next key of queue, syncs it while health counts the
// sync, and puts the key back as the outcome asks (see Settle). It returns
// false once the queue shuts down.
func ProcessNext(ctx context.Context, queue *Queue, health *Health, sync SyncFunc) bool {
	key, priority, quit := queue.GetWithPriority()
	if quit {
		return false
	}
	process(ctx, queue, health, sync, key, priority)
	return true
}

// ProcessNextUrgent is ProcessNext for a worker kept for urgent keys.
func ProcessNextUrgent(ctx context.Context, queue *Queue, health *Health, sync SyncFunc) bool {
	key, quit := queue.GetUrgent()
	if quit {
		return false
	}
	process(ctx, queue, health, sync, key, 1)
	return true
}

// urgentSync marks the context of the sync of an urgent key.
type urgentSync struct{}

// Urgent tells whether ctx is that of the sync of an urgent key: an API
// client can then send its requests on a budget of their own (see
// operator.NewKubeClients), so that a burst of other syncs' writes never
// holds back the one that lists a running worker.
func Urgent(ctx context.Context) bool {
	urgent, _ := ctx.Value(urgentSync{}).(bool)
	return urgent
}

// syncKinds label the syncs by priority in metrics.SyncSeconds.
var syncKinds = [2]string{"main", "urgent"}

func process(ctx context.Context, queue *Queue, health *Health, sync SyncFunc, key string, priority int) {
	defer queue.Done(key)
	logger := klog.FromContext(ctx).WithValues("mpijob", key)
	if priority > 0 {
		logger = logger.WithValues("urgent", true)
		ctx = context.WithValue(ctx, urgentSync{}, true)
	}
	ctx = klog.NewContext(ctx, logger)
	slot := health.SyncStarted()
	start := time.Now()
	requeue, err := sync(ctx, key)
	metrics.SyncSeconds.WithLabelValues(syncKinds[min(priority, 1)]).Observe(time.Since(start).Seconds())
	health.SyncFinished(slot)
	Settle(ctx, queue, key, priority, requeue, err)
}

// Settle puts key, taken from queue at priority, back as the outcome of
// its sync asks: after requeue when it went through; with the queue's
// backoff when it failed, at the same priority when the cache was only a
// moment behind (an urgent change stays urgent), at none otherwise; not at
// all when only an edit of the job can help (a SpecError, whose edit's
// event brings the job back) or the controller is stopping (the next leader
// starts from the cluster as it is).
func Settle(ctx context.Context, queue *Queue, key string, priority int, requeue time.Duration, err error) {
	logger := klog.FromContext(ctx)
	if err == nil {
		queue.Forget(key)
		if requeue > 0 {
			queue.AddAfter(key, requeue)
		}
		return
	}
	var spec *SpecError
	switch {
	case ctx.Err() != nil:
		logger.V(2).Info("Sync cut short by the stop", "err", err)
		return
	case errors.As(err, &spec):
		logger.V(2).Info("Holding the job until its spec is valid", "err", err)
		queue.Forget(key)
		return
	case apierrors.IsConflict(err), apierrors.IsAlreadyExists(err):
		// A write raced another, or the cache did not show the
		// controller's own last write yet; the retry reads the newer state.
		logger.V(4).Info("Retrying after a conflict", "err", err)
		queue.addRateLimited(key, priority > 0)
		return
	case IsBlocked(err):
		// The job's Blocked condition and its event tell the user.
		logger.V(2).Info("Blocked; retrying with backoff", "err", err)
	default:
		logger.Error(err, "Syncing the MPIJob failed; retrying")
	}
	queue.AddRateLimited(key)
}

// StatusWrites remembers, per job key, the resourceVersion that the
// controller's last status write started from. While the cache still shows
// that version it has not seen the write, and a status written from it
// would only conflict.
type StatusWrites struct{ base sync.Map } // job key -> resourceVersion

// Wrote records a status write of key that started from resourceVersion.
func (w *StatusWrites) Wrote(key, resourceVersion string) { w.base.Store(key, resourceVersion) }

// Unseen tells whether resourceVersion, the job's as the cache shows it, is
// the one the last status write of key started from; once it is not, the
// write is forgotten.
func (w *StatusWrites) Unseen(key, resourceVersion string) bool {
	if base, ok := w.base.Load(key); ok && base == resourceVersion {
		return true
	}
	w.base.Delete(key)
	return false
}

// Forget drops what is remembered of key, a job that is gone.
func (w *StatusWrites) Forget(key string) { w.base.Delete(key) }

// Holds tells whether a status write of key is remembered.
func (w *StatusWrites) Holds(key string) bool {
	_, ok := w.base.Load(key)
	return ok
}
