package delivery

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/klog/v2/ktesting"
)

const testNamespace = "jobs"

// patience bounds every wait in these tests. It only matters when a test is
// failing; passing tests finish far sooner.
const patience = 10 * time.Second

// podOption adjusts a test pod.
type podOption func(*corev1.Pod)

// running puts the pod in phase Running with the given Ready condition.
func running(ready bool) podOption {
	return func(p *corev1.Pod) {
		p.Status.Phase = corev1.PodRunning
		status := corev1.ConditionFalse
		if ready {
			status = corev1.ConditionTrue
		}
		p.Status.Conditions = []corev1.PodCondition{
			{Type: corev1.PodScheduled, Status: corev1.ConditionTrue},
			{Type: corev1.PodReady, Status: status},
		}
	}
}

// terminating marks the pod as being deleted.
func terminating() podOption {
	return func(p *corev1.Pod) {
		now := metav1.Now()
		p.DeletionTimestamp = &now
		p.Finalizers = []string{"example.com/hold"}
	}
}

// role sets the MPIJob labels of the pod.
func role(job, role string) podOption {
	return func(p *corev1.Pod) {
		p.Labels = map[string]string{"mpi-job-name": job, "mpi-job-role": role}
	}
}

// newPod returns a pending worker of job "job" unless options say otherwise.
func newPod(name string, opts ...podOption) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name:      name,
			Namespace: testNamespace,
			Labels:    map[string]string{"mpi-job-name": "job", "mpi-job-role": "worker"},
		},
		Status: corev1.PodStatus{Phase: corev1.PodPending},
	}
	for _, o := range opts {
		o(p)
	}
	return p
}

func TestIsPodReady(t *testing.T) {
	cases := map[string]struct {
		pod  *corev1.Pod
		want bool
	}{
		"nil":                 {pod: nil, want: false},
		"pending":             {pod: newPod("w"), want: false},
		"running, not ready":  {pod: newPod("w", running(false)), want: false},
		"running and ready":   {pod: newPod("w", running(true)), want: true},
		"ready but deleting":  {pod: newPod("w", running(true), terminating()), want: false},
		"running, no Ready":   {pod: func() *corev1.Pod { p := newPod("w", running(true)); p.Status.Conditions = nil; return p }(), want: false},
		"succeeded but ready": {pod: func() *corev1.Pod { p := newPod("w", running(true)); p.Status.Phase = corev1.PodSucceeded; return p }(), want: false},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := IsPodReady(tc.pod); got != tc.want {
				t.Errorf("IsPodReady() = %v, want %v", got, tc.want)
			}
		})
	}
}

// newFakeClient returns a fake clientset holding objs and a channel closed
// once a pod watch is in place, so a test knows that pods it creates from
// then on reach the informer. (The fake cannot resume a watch from a
// resource version, so changes made between list and watch would be lost.)
func newFakeClient(objs ...runtime.Object) (*fake.Clientset, <-chan struct{}) {
	client := fake.NewClientset(objs...)
	watching := make(chan struct{})
	var once sync.Once
	client.PrependWatchReactor("pods", func(action k8stesting.Action) (bool, watch.Interface, error) {
		w, err := client.Tracker().Watch(action.GetResource(), action.GetNamespace())
		if err != nil {
			return true, nil, err
		}
		once.Do(func() { close(watching) })
		return true, w, nil
	})
	return client, watching
}

// progress is what the wait loop reported after looking at its cache.
type progress struct{ ready, seen int }

// waitRun is a wait running in the background.
type waitRun struct {
	client   *fake.Clientset
	watching <-chan struct{}
	progress chan progress
	done     chan error
	returned bool
}

// startWait runs waitForPods for q on a fake clientset holding initial. The
// wait is cancelled and collected when the test ends.
func startWait(t *testing.T, q podQuery, initial ...*corev1.Pod) *waitRun {
	t.Helper()
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)

	var objs []runtime.Object
	for _, p := range initial {
		objs = append(objs, p)
	}
	client, watching := newFakeClient(objs...)
	r := &waitRun{
		client:   client,
		watching: watching,
		progress: make(chan progress, 1000),
		done:     make(chan error, 1),
	}
	q.observe = func(ready, seen int) {
		select {
		case r.progress <- progress{ready, seen}:
		default: // the test is not interested any more
		}
	}
	go func() { r.done <- waitForPods(ctx, client, q) }()
	t.Cleanup(func() {
		cancel()
		if !r.returned {
			select {
			case err := <-r.done:
				// Any outcome is fine here; the test itself checked it.
				_ = err
			case <-time.After(patience):
				t.Error("the wait did not stop after its context was cancelled")
			}
		}
	})
	return r
}

