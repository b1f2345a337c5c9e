package controller

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	common "github.com/kubeflow/common/pkg/apis/common/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	k8sfake "k8s.io/client-go/kubernetes/fake"
	metadatafake "k8s.io/client-go/metadata/fake"
	"k8s.io/client-go/rest"
	core "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2/ktesting"
	clocktesting "k8s.io/utils/clock/testing"
	volcanov1beta1 "volcano.sh/apis/pkg/apis/scheduling/v1beta1"
	volcanoclient "volcano.sh/apis/pkg/client/clientset/versioned"
	volcanotyped "volcano.sh/apis/pkg/client/clientset/versioned/typed/scheduling/v1beta1"

	kubeflow "github.com/kubeflow/mpi-operator/pkg/apis/kubeflow/v1"
	mpifake "github.com/kubeflow/mpi-operator/pkg/client/clientset/versioned/fake"
	"github.com/kubeflow/mpi-operator/pkg/elastic"
	"github.com/kubeflow/mpi-operator/pkg/engine"
	"github.com/kubeflow/mpi-operator/pkg/engine/enginetest"
)

// testNow is the fixed time of every sync test.
var testNow = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

const testDeliveryImage = "example.com/kubectl-delivery:test"

// fixture runs the sync handler against fake clientsets whose informers are
// filled by hand, as in Kubernetes' sample-controller.
type fixture struct {
	t *testing.T

	jobs     []*kubeflow.MPIJob
	pods     []*corev1.Pod
	cms      []*corev1.ConfigMap
	sas      []*corev1.ServiceAccount
	roles    []*rbacv1.Role
	bindings []*rbacv1.RoleBinding
	groups   []*volcanov1beta1.PodGroup

	cfg Config

	kubeClient *k8sfake.Clientset
	mpiClient  *mpifake.Clientset
	podGroups  *fakePodGroups
	inf        *Informers
	recorder   *record.FakeRecorder
	clock      *clocktesting.FakeClock
}

// unpaced is a pace (Config.WriteBytesPerSecond) at which no write waits.
const unpaced = 1 << 50

func newFixture(t *testing.T) *fixture {
	return &fixture{
		t: t,
		// The fake clock stands still between a test's syncs: a job's
		// pace would hold every sync after its first write.
		cfg:   Config{KubectlDeliveryImage: testDeliveryImage, RefreshLauncher: true, WriteBytesPerSecond: unpaced},
		clock: clocktesting.NewFakeClock(testNow),
	}
}

