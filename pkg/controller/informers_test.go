package controller

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubeflow/mpi-operator/pkg/elastic"
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
		want    *cachedPod
		wantPod *corev1.Pod // what readers of the cache get
	}{
		"worker": {
			in:   full(roleWorker),
			want: &cachedPod{ObjectMeta: trimmedMeta(roleWorker), Phase: corev1.PodFailed, Reason: "Evicted"},
			wantPod: &corev1.Pod{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"}, ObjectMeta: trimmedMeta(roleWorker),
				Status: corev1.PodStatus{Phase: corev1.PodFailed, Reason: "Evicted"}},
		},
		"launcher keeps how its containers ended": {
			in: full(roleLauncher),
			want: &cachedPod{ObjectMeta: trimmedMeta(roleLauncher), Phase: corev1.PodFailed, Reason: "Evicted",
				ContainerStatuses: launcherStatuses},
			wantPod: &corev1.Pod{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"}, ObjectMeta: trimmedMeta(roleLauncher),
				Status: corev1.PodStatus{Phase: corev1.PodFailed, Reason: "Evicted", ContainerStatuses: launcherStatuses}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := trimPod(tc.in)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("cached pod (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantPod, asPod(got)); diff != "" {
				t.Errorf("pod read from the cache (-want +got):\n%s", diff)
			}
		})
	}
}

func TestTrimConfigMap(t *testing.T) {
	job := defaulted(newTestJob("pi", 1))
	ours := newConfigMap(job, elastic.Hosts{Desired: []string{"pi-worker-0"}}, elastic.State{})
	ours.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "x"}}
	want := ours.DeepCopy()
	want.ManagedFields = nil
	got, err := trimConfigMap(ours)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("an MPIJob's ConfigMap (-want +got):\n%s", diff)
	}

	foreign := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "app-settings", Namespace: "ns", Labels: map[string]string{"app": "web"},
			Annotations: map[string]string{"notes": "..."}},
		Data:       map[string]string{"big": "..."},
		BinaryData: map[string][]byte{"blob": {1, 2}},
	}
	got, err = trimConfigMap(foreign)
	if err != nil {
		t.Fatal(err)
	}
	if cm := got.(*corev1.ConfigMap); cm.Data != nil || cm.BinaryData != nil || cm.Annotations != nil || cm.Name != "app-settings" {
		t.Errorf("a ConfigMap of no MPIJob keeps its data or annotations: %+v", cm)
	}
}
func TestTrimRBAC(t *testing.T) {
	job := defaulted(newTestJob("pi", 2))
	ours := newLauncherRole(job, []string{"pi-worker-0", "pi-worker-1"})
	ours.Annotations = map[string]string{"note": "kept: an update writes the cached copy back"}
	ours.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "x"}}
	want := ours.DeepCopy()
	want.ManagedFields = nil
	got, err := trimRBAC(ours)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("a Role the job controls (-want +got):\n%s", diff)
	}
	// Upstream's operator labelled none of them; what it created is kept
	// whole all the same, as its controller is an MPIJob.
	upstream := newLauncherRoleBinding(job)
	upstream.Labels = nil
	if got, _ := trimRBAC(upstream.DeepCopy()); !cmp.Equal(upstream, got) {
		t.Errorf("a RoleBinding of upstream's operator changed: %s", cmp.Diff(upstream, got))
	}

	other := metav1.OwnerReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "web", UID: "web-uid", Controller: ptr(true)}
	foreign := &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Name: "pi-launcher", Namespace: "ns", UID: "r-uid", ResourceVersion: "4",
			Labels: map[string]string{"app": "web"}, OwnerReferences: []metav1.OwnerReference{other}},
		Rules: []rbacv1.PolicyRule{{Verbs: []string{"get"}, APIGroups: []string{""}, Resources: []string{"secrets"}}},
	}
	wantForeign := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "pi-launcher", Namespace: "ns", UID: "r-uid",
		ResourceVersion: "4", OwnerReferences: []metav1.OwnerReference{other}}}
	got, err = trimRBAC(foreign)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(wantForeign, got); diff != "" {
		t.Errorf("a Role of someone else (-want +got):\n%s", diff)
	}
	bare := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "admins", Namespace: "ns"},
		Subjects: []rbacv1.Subject{{Kind: "Group", Name: "admins"}}, RoleRef: rbacv1.RoleRef{Kind: "ClusterRole", Name: "admin"}}
	got, _ = trimRBAC(bare)
	if diff := cmp.Diff(&rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "admins", Namespace: "ns"}}, got); diff != "" {
		t.Errorf("a RoleBinding of no owner (-want +got):\n%s", diff)
	}
}
