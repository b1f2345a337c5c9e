package reconcile

import (
	"context"
	"errors"
	"maps"
	"strings"
	"testing"

	corelisters "k8s.io/client-go/listers/core/v1"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2/ktesting"
	"k8s.io/utils/ptr"
)

var (
	configMaps = schema.GroupResource{Resource: "configmaps"}
	// testOwner is any object with a UID; its kind is the caller's.
	testOwner = Owner{Kind: "MPIJob", Object: &metav1.ObjectMeta{Name: "pi", Namespace: "ns", UID: "pi-uid"}}
)

// childWorld is a cache and an API server of ConfigMaps, for Ensure.
type childWorld struct {
	cache, server map[string]*corev1.ConfigMap
	// getErr, fetchErr, createErr and updateErr, if set, fail those calls.
	getErr, fetchErr, createErr, updateErr error
	writes                                 []string // "create name", "update name"
	// stored are the bytes of the objects the server stored.
	stored int
}

func newChildWorld() *childWorld {
	return &childWorld{cache: map[string]*corev1.ConfigMap{}, server: map[string]*corev1.ConfigMap{}}
}

// configMap is the ConfigMap pi-config with data, controlled by owner
// unless it is nil.
func configMap(owner *Owner, data map[string]string) *corev1.ConfigMap {
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "pi-config", Namespace: "ns"}, Data: data}
	if owner != nil {
		cm.OwnerReferences = []metav1.OwnerReference{{
			APIVersion: "kubeflow.org/v1", Kind: owner.Kind, Name: owner.Object.GetName(),
			UID: owner.Object.GetUID(), Controller: ptr.To(true),
		}}
	}
	return cm
}

// existing puts cm on the server and, if cached, in the cache.
func (w *childWorld) existing(cm *corev1.ConfigMap, cached bool) {
	w.server[cm.Name] = cm
	if cached {
		w.cache[cm.Name] = cm
	}
}

func (w *childWorld) child() Child[*corev1.ConfigMap] {
	return Child[*corev1.ConfigMap]{
		Kind: "ConfigMap",
		Get: func(_, name string) (*corev1.ConfigMap, error) {
			return lookUp(w.cache, name, w.getErr)
		},
		Fetch: func(_ context.Context, _, name string) (*corev1.ConfigMap, error) {
			return lookUp(w.server, name, w.fetchErr)
		},
		Create: func(_ context.Context, cm *corev1.ConfigMap) (*corev1.ConfigMap, error) {
			return w.write("create", cm, w.createErr)
		},
		Update: func(_ context.Context, cm *corev1.ConfigMap) (*corev1.ConfigMap, error) {
			return w.write("update", cm, w.updateErr)
		},
		Merge: func(cur, want *corev1.ConfigMap) (*corev1.ConfigMap, bool) {
			if maps.Equal(cur.Data, want.Data) {
				return cur, false
			}
			merged := cur.DeepCopy()
			merged.Data = want.Data
			return merged, true
		},
	}
}

func lookUp(objs map[string]*corev1.ConfigMap, name string, err error) (*corev1.ConfigMap, error) {
	if err != nil {
		return nil, err
	}
	if cm, ok := objs[name]; ok {
		return cm, nil
	}
	return nil, apierrors.NewNotFound(configMaps, name)
}

// write records a create or update of cm and returns what the server holds.
func (w *childWorld) write(verb string, cm *corev1.ConfigMap, err error) (*corev1.ConfigMap, error) {
	w.writes = append(w.writes, verb+" "+cm.Name)
	if err != nil {
		return nil, err
	}
	if _, ok := w.server[cm.Name]; ok && verb == "create" {
		return nil, apierrors.NewAlreadyExists(configMaps, cm.Name)
	}
	stored := cm.DeepCopy()
	stored.ResourceVersion = verb + "d"
	w.server[cm.Name] = stored
	w.stored += stored.Size()
	return stored, nil
}

