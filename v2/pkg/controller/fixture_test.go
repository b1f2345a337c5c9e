package controller

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	k8sfake "k8s.io/client-go/kubernetes/fake"
	kubescheme "k8s.io/client-go/kubernetes/scheme"
	metadatafake "k8s.io/client-go/metadata/fake"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2/ktesting"
	clocktesting "k8s.io/utils/clock/testing"
	schedv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"
	schedclient "sigs.k8s.io/scheduler-plugins/pkg/generated/clientset/versioned"
	schedtyped "sigs.k8s.io/scheduler-plugins/pkg/generated/clientset/versioned/typed/scheduling/v1alpha1"
	volcanov1beta1 "volcano.sh/apis/pkg/apis/scheduling/v1beta1"
	volcanoclient "volcano.sh/apis/pkg/client/clientset/versioned"
	volcanotyped "volcano.sh/apis/pkg/client/clientset/versioned/typed/scheduling/v1beta1"

	"github.com/kubeflow/mpi-operator/pkg/engine"
	"github.com/kubeflow/mpi-operator/pkg/engine/enginetest"
	"github.com/kubeflow/mpi-operator/pkg/podcache"
	"github.com/kubeflow/mpi-operator/v2/pkg/apis/kubeflow/v2beta1"
	mpifake "github.com/kubeflow/mpi-operator/v2/pkg/client/clientset/versioned/fake"
)

// asServed compares a built object with one the fake clientset served,
// which carries its kind and field managers.
var asServed = cmp.Options{
	cmpopts.IgnoreTypes(metav1.TypeMeta{}),
	cmpopts.IgnoreFields(metav1.ObjectMeta{}, "ManagedFields"),
}

// Options of the fixture's own requests.
var (
	metaGet    = metav1.GetOptions{}
	metaUpdate = metav1.UpdateOptions{}
	metaDelete = metav1.DeleteOptions{}
)

// testNow is the time of every sync test, until a test moves the clock.
var testNow = time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)

const testKey = "ns/job"

// fixture runs the sync handler on fake clientsets. The informers never
// list or watch: refresh fills their caches from what the clientsets hold,
// and tells the controller of pod changes as the informers' events would,
// so that a test can play a cluster through several syncs.
type fixture struct {
	t   *testing.T
	ctx context.Context
	cfg Config

	kube     *k8sfake.Clientset
	mpi      *mpifake.Clientset
	groups   *fakeGroups
	inf      *Informers
	c        *MPIJobController
	recorder *record.FakeRecorder
	clock    *clocktesting.FakeClock

	// version numbers the objects' resourceVersions, which the fake
	// clientsets leave alone.
	version int
	cached  map[types.UID]*corev1.Pod
	// holdStatus keeps the controller's hold of status changes that may
	// wait (engine.StatusHold); otherwise each sync finds them due, so
	// that a test sees every status write at the sync that makes it.
	holdStatus bool
}

func newFixture(t *testing.T) *fixture {
	_, ctx := ktesting.NewTestContext(t)
	// The fake clock stands still between a test's syncs: a job's pace
	// would hold every sync after its first write.
	cfg := Config{RefreshLauncher: true, WriteBytesPerSecond: 1 << 50}
	return &fixture{t: t, ctx: ctx, cfg: cfg, clock: clocktesting.NewFakeClock(testNow)}
}

