package controller

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/kubeflow/mpi-operator/pkg/elastic"
	"github.com/kubeflow/mpi-operator/pkg/podcache"
)

func TestTrimPod(t *testing.T) {
	job := defaulted(newTestJob("pi", 1))
	ctrl := ownerRefs(job)[0]
	other := metav1.OwnerReference{APIVersion: "v1", Kind: "ConfigMap", Name: "x", UID: "x-uid"}
	deleted := metav1.Now()
	full := func(role string) *corev1.Pod {
		return &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{
				Name: "pi-" + role, Namespace: "ns", UID: "uid", ResourceVersion: "7",
				Generation: 3, DeletionTimestamp: &deleted,
				Labels: map[string]string{
					labelGroupName: "kubeflow.org", labelMPIJobName: "pi", labelMPIRole: role,
					labelReplicaIndex: "0", "training.kubeflow.org/replica-index": "0", "team": "ml",
				},
				Annotations: map[string]string{
					elastic.AnnotationDrainingSince: "t", elastic.AnnotationDeletionCost: "5", "note": "long text",
				},
				OwnerReferences: []metav1.OwnerReference{other, ctrl},
				ManagedFields:   []metav1.ManagedFieldsEntry{{Manager: "kubectl"}},
				Finalizers:      []string{"f"},
			},
			Spec: corev1.PodSpec{NodeName: "node", Containers: []corev1.Container{{Name: "c", Image: "i"}}},
			Status: corev1.PodStatus{
				Phase: corev1.PodFailed, Reason: "Evicted", Message: "long message",
				Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionFalse}},
				ContainerStatuses: []corev1.ContainerStatus{{
					Name: "c", Image: "i", RestartCount: 2,
					State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 137, Reason: "OOMKilled", Message: "m"}},
				}},
			},
		}
	}
	trimmedMeta := func(role string) metav1.ObjectMeta {
		return metav1.ObjectMeta{
			Name: "pi-" + role, Namespace: "ns", UID: "uid", ResourceVersion: "7", DeletionTimestamp: &deleted,
			Labels: map[string]string{
				labelGroupName: "kubeflow.org", labelMPIJobName: "pi", labelMPIRole: role,
				labelReplicaIndex: "0", "training.kubeflow.org/replica-index": "0",
			},
			Annotations:     map[string]string{elastic.AnnotationDrainingSince: "t", elastic.AnnotationDeletionCost: "5"},
			OwnerReferences: []metav1.OwnerReference{ctrl},
		}
	}
	launcherStatuses := []corev1.ContainerStatus{{Name: "c", RestartCount: 2,
		State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 137, Reason: "OOMKilled"}}}}
	cases := map[string]struct {
		in      *corev1.Pod
		want    *podcache.Pod
		wantPod *corev1.Pod // what readers of the cache get
	}{
		"worker": {
			in:   full(roleWorker),
			want: &podcache.Pod{ObjectMeta: trimmedMeta(roleWorker), Phase: corev1.PodFailed, Reason: "Evicted"},
			wantPod: &corev1.Pod{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"}, ObjectMeta: trimmedMeta(roleWorker),
				Status: corev1.PodStatus{Phase: corev1.PodFailed, Reason: "Evicted"}},
		},
		"launcher keeps how its containers ended": {
			in: full(roleLauncher),
			want: &podcache.Pod{ObjectMeta: trimmedMeta(roleLauncher), Phase: corev1.PodFailed, Reason: "Evicted",
				ContainerStatuses: launcherStatuses},
			wantPod: &corev1.Pod{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"}, ObjectMeta: trimmedMeta(roleLauncher),
				Status: corev1.PodStatus{Phase: corev1.PodFailed, Reason: "Evicted", ContainerStatuses: launcherStatuses}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := trimPod(tc.in)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("cached pod (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantPod, podcache.AsPod(got)); diff != "" {
				t.Errorf("pod read from the cache (-want +got):\n%s", diff)
			}
		})
	}
}