func TestEnsure(t *testing.T) {
	wantData := map[string]string{"hostfile": "pi-worker-0 slots=1\n"}
	cases := []struct {
		name    string
		prepare func(w *childWorld)
		// wantWrites are the requests Ensure sends.
		wantWrites []string
		// wantRV is the resourceVersion of the object returned; wantData
		// its data.
		wantRV   string
		wantData map[string]string
		// wantErr is a fragment of the error, "" for none; isErr, if set,
		// must hold for it.
		wantErr string
		isErr   func(error) bool
		// labels are those of the wanted object; wantLabels, if set, those
		// the server holds after Ensure.
		labels, wantLabels map[string]string
	}{
		{
			name:       "absent: created",
			prepare:    func(*childWorld) {},
			wantWrites: []string{"create pi-config"},
			wantRV:     "created", wantData: wantData,
		},
		{
			name: "owned and the same: left alone",
			prepare: func(w *childWorld) {
				cm := configMap(&testOwner, wantData)
				cm.ResourceVersion = "7"
				w.existing(cm, true)
			},
			wantRV: "7", wantData: wantData,
		},
		{
			name: "owned and different: updated",
			prepare: func(w *childWorld) {
				w.existing(configMap(&testOwner, map[string]string{"hostfile": "old"}), true)
			},
			wantWrites: []string{"update pi-config"},
			wantRV:     "updated", wantData: wantData,
		},
		{
			name: "not owned: never written",
			prepare: func(w *childWorld) {
				w.existing(configMap(nil, map[string]string{"theirs": "x"}), true)
			},
			wantData: map[string]string{"theirs": "x"},
			wantErr:  `ConfigMap "pi-config" already exists and is not managed by MPIJob pi`,
			isErr:    func(err error) bool { return errors.Is(err, ErrResourceExists) },
		},
		{
			name: "controlled by another owner: never written",
			prepare: func(w *childWorld) {
				other := Owner{Kind: "MPIJob", Object: &metav1.ObjectMeta{Name: "pi", UID: "older-pi-uid"}}
				w.existing(configMap(&other, map[string]string{"hostfile": "old"}), true)
			},
			wantData: map[string]string{"hostfile": "old"},
			wantErr:  "not managed by MPIJob pi",
			isErr:    func(err error) bool { return errors.Is(err, ErrResourceExists) },
		},
		{
			name: "not owned and not cached: the failed create finds it",
			prepare: func(w *childWorld) {
				w.existing(configMap(nil, nil), false)
			},
			wantWrites: []string{"create pi-config"},
			wantData:   wantData,
			wantErr:    `ConfigMap "pi-config" already exists and is not managed by MPIJob pi`,
			isErr:      func(err error) bool { return errors.Is(err, ErrResourceExists) },
		},
		{
			name: "owned and not cached yet: the retry compares it",
			prepare: func(w *childWorld) {
				w.existing(configMap(&testOwner, nil), false)
			},
			wantWrites: []string{"create pi-config"},
			wantData:   wantData,
			wantErr:    "creating ConfigMap pi-config: ",
			isErr:      func(err error) bool { return apierrors.IsAlreadyExists(err) && !errors.Is(err, ErrResourceExists) },
		},
		{
			name: "owned, its labels taken away: relabelled, adopted and brought in line",
			prepare: func(w *childWorld) {
				w.existing(configMap(&testOwner, map[string]string{"hostfile": "old"}), false)
			},
			labels:     map[string]string{"app": "pi"},
			wantWrites: []string{"create pi-config", "update pi-config", "update pi-config"},
			wantRV:     "updated", wantData: wantData,
			wantLabels: map[string]string{"app": "pi"},
		},
		{
			name: "owned, its labels taken away, the relabelling refused: an error",
			prepare: func(w *childWorld) {
				w.existing(configMap(&testOwner, nil), false)
				w.updateErr = apierrors.NewForbidden(configMaps, "pi-config", errors.New("policy"))
			},
			labels:     map[string]string{"app": "pi"},
			wantWrites: []string{"create pi-config", "update pi-config"},
			wantData:   wantData,
			wantErr:    "restoring the labels of ConfigMap pi-config: ",
			isErr:      apierrors.IsForbidden,
		},
		{
			name: "not owned, labelled like a child: never written",
			prepare: func(w *childWorld) {
				cm := configMap(nil, nil)
				w.existing(cm, false)
			},
			labels:     map[string]string{"app": "pi"},
			wantWrites: []string{"create pi-config"},
			wantData:   wantData,
			wantErr:    "not managed by MPIJob pi",
			isErr:      func(err error) bool { return errors.Is(err, ErrResourceExists) },
		},
		{
			name: "exists and cannot be fetched: the create's error",
			prepare: func(w *childWorld) {
				w.existing(configMap(nil, nil), false)
				w.fetchErr = apierrors.NewTimeoutError("slow", 1)
			},
			wantWrites: []string{"create pi-config"},
			wantData:   wantData,
			wantErr:    "creating ConfigMap pi-config: ",
			isErr:      func(err error) bool { return apierrors.IsAlreadyExists(err) && !errors.Is(err, ErrResourceExists) },
		},
		{
			name: "create refused",
			prepare: func(w *childWorld) {
				w.createErr = apierrors.NewForbidden(configMaps, "pi-config", errors.New("quota"))
			},
			wantWrites: []string{"create pi-config"},
			wantData:   wantData,
			wantErr:    "creating ConfigMap pi-config: ",
			isErr:      apierrors.IsForbidden,
		},
		{
			name:     "cache fails",
			prepare:  func(w *childWorld) { w.getErr = errors.New("cache broken") },
			wantData: wantData,
			wantErr:  "getting ConfigMap pi-config: cache broken",
		},
		{
			name: "update conflicts: the cached object",
			prepare: func(w *childWorld) {
				cm := configMap(&testOwner, map[string]string{"hostfile": "old"})
				cm.ResourceVersion = "7"
				w.existing(cm, true)
				w.updateErr = apierrors.NewConflict(configMaps, "pi-config", errors.New("stale"))
			},
			wantWrites: []string{"update pi-config"},
			wantRV:     "7", wantData: map[string]string{"hostfile": "old"},
			wantErr: "updating ConfigMap pi-config: ",
			isErr:   apierrors.IsConflict,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			w := newChildWorld()
			tc.prepare(w)
			_, ctx := ktesting.NewTestContext(t)
			var meter Meter
			want := configMap(&testOwner, wantData)
			want.Labels = tc.labels
			got, err := Ensure(WithMeter(ctx, &meter), testOwner, w.child(), want)
			checkErr(t, err, tc.wantErr, tc.isErr)
			if meter.Bytes() != w.stored {
				t.Errorf("the meter counted %d bytes, the server stored %d", meter.Bytes(), w.stored)
			}
			if tc.wantLabels != nil && !maps.Equal(w.server["pi-config"].Labels, tc.wantLabels) {
				t.Errorf("labels on the server %v, want %v", w.server["pi-config"].Labels, tc.wantLabels)
			}
			if diff := cmp.Diff(tc.wantWrites, w.writes); diff != "" {
				t.Errorf("requests (-want +got):\n%s", diff)
			}
			if got.ResourceVersion != tc.wantRV || !maps.Equal(got.Data, tc.wantData) {
				t.Errorf("returned version %q with %v, want %q with %v", got.ResourceVersion, got.Data, tc.wantRV, tc.wantData)
			}
		})
	}
}

