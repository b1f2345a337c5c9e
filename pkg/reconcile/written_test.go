package reconcile

import (
	"context"
	"errors"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2/ktesting"
	testingclock "k8s.io/utils/clock/testing"
)

// Written returns the newer of the cached object and the controller's own
// last write of it; of an object the cache does not have, only one the
// controller created and whose deletion the informer has not shown. The
// informer's events forget the writes it shows.
func TestWritten(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	store := cache.NewStore(cache.MetaNamespaceKeyFunc)
	w := NewWritten[*corev1.ConfigMap](ctx, configMaps, store)
	clk := testingclock.NewFakeClock(time.Unix(1000, 0))
	w.clock = clk
	events := w.Events()
	version := func(uid, rv string, data string) *corev1.ConfigMap {
		cm := configMap(&testOwner, map[string]string{"k": data})
		cm.UID, cm.ResourceVersion = types.UID(uid), rv
		return cm
	}
	var writeErr error
	write := func(_ context.Context, cm *corev1.ConfigMap) (*corev1.ConfigMap, error) {
		if writeErr != nil {
			return nil, writeErr
		}
		return cm.DeepCopy(), nil
	}
	ch := Child[*corev1.ConfigMap]{
		Kind:   "ConfigMap",
		Get:    func(string, string) (*corev1.ConfigMap, error) { t.Fatal("read past Written"); return nil, nil },
		Update: write,
		Create: write,
	}.Remembering(w)
	cached := func(cm *corev1.ConfigMap) {
		_ = store.Update(cm)
		events.UpdateFunc(nil, cm)
	}
	deleted := func(cm *corev1.ConfigMap) {
		_ = store.Delete(cm)
		events.DeleteFunc(cache.DeletedFinalStateUnknown{Obj: cm})
	}
	steps := []struct {
		name   string
		act    func()
		expect string
		kept   int
	}{
		{"nothing cached, nothing written", func() {}, "not found", 0},
		{"updated, not cached: a deleted object stays gone", func() { mustWrite(t, ch.Update, version("a", "3", "c")) }, "not found", 1},
		{"cached at an older version", func() { cached(version("a", "2", "b")) }, "a 3 c", 1},
		{"a refused write is not recorded", func() {
			writeErr = errors.New("refused")
			if _, err := ch.Update(ctx, version("a", "9", "x")); err == nil {
				t.Fatal("the update did not fail")
			}
			writeErr = nil
		}, "a 3 c", 1},
		{"the cache catches up", func() { cached(version("a", "3", "c")) }, "a 3 c", 0},
		{"the cache moves past a write", func() {
			mustWrite(t, ch.Update, version("a", "5", "e"))
			cached(version("a", "6", "f"))
		}, "a 6 f", 0},
		{"deleted from the cache", func() { deleted(version("a", "6", "f")) }, "not found", 0},
		{"created, not cached yet", func() { mustWrite(t, ch.Create, version("b", "7", "g")) }, "b 7 g", 1},
		{"the deletion of the earlier object seen late", func() { events.DeleteFunc(version("a", "6", "f")) }, "b 7 g", 1},
		{"created, then deleted before the cache showed it", func() { events.DeleteFunc(version("b", "7", "g")) }, "not found", 0},
		{"created, and the cache never shows it", func() {
			mustWrite(t, ch.Create, version("c", "8", "h"))
			clk.Step(ExpectationsTimeout + time.Second)
		}, "not found", 0},
	}
	for _, s := range steps {
		s.act()
		got := "not found"
		cm, err := ch.Get("ns", "pi-config")
		switch {
		case err == nil:
			got = string(cm.UID) + " " + cm.ResourceVersion + " " + cm.Data["k"]
		case !apierrors.IsNotFound(err):
			t.Fatalf("%s: %v", s.name, err)
		}
		if got != s.expect || w.len() != s.kept {
			t.Errorf("%s: got %q with %d writes kept, want %q with %d", s.name, got, w.len(), s.expect, s.kept)
		}
	}
}

func mustWrite(t *testing.T, write func(context.Context, *corev1.ConfigMap) (*corev1.ConfigMap, error), cm *corev1.ConfigMap) {
	t.Helper()
	if _, err := write(context.Background(), cm); err != nil {
		t.Fatal(err)
	}
}