// start makes the controller on objs: MPIJobs, kube objects and PodGroups.
func (f *fixture) start(objs ...runtime.Object) *fixture {
	f.t.Helper()
	var kubeObjs, mpiObjs []runtime.Object
	f.groups = &fakeGroups{volcano: map[string]*volcanov1beta1.PodGroup{}, sched: map[string]*schedv1alpha1.PodGroup{}}
	for _, o := range objs {
		switch o := o.(type) {
		case *v2beta1.MPIJob:
			mpiObjs = append(mpiObjs, o)
		case *volcanov1beta1.PodGroup:
			f.groups.volcano[o.Name] = o
		case *schedv1alpha1.PodGroup:
			f.groups.sched[o.Name] = o
		default:
			kubeObjs = append(kubeObjs, o)
		}
	}
	f.kube = k8sfake.NewClientset(kubeObjs...)
	f.mpi = mpifake.NewSimpleClientset(mpiObjs...)
	f.recorder = record.NewFakeRecorder(1000)
	meta := metadatafake.NewSimpleMetadataClient(metadatafake.NewTestScheme())
	volcano := newFakeVolcano(f.groups)
	sched := newFakeSched(f.groups)
	f.inf = NewInformers(f.kube, meta, f.mpi, volcano, sched, f.cfg)
	f.c = newController(f.ctx, f.kube, f.mpi, volcano, sched, f.inf, f.cfg, f.recorder, f.clock)
	f.t.Cleanup(f.c.Queue.ShutDown) // the queue runs goroutines
	f.cached = map[types.UID]*corev1.Pod{}
	f.refresh()
	return f
}

// refresh shows the caches what the clientsets hold, gives new objects a
// UID and every MPIJob a new resourceVersion, as the API server would, and
// forgets the requests so far.
func (f *fixture) refresh() {
	f.t.Helper()
	f.version++
	jobs, err := f.mpi.KubeflowV2beta1().MPIJobs("").List(f.ctx, metav1.ListOptions{})
	must(f.t, err)
	var jobObjs []any
	for i := range jobs.Items {
		j := &jobs.Items[i]
		j.ResourceVersion = strconv.Itoa(f.version)
		_, err := f.mpi.KubeflowV2beta1().MPIJobs(j.Namespace).Update(f.ctx, j, metav1.UpdateOptions{})
		must(f.t, err)
		jobObjs = append(jobObjs, j)
	}
	replace(f.t, f.inf.jobs.Kubeflow().V2beta1().MPIJobs().Informer(), jobObjs)
	f.refreshKube()
	if f.inf.volcano != nil {
		replace(f.t, f.inf.volcano.Scheduling().V1beta1().PodGroups().Informer(), values(f.groups.volcano))
	}
	if f.inf.schedPlugins != nil {
		replace(f.t, f.inf.schedPlugins.Scheduling().V1alpha1().PodGroups().Informer(), values(f.groups.sched))
	}
	f.kube.ClearActions()
	f.mpi.ClearActions()
	f.groups.writes = nil
}

// refreshKube fills the caches of kube objects, with UIDs, and delivers
// the pod events.
func (f *fixture) refreshKube() {
	f.t.Helper()
	lab := f.inf.labelled
	for gv, informer := range map[schema.GroupVersionKind]cache.SharedIndexInformer{
		corev1.SchemeGroupVersion.WithKind("Service"):            lab.Core().V1().Services().Informer(),
		corev1.SchemeGroupVersion.WithKind("ConfigMap"):          lab.Core().V1().ConfigMaps().Informer(),
		corev1.SchemeGroupVersion.WithKind("Secret"):             lab.Core().V1().Secrets().Informer(),
		batchv1.SchemeGroupVersion.WithKind("Job"):               lab.Batch().V1().Jobs().Informer(),
		discoveryv1.SchemeGroupVersion.WithKind("EndpointSlice"): lab.Discovery().V1().EndpointSlices().Informer(),
	} {
		gvr, _ := meta.UnsafeGuessKindToResource(gv)
		list, err := f.kube.Tracker().List(gvr, gv, "")
		must(f.t, err)
		items, err := meta.ExtractList(list)
		must(f.t, err)
		var objs []any
		for _, o := range items {
			f.giveUID(o)
			if m, _ := meta.Accessor(o); m.GetLabels()[labelApp] != "" {
				// The informer selects by the label, and trims.
				trimmed, err := trimChild(o)
				must(f.t, err)
				objs = append(objs, trimmed)
			}
		}
		replace(f.t, informer, objs)
	}
	f.refreshPods()
}