// TestEnsureHeld: under a meter that holds writes, Ensure sends no write:
// what would have to be created or updated is left as it is,
// with an error IsHeld knows; what is as wanted is returned as ever.
func TestEnsureHeld(t *testing.T) {
	wantData := map[string]string{"hostfile": "pi-worker-0 slots=1\n"}
	cases := []struct {
		name    string
		prepare func(w *childWorld)
		held    bool
	}{
		{name: "absent", prepare: func(*childWorld) {}, held: true},
		{name: "owned and different", prepare: func(w *childWorld) {
			w.existing(configMap(&testOwner, map[string]string{"hostfile": "old"}), true)
		}, held: true},
		{name: "owned and the same", prepare: func(w *childWorld) {
			w.existing(configMap(&testOwner, wantData), true)
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			w := newChildWorld()
			tc.prepare(w)
			_, ctx := ktesting.NewTestContext(t)
			meter := Meter{Hold: true}
			want := configMap(&testOwner, wantData)
			want.Labels = map[string]string{"app": "pi"}
			_, err := Ensure(WithMeter(ctx, &meter), testOwner, w.child(), want)
			if IsHeld(err) != tc.held {
				t.Errorf("error %v, held %t, want held %t", err, IsHeld(err), tc.held)
			}
			if len(w.writes) != 0 || meter.Bytes() != 0 {
				t.Errorf("requests %v and %d bytes written under a hold", w.writes, meter.Bytes())
			}
		})
	}
}

