package engine

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/kubeflow/mpi-operator/pkg/elastic"
	"github.com/kubeflow/mpi-operator/pkg/metrics"
	"github.com/kubeflow/mpi-operator/pkg/reconcile"
)

// MaxCreatesPerSync bounds the workers one sync creates, so that a job with
// many workers to create does not hold a queue worker for long while other
// jobs wait; the pod events of those created bring the job back for the
// rest.
const MaxCreatesPerSync = 32

// ReasonWorkerReplaced is the reason of the Warning event of a failed
// worker of an elastic job, which leaves discover_hosts.sh and is replaced.
const ReasonWorkerReplaced = "WorkerReplaced"

// Engine acts on the plans of one controller's jobs. It holds what the
// controller remembers of each job's scale steps (Steps, to forget with the
// job).
type Engine struct {
	// Pods marks and deletes workers; its expectations tell whether the
	// cache shows the controller's own pod writes of a job.
	Pods reconcile.PodWrites
	// Creations creates workers, through a client whose rate limit is
	// their own.
	Creations reconcile.PodWrites
	Steps     ScaleSteps
	// Launchers remembers the launcher refreshes sent (RefreshLauncher).
	Launchers Refreshes
	// Running remembers when the workers turned Running (PodEvents), and
	// Clock tells how long ago when they are listed.
	Running RunningSince
	Clock   clock.PassiveClock
	// Pace keeps each job's writes of its files and the objects beside
	// them to a byte rate; nil means no pacing.
	Pace *Pace
	// GiveWay, if set, tells whether a job's key was queued urgently while
	// the job is being synced (a worker turned Running): Act then stops at
	// its next step after the files, and the sync that change asks for
	// runs next and lists the worker, instead of waiting for every write.
	GiveWay func(key string) bool
}

// Job is what the engine knows of one job in one sync.
type Job struct {
	Owner      reconcile.Owner
	UID        types.UID
	Generation int64
	// Replicas is the number of workers the job asks for.
	Replicas int
	// Elastic jobs replace failed workers.
	Elastic     bool
	DrainPeriod time.Duration
	WorkerName  func(index int) string
	// Now is the time of the sync, from which drains count.
	Now time.Time
	// Seen is what the expectations of the controller's pod writes told
	// before the sync read the job's pods, from which its workers and plan
	// come (reconcile.Seen). Act also waits for the pod writes that the
	// sync made since.
	Seen reconcile.Seen
}

// Hooks are what the API version decides: how the files and the objects
// beside them are written, how a worker is built, how the launcher is told
// and where events go.
type Hooks struct {
	// Files writes the job's files for plan and returns the
	// discover_hosts.sh that the API server holds after the write (a
	// write may be held back: then the script as it was).
	Files func(ctx context.Context, plan elastic.Plan) (script string, err error)
	// Beside are written at the same time as the files, before any worker
	// is created: the launcher's exec rights, a PodGroup. settled tells
	// whether the plan is carried out in full (see Act).
	Beside []func(ctx context.Context, plan elastic.Plan, settled bool) error
	// Tell, if set, tells the running launcher of the script just written.
	Tell func(ctx context.Context, script string) error
	// Worker builds the pod of the worker of an index.
	Worker func(index int) *corev1.Pod
	// Event records an event on the job.
	Event func(eventType, reason, message string)
}

// Outcome is what Act did, for the job's status and its next sync.
type Outcome struct {
	// Settled is true when the cache showed every pod write of the
	// controller's for the job, so that the plan was carried out in full.
	Settled bool
	// Written is true when the files were written (or found as wanted);
	// Script is then the discover_hosts.sh the API server holds.
	Written bool
	Script  string
	// Created are the indices of the workers created.
	Created []int
	// Requeue is when the job needs another look, if it does.
	Requeue time.Duration
	// Held is set when the job's writes were held back (Pace): how long
	// until they may go on.
	Held time.Duration
	// GaveWay is set when Act stopped after the files for the sync of an
	// urgent change of the job (Engine.GiveWay): the caller writes nothing
	// more either, and that sync, next, carries on.
	GaveWay bool
}