// refreshPods fills the pod cache and delivers the events a pod informer
// would.
func (f *fixture) refreshPods() {
	pods, err := f.kube.CoreV1().Pods("").List(f.ctx, metav1.ListOptions{})
	must(f.t, err)
	var objs, others []any
	now := map[types.UID]*corev1.Pod{}
	for i := range pods.Items {
		p := &pods.Items[i]
		f.giveUID(p)
		if p.Labels[labelOperatorName] != operatorName {
			others = append(others, &metav1.PartialObjectMetadata{ObjectMeta: p.ObjectMeta})
			continue
		}
		// As the informer's transform leaves it, so that every test shows
		// that the cache keeps what the controller reads.
		cached, err := newPodTrimmer(nil).Transform(p.DeepCopy())
		must(f.t, err)
		objs = append(objs, cached)
		now[p.UID] = podcache.AsPod(cached)
	}
	replace(f.t, f.inf.pods.Core().V1().Pods().Informer(), objs)
	replace(f.t, f.inf.otherPodsInformer().Informer(), others)
	for uid, p := range f.cached {
		if now[uid] == nil {
			f.c.podEvents.DeleteFunc(p)
		}
	}
	for _, p := range now {
		f.c.podEvents.AddFunc(p)
	}
	f.cached = now
}

// giveUID gives an object the clientsets created a UID, as the API server
// would, and writes it back.
func (f *fixture) giveUID(obj runtime.Object) {
	m, err := meta.Accessor(obj)
	must(f.t, err)
	if m.GetUID() != "" {
		return
	}
	m.SetUID(types.UID(m.GetName() + "-uid"))
	gvks, _, err := kubescheme.Scheme.ObjectKinds(obj)
	must(f.t, err)
	gvr, _ := meta.UnsafeGuessKindToResource(gvks[0])
	must(f.t, f.kube.Tracker().Update(gvr, obj, m.GetNamespace()))
}

func values[T any](m map[string]T) []any {
	var out []any
	for _, v := range m {
		out = append(out, v)
	}
	return out
}

