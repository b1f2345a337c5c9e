package reconcile

import (
	"context"
	"errors"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2/ktesting"
)

// Written returns the newer of the cached object and the controller's own
// last write of it, and nothing the cache does not have.
func TestWritten(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	store := cache.NewStore(cache.MetaNamespaceKeyFunc)
	w := NewWritten[*corev1.ConfigMap](ctx, configMaps, store)
	version := func(rv string, data string) *corev1.ConfigMap {
		cm := configMap(&testOwner, map[string]string{"k": data})
		cm.ResourceVersion = rv
		return cm
	}
	var updateErr error
	ch := Child[*corev1.ConfigMap]{
		Kind: "ConfigMap",
		Get:  func(string, string) (*corev1.ConfigMap, error) { t.Fatal("read past Written"); return nil, nil },
		Update: func(_ context.Context, cm *corev1.ConfigMap) (*corev1.ConfigMap, error) {
			if updateErr != nil {
				return nil, updateErr
			}
			return cm.DeepCopy(), nil
		},
		Create: func(_ context.Context, cm *corev1.ConfigMap) (*corev1.ConfigMap, error) { return cm, nil },
	}.Remembering(w)
	get := func(step string) string {
		t.Helper()
		cm, err := ch.Get("ns", "pi-config")
		if apierrors.IsNotFound(err) {
			return "not found"
		}
		if err != nil {
			t.Fatalf("%s: %v", step, err)
		}
		return cm.ResourceVersion + " " + cm.Data["k"]
	}
	steps := []struct {
		name   string
		act    func()
		expect string
	}{
		{"nothing cached, nothing written", func() {}, "not found"},
		{"written, not cached: a deleted object stays gone", func() { mustUpdate(t, ch, version("3", "c")) }, "not found"},
		{"cached at an older version", func() { _ = store.Add(version("2", "b")) }, "3 c"},
		{"a refused write is not recorded", func() {
			updateErr = errors.New("refused")
			if _, err := ch.Update(ctx, version("9", "x")); err == nil {
				t.Fatal("the update did not fail")
			}
			updateErr = nil
		}, "3 c"},
		{"the cache catches up", func() { _ = store.Update(version("3", "c")) }, "3 c"},
		{"the cache moves past the write", func() { _ = store.Update(version("4", "d")) }, "4 d"},
		{"deleted from the cache", func() { _ = store.Delete(version("4", "d")) }, "not found"},
	}
	for _, s := range steps {
		s.act()
		if got := get(s.name); got != s.expect {
			t.Errorf("%s: got %q, want %q", s.name, got, s.expect)
		}
	}
}

func mustUpdate(t *testing.T, ch Child[*corev1.ConfigMap], cm *corev1.ConfigMap) {
	t.Helper()
	if _, err := ch.Update(context.Background(), cm); err != nil {
		t.Fatal(err)
	}
}