func (f *fixture) newController(ctx context.Context) *MPIJobController {
	kubeObjs := slices.Concat(objects(f.pods), objects(f.cms), objects(f.sas), objects(f.roles), objects(f.bindings))
	f.kubeClient = k8sfake.NewClientset(kubeObjs...)
	f.mpiClient = mpifake.NewSimpleClientset(objects(f.jobs)...)
	f.recorder = record.NewFakeRecorder(100)
	f.podGroups = &fakePodGroups{}
	// volcano's own fake clientset does not build against this client-go;
	// the informers are filled by hand and never list, and PodGroup writes
	// go to fakePodGroups.
	volcano := volcanoclient.NewForConfigOrDie(&rest.Config{Host: "http://127.0.0.1:1"})

	// The metadata client is never listed either: its cache is filled by
	// hand like the others.
	meta := metadatafake.NewSimpleMetadataClient(metadatafake.NewTestScheme())
	inf := NewInformers(f.kubeClient, meta, f.mpiClient, volcano, f.cfg)
	f.inf = inf
	c := newController(ctx, f.kubeClient, f.mpiClient, volcano, inf, f.cfg, f.recorder, f.clock)
	if c.podGroups != nil {
		c.podGroups = func(string) volcanotyped.PodGroupInterface { return f.podGroups }
	}
	add := func(informer cache.SharedIndexInformer, obj any) {
		if err := informer.GetIndexer().Add(obj); err != nil {
			f.t.Fatal(err)
		}
	}
	for _, o := range f.jobs {
		add(inf.jobs.Kubeflow().V1().MPIJobs().Informer(), o)
	}
	for _, o := range f.pods {
		// Each pod goes where the informers' label selectors put it.
		if _, ok := o.Labels[labelMPIJobName]; ok {
			// As the informer's transform leaves it, so that every test
			// shows that the cache keeps what the controller reads.
			informer := inf.pods.Core().V1().Pods().Informer()
			cached, err := newPodTrimmer(informer.GetIndexer()).Transform(o.DeepCopy())
			if err != nil {
				f.t.Fatal(err)
			}
			add(informer, cached)
			continue
		}
		m := &metav1.PartialObjectMetadata{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"}, ObjectMeta: o.ObjectMeta}
		add(inf.otherPodsInformer().Informer(), m)
	}
	for _, o := range f.cms {
		add(inf.labelled.Core().V1().ConfigMaps().Informer(), o)
	}
	for _, o := range f.sas {
		add(inf.labelled.Core().V1().ServiceAccounts().Informer(), o)
	}
	// Roles and RoleBindings too go in as their transform leaves them.
	rbac := func(informer cache.SharedIndexInformer, obj runtime.Object) {
		cached, err := trimRBAC(obj.DeepCopyObject())
		if err != nil {
			f.t.Fatal(err)
		}
		add(informer, cached)
	}
	for _, o := range f.roles {
		rbac(inf.rbac.Rbac().V1().Roles().Informer(), o)
	}
	for _, o := range f.bindings {
		rbac(inf.rbac.Rbac().V1().RoleBindings().Informer(), o)
	}
	for _, o := range f.groups {
		add(inf.volcano.Scheduling().V1beta1().PodGroups().Informer(), o)
	}
	return c
}

func objects[T runtime.Object](objs []T) []runtime.Object {
	out := make([]runtime.Object, len(objs))
	for i, o := range objs {
		out[i] = o
	}
	return out
}

// sync runs one sync of job and returns the requeue delay.
func (f *fixture) sync(job *kubeflow.MPIJob) time.Duration {
	f.t.Helper()
	d, err := f.syncErr(job)
	if err != nil {
		f.t.Fatalf("sync: %v", err)
	}
	return d
}

func (f *fixture) syncErr(job *kubeflow.MPIJob) (time.Duration, error) {
	f.t.Helper()
	return f.syncPrepared(job, nil)
}

// syncCountsDue runs one sync of job on a controller for which a change of
// the job's replica counts alone has waited engine.StatusBatchPeriod
// already, so that it is written.
func (f *fixture) syncCountsDue(job *kubeflow.MPIJob) time.Duration {
	f.t.Helper()
	d, err := f.syncPrepared(job, func(c *MPIJobController) {
		c.StatusHold.Wait(jobKey(job), f.clock.Now().Add(-engine.StatusBatchPeriod), true)
	})
	if err != nil {
		f.t.Fatalf("sync: %v", err)
	}
	return d
}

// syncPrepared runs one sync of job; prepare, if given, sees the controller
// first.
func (f *fixture) syncPrepared(job *kubeflow.MPIJob, prepare func(*MPIJobController)) (time.Duration, error) {
	f.t.Helper()
	ctx, c := f.readyController(prepare)
	return c.syncHandler(ctx, jobKey(job))
}

// readyController returns a controller on the fixture's objects, after
// prepare (if given), with no API request recorded yet.
func (f *fixture) readyController(prepare func(*MPIJobController)) (context.Context, *MPIJobController) {
	f.t.Helper()
	_, ctx := ktesting.NewTestContext(f.t)
	c := f.newController(ctx)
	if prepare != nil {
		prepare(c)
	}
	f.kubeClient.ClearActions()
	f.mpiClient.ClearActions()
	return ctx, c
}

// action is what a test checks of a write request.
type action = enginetest.Action

var (
	create, update, del = enginetest.Create, enginetest.Update, enginetest.Delete
	patchPod            = enginetest.PatchPod
)

// statusUpdate is the status write of the test job, which is always "pi".
func statusUpdate() action { return enginetest.StatusUpdate("pi") }

// writes returns the mutating requests a client received, in order.
func writes(actions []core.Action) []action { return enginetest.Writes(actions) }

// inIssueOrder sorts each run of consecutive writes that the controller may
// send in parallel: writes of one verb to pods, or writes to the children
// that come before the workers (ConfigMap, ServiceAccount, Role,
// RoleBinding).
func inIssueOrder(actions []action) []action {
	return enginetest.InRuns(actions, func(a action) string {
		switch a.Resource {
		case "configmaps", "serviceaccounts", "roles", "rolebindings":
			return "children"
		}
		return a.Verb + " " + a.Resource + "/" + a.Sub
	})
}

func (f *fixture) expectKubeWrites(want ...action) {
	f.t.Helper()
	got := inIssueOrder(writes(f.kubeClient.Actions()))
	if diff := cmp.Diff(inIssueOrder(want), got, cmpopts.EquateEmpty()); diff != "" {
		f.t.Errorf("kube API writes (-want +got):\n%s", diff)
	}
}

func (f *fixture) expectMPIWrites(want ...action) {
	f.t.Helper()
	if diff := cmp.Diff(want, writes(f.mpiClient.Actions()), cmpopts.EquateEmpty()); diff != "" {
		f.t.Errorf("MPIJob API writes (-want +got):\n%s", diff)
	}
}

// createdObject returns the object of the create request for name.
func createdObject[T runtime.Object](f *fixture, resource, name string) T {
	f.t.Helper()
	var zero T
	for _, a := range f.kubeClient.Actions() {
		if c, ok := a.(core.CreateAction); ok && a.GetVerb() == "create" && a.GetResource().Resource == resource && nameOf(a) == name {
			return c.GetObject().(T)
		}
	}
	f.t.Fatalf("no create of %s %s", resource, name)
	return zero
}

// updatedObject returns the object of the last update of resource name.
func updatedObject[T runtime.Object](f *fixture, resource, name string) T {
	f.t.Helper()
	var found T
	ok := false
	for _, a := range f.kubeClient.Actions() {
		if u, isUpdate := a.(core.UpdateAction); isUpdate && a.GetResource().Resource == resource && nameOf(a) == name {
			found, ok = u.GetObject().(T), true
		}
	}
	if !ok {
		f.t.Fatalf("no update of %s %s", resource, name)
	}
	return found
}

// writtenStatus returns the status the sync wrote, failing if it wrote none.
func (f *fixture) writtenStatus() common.JobStatus {
	f.t.Helper()
	for _, a := range f.mpiClient.Actions() {
		if u, ok := a.(core.UpdateAction); ok && a.GetSubresource() == "status" {
			return u.GetObject().(*kubeflow.MPIJob).Status
		}
	}
	f.t.Fatal("no status update")
	return common.JobStatus{}
}

// events returns the recorded events, each "Type Reason Message".
func (f *fixture) events() []string { return enginetest.Events(f.recorder) }

// nameOf is the name of the object a write request is about.
func nameOf(a core.Action) string {
	w, _ := enginetest.Of(a)
	return w.Name
}

// newTestJob returns an MPIJob with a launcher and the given workers.
func newTestJob(name string, workers int32) *kubeflow.MPIJob {
	container := func(n string) corev1.PodTemplateSpec {
		return corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: n, Image: "mpi:test"}}}}
	}
	return &kubeflow.MPIJob{
		TypeMeta: metav1.TypeMeta{APIVersion: "kubeflow.org/v1", Kind: "MPIJob"},
		ObjectMeta: metav1.ObjectMeta{
			Name:      name,
			Namespace: "ns",
			UID:       types.UID(name + "-uid"),
		},
		Spec: kubeflow.MPIJobSpec{
			MPIReplicaSpecs: map[common.ReplicaType]*common.ReplicaSpec{
				kubeflow.MPIReplicaTypeLauncher: {Replicas: ptr[int32](1), Template: container("launcher")},
				kubeflow.MPIReplicaTypeWorker:   {Replicas: ptr(workers), Template: container("worker")},
			},
		},
	}
}