func replace(t *testing.T, informer cache.SharedIndexInformer, objs []any) {
	t.Helper()
	must(t, informer.GetIndexer().Replace(objs, ""))
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// sync runs one sync of the test job and fails the test on an error.
func (f *fixture) sync() time.Duration {
	f.t.Helper()
	d, err := f.syncErr()
	if err != nil {
		f.t.Fatalf("sync: %v", err)
	}
	return d
}

func (f *fixture) syncErr() (time.Duration, error) {
	f.t.Helper()
	if !f.holdStatus {
		f.c.StatusHold.Wait(testKey, f.clock.Now().Add(-engine.StatusBatchPeriod), true)
	}
	return f.c.syncHandler(f.ctx, testKey)
}

// step refreshes the caches, then syncs.
func (f *fixture) step() time.Duration {
	f.t.Helper()
	f.refresh()
	return f.sync()
}

// action is what a test checks of a write request.
type action = enginetest.Action

var (
	create, update, del = enginetest.Create, enginetest.Update, enginetest.Delete
	patchPod            = enginetest.PatchPod
)

// statusUpdate is the status write of the test job, which is always "job".
func statusUpdate() action { return enginetest.StatusUpdate("job") }

// writes are the mutating requests the kube and MPIJob clientsets
// received since the last refresh, in order; f.groups.writes has the
// PodGroups'.
func (f *fixture) writes() []action { return enginetest.Writes(f.kube.Actions(), f.mpi.Actions()) }

// expectWrites checks the writes since the last refresh. Runs of writes
// that the controller sends in parallel (one verb on one resource) are
// compared in name order.
func (f *fixture) expectWrites(want ...action) {
	f.t.Helper()
	if diff := cmp.Diff(inRuns(want), inRuns(f.writes())); diff != "" {
		f.t.Errorf("writes (-want +got):\n%s", diff)
	}
}

// inRuns sorts each run of consecutive writes that the controller sends
// in parallel: one verb on one resource, or the Service, the Secret and the
// PodGroup.
func inRuns(actions []action) []action {
	return enginetest.InRuns(actions, func(a action) string {
		switch r := a.Verb + " " + a.Resource; r {
		case "create services", "create secrets", "update services":
			return "children"
		default:
			return r + "/" + a.Sub
		}
	})
}

// status is the test job's status as the clientset holds it.
func (f *fixture) status() v2beta1.JobStatus {
	f.t.Helper()
	j, err := f.mpi.KubeflowV2beta1().MPIJobs("ns").Get(f.ctx, "job", metav1.GetOptions{})
	must(f.t, err)
	return j.Status
}

// condition is the test job's condition of type t, "" when it has none,
// else "<status> <reason>".
func (f *fixture) condition(t v2beta1.JobConditionType) string {
	st := f.status()
	if c := conditions.Find(st.Conditions, t); c != nil {
		return string(c.Status) + " " + c.Reason
	}
	return ""
}

// events are the events recorded since the last call, "Type Reason Message".
func (f *fixture) events() []string { return enginetest.Events(f.recorder) }

// expectEvent checks that one of the events since the last call starts
// with prefix.
func (f *fixture) expectEvent(prefix string) {
	f.t.Helper()
	if events := f.events(); !slices.ContainsFunc(events, func(e string) bool { return strings.HasPrefix(e, prefix) }) {
		f.t.Errorf("events %q lack %q", events, prefix)
	}
}

// expectNoEvents checks that no event was recorded since the last call.
func (f *fixture) expectNoEvents() {
	f.t.Helper()
	if events := f.events(); len(events) != 0 {
		f.t.Errorf("events %q", events)
	}
}

// expectCondition checks the test job's condition of type typ, as
// condition words it.
func (f *fixture) expectCondition(typ v2beta1.JobConditionType, want string) {
	f.t.Helper()
	if got := f.condition(typ); got != want {
		f.t.Errorf("%s = %q, want %q", typ, got, want)
	}
}

// pod returns the pod of that name from the clientset; nil if none.
func (f *fixture) pod(name string) *corev1.Pod {
	p, err := f.kube.CoreV1().Pods("ns").Get(f.ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	must(f.t, err)
	return p
}

// podNames are the names of the pods the clientset holds, sorted.
func (f *fixture) podNames() []string {
	pods, err := f.kube.CoreV1().Pods("ns").List(f.ctx, metav1.ListOptions{})
	must(f.t, err)
	var out []string
	for _, p := range pods.Items {
		out = append(out, p.Name)
	}
	slices.Sort(out)
	return out
}

// expectPods checks the names of the pods the clientset holds.
func (f *fixture) expectPods(want ...string) {
	f.t.Helper()
	if diff := cmp.Diff(want, f.podNames(), cmpopts.EquateEmpty()); diff != "" {
		f.t.Errorf("pods (-want +got):\n%s", diff)
	}
}

// expectGroupWrites checks the PodGroup writes since the last refresh.
func (f *fixture) expectGroupWrites(want ...action) {
	f.t.Helper()
	if diff := cmp.Diff(want, f.groups.writes, cmpopts.EquateEmpty()); diff != "" {
		f.t.Errorf("PodGroup writes (-want +got):\n%s", diff)
	}
}

// setPhase plays the kubelet: the pods run (Ready too), or end.
func (f *fixture) setPhase(phase corev1.PodPhase, names ...string) {
	f.t.Helper()
	for _, n := range names {
		p := f.pod(n)
		if p == nil {
			f.t.Fatalf("no pod %s", n)
		}
		p.Status.Phase = phase
		p.Status.Conditions = nil
		if phase == corev1.PodRunning {
			p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
		}
		_, err := f.kube.CoreV1().Pods("ns").UpdateStatus(f.ctx, p, metav1.UpdateOptions{})
		must(f.t, err)
	}
}

// files are the test job's files as the clientset holds them.
func (f *fixture) files() (hostfile, discover string) {
	f.t.Helper()
	cm, err := f.kube.CoreV1().ConfigMaps("ns").Get(f.ctx, "job-config", metav1.GetOptions{})
	must(f.t, err)
	return cm.Data[hostfileKey], cm.Data[discoverHostsKey]
}

// expectListed checks that discover_hosts.sh lists the given workers.
func (f *fixture) expectListed(workers ...string) {
	f.t.Helper()
	if _, discover := f.files(); discover != script(workers...) {
		f.t.Errorf("discover_hosts.sh:\n%s\nwant:\n%s", discover, script(workers...))
	}
}

// script is discover_hosts.sh listing the given workers of the test job.
func script(workers ...string) string {
	var b strings.Builder
	b.WriteString("#!/bin/sh\n")
	for _, w := range workers {
		fmt.Fprintf(&b, "echo %s.job.ns.svc\n", w)
	}
	return b.String()
}

// publish plays the EndpointSlice controller for the Service svc: its
// slice names the given pods, each by its spec.hostname (else its name),
// which then resolve.
func (f *fixture) publish(svc string, names ...string) {
	f.t.Helper()
	slice := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{
			Name: svc + "-slice", Namespace: "ns",
			Labels: map[string]string{discoveryv1.LabelServiceName: svc, labelApp: "job"},
		},
		AddressType: discoveryv1.AddressTypeIPv4,
	}
	for i, n := range names {
		p := f.pod(n)
		host := p.Spec.Hostname
		if host == "" {
			host = n
		}
		slice.Endpoints = append(slice.Endpoints, discoveryv1.Endpoint{
			Addresses: []string{fmt.Sprintf("10.0.0.%d", i+1)},
			Hostname:  ptr(host),
			TargetRef: &corev1.ObjectReference{Kind: "Pod", Namespace: "ns", Name: n, UID: p.UID},
		})
	}
	slices := f.kube.DiscoveryV1().EndpointSlices("ns")
	if _, err := slices.Update(f.ctx, slice, metav1.UpdateOptions{}); apierrors.IsNotFound(err) {
		_, err = slices.Create(f.ctx, slice, metav1.CreateOptions{})
		must(f.t, err)
	} else {
		must(f.t, err)
	}
}

// launcherJob is the test job's launcher Job from the clientset.
func (f *fixture) launcherJob() *batchv1.Job {
	f.t.Helper()
	lj, err := f.kube.BatchV1().Jobs("ns").Get(f.ctx, "job-launcher", metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	must(f.t, err)
	return lj
}

// setLauncherStatus plays the Job controller.
func (f *fixture) setLauncherStatus(status batchv1.JobStatus) {
	f.t.Helper()
	lj := f.launcherJob()
	lj.Status = status
	_, err := f.kube.BatchV1().Jobs("ns").UpdateStatus(f.ctx, lj, metav1.UpdateOptions{})
	must(f.t, err)
}

// runLauncherPod plays the Job controller and the kubelet: a pod of the
// launcher Job runs.
func (f *fixture) runLauncherPod() {
	f.t.Helper()
	lj := f.launcherJob()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: "job-launcher-abcde", Namespace: "ns", UID: "job-launcher-abcde-uid",
			Labels:          lj.Spec.Template.Labels,
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(lj, batchv1.SchemeGroupVersion.WithKind("Job"))},
		},
		Spec:   lj.Spec.Template.Spec,
		Status: corev1.PodStatus{Phase: corev1.PodRunning},
	}
	_, err := f.kube.CoreV1().Pods("ns").Create(f.ctx, pod, metav1.CreateOptions{})
	must(f.t, err)
	f.setLauncherStatus(batchv1.JobStatus{Active: 1})
}

