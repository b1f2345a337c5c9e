package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/utils/ptr"

	kubeflow "github.com/kubeflow/mpi-operator/pkg/apis/kubeflow/v1"
	clientset "github.com/kubeflow/mpi-operator/pkg/client/clientset/versioned"
	"github.com/kubeflow/mpi-operator/test/harness"
)

// drainChoices are the jobs' drainSeconds, in turn: 0 deletes a victim in
// the sync after it left discover_hosts.sh.
var drainChoices = []int32{0, 1, 2, 3, 5}

func jobName(i int) string { return fmt.Sprintf("chaos-%02d", i) }

// newJob is an elastic MPIJob of the chaos namespace.
func newJob(name string, workers, minW, maxW int, drain int32) *kubeflow.MPIJob {
	return harness.NewJob(namespace, name, workers, &kubeflow.ElasticPolicy{
		MinReplicas:  ptr.To(int32(minW)),
		MaxReplicas:  ptr.To(int32(maxW)),
		DrainSeconds: ptr.To(drain),
	})
}

// The ways a scale operation is sent, as kubectl scale, kubectl patch
// --subresource=scale, kubectl edit and kubectl patch do.
const (
	methodScaleUpdate = "scale subresource (update)"
	methodScalePatch  = "scale subresource (merge patch)"
	methodSpecUpdate  = "spec edit (update)"
	methodSpecPatch   = "spec edit (merge patch)"
)

var methods = []string{methodScaleUpdate, methodScalePatch, methodSpecUpdate, methodSpecPatch}

// scaleOp is one change of a job's worker replicas.
type scaleOp struct {
	seq      int
	job      string
	method   string
	from, to int
	at, done time.Time
	// attempts counts the requests sent; more than one when the API server
	// refused or was down.
	attempts int
	err      error
	lastErr  string
}

// send writes the op once.
func (op *scaleOp) send(ctx context.Context, mpi clientset.Interface, dyn dynamic.Interface) error {
	jobs := mpi.KubeflowV1().MPIJobs(namespace)
	switch op.method {
	case methodScaleUpdate:
		return harness.V1.Scale(ctx, dyn, namespace, op.job, op.to)
	case methodScalePatch:
		// The MPIJob client cannot decode a Scale: take the raw answer.
		_, err := mpi.KubeflowV1().RESTClient().Patch(types.MergePatchType).Namespace(namespace).
			Resource("mpijobs").Name(op.job).SubResource("scale").
			Body(fmt.Appendf(nil, `{"spec":{"replicas":%d}}`, op.to)).DoRaw(ctx)
		return err
	case methodSpecUpdate:
		job, err := jobs.Get(ctx, op.job, metav1.GetOptions{})
		if err != nil {
			return err
		}
		job.Spec.MPIReplicaSpecs[kubeflow.MPIReplicaTypeWorker].Replicas = ptr.To(int32(op.to))
		_, err = jobs.Update(ctx, job, metav1.UpdateOptions{})
		return err
	default:
		_, err := jobs.Patch(ctx, op.job, types.MergePatchType,
			fmt.Appendf(nil, `{"spec":{"mpiReplicaSpecs":{"Worker":{"replicas":%d}}}}`, op.to), metav1.PatchOptions{})
		return err
	}
}

// opDriver sends the scale operations, paced so that they spread over the
// kills: before each, the wait is the expected time left until the last
// kill over the operations left (drawn from an exponential distribution,
// so some come in bursts).
type opDriver struct {
	o   *options
	mpi clientset.Interface
	dyn dynamic.Interface
	tl  *timeline
	rng *rand.Rand

	// sending serializes the operations, so that the last one taken is
	// the last one recorded in desired.
	sending sync.Mutex
	mu      sync.Mutex
	desired map[string]int
	ops     []*scaleOp
	done    bool
	// killsLeft, cycle and cycleStart come from the kill loop: kills
	// still to do, the mean time a kill cycle took so far, and when the
	// current one began.
	killsLeft  int
	cycle      time.Duration
	cycleStart time.Time
}

func (d *opDriver) progress(killsLeft int, cycle time.Duration, cycleStart time.Time) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.killsLeft, d.cycle, d.cycleStart = killsLeft, cycle, cycleStart
}

func (d *opDriver) finished() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.done
}

