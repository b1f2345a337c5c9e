package plugin

import (
	"context"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/kubernetes"
)

// reasonFailedScheduling is the reason of the scheduler's events for a pod
// it cannot place.
const reasonFailedScheduling = "FailedScheduling"

// eventTime is when an event last happened, whichever field its reporter
// set.
func eventTime(e *corev1.Event) time.Time {
	for _, t := range []time.Time{e.LastTimestamp.Time, e.EventTime.Time, e.FirstTimestamp.Time} {
		if !t.IsZero() {
			return t
		}
	}
	return e.CreationTimestamp.Time
}

// LatestReasons returns, for each pod named, the message of its latest
// event whose reason is reason ("Reason: message"), from events.
func LatestReasons(events []corev1.Event, reason string) map[string]string {
	latest := map[string]*corev1.Event{}
	for i := range events {
		e := &events[i]
		if e.InvolvedObject.Kind != "Pod" || e.Reason != reason {
			continue
		}
		if cur, ok := latest[e.InvolvedObject.Name]; !ok || eventTime(e).After(eventTime(cur)) {
			latest[e.InvolvedObject.Name] = e
		}
	}
	out := make(map[string]string, len(latest))
	for name, e := range latest {
		out[name] = e.Reason + ": " + e.Message
	}
	return out
}

// schedulingReasons lists the scheduler's latest word on each of the pods
// named.
func schedulingReasons(ctx context.Context, kube kubernetes.Interface, ns string, pods []string) (map[string]string, error) {
	if len(pods) == 0 {
		return map[string]string{}, nil
	}
	sel := fields.Set{"involvedObject.kind": "Pod", "reason": reasonFailedScheduling}.AsSelector()
	list, err := kube.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: sel.String()})
	if err != nil {
		return nil, err
	}
	reasons := LatestReasons(list.Items, reasonFailedScheduling)
	for name := range reasons {
		if !slices.Contains(pods, name) {
			delete(reasons, name)
		}
	}
	return reasons, nil
}