// defaulted returns a defaulted copy, as the controller sees the job.
func defaulted(job *kubeflow.MPIJob) *kubeflow.MPIJob {
	d := job.DeepCopy()
	kubeflow.SetDefaults_MPIJob(d)
	return d
}

// withPhase sets a pod's phase and returns it.
func withPhase(pod *corev1.Pod, phase corev1.PodPhase) *corev1.Pod {
	pod.Status.Phase = phase
	return pod
}

// existingWorkers returns the worker pods of job as the controller created them.
func existingWorkers(job *kubeflow.MPIJob, phase corev1.PodPhase, indices ...int) []*corev1.Pod {
	d := defaulted(job)
	var out []*corev1.Pod
	for _, i := range indices {
		p := newWorker(d, i, "")
		p.UID = types.UID(p.Name + "-uid")
		out = append(out, withPhase(p, phase))
	}
	return out
}

func existingLauncher(job *kubeflow.MPIJob, phase corev1.PodPhase) *corev1.Pod {
	p := newLauncher(defaulted(job), launcherOptions{deliveryImage: testDeliveryImage})
	p.UID = types.UID(p.Name + "-uid")
	return withPhase(p, phase)
}

// withChildren adds the job's ConfigMap (for hosts), ServiceAccount, Role
// (for exec) and RoleBinding as the controller made them.
func (f *fixture) withChildren(job *kubeflow.MPIJob, hosts elastic.Hosts, exec []string) {
	d := defaulted(job)
	f.cms = append(f.cms, newConfigMap(d, hosts, elastic.State{}))
	f.sas = append(f.sas, newLauncherServiceAccount(d))
	f.roles = append(f.roles, newLauncherRole(d, exec))
	f.bindings = append(f.bindings, newLauncherRoleBinding(d))
}

