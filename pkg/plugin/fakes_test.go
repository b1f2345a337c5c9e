package plugin

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	fakediscovery "k8s.io/client-go/discovery/fake"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	kubefake "k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
)

// fakeCluster is what the commands' tests run on: a clientset whose
// discovery serves the MPIJobs of the versions given, and a dynamic client
// that holds the jobs.
type fakeCluster struct {
	api  API // the version the jobs were made in
	kube *kubefake.Clientset
	dyn  *dynamicfake.FakeDynamicClient
}

// newFakeCluster serves the MPIJobs of served (api alone when none are
// given) and holds the objects given: jobs as their typed or unstructured
// objects, the rest in the clientset.
func newFakeCluster(t *testing.T, api API, objects []runtime.Object, served ...API) *fakeCluster {
	t.Helper()
	if len(served) == 0 {
		served = []API{api}
	}
	listKinds := map[schema.GroupVersionResource]string{}
	for _, a := range apis {
		listKinds[a.GVR()] = "MPIJobList"
	}
	var kubeObjects, jobs []runtime.Object
	for _, o := range objects {
		switch o.(type) {
		case *unstructured.Unstructured:
			jobs = append(jobs, o)
		default:
			if o.GetObjectKind().GroupVersionKind().Group == APIv1.GroupVersion().Group {
				jobs = append(jobs, toUnstructured(t, o))
			} else {
				kubeObjects = append(kubeObjects, o)
			}
		}
	}
	f := &fakeCluster{
		api:  api,
		kube: kubefake.NewClientset(kubeObjects...),
		dyn:  dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), listKinds, jobs...),
	}
	disco := f.kube.Discovery().(*fakediscovery.FakeDiscovery)
	for _, a := range served {
		disco.Resources = append(disco.Resources, &metav1.APIResourceList{
			GroupVersion: a.GroupVersion().String(),
			APIResources: []metav1.APIResource{{Name: "mpijobs", Kind: "MPIJob", Namespaced: true}},
		})
	}
	return f
}

func toUnstructured(t *testing.T, obj any) *unstructured.Unstructured {
	t.Helper()
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		t.Fatal(err)
	}
	if ts, _, _ := unstructured.NestedFieldNoCopy(m, "metadata", "creationTimestamp"); ts == nil {
		unstructured.RemoveNestedField(m, "metadata", "creationTimestamp")
	}
	return &unstructured.Unstructured{Object: m}
}

// object is the job of that name as the fake holds it.
func (f *fakeCluster) object(t *testing.T, name string) *unstructured.Unstructured {
	t.Helper()
	obj, err := f.dyn.Tracker().Get(f.api.GVR(), "ml", name)
	if err != nil {
		t.Fatal(err)
	}
	return obj.(*unstructured.Unstructured)
}

// setWorkers sets the job's Worker.replicas as an edit would.
func (f *fakeCluster) setWorkers(t *testing.T, name string, n int32) {
	t.Helper()
	job := f.object(t, name).DeepCopy()
	if err := unstructured.SetNestedField(job.Object, int64(n), "spec", "mpiReplicaSpecs", "Worker", "replicas"); err != nil {
		t.Fatal(err)
	}
	if err := f.dyn.Tracker().Update(f.api.GVR(), job, "ml"); err != nil {
		t.Fatal(err)
	}
}

// actions are the requests both clients received.
func (f *fakeCluster) actions() []clienttesting.Action {
	return append(f.kube.Actions(), f.dyn.Actions()...)
}

// env runs commands on the fake in namespace ml, at now.
func (f *fakeCluster) env() *Env {
	return &Env{
		NewClients: func() (*Clients, error) { return &Clients{Kube: f.kube, Dynamic: f.dyn, Namespace: "ml"}, nil },
		Now:        func() time.Time { return now },
		Poll:       time.Millisecond,
	}
}

// run runs the plugin on the fake; it returns stdout and stderr together.
func run(t *testing.T, f *fakeCluster, args ...string) (string, error) {
	t.Helper()
	var out, errOut bytes.Buffer
	env := f.env()
	env.Out, env.ErrOut, env.In = &out, &errOut, strings.NewReader("")
	cmd := newRootCommand(env)
	cmd.SetArgs(args)
	err := cmd.ExecuteContext(context.Background())
	return out.String() + errOut.String(), err
}

// scaleSubresource serves the jobs' scale subresource from the fake's
// tracker, and calls onScale with each new replica count, as the operator
// would see it.
func scaleSubresource(t *testing.T, f *fakeCluster, onScale func(replicas int32)) *[]int32 {
	var updates []int32
	f.dyn.PrependReactor("get", "mpijobs", func(a clienttesting.Action) (bool, runtime.Object, error) {
		get := a.(clienttesting.GetAction)
		if get.GetSubresource() != "scale" {
			return false, nil, nil
		}
		obj, err := f.dyn.Tracker().Get(f.api.GVR(), get.GetNamespace(), get.GetName())
		if err != nil {
			return true, nil, err
		}
		job, err := JobFrom(obj.(*unstructured.Unstructured))
		if err != nil {
			return true, nil, err
		}
		return true, scaleObject(job.Name, job.Namespace, workerReplicas(job)), nil
	})
	f.dyn.PrependReactor("update", "mpijobs", func(a clienttesting.Action) (bool, runtime.Object, error) {
		update := a.(clienttesting.UpdateAction)
		if update.GetSubresource() != "scale" {
			return false, nil, nil
		}
		sc := update.GetObject().(*unstructured.Unstructured)
		replicas, _, err := unstructured.NestedInt64(sc.Object, "spec", "replicas")
		if err != nil {
			return true, nil, err
		}
		f.setWorkers(t, sc.GetName(), int32(replicas))
		updates = append(updates, int32(replicas))
		onScale(int32(replicas))
		return true, sc, nil
	})
	return &updates
}

// scaleObject is a job's Scale as the dynamic client reads it.
func scaleObject(name, ns string, replicas int32) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "autoscaling/v1",
		"kind":       "Scale",
		"metadata":   map[string]any{"name": name, "namespace": ns},
		"spec":       map[string]any{"replicas": int64(replicas)},
	}}
}
