package delivery

import (
	"context"
	"errors"
	"fmt"
	"sync"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	coreinformers "k8s.io/client-go/informers/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
)

// IsPodReady reports whether a pod counts as an available worker: it is in
// phase Running, its Ready condition is True, and it is not being deleted.
func IsPodReady(pod *corev1.Pod) bool {
	if pod == nil || pod.DeletionTimestamp != nil || pod.Status.Phase != corev1.PodRunning {
		return false
	}
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// WaitForReadyWorkers blocks until at least minReady pods in namespace that
// match selector are ready (see IsPodReady) at the same time. It returns nil
// at once when minReady is zero or less, and the context's error if ctx ends
// first.
func WaitForReadyWorkers(ctx context.Context, client kubernetes.Interface, namespace string, selector labels.Selector, minReady int) error {
	if minReady <= 0 {
		return nil
	}
	if selector == nil || selector.Empty() {
		return errors.New("a non-empty worker selector is required")
	}
	return waitForPods(ctx, client, selectorQuery(namespace, selector, minReady))
}

// WaitForNamedPods blocks until every pod in namespace named in names is ready
// (see IsPodReady) at the same time. It returns nil at once when names is
// empty, and the context's error if ctx ends first.
func WaitForNamedPods(ctx context.Context, client kubernetes.Interface, namespace string, names []string) error {
	if len(names) == 0 {
		return nil
	}
	return waitForPods(ctx, client, namesQuery(namespace, names))
}

// podQuery describes which pods to watch and how many of them must be ready.
type podQuery struct {
	namespace     string
	labelSelector string // sent to the API server; may be empty
	matches       func(*corev1.Pod) bool
	want          int

	// observe, when set, is told the counts after every look at the cache.
	// Tests use it to know what the wait has seen.
	observe func(ready, seen int)
}

func selectorQuery(namespace string, selector labels.Selector, minReady int) podQuery {
	return podQuery{
		namespace:     namespace,
		labelSelector: selector.String(),
		// Filter here too: a server (or a fake) need not apply the
		// selector to every event it sends.
		matches: func(pod *corev1.Pod) bool { return selector.Matches(labels.Set(pod.Labels)) },
		want:    minReady,
	}
}

func namesQuery(namespace string, names []string) podQuery {
	wanted := make(map[string]bool, len(names))
	for _, n := range names {
		wanted[n] = true
	}
	return podQuery{
		namespace: namespace,
		matches:   func(pod *corev1.Pod) bool { return wanted[pod.Name] },
		want:      len(wanted),
	}
}

// waitForPods runs a pod informer for the query and returns once the query
// is satisfied by the informer's cache. The informer relists and rewatches
// by itself when a watch breaks.
func waitForPods(ctx context.Context, client kubernetes.Interface, q podQuery) error {
	logger := klog.FromContext(ctx).WithValues("namespace", q.namespace)
	if q.labelSelector != "" {
		logger = logger.WithValues("selector", q.labelSelector)
	}
	ctx = klog.NewContext(ctx, logger)

	informer := coreinformers.NewFilteredPodInformer(client, q.namespace, 0, cache.Indexers{},
		func(opts *metav1.ListOptions) { opts.LabelSelector = q.labelSelector })

	// changed holds at most one pending wake-up; senders never block, and a
	// change that arrives while the loop is counting is not lost.
	changed := make(chan struct{}, 1)
	poke := func() {
		select {
		case changed <- struct{}{}:
		default:
		}
	}
	if _, err := informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { poke() },
		UpdateFunc: func(any, any) { poke() },
		DeleteFunc: func(any) { poke() },
	}); err != nil {
		return fmt.Errorf("watching pods: %w", err)
	}

	runCtx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() { informer.RunWithContext(runCtx) })
	defer func() {
		stop()
		wg.Wait()
	}()

	logger.Info("Waiting for worker pods to become ready", "required", q.want)
	last := -1
	for {
		ready, seen := countReady(informer.GetStore(), q.matches)
		if ready != last {
			logger.Info("Ready worker pods", "ready", ready, "required", q.want, "observed", seen,
				"progress", fmt.Sprintf("%d of %d", ready, q.want))
			last = ready
		}
		if q.observe != nil {
			q.observe(ready, seen)
		}
		if ready >= q.want {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("stopped waiting with %d of %d worker pods ready: %w", ready, q.want, ctx.Err())
		case <-changed:
		}
	}
}

// countReady returns how many cached pods match and are ready, and how many
// match at all.
func countReady(store cache.Store, matches func(*corev1.Pod) bool) (ready, seen int) {
	for _, obj := range store.List() {
		pod, ok := obj.(*corev1.Pod)
		if !ok || !matches(pod) {
			continue
		}
		seen++
		if IsPodReady(pod) {
			ready++
		}
	}
	return ready, seen
}