// Act carries out plan for job, in the one order both operators follow:
//  1. the files, with the objects beside them (the exec rights of every
//     worker about to exist);
//  2. the launcher told of the script;
//  3. the drain marks of the victims that the written script no longer
//     lists (Unlisted: a drain counts from that write);
//  4. the creations, at most MaxCreatesPerSync, in batches;
//  5. the marks of failed workers replaced by the workers just created;
//  6. the deletions of drained or finished workers.
//
// While the cache does not show the controller's own last pod writes of the
// job (as job.Seen tells, taken before ws was read), the plan may repeat
// them: the pod writes wait (the event that shows them brings the job back,
// or ExpectationsTimeout passes). While it does not show a drain mark or a
// deletion, the plan could list a worker already taken out of the script:
// the files wait too.
//
// Once the files are written, Act gives way (Outcome.GaveWay) at the next
// step if the job was queued urgently meanwhile (GiveWay): the sync that
// change asks for runs next, writes the files again with the worker that
// turned Running, and carries on with the steps left.
func (e *Engine) Act(ctx context.Context, job Job, ws []elastic.Worker, plan elastic.Plan, h Hooks) (Outcome, error) {
	key := job.Owner.Key()
	out := Outcome{Settled: e.Pods.Expectations.SettledSince(job.Seen, key), Requeue: plan.Requeue}
	if !out.Settled {
		plan.Create, plan.Drain, plan.Remove = nil, nil, nil
		out.Requeue = elastic.Sooner(out.Requeue, reconcile.ExpectationsTimeout)
	}
	rest := podSteps{create: plan.Create[:min(len(plan.Create), MaxCreatesPerSync)], planned: plan.Create,
		remove: plan.Remove, replace: out.Settled && job.Elastic}
	out, rest, err := e.writeFiles(ctx, job, plan, h, out, rest)
	if err != nil {
		return out, err
	}
	if out.Written {
		e.observeDiscovery(key, ws, plan.Hosts.Running)
		if out.GaveWay = e.givingWay(key); out.GaveWay {
			return out, nil
		}
		if err := e.tell(ctx, job, plan, h, out.Script); err != nil {
			return out, err
		}
	}
	out.Created, err = e.create(ctx, job, h, rest.create, rest.planned)
	if err == nil && rest.replace {
		err = e.markReplaced(ctx, job, h, ws, out.Created)
	}
	if err != nil {
		return out, err
	}
	if out.GaveWay = e.givingWay(key); out.GaveWay {
		return out, nil
	}
	return out, e.Delete(ctx, job, h, rest.remove)
}

// tell tells the launcher of script, just written, and marks the victims
// it no longer lists as draining.
func (e *Engine) tell(ctx context.Context, job Job, plan elastic.Plan, h Hooks, script string) error {
	if h.Tell != nil {
		if err := h.Tell(ctx, script); err != nil {
			return err
		}
	}
	return e.markDraining(ctx, job, h, Unlisted(plan.Drain, script))
}

// podSteps are the pod writes that follow the files.
type podSteps struct {
	create, planned []int
	remove          []*corev1.Pod
	replace         bool
}

// givingWay tells whether the sync of key should stop at this step for
// the one its urgent change asks for.
func (e *Engine) givingWay(key string) bool { return e.GiveWay != nil && e.GiveWay(key) }