// updateJob changes the test job as a user or Kueue would.
func (f *fixture) updateJob(change func(*v2beta1.MPIJob)) {
	f.t.Helper()
	j, err := f.mpi.KubeflowV2beta1().MPIJobs("ns").Get(f.ctx, "job", metav1.GetOptions{})
	must(f.t, err)
	change(j)
	_, err = f.mpi.KubeflowV2beta1().MPIJobs("ns").Update(f.ctx, j, metav1.UpdateOptions{})
	must(f.t, err)
}

// storedJob is a job as a client creates it: without defaults, as the
// builders' tests' newTestJob makes it but for them. Nil modifiers are
// skipped.
func storedJob(workers int32, modify ...func(*v2beta1.MPIJob)) *v2beta1.MPIJob {
	job := newTestJob(workers)
	job.Spec = v2beta1.MPIJobSpec{MPIReplicaSpecs: job.Spec.MPIReplicaSpecs}
	job.Spec.MPIReplicaSpecs[v2beta1.MPIReplicaTypeLauncher].Replicas = nil
	job.Spec.MPIReplicaSpecs[v2beta1.MPIReplicaTypeLauncher].RestartPolicy = ""
	job.Spec.MPIReplicaSpecs[v2beta1.MPIReplicaTypeWorker].RestartPolicy = ""
	for _, m := range modify {
		if m != nil {
			m(job)
		}
	}
	return job
}

