package engine

import (
	"errors"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/clock"

	"github.com/kubeflow/mpi-operator/pkg/reconcile"
)

type sizedJob struct{ replicas int }

func TestResized(t *testing.T) {
	replicas := func(j *sizedJob) int { return j.replicas }
	cases := []struct {
		name     string
		old, new any
		want     bool
	}{
		{"replicas changed", &sizedJob{2}, &sizedJob{3}, true},
		{"replicas kept", &sizedJob{2}, &sizedJob{2}, false},
		{"not a job", "a tombstone", &sizedJob{3}, false},
		{"no job after", &sizedJob{2}, nil, false},
	}
	for _, tc := range cases {
		if got := Resized(tc.old, tc.new, replicas); got != tc.want {
			t.Errorf("%s: Resized = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestEnqueueChange: an event that settled the job's pod writes queues it
// urgently at once; a change of what its files list, urgently once the
// job's pace lets the files be written (at once when paid); anything else
// without urgency.
func TestEnqueueChange(t *testing.T) {
	const key, paced = "ns/j", "ns/paced"
	hold := 300 * time.Millisecond
	b := NewBase(fake.NewClientset(), nil, nil, nil, clock.RealClock{})
	defer b.Queue.ShutDown()
	now := time.Now()
	b.Engine.Pace.Wrote(paced, now, int(hold.Seconds()*DefaultBytesPerSecond))

	for _, tc := range []struct {
		name             string
		key              string
		changed, settled bool
		wantPriority     int
		wantAfterAtLeast time.Duration
	}{
		{name: "settled, paced", key: paced, settled: true, wantPriority: 1},
		{name: "settled and changed, paced", key: paced, changed: true, settled: true, wantPriority: 1},
		{name: "changed, paid", key: key, changed: true, wantPriority: 1},
		{name: "neither", key: paced, wantPriority: 0},
		{name: "changed, paced", key: paced, changed: true, wantPriority: 1, wantAfterAtLeast: hold - time.Since(now) - 50*time.Millisecond},
	} {
		start := time.Now()
		b.EnqueueChange(tc.key, tc.changed, tc.settled)
		if tc.wantAfterAtLeast > 0 && b.Queue.Len() != 0 {
			t.Errorf("%s: queued at once, want after the pace", tc.name)
		}
		got, priority, _ := b.Queue.GetWithPriority()
		b.Queue.Done(got)
		if waited := time.Since(start); got != tc.key || priority != tc.wantPriority || waited < tc.wantAfterAtLeast {
			t.Errorf("%s: got %q at priority %d after %v, want %q at %d after at least %v",
				tc.name, got, priority, waited, tc.key, tc.wantPriority, tc.wantAfterAtLeast)
		}
	}
}

// TestCreationsHaveTheirOwnClient: the workers are created through the
// client given for creations, and every other pod write goes through the
// controller's; without one, the controller's creates them too.
func TestCreationsHaveTheirOwnClient(t *testing.T) {
	kube, creations := fake.NewClientset(), fake.NewClientset()
	b := NewBase(kube, creations, nil, nil, clock.RealClock{})
	defer b.Queue.ShutDown()
	if b.Engine.Creations.Client != creations || b.Engine.Pods.Client != kube || b.Pods.Client != kube {
		t.Error("the pod writes do not go through the clients given")
	}
	b = NewBase(kube, nil, nil, nil, clock.RealClock{})
	defer b.Queue.ShutDown()
	if b.Engine.Creations.Client != kube {
		t.Error("without a client for creations, the workers are not created through the controller's")
	}
}

// TestEndSync: the status is written unless the sync gives way or the
// cache does not show the last status write yet, and the sync's own error
// and the write's both come back.
func TestEndSync(t *testing.T) {
	const key = "ns/j"
	b := NewBase(fake.NewClientset(), nil, nil, nil, clock.RealClock{})
	defer b.Queue.ShutDown()
	syncErr, writeErr := errors.New("sync"), errors.New("write")
	for _, tc := range []struct {
		name        string
		urgentAgain bool
		lastWriteRV string
		writeErr    error
		wantWrites  int
		wantRequeue time.Duration
		wantErrs    []error
	}{
		{name: "written", wantWrites: 1, wantRequeue: 300 * time.Millisecond, wantErrs: []error{syncErr}},
		{name: "the write fails", writeErr: writeErr, wantWrites: 1, wantRequeue: 300 * time.Millisecond, wantErrs: []error{syncErr, writeErr}},
		{name: "last write unseen", lastWriteRV: "7", wantRequeue: 5 * time.Second, wantErrs: []error{syncErr}},
		{name: "last write seen", lastWriteRV: "6", wantWrites: 1, wantRequeue: 300 * time.Millisecond, wantErrs: []error{syncErr}},
		{name: "giving way", urgentAgain: true, wantRequeue: 5 * time.Second, wantErrs: []error{syncErr}},
	} {
		b.StatusWrites.Forget(key)
		if tc.lastWriteRV != "" {
			b.StatusWrites.Wrote(key, tc.lastWriteRV)
		}
		if tc.urgentAgain {
			// In the middle of its sync, the job is queued urgently.
			b.Queue.Add(key)
			got, _ := b.Queue.Get()
			reconcile.AddUrgent(b.Queue, got)
		}
		writes := 0
		requeue, err := b.EndSync(key, "7", 5*time.Second, syncErr, func() (time.Duration, error) {
			writes++
			return 300 * time.Millisecond, tc.writeErr
		})
		if writes != tc.wantWrites || requeue != tc.wantRequeue {
			t.Errorf("%s: %d writes, requeue %v; want %d, %v", tc.name, writes, requeue, tc.wantWrites, tc.wantRequeue)
		}
		for _, want := range tc.wantErrs {
			if !errors.Is(err, want) {
				t.Errorf("%s: error %v does not hold %v", tc.name, err, want)
			}
		}
	}
}
