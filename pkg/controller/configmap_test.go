package controller

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/kubeflow/mpi-operator/pkg/elastic"
)

func TestAddingHostsIsPacedByTheLastWritesSize(t *testing.T) {
	cases := []struct {
		name     string
		ago      time.Duration // since the last write, of listingBytesPerSecond bytes
		wantCM   bool
		wantWait bool
	}{
		{name: "just after a write of a second's bytes", ago: 0, wantWait: true},
		{name: "half a second after", ago: 500 * time.Millisecond, wantWait: true},
		{name: "a second after", ago: time.Second, wantCM: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			job := oneOfTwoListed(f)
			var c *MPIJobController
			err := f.discover(job, func(ctrl *MPIJobController) {
				c = ctrl
				c.cmWrites.wrote(jobKey(job), f.clock.Now().Add(-tc.ago), listingBytesPerSecond)
			})
			if err != nil {
				t.Fatal(err)
			}
			if tc.wantCM {
				f.expectKubeWrites(update("configmaps", "pi-config"), patchPod("pi-launcher"))
			} else {
				f.expectKubeWrites()
			}
			wait := c.cmWrites.wait(jobKey(job), f.clock.Now())
			if tc.wantCM && wait <= 0 {
				t.Errorf("after the write, the next one waits %s: the write was not recorded", wait)
			}
			if !tc.wantCM && (wait <= 0 || wait > time.Second-tc.ago) {
				t.Errorf("the held-back write waits %s, want (0, %s]", wait, time.Second-tc.ago)
			}
		})
	}
}

func TestTakingHostsOutIsNeverPaced(t *testing.T) {
	f := newFixture(t)
	job := runningJob(f, 1)
	two := []string{"pi-worker-0", "pi-worker-1"}
	// The ConfigMap still lists a second worker, which is gone.
	f.cms[0] = newConfigMap(defaulted(job), elastic.Hosts{Desired: two, Running: two}, elastic.State{})
	err := f.discover(job, func(c *MPIJobController) {
		c.cmWrites.wrote(jobKey(job), f.clock.Now(), 100*listingBytesPerSecond)
	})
	if err != nil {
		t.Fatal(err)
	}
	got := updatedObject[*corev1.ConfigMap](f, "configmaps", "pi-config").Data[discoverHostsKey]
	if want := "#!/bin/sh\necho pi-worker-0:1\n"; got != want {
		t.Errorf("discover_hosts.sh %q, want %q", got, want)
	}
}

func TestOnlyAddsHosts(t *testing.T) {
	cm := func(hosts ...string) *corev1.ConfigMap {
		job := defaulted(newTestJob("pi", int32(len(hosts))))
		return newConfigMap(job, elastic.Hosts{Desired: hosts, Running: hosts}, elastic.State{})
	}
	cases := []struct {
		name      string
		cur, want *corev1.ConfigMap
		adds      bool
	}{
		{"adds one", cm("a"), cm("a", "b"), true},
		{"from none", cm(), cm("a"), true},
		{"same", cm("a", "b"), cm("a", "b"), false},
		{"takes one out", cm("a", "b"), cm("a"), false},
		{"swaps one", cm("a", "b"), cm("a", "c"), false},
		{"swaps one and adds one", cm("a", "b"), cm("a", "c", "d"), false},
	}
	for _, tc := range cases {
		if got := elastic.OnlyAddsHosts(tc.cur.Data[discoverHostsKey], tc.want.Data[discoverHostsKey]); got != tc.adds {
			t.Errorf("%s: onlyAddsHosts = %t, want %t", tc.name, got, tc.adds)
		}
	}
}
