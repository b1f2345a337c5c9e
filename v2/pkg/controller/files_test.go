package controller

import (
	"os/exec"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"

	"github.com/kubeflow/mpi-operator/v2/pkg/apis/kubeflow/v2beta1"
)

func TestNewConfigMap(t *testing.T) {
	twoWorkers := []string{"job-worker-0", "job-worker-1"}
	cases := []struct {
		name            string
		modify          func(*v2beta1.MPIJob)
		hostfile        []string
		discover        []string
		subdomains      map[string]string
		clusterDomain   string
		annotations     map[string]string
		wantHostfile    string
		wantDiscover    string
		wantAnnotations map[string]string
	}{
		{
			name:         "OpenMPI: two workers wanted, one running",
			hostfile:     twoWorkers,
			discover:     []string{"job-worker-0"},
			wantHostfile: "job-worker-0.job.ns.svc slots=1\njob-worker-1.job.ns.svc slots=1\n",
			wantDiscover: "#!/bin/sh\necho job-worker-0.job.ns.svc\n",
		},
		{
			name:         "OpenMPI with slotsPerWorker",
			modify:       func(j *v2beta1.MPIJob) { j.Spec.SlotsPerWorker = ptr[int32](8) },
			hostfile:     twoWorkers,
			discover:     twoWorkers,
			wantHostfile: "job-worker-0.job.ns.svc slots=8\njob-worker-1.job.ns.svc slots=8\n",
			wantDiscover: "#!/bin/sh\necho job-worker-0.job.ns.svc\necho job-worker-1.job.ns.svc\n",
		},
		{
			name: "Intel: host:slots",
			modify: func(j *v2beta1.MPIJob) {
				j.Spec.MPIImplementation = v2beta1.MPIImplementationIntel
				j.Spec.SlotsPerWorker = ptr[int32](4)
			},
			hostfile:     twoWorkers,
			discover:     twoWorkers,
			wantHostfile: "job-worker-0.job.ns.svc:4\njob-worker-1.job.ns.svc:4\n",
			wantDiscover: "#!/bin/sh\necho job-worker-0.job.ns.svc\necho job-worker-1.job.ns.svc\n",
		},
		{
			name:         "MPICH: host:slots",
			modify:       func(j *v2beta1.MPIJob) { j.Spec.MPIImplementation = v2beta1.MPIImplementationMPICH },
			hostfile:     twoWorkers,
			discover:     []string{"job-worker-1"},
			wantHostfile: "job-worker-0.job.ns.svc:1\njob-worker-1.job.ns.svc:1\n",
			wantDiscover: "#!/bin/sh\necho job-worker-1.job.ns.svc\n",
		},
		{
			name: "OpenMPI with the launcher as a worker: the launcher leads both files",
			modify: func(j *v2beta1.MPIJob) {
				j.Spec.RunLauncherAsWorker = ptr(true)
				j.Spec.SlotsPerWorker = ptr[int32](2)
			},
			hostfile:     twoWorkers,
			discover:     []string{"job-worker-1"},
			wantHostfile: "job-launcher.job.ns.svc slots=2\njob-worker-0.job.ns.svc slots=2\njob-worker-1.job.ns.svc slots=2\n",
			wantDiscover: "#!/bin/sh\necho job-launcher.job.ns.svc\necho job-worker-1.job.ns.svc\n",
		},
		{
			name: "Intel with the launcher as a worker and a cluster domain",
			modify: func(j *v2beta1.MPIJob) {
				j.Spec.MPIImplementation = v2beta1.MPIImplementationIntel
				j.Spec.RunLauncherAsWorker = ptr(true)
			},
			hostfile:      []string{"job-worker-0"},
			discover:      []string{"job-worker-0"},
			clusterDomain: "cluster.example",
			wantHostfile:  "job-launcher.job.ns.svc.cluster.example:1\njob-worker-0.job.ns.svc.cluster.example:1\n",
			wantDiscover:  "#!/bin/sh\necho job-launcher.job.ns.svc.cluster.example\necho job-worker-0.job.ns.svc.cluster.example\n",
		},
		{
			name:          "OpenMPI with a cluster domain",
			hostfile:      twoWorkers,
			discover:      twoWorkers,
			clusterDomain: "cluster.local",
			wantHostfile:  "job-worker-0.job.ns.svc.cluster.local slots=1\njob-worker-1.job.ns.svc.cluster.local slots=1\n",
			wantDiscover:  "#!/bin/sh\necho job-worker-0.job.ns.svc.cluster.local\necho job-worker-1.job.ns.svc.cluster.local\n",
		},
		{
			name:         "no workers: an empty hostfile, a script that lists nothing",
			wantHostfile: "",
			wantDiscover: "#!/bin/sh\n",
		},
		{
			name:         "the launcher as a worker and no workers: the launcher alone",
			modify:       func(j *v2beta1.MPIJob) { j.Spec.RunLauncherAsWorker = ptr(true) },
			wantHostfile: "job-launcher.job.ns.svc slots=1\n",
			wantDiscover: "#!/bin/sh\necho job-launcher.job.ns.svc\n",
		},
		{
			name:         "the lists' order is kept: choosing and ordering is the caller's",
			hostfile:     []string{"job-worker-2", "job-worker-10", "job-worker-5"},
			discover:     []string{"job-worker-10", "job-worker-2"},
			wantHostfile: "job-worker-2.job.ns.svc slots=1\njob-worker-10.job.ns.svc slots=1\njob-worker-5.job.ns.svc slots=1\n",
			wantDiscover: "#!/bin/sh\necho job-worker-10.job.ns.svc\necho job-worker-2.job.ns.svc\n",
		},
		{
			name:          "a pod adopted from an older operator resolves under its own subdomain",
			hostfile:      []string{"job-worker-0", "job-worker-1", "job-worker-2"},
			discover:      []string{"job-worker-0", "job-worker-1"},
			subdomains:    map[string]string{"job-worker-0": "job-worker", "job-worker-1": "job"},
			clusterDomain: "cluster.local",
			wantHostfile: "job-worker-0.job-worker.ns.svc.cluster.local slots=1\njob-worker-1.job.ns.svc.cluster.local slots=1\n" +
				"job-worker-2.job.ns.svc.cluster.local slots=1\n",
			wantDiscover: "#!/bin/sh\necho job-worker-0.job-worker.ns.svc.cluster.local\necho job-worker-1.job.ns.svc.cluster.local\n",
		},
		{
			name:            "annotations carried",
			hostfile:        []string{"job-worker-0"},
			annotations:     map[string]string{"mpi-operator.kubeflow.org/next-worker-index": "3"},
			wantHostfile:    "job-worker-0.job.ns.svc slots=1\n",
			wantDiscover:    "#!/bin/sh\n",
			wantAnnotations: map[string]string{"mpi-operator.kubeflow.org/next-worker-index": "3"},
		},
		{
			name:         "empty annotations are none",
			annotations:  map[string]string{},
			wantHostfile: "",
			wantDiscover: "#!/bin/sh\n",
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			job := newTestJob(2, tc.modify)
			want := &corev1.ConfigMap{
				ObjectMeta: testChildMeta("job-config"),
				Data:       map[string]string{"hostfile": tc.wantHostfile, "discover_hosts.sh": tc.wantDiscover},
			}
			want.Annotations = tc.wantAnnotations
			got := newConfigMap(job, tc.hostfile, tc.discover, tc.subdomains, tc.clusterDomain, tc.annotations)
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("newConfigMap (-want +got):\n%s", diff)
			}
			for k := range tc.annotations {
				tc.annotations[k] = "changed by the caller"
			}
			if diff := cmp.Diff(tc.wantAnnotations, got.Annotations); diff != "" {
				t.Errorf("the ConfigMap's annotations follow the caller's map (-want +got):\n%s", diff)
			}
		})
	}
}

