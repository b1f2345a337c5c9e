package harness

import (
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
)

// Objects builds the children of one job as the operator writes them, each
// with the next resourceVersion, to feed a History (or anything that reads
// watch events) in tests.
type Objects struct {
	Job string
	// API shapes the labels and host names; the zero value is V1.
	API API
	rv  int64
}

func (o *Objects) api() API {
	if o.API.Version == "" {
		return V1
	}
	return o.API
}

func (o *Objects) meta(name string) metav1.ObjectMeta {
	o.rv++
	return metav1.ObjectMeta{Name: name, Namespace: "ns", ResourceVersion: strconv.FormatInt(o.rv, 10)}
}

// Worker is a worker pod of the job: draining carries the draining mark,
// deleting a deletionTimestamp.
func (o *Objects) Worker(name, uid string, phase corev1.PodPhase, draining, deleting bool) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: o.meta(name)}
	p.UID = types.UID(uid)
	p.Labels = map[string]string{o.api().LabelJobName: o.Job, o.api().LabelRole: "worker"}
	p.Status.Phase = phase
	if draining {
		p.Annotations = map[string]string{AnnotationDrainingSince: "2026-01-01T00:00:00Z"}
	}
	if deleting {
		p.DeletionTimestamp = &metav1.Time{Time: time.Now()}
	}
	return p
}

// ConfigMap is the job's ConfigMap with a discover_hosts.sh listing hosts.
func (o *Objects) ConfigMap(hosts ...string) *corev1.ConfigMap {
	script := "#!/bin/sh\n"
	for _, h := range hosts {
		if o.api().FQDNHosts {
			script += "echo " + h + "." + o.Job + ".ns.svc.cluster.local\n"
		} else {
			script += "echo " + h + ":1\n"
		}
	}
	return &corev1.ConfigMap{ObjectMeta: o.meta(o.Job + ConfigSuffix), Data: map[string]string{DiscoverHostsKey: script}}
}

// Role is the launcher's Role allowing exec into the named workers.
func (o *Objects) Role(exec ...string) *rbacv1.Role {
	return &rbacv1.Role{
		ObjectMeta: o.meta(o.Job + LauncherSuffix),
		Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get", "list", "watch"}},
			{APIGroups: []string{""}, Resources: []string{"pods/exec"}, Verbs: []string{"create"}, ResourceNames: exec},
		},
	}
}

// Slice is the EndpointSlice of the job's Service naming the given pods,
// as the EndpointSlice controller writes it for a headless Service whose
// pods set their subdomain.
func (o *Objects) Slice(name string, pods ...string) *discoveryv1.EndpointSlice {
	s := &discoveryv1.EndpointSlice{ObjectMeta: o.meta(name)}
	s.Labels = map[string]string{discoveryv1.LabelServiceName: o.Job}
	for _, p := range pods {
		s.Endpoints = append(s.Endpoints, discoveryv1.Endpoint{
			Hostname:  ptr.To(p),
			TargetRef: &corev1.ObjectReference{Kind: "Pod", Name: p},
		})
	}
	return s
}
