package reconcile

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/client-go/util/workqueue"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/kubeflow/mpi-operator/pkg/metrics"
)

// newTestQueue returns a queue whose retries come after backoff.
func newTestQueue(backoff time.Duration) *Queue {
	return NewQueueWithRateLimiter(workqueue.NewTypedItemExponentialFailureRateLimiter[string](backoff, backoff))
}

// TestSettle: how the outcome of a sync puts its job back in the queue.
func TestSettle(t *testing.T) {
	stopped, stop := context.WithCancel(context.Background())
	stop()
	cases := map[string]struct {
		ctx     context.Context
		requeue time.Duration
		err     error
		retried bool // with backoff
		urgent  bool // at the priority it was taken at, urgent here
		later   bool // after requeue
	}{
		"done":         {},
		"look again":   {requeue: time.Millisecond, later: true},
		"conflict":     {err: apierrors.NewConflict(schema.GroupResource{}, "job", errors.New("x")), retried: true, urgent: true},
		"cache behind": {err: apierrors.NewAlreadyExists(schema.GroupResource{}, "job"), retried: true, urgent: true},
		"held spec":    {err: &SpecError{Reason: "InvalidMPIJobSpec", Job: "ns/job", Errs: field.ErrorList{field.Required(field.NewPath("spec"), "")}}},
		"blocked":      {err: &ForeignError{Kind: "Pod", Name: "job-worker-0", OwnerKind: "MPIJob", OwnerName: "job"}, retried: true},
		"failure":      {err: errors.New("boom"), retried: true},
		"stopping":     {ctx: stopped, err: errors.New("cut short")},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			q := newTestQueue(time.Hour)
			defer q.ShutDown()
			ctx := tc.ctx
			if ctx == nil {
				ctx = context.Background()
			}
			Settle(ctx, q, "ns/job", 1, tc.requeue, tc.err)
			if got := q.NumRequeues("ns/job") > 0; got != tc.retried {
				t.Errorf("retried with backoff %v, want %v", got, tc.retried)
			}

			if tc.later {
				time.Sleep(20 * time.Millisecond)
			}
			if got := q.Len() == 1; got != tc.later {
				t.Errorf("queued %v, want %v", got, tc.later)
			}
		})
	}
}

// TestRetryKeepsUrgencyOfACacheBehind: a sync of an urgent key that
// conflicts is retried urgently; one that fails otherwise is retried
// without urgency, behind the jobs queued meanwhile.
func TestRetryKeepsUrgencyOfACacheBehind(t *testing.T) {
	cases := map[string]struct {
		err    error
		urgent bool
	}{
		"conflict": {apierrors.NewConflict(schema.GroupResource{}, "job", errors.New("x")), true},
		"failure":  {errors.New("boom"), false},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			q := newTestQueue(time.Millisecond)
			defer q.ShutDown()
			Settle(context.Background(), q, "ns/job", 1, 0, tc.err)
			time.Sleep(20 * time.Millisecond)
			if q.Len() != 1 {
				t.Fatalf("the retry is not queued")
			}
			if _, priority, _ := q.GetWithPriority(); (priority > 0) != tc.urgent {
				t.Errorf("retried at priority %d, want urgent %v", priority, tc.urgent)
			}
		})
	}
}

func TestProcessNext(t *testing.T) {
	q := newTestQueue(time.Hour)
	health := NewHealth(testingclock.NewFakeClock(time.Now()), q.Len)
	q.Add("ns/job")
	var synced string
	more := ProcessNext(context.Background(), q, health, func(_ context.Context, key string) (time.Duration, error) {
		synced = key
		return 0, errors.New("boom")
	})
	if !more || synced != "ns/job" || q.NumRequeues("ns/job") != 1 {
		t.Errorf("more %v, synced %q, requeues %d", more, synced, q.NumRequeues("ns/job"))
	}
	q.ShutDown()
	if ProcessNext(context.Background(), q, health, nil) {
		t.Error("ProcessNext goes on after the queue shut down")
	}
}