// TestDiscoverHostsScriptRuns runs discover_hosts.sh through /bin/sh, as
// Horovod does, and checks that it prints a host a line.
func TestDiscoverHostsScriptRuns(t *testing.T) {
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Skip("no sh")
	}
	job := newTestJob(3, func(j *v2beta1.MPIJob) { j.Spec.RunLauncherAsWorker = ptr(true) })
	cm := newConfigMap(job, nil, []string{"job-worker-0", "job-worker-2"}, nil, "", nil)
	out, err := exec.Command(sh, "-c", cm.Data["discover_hosts.sh"]).Output()
	if err != nil {
		t.Fatalf("running discover_hosts.sh: %v", err)
	}
	want := "job-launcher.job.ns.svc\njob-worker-0.job.ns.svc\njob-worker-2.job.ns.svc\n"
	if diff := cmp.Diff(want, string(out)); diff != "" {
		t.Errorf("discover_hosts.sh output (-want +got):\n%s", diff)
	}
	empty := newConfigMap(newTestJob(0), nil, nil, nil, "", nil)
	out, err = exec.Command(sh, "-c", empty.Data["discover_hosts.sh"]).Output()
	if err != nil || len(out) != 0 {
		t.Errorf("discover_hosts.sh without hosts: output %q, error %v; want nothing and success", out, err)
	}
}