// awaitWatch blocks until the informer watches pods.
func (r *waitRun) awaitWatch(t *testing.T) {
	t.Helper()
	select {
	case <-r.watching:
	case err := <-r.done:
		r.returned = true
		t.Fatalf("wait returned (%v) before watching pods", err)
	case <-time.After(patience):
		t.Fatal("the informer never started watching pods")
	}
}

// awaitProgress blocks until the wait reports want, failing if it returns.
func (r *waitRun) awaitProgress(t *testing.T, want progress) {
	t.Helper()
	deadline := time.After(patience)
	last := progress{-1, -1}
	for {
		select {
		case got := <-r.progress:
			if got == want {
				return
			}
			last = got
		case err := <-r.done:
			r.returned = true
			for drained := false; !drained; {
				select {
				case last = <-r.progress:
				default:
					drained = true
				}
			}
			t.Fatalf("wait returned (err=%v) while %d of %d pods were ready, want it still waiting at %d ready of %d seen",
				err, last.ready, last.seen, want.ready, want.seen)
		case <-deadline:
			t.Fatalf("wait never reported %d ready of %d seen; last report was %d of %d",
				want.ready, want.seen, last.ready, last.seen)
		}
	}
}

// awaitReturn blocks until the wait returns and gives its error.
func (r *waitRun) awaitReturn(t *testing.T) error {
	t.Helper()
	select {
	case err := <-r.done:
		r.returned = true
		return err
	case <-time.After(patience):
		t.Fatal("the wait did not return")
		return nil
	}
}

// step changes the pods, then checks the wait: still waiting at want, or
// returned successfully when want is nil.
type step struct {
	create []*corev1.Pod
	update []*corev1.Pod
	delete []string
	want   *progress
}

func (s step) apply(t *testing.T, client kubernetes.Interface) {
	t.Helper()
	ctx := context.Background()
	pods := client.CoreV1().Pods(testNamespace)
	for _, p := range s.create {
		if _, err := pods.Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatalf("creating pod %s: %v", p.Name, err)
		}
	}
	for _, p := range s.update {
		if _, err := pods.Update(ctx, p, metav1.UpdateOptions{}); err != nil {
			t.Fatalf("updating pod %s: %v", p.Name, err)
		}
	}
	for _, name := range s.delete {
		if err := pods.Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
			t.Fatalf("deleting pod %s: %v", name, err)
		}
	}
}

func waiting(ready, seen int) *progress { return &progress{ready, seen} }

