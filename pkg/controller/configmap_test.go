package controller

import (
	"slices"
	"testing"
	"time"

	"github.com/kubeflow/mpi-operator/pkg/engine"
)

// TestListingIsPacedByTheLastWritesSize: the sync that lists a worker keeps
// to the job's pace (engine.Pace), and records its own writes in it.
func TestListingIsPacedByTheLastWritesSize(t *testing.T) {
	cases := []struct {
		name   string
		ago    time.Duration // since the last write, of a second's bytes
		wantCM bool
	}{
		{name: "just after a write of a second's bytes", ago: 0},
		{name: "half a second after", ago: 500 * time.Millisecond},
		{name: "a second after", ago: time.Second, wantCM: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			job := oneOfTwoListed(f)
			var c *MPIJobController
			_, err := f.syncPrepared(job, func(ctrl *MPIJobController) {
				c = ctrl
				c.Engine.Pace.BytesPerSecond = engine.DefaultBytesPerSecond
				c.Engine.Pace.Wrote(jobKey(job), f.clock.Now().Add(-tc.ago), engine.DefaultBytesPerSecond)
			})
			if err != nil {
				t.Fatal(err)
			}
			got := writes(f.kubeClient.Actions())
			if slices.Contains(got, update("configmaps", "pi-config")) != tc.wantCM || slices.Contains(got, patchPod("pi-launcher")) != tc.wantCM {
				t.Errorf("writes %v; want the files written and the launcher told: %v", got, tc.wantCM)
			}
			wait := c.Engine.Pace.Wait(jobKey(job), f.clock.Now())
			if tc.wantCM && wait <= 0 {
				t.Errorf("after the write, the next one waits %s: the write was not recorded", wait)
			}
			if !tc.wantCM && (wait <= 0 || wait > time.Second-tc.ago) {
				t.Errorf("the held-back write waits %s, want (0, %s]", wait, time.Second-tc.ago)
			}
		})
	}
}
