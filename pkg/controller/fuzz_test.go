package controller

import (
	"encoding/json"
	"errors"
	"testing"

	common "github.com/kubeflow/common/pkg/apis/common/v1"

	kubeflow "github.com/kubeflow/mpi-operator/pkg/apis/kubeflow/v1"
	"github.com/kubeflow/mpi-operator/pkg/reconcile"
)

// The fuzz tests run their seeds with every go test; `make fuzz` (part of
// make test) runs each one for a bounded number of inputs. The planner's,
// FuzzPlanWorkers, is package elastic's.

// FuzzSync runs whole syncs on jobs decoded from the fuzzer's bytes, as any
// client could send them past an older CRD: a sync never panics, and a job
// it cannot run ends Failed or Blocked with its field named, never silent.
func FuzzSync(f *testing.F) {
	seed := func(job *kubeflow.MPIJob) {
		data, err := json.Marshal(job.Spec)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	seed(newTestJob("pi", 2))
	elastic := newTestJob("pi", 3)
	elastic.Spec.ElasticPolicy = &kubeflow.ElasticPolicy{MinReplicas: ptr[int32](1), MaxReplicas: ptr[int32](4)}
	seed(elastic)
	bad := newTestJob("pi", -1)
	bad.Spec.MainContainer = "Nope"
	bad.Spec.MPIReplicaSpecs["Chief"] = nil
	seed(bad)
	f.Add([]byte(`{"mpiReplicaSpecs":{"Launcher":null,"Worker":{"replicas":2000000000}}}`))
	// Past the bound on workers: refused before any planning allocates.
	f.Add([]byte(`{"mpiReplicaSpecs":{"Launcher":{"template":{"spec":{"containers":[{"name":"l"}]}}},"Worker":{"replicas":2000000000,"template":{"spec":{"containers":[{"name":"w"}]}}}},"elasticPolicy":{"maxReplicas":2000000000}}`))
	f.Add([]byte(`{"mpiReplicaSpecs":{},"runPolicy":{"backoffLimit":-3,"cleanPodPolicy":"Sometimes"}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		job := newTestJob("pi", 0)
		job.Spec = kubeflow.MPIJobSpec{}
		if err := json.Unmarshal(data, &job.Spec); err != nil {
			return
		}
		fx := newFixture(t)
		fx.jobs = append(fx.jobs, job)
		_, err := fx.syncErr(job)
		var spec *reconcile.SpecError
		if errors.As(err, &spec) {
			t.Fatalf("a job that never started was held, not failed: %v", err)
		}
		if err != nil && !reconcile.IsBlocked(err) {
			t.Fatalf("sync: %v", err)
		}
		st := fx.writtenStatus()
		if errs := validateJob(defaulted(job)); len(errs) > 0 {
			c := conditions.Find(st.Conditions, common.JobFailed)
			if c == nil || c.Reason != reasonInvalidSpec {
				t.Fatalf("invalid job (%v) not failed: %+v", errs.ToAggregate(), st.Conditions)
			}
		}
	})
}