func TestStatusWrites(t *testing.T) {
	var w StatusWrites
	if w.Unseen("ns/job", "5") {
		t.Error("a job never written is unseen")
	}
	w.Wrote("ns/job", "5")
	if !w.Unseen("ns/job", "5") {
		t.Error("the write is not unseen while the cache shows its base")
	}
	if w.Unseen("ns/job", "6") || w.Unseen("ns/job", "5") {
		t.Error("the write is not forgotten once the cache moved on")
	}
	w.Wrote("ns/other", "7")
	w.Forget("ns/other")
	if w.Unseen("ns/other", "7") {
		t.Error("a forgotten job is unseen")
	}
}

// TestQueueHandsUrgentKeysFirst: urgent keys come before the others, and a
// key being synced is not handed out again until its sync is done.
func TestQueueHandsUrgentKeysFirst(t *testing.T) {
	q := NewQueue()
	defer q.ShutDown()
	q.Add("ns/a")
	q.Add("ns/b")
	AddUrgent(q, "ns/c")
	AddUrgent(q, "ns/b") // queued already: moves up
	var got []string
	for range 3 {
		key, _ := q.Get()
		got = append(got, key)
	}
	// An urgent key first; then ns/a, which waited while it was handed
	// out; then the other urgent key.
	want := []string{"ns/c", "ns/a", "ns/b"}
	if !slices.Equal(got, want) {
		t.Fatalf("order = %v, want %v", got, want)
	}
	// ns/a is being synced; an urgent add waits for its Done.
	AddUrgent(q, "ns/a")
	q.Add("ns/d")
	if key, _ := q.Get(); key != "ns/d" {
		t.Fatalf("got %s while ns/a is being synced, want ns/d", key)
	}
	q.Done("ns/a")
	if key, _ := q.Get(); key != "ns/a" {
		t.Fatalf("got %s after ns/a's sync, want ns/a again", key)
	}
}

// TestUrgentStreamDelaysOthersOneSyncAtMost: a job whose every sync brings
// an urgent change of its own (its workers turning Running one after the
// other) is synced again and again by the one worker that takes either kind
// of key; another job, added plainly, waits for one of those syncs at most.
func TestUrgentStreamDelaysOthersOneSyncAtMost(t *testing.T) {
	q := NewQueue()
	defer q.ShutDown()
	AddUrgent(q, "ns/busy")
	key, _ := q.Get()
	q.Add("ns/quiet") // while ns/busy's first sync runs
	// started counts the syncs of ns/busy that start after ns/quiet came.
	started := 0
	for key != "ns/quiet" {
		if started > 10 {
			t.Fatalf("ns/quiet still waits after %d syncs of ns/busy", started)
		}
		AddUrgent(q, "ns/busy") // an event of its own during its sync
		q.Done("ns/busy")
		if key, _ = q.Get(); key == "ns/busy" {
			started++
		}
	}
	if started > 1 {
		t.Errorf("ns/quiet waited for %d syncs of ns/busy to start and end, want 1 at most", started)
	}
}

// TestGetUrgentTakesUrgentKeysOnly: a worker kept for urgent keys leaves the
// others to the other workers, and waits for an urgent one.
func TestGetUrgentTakesUrgentKeysOnly(t *testing.T) {
	q := NewQueue()
	defer q.ShutDown()
	q.Add("ns/a")
	got := make(chan string)
	go func() {
		key, _ := q.GetUrgent()
		got <- key
	}()
	select {
	case key := <-got:
		t.Fatalf("GetUrgent took %s, queued without urgency", key)
	case <-time.After(50 * time.Millisecond):
	}
	AddUrgent(q, "ns/b")
	if key := <-got; key != "ns/b" {
		t.Fatalf("GetUrgent took %s, want ns/b", key)
	}
	if key, _ := q.Get(); key != "ns/a" {
		t.Fatalf("Get took %s, want ns/a", key)
	}
}