func TestWaitForPods(t *testing.T) {
	workers := labels.SelectorFromSet(labels.Set{"mpi-job-name": "job", "mpi-job-role": "worker"})

	cases := map[string]struct {
		query   podQuery
		initial []*corev1.Pod
		// steps run after the informer watches; without steps the wait
		// must return on the initial pods alone.
		steps []step
	}{
		"enough workers ready from the start": {
			query:   selectorQuery(testNamespace, workers, 2),
			initial: []*corev1.Pod{newPod("job-worker-0", running(true)), newPod("job-worker-1", running(true)), newPod("job-worker-2")},
		},
		"workers become ready after the wait starts": {
			query: selectorQuery(testNamespace, workers, 2),
			steps: []step{
				{create: []*corev1.Pod{newPod("job-worker-0"), newPod("job-worker-1")}, want: waiting(0, 2)},
				{update: []*corev1.Pod{newPod("job-worker-0", running(true))}, want: waiting(1, 2)},
				{update: []*corev1.Pod{newPod("job-worker-1", running(true))}},
			},
		},
		"elastic job does not wait for every worker": {
			query:   selectorQuery(testNamespace, workers, 2),
			initial: []*corev1.Pod{newPod("job-worker-0", running(true)), newPod("job-worker-1"), newPod("job-worker-2"), newPod("job-worker-3")},
			steps: []step{
				{create: []*corev1.Pod{newPod("job-worker-4", running(true))}},
			},
		},
		"not ready, terminating and unselected pods do not count": {
			query:   selectorQuery(testNamespace, workers, 2),
			initial: []*corev1.Pod{newPod("job-worker-0", running(true))},
			steps: []step{
				{
					create: []*corev1.Pod{
						newPod("job-worker-1", running(false)),
						newPod("job-worker-2", running(true), terminating()),
						newPod("job-launcher", running(true), role("job", "launcher")),
						newPod("other-worker-0", running(true), role("other", "worker")),
					},
					want: waiting(1, 3),
				},
				{update: []*corev1.Pod{newPod("job-worker-1", running(true))}},
			},
		},
		"pods in other namespaces do not count": {
			query: selectorQuery(testNamespace, workers, 1),
			initial: []*corev1.Pod{func() *corev1.Pod {
				p := newPod("job-worker-0", running(true))
				p.Namespace = "elsewhere"
				return p
			}()},
			steps: []step{
				{create: []*corev1.Pod{newPod("job-worker-0")}, want: waiting(0, 1)},
				{update: []*corev1.Pod{newPod("job-worker-0", running(true))}},
			},
		},
		"ready workers must be ready at the same time": {
			query:   selectorQuery(testNamespace, workers, 2),
			initial: []*corev1.Pod{newPod("job-worker-0", running(true)), newPod("job-worker-1")},
			steps: []step{
				{update: []*corev1.Pod{newPod("job-worker-0", running(false))}, want: waiting(0, 2)},
				{update: []*corev1.Pod{newPod("job-worker-1", running(true))}, want: waiting(1, 2)},
				{delete: []string{"job-worker-0"}, want: waiting(1, 1)},
				{create: []*corev1.Pod{newPod("job-worker-2", running(true))}},
			},
		},
		"named pods all ready from the start": {
			query:   namesQuery(testNamespace, []string{"job-worker-0", "job-worker-1"}),
			initial: []*corev1.Pod{newPod("job-worker-0", running(true)), newPod("job-worker-1", running(true))},
		},
		"named pods: only exactly the listed pods count": {
			query:   namesQuery(testNamespace, []string{"job-worker-0", "job-worker-1"}),
			initial: []*corev1.Pod{newPod("job-worker-0", running(true))},
			steps: []step{
				{
					create: []*corev1.Pod{
						newPod("job-worker-2", running(true)),
						newPod("job-launcher", running(true), role("job", "launcher")),
					},
					want: waiting(1, 1),
				},
				{create: []*corev1.Pod{newPod("job-worker-1", running(false))}, want: waiting(1, 2)},
				{update: []*corev1.Pod{newPod("job-worker-1", running(true), terminating())}, want: waiting(1, 2)},
				{delete: []string{"job-worker-1"}, want: waiting(1, 1)},
				{create: []*corev1.Pod{newPod("job-worker-1", running(true))}},
			},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			r := startWait(t, tc.query, tc.initial...)
			if len(tc.steps) > 0 {
				r.awaitWatch(t)
			}
			for i, s := range tc.steps {
				s.apply(t, r.client)
				if s.want != nil {
					r.awaitProgress(t, *s.want)
					continue
				}
				if i != len(tc.steps)-1 {
					t.Fatalf("step %d expects the wait to return but is not the last step", i)
				}
			}
			if err := r.awaitReturn(t); err != nil {
				t.Fatalf("wait failed: %v", err)
			}
		})
	}
}

func TestWaitReturnsAtOnceWithoutWorkers(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	client, _ := newFakeClient()
	sel := labels.SelectorFromSet(labels.Set{"mpi-job-name": "job"})

	if err := WaitForReadyWorkers(ctx, client, testNamespace, sel, 0); err != nil {
		t.Errorf("WaitForReadyWorkers with a minimum of 0: %v", err)
	}
	if err := WaitForNamedPods(ctx, client, testNamespace, nil); err != nil {
		t.Errorf("WaitForNamedPods without names: %v", err)
	}
	if got := client.Actions(); len(got) != 0 {
		t.Errorf("the API was called %d times, want none: %v", len(got), got)
	}
}

func TestWaitForReadyWorkersRejectsEmptySelector(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	client, _ := newFakeClient()
	if err := WaitForReadyWorkers(ctx, client, testNamespace, labels.Everything(), 1); err == nil {
		t.Error("WaitForReadyWorkers accepted a selector matching every pod")
	}
}

func TestWaitPublicFunctions(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	client, _ := newFakeClient(
		newPod("job-worker-0", running(true)),
		newPod("job-worker-1", running(true)),
		newPod("job-worker-2"),
	)
	sel := labels.SelectorFromSet(labels.Set{"mpi-job-name": "job", "mpi-job-role": "worker"})
	if err := WaitForReadyWorkers(ctx, client, testNamespace, sel, 2); err != nil {
		t.Errorf("WaitForReadyWorkers: %v", err)
	}
	if err := WaitForNamedPods(ctx, client, testNamespace, []string{"job-worker-1", "job-worker-0"}); err != nil {
		t.Errorf("WaitForNamedPods: %v", err)
	}
}