func withElastic(minReplicas, maxReplicas int32) func(*v2beta1.MPIJob) {
	return func(j *v2beta1.MPIJob) {
		j.Spec.ElasticPolicy = &v2beta1.ElasticPolicy{MinReplicas: ptr(minReplicas), MaxReplicas: ptr(maxReplicas)}
	}
}

// fakeGroups stands in for the PodGroups of both gang schedulers, whose
// own fake clientsets do not build against this client-go.
type fakeGroups struct {
	volcano map[string]*volcanov1beta1.PodGroup
	sched   map[string]*schedv1alpha1.PodGroup
	writes  []action
}

// groupClient carries out the writes of one gang scheduler's PodGroups on
// its map of fakeGroups.
type groupClient[T metav1.Object] struct {
	f     *fakeGroups
	store map[string]T
}

func (g groupClient[T]) write(verb string, obj T) (T, error) {
	g.f.writes = append(g.f.writes, action{Verb: verb, Resource: "podgroups", Name: obj.GetName()})
	if _, exists := g.store[obj.GetName()]; exists == (verb == "create") {
		var zero T
		gr := schema.GroupResource{Resource: "podgroups"}
		if exists {
			return zero, apierrors.NewAlreadyExists(gr, obj.GetName())
		}
		return zero, apierrors.NewNotFound(gr, obj.GetName())
	}
	g.store[obj.GetName()] = obj
	return obj, nil
}

func (g groupClient[T]) Create(_ context.Context, obj T, _ metav1.CreateOptions) (T, error) {
	return g.write("create", obj)
}

func (g groupClient[T]) Update(_ context.Context, obj T, _ metav1.UpdateOptions) (T, error) {
	return g.write("update", obj)
}

func (g groupClient[T]) Get(_ context.Context, name string, _ metav1.GetOptions) (T, error) {
	if obj, ok := g.store[name]; ok {
		return obj, nil
	}
	var zero T
	return zero, apierrors.NewNotFound(schema.GroupResource{Resource: "podgroups"}, name)
}

func (g groupClient[T]) Delete(_ context.Context, name string, _ metav1.DeleteOptions) error {
	g.f.writes = append(g.f.writes, del("podgroups", name))
	delete(g.store, name)
	return nil
}

// The clients of the two gang schedulers: a groupClient for what the
// controller calls, a nil interface one level down for the rest.
type (
	volcanoRest struct{ volcanotyped.PodGroupInterface }
	fakeVolcano struct {
		volcanoclient.Interface
		volcanotyped.SchedulingV1beta1Interface
		groupClient[*volcanov1beta1.PodGroup]
		volcanoRest
	}
	schedRest struct{ schedtyped.PodGroupInterface }
	fakeSched struct {
		schedclient.Interface
		schedtyped.SchedulingV1alpha1Interface
		groupClient[*schedv1alpha1.PodGroup]
		schedRest
	}
)

func newFakeVolcano(f *fakeGroups) *fakeVolcano {
	return &fakeVolcano{groupClient: groupClient[*volcanov1beta1.PodGroup]{f: f, store: f.volcano}}
}

func (v *fakeVolcano) SchedulingV1beta1() volcanotyped.SchedulingV1beta1Interface { return v }
func (v *fakeVolcano) PodGroups(string) volcanotyped.PodGroupInterface            { return v }

func newFakeSched(f *fakeGroups) *fakeSched {
	return &fakeSched{groupClient: groupClient[*schedv1alpha1.PodGroup]{f: f, store: f.sched}}
}

func (s *fakeSched) SchedulingV1alpha1() schedtyped.SchedulingV1alpha1Interface { return s }
func (s *fakeSched) PodGroups(string) schedtyped.PodGroupInterface              { return s }
