package controller

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/kubeflow/mpi-operator/pkg/reconcile"
	"github.com/kubeflow/mpi-operator/v2/pkg/apis/kubeflow/v2beta1"
)

// Bits of FuzzSync's flags.
const (
	fuzzElastic = 1 << iota
	fuzzLauncherAsWorker
	fuzzWaitForWorkers
	fuzzCleanAll
	fuzzSuspended
	fuzzResizeTo // the job's replicas change to resize after the first step
	fuzzNoLauncherContainer
)

// FuzzSync plays random jobs through a few syncs, the kubelet moving their
// workers through random phases, and checks what must hold whatever the
// job: no sync fails for a reason other than a blocked job, a suspended
// job has no pod created, and no worker is deleted while discover_hosts.sh
// lists it.
func FuzzSync(f *testing.F) {
	f.Add(uint8(2), uint8(1), uint8(0), uint8(3), uint16(0x5555))
	f.Add(uint8(3), uint8(2), uint8(fuzzElastic|fuzzResizeTo), uint8(1), uint16(0xffff))
	f.Add(uint8(1), uint8(1), uint8(fuzzSuspended|fuzzCleanAll), uint8(0), uint16(0x1234))
	f.Add(uint8(4), uint8(3), uint8(fuzzElastic|fuzzWaitForWorkers|fuzzLauncherAsWorker), uint8(1), uint16(0xa5a5))
	f.Add(uint8(2), uint8(0), uint8(fuzzNoLauncherContainer), uint8(2), uint16(0))
	f.Fuzz(func(t *testing.T, workers, minReplicas, flags, resize uint8, phases uint16) {
		job := storedJob(int32(workers%6), func(j *v2beta1.MPIJob) {
			if flags&fuzzElastic != 0 {
				j.Spec.ElasticPolicy = &v2beta1.ElasticPolicy{MinReplicas: ptr(int32(minReplicas%4) + 1), MaxReplicas: ptr[int32](6)}
			}
			j.Spec.RunLauncherAsWorker = ptr(flags&fuzzLauncherAsWorker != 0)
			if flags&fuzzWaitForWorkers != 0 {
				waitForWorkers(j)
			}
			if flags&fuzzCleanAll != 0 {
				j.Spec.RunPolicy.CleanPodPolicy = ptr(v2beta1.CleanPodPolicyAll)
			}
			j.Spec.RunPolicy.Suspend = ptr(flags&fuzzSuspended != 0)
			if flags&fuzzNoLauncherContainer != 0 {
				j.Spec.MPIReplicaSpecs[v2beta1.MPIReplicaTypeLauncher].Template.Spec.Containers = nil
			}
		})
		fx := newFixture(t).start(job)
		allPhases := []corev1.PodPhase{corev1.PodPending, corev1.PodRunning, corev1.PodSucceeded, corev1.PodFailed}
		for step := range 5 {
			if _, err := fx.syncErr(); err != nil && !reconcile.IsBlocked(err) {
				t.Fatalf("step %d: %v", step, err)
			}
			checkSyncInvariants(t, fx, flags&fuzzSuspended != 0)
			fx.refresh()
			if step == 0 && flags&fuzzResizeTo != 0 {
				fx.updateJob(setWorkers(int32(resize % 7)))
			}
			for i, name := range fx.podNames() {
				if strings.HasPrefix(name, "job-worker-") {
					fx.setPhase(allPhases[(phases>>(2*(i%8)))&3], name)
				}
			}
			fx.publish("job", runningWorkers(fx)...)
			fx.refresh()
		}
	})
}

// checkSyncInvariants checks the writes of the last sync.
func checkSyncInvariants(t *testing.T, fx *fixture, suspended bool) {
	t.Helper()
	discover := ""
	if cm, err := fx.kube.CoreV1().ConfigMaps("ns").Get(fx.ctx, "job-config", metaGet); err == nil {
		discover = cm.Data[discoverHostsKey]
	}
	for _, w := range fx.writes() {
		if w.Resource != "pods" {
			continue
		}
		if suspended && w.Verb == "create" {
			t.Errorf("suspended job: %v", w)
		}
		if w.Verb == "delete" && strings.Contains(discover, "echo "+w.Name+".") {
			t.Errorf("%v while discover_hosts.sh lists it:\n%s", w, discover)
		}
	}
}

// runningWorkers are the names of the worker pods that run.
func runningWorkers(fx *fixture) []string {
	var out []string
	for _, name := range fx.podNames() {
		if p := fx.pod(name); strings.HasPrefix(name, "job-worker-") && p.Status.Phase == corev1.PodRunning {
			out = append(out, name)
		}
	}
	return out
}