func TestTrimLabelled(t *testing.T) {
	job := defaulted(newTestJob("pi", 1))
	ctrl := ownerRefs(job)[0]
	// An MPIJob of another group, with the job's name, is not this
	// operator's.
	otherGroup := metav1.OwnerReference{APIVersion: "example.com/v1", Kind: "MPIJob", Name: "pi", UID: "other-uid", Controller: ptr(true)}
	notController := metav1.OwnerReference{APIVersion: "v1", Kind: "Pod", Name: "p", UID: "p-uid"}
	created := metav1.Now()
	meta := func(name string, refs ...metav1.OwnerReference) metav1.ObjectMeta {
		return metav1.ObjectMeta{Name: name, Namespace: "ns", UID: "o-uid", ResourceVersion: "9",
			CreationTimestamp: created, Labels: map[string]string{labelApp: "pi"}, OwnerReferences: refs}
	}
	full := func(name string, refs ...metav1.OwnerReference) metav1.ObjectMeta {
		m := meta(name, refs...)
		m.Labels["team"] = "ml"
		m.Annotations = map[string]string{"notes": "long text"}
		m.Generation = 2
		m.Finalizers = []string{"f"}
		m.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "kubectl"}}
		return m
	}
	kept := func(name string, refs ...metav1.OwnerReference) metav1.ObjectMeta {
		m := meta(name, refs...)
		m.Labels["team"] = "ml"
		return m
	}

	ours := newConfigMap(job, elastic.Hosts{Desired: []string{"pi-worker-0"}}, elastic.State{})
	ours.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "x"}}
	oursWant := ours.DeepCopy()
	oursWant.ManagedFields = nil
	cm := func(m metav1.ObjectMeta) *corev1.ConfigMap {
		return &corev1.ConfigMap{ObjectMeta: m, Data: map[string]string{"big": "..."}, BinaryData: map[string][]byte{"blob": {1, 2}}}
	}

	ourSA := newLauncherServiceAccount(job)
	ourSA.UID, ourSA.ResourceVersion = "sa-uid", "3"
	ourSA.Annotations = map[string]string{"eks.amazonaws.com/role-arn": "arn"}
	ourSA.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "x"}}
	ourSA.Secrets = []corev1.ObjectReference{{Name: "token"}}
	ourSAWant := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "pi-launcher", Namespace: "ns", UID: "sa-uid",
		ResourceVersion: "3", Labels: map[string]string{labelApp: "pi"}, OwnerReferences: []metav1.OwnerReference{ctrl}}}
	sa := func(m metav1.ObjectMeta) *corev1.ServiceAccount {
		return &corev1.ServiceAccount{ObjectMeta: m, Secrets: []corev1.ObjectReference{{Name: "token"}},
			ImagePullSecrets: []corev1.LocalObjectReference{{Name: "registry"}}, AutomountServiceAccountToken: ptr(false)}
	}

	cases := map[string]struct {
		in   any
		want any
		// controlled: the cached object still tells that the job controls
		// it, as reconcile.Ensure asks.
		controlled bool
	}{
		"the job's ConfigMap is kept whole": {in: ours, want: oursWant, controlled: true},
		"a tenant's ConfigMap keeps its metadata": {
			in:   cm(full("pi-config")),
			want: &corev1.ConfigMap{ObjectMeta: kept("pi-config")},
		},
		"a ConfigMap of an MPIJob of another group keeps its metadata": {
			in:   cm(full("pi-config", notController, otherGroup)),
			want: &corev1.ConfigMap{ObjectMeta: kept("pi-config", otherGroup)},
		},
		"a ConfigMap the job owns but does not control keeps its metadata": {
			in:   cm(full("pi-config", metav1.OwnerReference{APIVersion: ctrl.APIVersion, Kind: ctrl.Kind, Name: ctrl.Name, UID: ctrl.UID})),
			want: &corev1.ConfigMap{ObjectMeta: kept("pi-config")},
		},
		"the job's ServiceAccount keeps its metadata": {in: ourSA, want: ourSAWant, controlled: true},
		"a tenant's ServiceAccount keeps its metadata": {
			in:   sa(full("pi-launcher", notController)),
			want: &corev1.ServiceAccount{ObjectMeta: kept("pi-launcher")},
		},
		"a ServiceAccount of an MPIJob of another group keeps its metadata": {
			in:   sa(full("pi-launcher", otherGroup)),
			want: &corev1.ServiceAccount{ObjectMeta: kept("pi-launcher", otherGroup)},
		},
		"another kind loses its managed fields only": {
			in:   &corev1.Secret{ObjectMeta: full("pi-secret"), Data: map[string][]byte{"k": {1}}},
			want: &corev1.Secret{ObjectMeta: func() metav1.ObjectMeta { m := full("pi-secret"); m.ManagedFields = nil; return m }(), Data: map[string][]byte{"k": {1}}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := trimLabelled(tc.in)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("cached object (-want +got):\n%s", diff)
			}
			if m, ok := got.(metav1.Object); !ok || metav1.IsControlledBy(m, job) != tc.controlled {
				t.Errorf("the cached object is controlled by the job: %v, want %v", ok && metav1.IsControlledBy(m, job), tc.controlled)
			}
		})
	}

	// The cache keeps no more of the job's ServiceAccount than its
	// metadata: the controller must never update one from it, which would
	// write back a ServiceAccount without its secrets and annotations.
	cached, _ := trimLabelled(ourSA.DeepCopy())
	if _, changed := (&MPIJobController{}).serviceAccountChild().Merge(cached.(*corev1.ServiceAccount), newLauncherServiceAccount(job)); changed {
		t.Error("the ServiceAccount child merges into the cached ServiceAccount, which keeps only its metadata")
	}
}