// writeFiles writes the job's files and the objects beside them, at once,
// unless its pace holds them back (then the pod steps that need them are
// dropped) or the cache does not show its last drain marks and deletions
// (then the files wait).
func (e *Engine) writeFiles(ctx context.Context, job Job, plan elastic.Plan, h Hooks, out Outcome, rest podSteps) (Outcome, podSteps, error) {
	key := job.Owner.Key()
	changing := e.Pods.Expectations.ChangingSince(job.Seen, key)
	// A job whose last writes are not paid for yet (Pace) writes nothing
	// that would change an object; what is as wanted counts as written.
	wait := e.Pace.Wait(key, job.Now)
	meter := reconcile.Meter{Hold: wait > 0}
	wctx := reconcile.WithMeter(ctx, &meter)
	var filesHeld, besideHeld atomic.Bool
	writes := []func() error{func() (err error) {
		if changing {
			return nil
		}
		out.Script, err = h.Files(wctx, plan)
		if reconcile.IsHeld(err) {
			filesHeld.Store(true)
			return nil
		}
		out.Written = err == nil
		return err
	}}
	for _, beside := range h.Beside {
		writes = append(writes, func() error {
			err := beside(wctx, plan, out.Settled)
			if reconcile.IsHeld(err) {
				besideHeld.Store(true)
				return nil
			}
			return err
		})
	}
	err := reconcile.Concurrently(writes...)
	e.Pace.Wrote(key, job.Now, meter.Bytes())
	if err == nil && (filesHeld.Load() || besideHeld.Load()) {
		out, rest = e.hold(ctx, out, rest, wait, besideHeld.Load())
	}
	return out, rest, err
}

// hold records that the job's pace held back a write of its files or of
// an object beside them: the job comes back once paid. Of the deletions,
// only those of workers whose drain mark says a written script left them
// out go on; when an object beside the files was held (the exec rights of
// the workers to create), no worker is created either.
func (e *Engine) hold(ctx context.Context, out Outcome, rest podSteps, wait time.Duration, creations bool) (Outcome, podSteps) {
	klog.FromContext(ctx).V(4).Info("Writes held back", "wait", wait, "creations", creations)
	metrics.PacedSyncs.Inc()
	if creations {
		rest.create, rest.replace = nil, false
	}
	rest.remove = slices.DeleteFunc(slices.Clone(rest.remove), func(p *corev1.Pod) bool {
		_, marked := p.Annotations[elastic.AnnotationDrainingSince]
		return !marked
	})
	out.Held = wait
	out.Requeue = elastic.Sooner(out.Requeue, wait)
	return out, rest
}

// AtBound is a BoundError for a plan whose creations Spec.MaxPods held
// back, nil for any other.
func AtBound(key string, plan elastic.Plan, maxPods int) error {
	if plan.HeldBack == 0 {
		return nil
	}
	return &reconcile.BoundError{Job: key, Pods: plan.Pods, Max: maxPods, HeldBack: plan.HeldBack}
}

// create creates the workers of indices, of the planned ones (all the step
// creates), in batches that start at one pod and double, as the Job
// controller's do, and returns the indices created. The step's event comes
// with its first creation.
func (e *Engine) create(ctx context.Context, job Job, h Hooks, indices, planned []int) ([]int, error) {
	if len(indices) == 0 {
		return nil, nil
	}
	var stop func() bool
	if e.GiveWay != nil {
		stop = func() bool { return e.GiveWay(job.Owner.Key()) }
	}
	done, err := reconcile.InBatchesUntil(len(indices), 1, stop, func(i int) error {
		_, err := e.Creations.Create(ctx, job.Owner, h.Worker(indices[i]))
		return err
	})
	created := make([]int, len(done))
	for i, d := range done {
		created[i] = indices[d]
	}
	if len(created) > 0 {
		klog.FromContext(ctx).V(2).Info("Created workers", "indices", created)
		if ev, first := e.Steps.Created(job.Owner.Key(), job.UID, job.Generation, job.Replicas, workerNames(job, planned)); first {
			h.Event(corev1.EventTypeNormal, ev.Reason, ev.Message)
			metrics.WorkerResizes.WithLabelValues("up").Inc()
		}
	}
	return created, err
}

// markDraining takes victims out of discover_hosts.sh for good: the mark is
// on the pod itself, so that it outlives a restart of the controller, and
// the victim is deleted DrainPeriod after it.
func (e *Engine) markDraining(ctx context.Context, job Job, h Hooks, pods []*corev1.Pod) error {
	since := job.Now.UTC().Format(time.RFC3339Nano)
	marked, err := onPods(pods, func(p *corev1.Pod) error {
		_, err := e.Pods.Annotate(ctx, job.Owner, p, elastic.AnnotationDrainingSince, since)
		return err
	})
	if len(marked) > 0 {
		klog.FromContext(ctx).V(2).Info("Draining workers", "pods", podNames(marked))
		ev := Draining(job.Replicas, podNames(marked), job.DrainPeriod)
		h.Event(corev1.EventTypeNormal, ev.Reason, ev.Message)
	}
	return err
}