func TestWaitStopsWithContext(t *testing.T) {
	sel := labels.SelectorFromSet(labels.Set{"mpi-job-name": "job"})

	t.Run("cancelled while waiting", func(t *testing.T) {
		_, ctx := ktesting.NewTestContext(t)
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		client, watching := newFakeClient(newPod("job-worker-0", running(true)))
		done := make(chan error, 1)
		go func() { done <- WaitForReadyWorkers(ctx, client, testNamespace, sel, 2) }()

		select {
		case <-watching:
		case err := <-done:
			t.Fatalf("wait returned early: %v", err)
		case <-time.After(patience):
			t.Fatal("the informer never started watching pods")
		}
		cancel()
		select {
		case err := <-done:
			if !errors.Is(err, context.Canceled) {
				t.Errorf("error = %v, want one wrapping context.Canceled", err)
			}
		case <-time.After(patience):
			t.Fatal("the wait did not return after cancellation")
		}
	})

	cases := map[string]struct {
		makeCtx func(context.Context) (context.Context, context.CancelFunc)
		want    error
	}{
		"already cancelled": {
			makeCtx: func(parent context.Context) (context.Context, context.CancelFunc) {
				ctx, cancel := context.WithCancel(parent)
				cancel()
				return ctx, cancel
			},
			want: context.Canceled,
		},
		"deadline passed": {
			makeCtx: func(parent context.Context) (context.Context, context.CancelFunc) {
				return context.WithDeadline(parent, time.Now().Add(-time.Second))
			},
			want: context.DeadlineExceeded,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			_, ctx := ktesting.NewTestContext(t)
			ctx, cancel := tc.makeCtx(ctx)
			defer cancel()
			client, _ := newFakeClient()
			err := WaitForNamedPods(ctx, client, testNamespace, []string{"job-worker-0"})
			if !errors.Is(err, tc.want) {
				t.Errorf("error = %v, want one wrapping %v", err, tc.want)
			}
		})
	}
}

func TestRun(t *testing.T) {
	errNoClient := errors.New("no cluster here")

	cases := map[string]struct {
		vars     map[string]string
		hostfile string
		pods     []*corev1.Pod
		// clientErr makes the client factory fail.
		clientErr bool
		wantErr   error
	}{
		"nothing to wait for needs no client": {
			vars:      map[string]string{EnvWorkerSelector: "mpi-job-name=job", EnvMinReadyWorkers: "0"},
			clientErr: true,
		},
		"selector": {
			vars: map[string]string{EnvNamespace: testNamespace, EnvWorkerSelector: "mpi-job-name=job,mpi-job-role=worker", EnvMinReadyWorkers: "1"},
			pods: []*corev1.Pod{newPod("job-worker-0"), newPod("job-worker-1", running(true))},
		},
		"hostfile fallback": {
			vars:     map[string]string{EnvNamespace: testNamespace, EnvPodName: "job-launcher"},
			hostfile: "job-launcher slots=1\njob-worker-0 slots=1\njob-worker-1 slots=1\n",
			pods:     []*corev1.Pod{newPod("job-worker-0", running(true)), newPod("job-worker-1", running(true))},
		},
		"client failure": {
			vars:      map[string]string{EnvNamespace: testNamespace, EnvWorkerSelector: "mpi-job-name=job", EnvMinReadyWorkers: "1"},
			clientErr: true,
			wantErr:   errNoClient,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			_, ctx := ktesting.NewTestContext(t)
			dir := t.TempDir()
			src := filepath.Join(dir, "image-kubectl")
			if err := os.WriteFile(src, []byte("kubectl"), 0o755); err != nil {
				t.Fatal(err)
			}
			vars := map[string]string{EnvKubectlSource: src, EnvTargetDir: filepath.Join(dir, "opt", "kube")}
			for k, v := range tc.vars {
				vars[k] = v
			}
			files := map[string]string{}
			if tc.hostfile != "" {
				files[DefaultHostfile] = tc.hostfile
			}
			cfg, err := LoadConfig(fakeEnv(vars, files, ""))
			if err != nil {
				t.Fatalf("LoadConfig: %v", err)
			}

			var objs []runtime.Object
			for _, p := range tc.pods {
				objs = append(objs, p)
			}
			newClient := func() (kubernetes.Interface, error) {
				if tc.clientErr {
					return nil, fmt.Errorf("loading config: %w", errNoClient)
				}
				client, _ := newFakeClient(objs...)
				return client, nil
			}

			err = Run(ctx, cfg, newClient)
			if tc.wantErr != nil {
				if !errors.Is(err, tc.wantErr) {
					t.Fatalf("Run error = %v, want one wrapping %v", err, tc.wantErr)
				}
			} else if err != nil {
				t.Fatalf("Run: %v", err)
			}
			if _, err := os.Stat(cfg.KubectlTarget()); err != nil {
				t.Errorf("kubectl was not installed: %v", err)
			}
		})
	}
}