func TestTrimRBAC(t *testing.T) {
	job := defaulted(newTestJob("pi", 2))
	ours := newLauncherRole(job, []string{"pi-worker-0", "pi-worker-1"})
	ours.Annotations = map[string]string{"note": "kept: an update writes the cached copy back"}
	ours.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "x"}}
	oursWant := ours.DeepCopy()
	oursWant.ManagedFields = nil
	upstream := newLauncherRoleBinding(job)
	upstream.Labels = nil
	other := metav1.OwnerReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "web", UID: "web-uid", Controller: ptr(true)}
	otherGroup := metav1.OwnerReference{APIVersion: "example.com/v1", Kind: "MPIJob", Name: "pi", UID: "other-uid", Controller: ptr(true)}
	cases := map[string]struct{ in, want runtime.Object }{
		"a Role the job controls": {ours, oursWant},
		// Upstream's operator labelled none of them; what it created is
		// kept whole all the same, as its controller is an MPIJob.
		"a RoleBinding of upstream's operator": {upstream.DeepCopy(), upstream},
		"a Role of someone else": {
			&rbacv1.Role{
				ObjectMeta: metav1.ObjectMeta{Name: "pi-launcher", Namespace: "ns", UID: "r-uid", ResourceVersion: "4",
					Labels: map[string]string{"app": "web"}, OwnerReferences: []metav1.OwnerReference{other}},
				Rules: []rbacv1.PolicyRule{{Verbs: []string{"get"}, APIGroups: []string{""}, Resources: []string{"secrets"}}},
			},
			&rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "pi-launcher", Namespace: "ns", UID: "r-uid",
				ResourceVersion: "4", OwnerReferences: []metav1.OwnerReference{other}}},
		},
		// An MPIJob of another group is someone else's too.
		"a Role of an MPIJob of another group": {
			&rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "pi-launcher", Namespace: "ns",
				OwnerReferences: []metav1.OwnerReference{otherGroup}}, Rules: oursWant.Rules},
			&rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "pi-launcher", Namespace: "ns",
				OwnerReferences: []metav1.OwnerReference{otherGroup}}},
		},
		"a RoleBinding of no owner": {
			&rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "admins", Namespace: "ns"},
				Subjects: []rbacv1.Subject{{Kind: "Group", Name: "admins"}}, RoleRef: rbacv1.RoleRef{Kind: "ClusterRole", Name: "admin"}},
			&rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "admins", Namespace: "ns"}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := trimRBAC(tc.in)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("cached object (-want +got):\n%s", diff)
			}
		})
	}
}
