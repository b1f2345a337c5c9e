package harness

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"

	"github.com/kubeflow/mpi-operator/pkg/elastic"
)

// DrainRecord is what watches of a job's ConfigMap and worker pods saw, and
// when they saw it: the versions of discover_hosts.sh, the pods marked
// draining, and when each pod was first seen being deleted.
type DrainRecord struct {
	mu       sync.Mutex
	scripts  []timedScript
	deleted  map[string]time.Time
	draining map[string]bool
	stop     func()
}

type timedScript struct {
	at    time.Time
	hosts map[string]bool // pod names
}

// RecordDrain watches the ConfigMap configMap and the pods that
// podSelector selects in namespace ns until Stop.
func RecordDrain(ctx context.Context, kube kubernetes.Interface, ns, configMap, podSelector string) (*DrainRecord, error) {
	ctx, cancel := context.WithCancel(ctx)
	cms, err := kube.CoreV1().ConfigMaps(ns).Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + configMap})
	if err != nil {
		cancel()
		return nil, err
	}
	pods, err := kube.CoreV1().Pods(ns).Watch(ctx, metav1.ListOptions{LabelSelector: podSelector})
	if err != nil {
		cancel()
		cms.Stop()
		return nil, err
	}
	r := &DrainRecord{deleted: map[string]time.Time{}, draining: map[string]bool{}}
	var wg sync.WaitGroup
	wg.Go(func() {
		for ev := range cms.ResultChan() {
			if cm, ok := ev.Object.(*corev1.ConfigMap); ok {
				r.addScript(cm.Data["discover_hosts.sh"])
			}
		}
	})
	wg.Go(func() {
		for ev := range pods.ResultChan() {
			if p, ok := ev.Object.(*corev1.Pod); ok {
				r.addPod(p, ev.Type == watch.Deleted)
			}
		}
	})
	r.stop = func() {
		cancel()
		cms.Stop()
		pods.Stop()
		wg.Wait()
	}
	return r, nil
}

// Stop ends the watches.
func (r *DrainRecord) Stop() { r.stop() }

func (r *DrainRecord) addScript(script string) {
	hosts := elastic.ListedPods(script)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.scripts = append(r.scripts, timedScript{time.Now(), hosts})
}

func (r *DrainRecord) addPod(p *corev1.Pod, gone bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, marked := p.Annotations[elastic.AnnotationDrainingSince]; marked {
		r.draining[p.Name] = true
	}
	if _, seen := r.deleted[p.Name]; !seen && (gone || p.DeletionTimestamp != nil) {
		r.deleted[p.Name] = time.Now()
	}
}

// UnlistedAt is when the first version of the script that no longer listed
// pod, after the last that did, was seen; zero if none was.
func (r *DrainRecord) UnlistedAt(pod string) time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	var at time.Time
	for _, s := range r.scripts {
		switch {
		case s.hosts[pod]:
			at = time.Time{}
		case at.IsZero():
			at = s.at
		}
	}
	return at
}

// DeletedAt is when pod was first seen being deleted; zero if it was not.
func (r *DrainRecord) DeletedAt(pod string) time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.deleted[pod]
}

// Marked are the pods seen with a drain mark so far, sorted.
func (r *DrainRecord) Marked() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for p := range r.draining {
		out = append(out, p)
	}
	slices.Sort(out)
	return out
}

// drainSlack is how much earlier than the drain period a deletion may be
// seen after the unlisting write: both times are when the watches saw the
// events, and the first may have been delivered later than the second.
const drainSlack = 200 * time.Millisecond

// CheckDrained checks that each victim was deleted at least drain after the
// write that unlisted it was seen. It returns a line per victim with the
// time between the two, and an error naming the victims deleted sooner or
// not seen unlisted and deleted.
func (r *DrainRecord) CheckDrained(victims []string, drain time.Duration) ([]string, error) {
	var report []string
	var errs []error
	for _, v := range victims {
		unlisted, deleted := r.UnlistedAt(v), r.DeletedAt(v)
		if unlisted.IsZero() || deleted.IsZero() {
			errs = append(errs, fmt.Errorf("%s: unlisted at %v, deleted at %v: not both seen", v, unlisted, deleted))
			continue
		}
		gap := deleted.Sub(unlisted)
		report = append(report, fmt.Sprintf("%s: deleted %v after the write that unlisted it (drain %v)", v, gap.Round(time.Millisecond), drain))
		if gap < drain-drainSlack {
			errs = append(errs, fmt.Errorf("%s deleted %v after the write that unlisted it, want at least %v", v, gap, drain))
		}
	}
	return report, errors.Join(errs...)
}