// Delete deletes workers that discover_hosts.sh no longer lists, through
// h.Event only. The deletion of drained workers ends the step that their
// draining event announced; only the others have an event of their own.
func (e *Engine) Delete(ctx context.Context, job Job, h Hooks, pods []*corev1.Pod) error {
	deleted, err := onPods(pods, func(p *corev1.Pod) error { return e.Pods.Delete(ctx, job.Owner, p) })
	if len(deleted) > 0 {
		klog.FromContext(ctx).V(2).Info("Deleted workers", "pods", podNames(deleted))
		metrics.WorkerResizes.WithLabelValues("down").Inc()
	}
	if ev, ok := Deleted(deleted); ok {
		h.Event(corev1.EventTypeNormal, ev.Reason, ev.Message)
	}
	return err
}

// markReplaced records on each failed worker of an elastic job the worker
// that replaces it, among those just created, and tells the user once.
func (e *Engine) markReplaced(ctx context.Context, job Job, h Hooks, ws []elastic.Worker, created []int) error {
	for _, r := range elastic.Replacements(ws, created, job.WorkerName) {
		patched, err := e.Pods.Annotate(ctx, job.Owner, r.Failed, elastic.AnnotationReplacedBy, r.By)
		if err != nil {
			return fmt.Errorf("marking failed worker %s: %w", r.Failed.Name, err)
		}
		if patched == nil {
			continue
		}
		outcome := "the job has the workers it asks for without a replacement"
		if r.By != elastic.ReplacedByNone {
			outcome = "replaced by " + r.By
			metrics.WorkersReplaced.Inc()
		}
		h.Event(corev1.EventTypeWarning, ReasonWorkerReplaced, fmt.Sprintf("Worker %s ended (%s) and is out of discover_hosts.sh; %s",
			r.Failed.Name, cmp.Or(r.Failed.Status.Reason, string(r.Failed.Status.Phase)), outcome))
	}
	return nil
}

// onPods runs write on pods in parallel batches and returns the pods it
// went through for.
func onPods(pods []*corev1.Pod, write func(*corev1.Pod) error) ([]*corev1.Pod, error) {
	if len(pods) == 0 {
		return nil, nil
	}
	done, err := reconcile.InBatches(len(pods), reconcile.MaxBatch, func(i int) error { return write(pods[i]) })
	out := make([]*corev1.Pod, len(done))
	for i, d := range done {
		out[i] = pods[d]
	}
	return out, err
}

func podNames(pods []*corev1.Pod) []string {
	out := make([]string, len(pods))
	for i, p := range pods {
		out[i] = p.Name
	}
	return out
}

func workerNames(job Job, indices []int) []string {
	out := make([]string, len(indices))
	for i, idx := range indices {
		out[i] = job.WorkerName(idx)
	}
	return out
}

// Adopt gives each of pods, pods of job's, the labels labelsOf gives for
// its name where it lacks any of them: a pod that lost them to a user or a
// mutating policy drops out of the pod informer (reconcile.Strays finds it
// by ownership) or out of the selectors that publish and list it. A stray
// worker then counts like any other, and one too many drains like any
// other surplus worker. A pod whose name labelsOf gives nothing for is left
// as it is. The job's pod writes wait for the cache to show the labels.
func (e *Engine) Adopt(ctx context.Context, job Job, pods []metav1.Object, labelsOf func(name string) map[string]string) error {
	for _, p := range pods {
		labels := labelsOf(p.GetName())
		if labels == nil || reconcile.HasLabels(p, labels) {
			continue
		}
		if err := e.Pods.Adopt(ctx, job.Owner, p, labels); err != nil {
			return err
		}
	}
	return nil
}