// TestKeyAddedWhileSyncedComesBackAfterDone: the queue never hands a key
// to two workers at once.
func TestKeyAddedWhileSyncedComesBackAfterDone(t *testing.T) {
	q := NewQueue()
	defer q.ShutDown()
	q.Add("ns/a")
	key, _ := q.Get()
	AddUrgent(q, key)
	if q.Len() != 0 {
		t.Fatalf("a key being synced is queued again before Done")
	}
	q.Done(key)
	if _, priority, _ := q.GetWithPriority(); priority != 1 {
		t.Errorf("the key came back at priority %d, want the urgency it was added with", priority)
	}
}

// TestUrgentAgain: only an urgent add of a key being synced asks its sync
// to give way.
func TestUrgentAgain(t *testing.T) {
	q := NewQueue()
	defer q.ShutDown()
	AddUrgent(q, "ns/queued")
	if q.UrgentAgain("ns/queued") {
		t.Error("a key waiting in the queue asks a sync to give way")
	}
	q.Add("ns/a")
	key, _, _ := q.GetWithPriority()
	if key != "ns/queued" {
		t.Fatalf("took %q, want the urgent key first", key)
	}
	key, _ = q.Get()
	q.Add(key)
	if q.UrgentAgain(key) {
		t.Error("a plain add while synced asks the sync to give way")
	}
	AddUrgent(q, key)
	if !q.UrgentAgain(key) {
		t.Error("an urgent add while synced does not ask the sync to give way")
	}
	q.Done(key)
	if q.UrgentAgain(key) {
		t.Error("a key no longer synced asks a sync to give way")
	}
}

func TestQueueShutsDownTwice(t *testing.T) {
	q := NewQueue()
	q.ShutDown()
	q.ShutDown()
	if _, shutdown := q.Get(); !shutdown {
		t.Error("Get after ShutDown hands out a key")
	}
}

// waitSamples reads the count and sum of the queue wait observed for a
// priority and a cause.
func waitSamples(t *testing.T, queue, cause string) (uint64, float64) {
	t.Helper()
	m := &dto.Metric{}
	if err := metrics.QueueWaitSeconds.WithLabelValues(queue, cause).(prometheus.Metric).Write(m); err != nil {
		t.Fatal(err)
	}
	return m.GetHistogram().GetSampleCount(), m.GetHistogram().GetSampleSum()
}

// TestQueueWaitIsObserved: each key handed out observes how long it
// waited, by its priority, and whether its own job's sync held it: an
// urgent add made during that sync counts from the add to the hand-out
// after Done; a plain key moved up counts from its urgent add.
func TestQueueWaitIsObserved(t *testing.T) {
	const hold = 200 * time.Millisecond
	type sample struct{ queue, cause string }
	before := map[sample]uint64{}
	sums := map[sample]float64{}
	for _, s := range []sample{{"main", "queue"}, {"urgent", "queue"}, {"urgent", "own_sync"}} {
		before[s], sums[s] = waitSamples(t, s.queue, s.cause)
	}
	q := NewQueue()
	defer q.ShutDown()

	q.Add("ns/plain")
	q.Get()
	AddUrgent(q, "ns/urgent")
	key, _ := q.Get()
	AddUrgent(q, key)
	time.Sleep(hold)
	q.Done(key)
	q.Get()
	q.Add("ns/moved")
	time.Sleep(hold)
	AddUrgent(q, "ns/moved")
	q.Get()

	want := map[sample]uint64{{"main", "queue"}: 1, {"urgent", "queue"}: 2, {"urgent", "own_sync"}: 1}
	for s, n := range want {
		count, sum := waitSamples(t, s.queue, s.cause)
		if count-before[s] != n {
			t.Errorf("%v: %d samples, want %d", s, count-before[s], n)
		}
		waited := time.Duration((sum - sums[s]) * float64(time.Second))
		switch {
		case s.cause == "own_sync" && waited < hold:
			t.Errorf("%v: waited %v, less than the sync it waited for (%v)", s, waited, hold)
		case s.cause == "queue" && waited >= hold:
			t.Errorf("%v: waited %v, counted from before the urgent add", s, waited)
		}
	}
}
