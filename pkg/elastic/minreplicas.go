package elastic

import "time"

// MinReplicasClock is where an elastic job stands against its minimum of
// workers.
type MinReplicasClock struct {
	// Since is when the job's running workers fell below the minimum, to
	// record as State.BelowMinSince; zero while they are not below.
	Since time.Time
	// Running is how many live workers run; zero before the job first ran.
	Running int
	// Left is how long the job may stay below the minimum before it fails;
	// zero while it is not below.
	Left time.Duration
}

// Expired tells whether the job has been below its minimum for longer than
// it may be: the caller fails it.
func (c MinReplicasClock) Expired() bool { return !c.Since.IsZero() && c.Left == 0 }

// TrackMinReplicas keeps the clock of a job that wants at least minReplicas
// live Running workers and fails after timeout below that. The clock runs
// only once the job has started running (before that its workers are still
// starting); recordedSince is the last recorded State.BelowMinSince, kept
// for as long as the job stays below.
func TrackMinReplicas(minReplicas int, timeout time.Duration, started bool, workers []Worker, recordedSince, now time.Time) MinReplicasClock {
	if !started {
		return MinReplicasClock{}
	}
	clock := MinReplicasClock{Running: CountRunning(workers)}
	if clock.Running >= minReplicas {
		return clock
	}
	clock.Since = recordedSince
	if clock.Since.IsZero() {
		clock.Since = now
	}
	clock.Left = max(clock.Since.Add(timeout).Sub(now), 0)
	return clock
}