func (d *opDriver) run(ctx context.Context) {
	defer func() {
		d.mu.Lock()
		d.done = true
		d.mu.Unlock()
	}()
	names := make([]string, 0, len(d.desired))
	for i := range d.o.jobs {
		names = append(names, jobName(i))
	}
	for i := range d.o.ops {
		d.mu.Lock()
		left := time.Duration(d.killsLeft)*d.cycle - time.Since(d.cycleStart)
		mean := max(left/time.Duration(d.o.ops-i), 500*time.Millisecond)
		d.mu.Unlock()
		wait := time.Duration(d.rng.ExpFloat64() * float64(mean))
		if err := sleepCtx(ctx, min(wait, 4*mean)); err != nil {
			return
		}
		d.send(ctx, func() (string, int, string) {
			job := names[d.rng.IntN(len(names))]
			to := d.o.minWorkers + d.rng.IntN(d.o.maxWorkers-d.o.minWorkers)
			if to >= d.desired[job] {
				to++
			}
			return job, to, methods[d.rng.IntN(len(methods))]
		})
	}
}

// scaleIn sends one operation besides the paced ones: the first job with
// more than its fewest workers loses one, so that a window of refused
// writes meets a scale-in whose victims must not drain before the write.
func (d *opDriver) scaleIn(ctx context.Context) {
	d.send(ctx, func() (string, int, string) {
		for i := range d.o.jobs {
			if job := jobName(i); d.desired[job] > d.o.minWorkers {
				return job, d.desired[job] - 1, methodSpecPatch
			}
		}
		return "", 0, ""
	})
}

// send sends the operation that choose picks (under d.mu; an empty job
// for none) and records its outcome.
func (d *opDriver) send(ctx context.Context, choose func() (job string, to int, method string)) {
	d.sending.Lock()
	defer d.sending.Unlock()
	d.mu.Lock()
	job, to, method := choose()
	if job == "" {
		d.mu.Unlock()
		return
	}
	op := &scaleOp{seq: len(d.ops) + 1, job: job, method: method, from: d.desired[job], to: to, at: time.Now()}
	d.ops = append(d.ops, op)
	d.mu.Unlock()
	d.tl.printf("op %d: %s %d -> %d (%s)", op.seq, job, op.from, to, op.method)
	d.perform(ctx, op)
	d.mu.Lock()
	if op.err == nil {
		d.desired[job] = to
	}
	d.mu.Unlock()
	if op.err != nil {
		d.tl.printf("op %d: failed after %d attempts: %v", op.seq, op.attempts, op.err)
		logf("scale operation %d failed: %v", op.seq, op.err)
	} else if op.attempts > 1 {
		d.tl.printf("op %d: done after %d attempts (%s)", op.seq, op.attempts, op.lastErr)
	}
}

// perform sends the op until the API server takes it, for up to three
// minutes: the API server may be restarting.
func (d *opDriver) perform(ctx context.Context, op *scaleOp) {
	deadline := time.Now().Add(3 * time.Minute)
	for {
		op.attempts++
		rctx, cancel := context.WithTimeout(ctx, 15*time.Second)
		err := op.send(rctx, d.mpi, d.dyn)
		cancel()
		if err == nil {
			op.done = time.Now()
			return
		}
		op.lastErr = firstLine(err.Error())
		if ctx.Err() != nil || time.Now().After(deadline) || !retriable(err) {
			op.err = err
			return
		}
		if !apierrors.IsConflict(err) {
			_ = sleepCtx(ctx, 500*time.Millisecond)
		}
	}
}

// retriable errors may go away by themselves: conflicts, and whatever an
// API server that is restarting answers, or not.
func retriable(err error) bool {
	switch {
	case apierrors.IsBadRequest(err), apierrors.IsForbidden(err), apierrors.IsNotFound(err),
		apierrors.IsInvalid(err), apierrors.IsMethodNotSupported(err):
		return false
	}
	return true
}

// snapshot returns the ops and the replicas each job was last given.
func (d *opDriver) snapshot() ([]*scaleOp, map[string]int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	desired := make(map[string]int, len(d.desired))
	for k, v := range d.desired {
		desired[k] = v
	}
	return append([]*scaleOp(nil), d.ops...), desired
}

// sent is how many operations have been sent.
func (d *opDriver) sent() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.ops)
}