// TestEnsureKeepsWhatItDoesNotOwn: the update carries the existing object
// with only the merged parts changed, and the cached object stays as it was.
func TestEnsureKeepsWhatItDoesNotOwn(t *testing.T) {
	w := newChildWorld()
	cur := configMap(&testOwner, map[string]string{"hostfile": "old"})
	cur.Labels = map[string]string{"team": "a"}
	w.existing(cur, true)
	_, ctx := ktesting.NewTestContext(t)
	if _, err := Ensure(ctx, testOwner, w.child(), configMap(&testOwner, map[string]string{"hostfile": "new"})); err != nil {
		t.Fatal(err)
	}
	if got := w.server["pi-config"]; got.Labels["team"] != "a" || got.Data["hostfile"] != "new" {
		t.Errorf("server holds %+v, want the label kept and the data updated", got)
	}
	if cur.Data["hostfile"] != "old" {
		t.Error("Ensure modified the cached object")
	}
}

func checkErr(t *testing.T, err error, want string, is func(error) bool) {
	t.Helper()
	switch {
	case want == "" && err != nil:
		t.Errorf("err = %v, want none", err)
	case want != "" && (err == nil || !strings.Contains(err.Error(), want)):
		t.Errorf("err = %v, want one containing %q", err, want)
	case is != nil && !is(err):
		t.Errorf("err = %v, of the wrong kind", err)
	}
}

// TestChildOf: a child described by its lister and typed client is got,
// created and updated through them, and Keep leaves an existing one as it
// is.
func TestChildOf(t *testing.T) {
	client := fake.NewClientset()
	indexer := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	lister := corelisters.NewConfigMapLister(indexer)
	owner := testPodOwner()
	ch := ChildOf("ConfigMap", func(ns, name string) (*corev1.ConfigMap, error) { return lister.ConfigMaps(ns).Get(name) },
		func(ns string) TypedClient[*corev1.ConfigMap] { return client.CoreV1().ConfigMaps(ns) }, Keep[*corev1.ConfigMap])
	yes := true
	want := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "job-config",
		OwnerReferences: []metav1.OwnerReference{{Kind: "MPIJob", Name: "job", UID: "job-uid", Controller: &yes}}},
		Data: map[string]string{"hostfile": "a"}}
	ctx := context.Background()
	if _, err := Ensure(ctx, owner, ch, want); err != nil {
		t.Fatal(err)
	}
	created, err := ch.Fetch(ctx, "ns", "job-config")
	if err != nil || created.Data["hostfile"] != "a" {
		t.Fatalf("Fetch after the create: %v, %v", created, err)
	}
	if err := indexer.Add(created); err != nil {
		t.Fatal(err)
	}
	changed := want.DeepCopy()
	changed.Data["hostfile"] = "b"
	got, err := Ensure(ctx, owner, ch, changed)
	if err != nil || got.Data["hostfile"] != "a" {
		t.Errorf("Keep: Ensure gave %v, %v; want the existing object", got, err)
	}
	updated, err := ch.Update(ctx, changed)
	if err != nil || updated.Data["hostfile"] != "b" {
		t.Errorf("Update: %v, %v", updated, err)
	}
}