// fakePodGroups records PodGroup writes. Only what the controller calls is
// implemented; anything else panics through the nil interface.
type fakePodGroups struct {
	volcanotyped.PodGroupInterface
	created, updated []*volcanov1beta1.PodGroup
	deleted          []string
}

func (f *fakePodGroups) Create(_ context.Context, pg *volcanov1beta1.PodGroup, _ metav1.CreateOptions) (*volcanov1beta1.PodGroup, error) {
	f.created = append(f.created, pg)
	return pg, nil
}

func (f *fakePodGroups) Update(_ context.Context, pg *volcanov1beta1.PodGroup, _ metav1.UpdateOptions) (*volcanov1beta1.PodGroup, error) {
	f.updated = append(f.updated, pg)
	return pg, nil
}

func (f *fakePodGroups) Delete(_ context.Context, name string, _ metav1.DeleteOptions) error {
	f.deleted = append(f.deleted, name)
	return nil
}

// setFiles replaces the job's ConfigMap with the one the controller writes
// for hosts and state, and lets the launcher have seen it.
func (f *fixture) setFiles(job *kubeflow.MPIJob, hosts elastic.Hosts, state elastic.State) {
	f.cms[0] = newConfigMap(defaulted(job), hosts, state)
	launcherOf(f).Annotations[elastic.AnnotationHostsHash] = elastic.HostsHash(f.cms[0].Data[discoverHostsKey])
}

// expectListed checks that the last update of the job's ConfigMap lists
// exactly hosts in discover_hosts.sh, each with one slot, and returns it.
func (f *fixture) expectListed(hosts ...string) *corev1.ConfigMap {
	f.t.Helper()
	cm := updatedObject[*corev1.ConfigMap](f, "configmaps", "pi-config")
	want := "#!/bin/sh\n"
	for _, h := range hosts {
		want += "echo " + h + ":1\n"
	}
	if got := cm.Data[discoverHostsKey]; got != want {
		f.t.Errorf("discover_hosts.sh %q, want %q", got, want)
	}
	return cm
}

// expectHostfile checks that the hostfile of cm names exactly hosts, each
// with one slot.
func (f *fixture) expectHostfile(cm *corev1.ConfigMap, hosts ...string) {
	f.t.Helper()
	want := ""
	for _, h := range hosts {
		want += h + " slots=1\n"
	}
	if got := cm.Data[hostfileKey]; got != want {
		f.t.Errorf("hostfile %q, want %q", got, want)
	}
}

// expectConditionTrue checks that st holds a True condition of type typ with
// reason and a message that contains msg.
func expectConditionTrue(t *testing.T, st common.JobStatus, typ common.JobConditionType, reason, msg string) {
	t.Helper()
	c := conditions.Find(st.Conditions, typ)
	if c == nil || c.Status != corev1.ConditionTrue || c.Reason != reason || !strings.Contains(c.Message, msg) {
		t.Errorf("%s condition %+v, want True with reason %s and a message containing %q", typ, c, reason, msg)
	}
}

// refuse makes every request of verb on resource to client fail with err.
func refuse(client *core.Fake, verb, resource string, err error) {
	client.PrependReactor(verb, resource, func(core.Action) (bool, runtime.Object, error) { return true, nil, err })
}
