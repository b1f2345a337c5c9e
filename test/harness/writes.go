package harness

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"

	"github.com/kubeflow/mpi-operator/pkg/metrics"
)

// WriteRecord is when updates of some objects were seen, and how large the
// objects were then.
type WriteRecord struct {
	mu    sync.Mutex
	at    []time.Time
	bytes []int
	stop  func()
	once  sync.Once
	// held is the count of held syncs when the record began.
	held float64
}

// RecordWrites watches the updates of the ConfigMap configMap in namespace
// ns and, unless role is empty, of the Role role, until Stop.
func RecordWrites(ctx context.Context, kube kubernetes.Interface, ns, configMap, role string) (*WriteRecord, error) {
	ctx, cancel := context.WithCancel(ctx)
	byName := func(name string) metav1.ListOptions {
		return metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("metadata.name", name).String()}
	}
	cms, err := kube.CoreV1().ConfigMaps(ns).Watch(ctx, byName(configMap))
	if err != nil {
		cancel()
		return nil, err
	}
	watches := []watch.Interface{cms}
	if role != "" {
		roles, err := kube.RbacV1().Roles(ns).Watch(ctx, byName(role))
		if err != nil {
			cancel()
			cms.Stop()
			return nil, err
		}
		watches = append(watches, roles)
	}
	r := &WriteRecord{held: testutil.ToFloat64(metrics.PacedSyncs)}
	var wg sync.WaitGroup
	for _, w := range watches {
		wg.Go(func() {
			for ev := range w.ResultChan() {
				if sized, ok := ev.Object.(interface{ Size() int }); ok && ev.Type == watch.Modified {
					r.add(sized.Size())
				}
			}
		})
	}
	r.stop = func() {
		cancel()
		for _, w := range watches {
			w.Stop()
		}
		wg.Wait()
	}
	return r, nil
}

func (r *WriteRecord) add(bytes int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.at, r.bytes = append(r.at, time.Now()), append(r.bytes, bytes)
}

// Stop ends the watches; it may be called more than once.
func (r *WriteRecord) Stop() { r.once.Do(r.stop) }

// Since sums the updates seen from start on: how many, their bytes, the
// largest, and the time from start to the last.
func (r *WriteRecord) Since(start time.Time) (n, total, largest int, span time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for i, at := range r.at {
		if at.Before(start) {
			continue
		}
		n, total, largest = n+1, total+r.bytes[i], max(largest, r.bytes[i])
		span = max(span, at.Sub(start))
	}
	return n, total, largest, span
}

// CheckPace fails t when the updates seen from start on wrote more bytes
// than a job paced at rate bytes a second may (what the time pays for,
// the sync time before each write, since the debt counts from the start
// of the sync, and the last writes of the ConfigMap and Role, paid for
// after them), or when no sync was held since the record began: then the
// job met no pace and the test shows nothing.
func (r *WriteRecord) CheckPace(t testing.TB, start time.Time, rate int) {
	t.Helper()
	n, total, largest, span := r.Since(start)
	allowed := int(float64(rate)*(span+time.Second/5).Seconds()) + 2*largest
	held := testutil.ToFloat64(metrics.PacedSyncs) - r.held
	t.Logf("%d updates of %d bytes (largest %d) in %s; %d bytes allowed; %v syncs held back",
		n, total, largest, span.Round(time.Millisecond), allowed, held)
	if total > allowed {
		t.Errorf("the job wrote %d bytes in %s, more than its pace of %d B/s allows (%d)",
			total, span.Round(time.Millisecond), rate, allowed)
	}
	if held == 0 {
		t.Error("no sync was held back: the job never met its pace, so the test shows nothing")
	}
}

// Flap sets a job's replicas to low and high in turn, times times, every
// interval, through scale, and returns when the flapping began.
func Flap(scale func(replicas int32), low, high int32, times int, interval time.Duration) time.Time {
	start := time.Now()
	for i := range times {
		scale([]int32{low, high}[i%2])
		time.Sleep(interval)
	}
	return start
}
