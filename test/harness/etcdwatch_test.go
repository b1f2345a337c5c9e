package harness

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

func stored(t *testing.T, obj runtime.Object) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := storageCodec.Encode(obj, &b); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// TestWatchEtcd serves two watch streams as etcd's gateway does: the first
// breaks after a few events, the second must resume after them.
func TestWatchEtcd(t *testing.T) {
	objs := Objects{Job: "j"}
	pod := objs.Worker("j-worker-0", "u", corev1.PodRunning, false, false)
	pod.APIVersion, pod.Kind = "v1", "Pod"
	cm := objs.ConfigMap("j-worker-0")
	cm.APIVersion, cm.Kind = "v1", "ConfigMap"
	line := func(events ...etcdEvent) string {
		var r etcdWatchResponse
		r.Result.Events = events
		b, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		return string(b) + "\n"
	}
	var mu sync.Mutex
	var requests []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body bytes.Buffer
		_, _ = body.ReadFrom(r.Body)
		mu.Lock()
		requests = append(requests, body.String())
		n := len(requests)
		mu.Unlock()
		fmt.Fprint(w, `{"result":{"header":{"revision":"9"},"created":true}}`+"\n")
		if n == 1 {
			fmt.Fprint(w, line(
				etcdEvent{KV: etcdKV{Key: []byte("/registry/pods/ns/j-worker-0"), ModRevision: "10", Value: stored(t, pod)}},
				etcdEvent{KV: etcdKV{Key: []byte("/registry/configmaps/other/j-config"), ModRevision: "11", Value: stored(t, cm)}},
				etcdEvent{KV: etcdKV{Key: []byte("/registry/configmaps/ns/j-config"), ModRevision: "12", Value: []byte("garbage")}},
			))
			return // the stream breaks
		}
		fmt.Fprint(w, line(etcdEvent{Type: "DELETE", KV: etcdKV{Key: []byte("/registry/pods/ns/j-worker-0"), ModRevision: "13"},
			PrevKV: &etcdKV{Key: []byte("/registry/pods/ns/j-worker-0"), ModRevision: "10", Value: stored(t, pod)}}))
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	}))
	defer srv.Close()

	type call struct {
		rv      string
		deleted bool
	}
	calls := make(chan call, 10)
	w, err := WatchEtcd(t.Context(), srv.URL, "ns", func(obj any, deleted bool) {
		calls <- call{obj.(*corev1.Pod).ResourceVersion, deleted}
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []call{{"10", false}, {"13", true}} {
		select {
		case got := <-calls:
			if got != want {
				t.Errorf("call %+v, want %+v", got, want)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("no call %+v", want)
		}
	}
	lost, resumed := w.Stop()
	if len(lost) != 1 || !strings.Contains(lost[0], "decoding /registry/configmaps/ns/j-config at revision 12") {
		t.Errorf("lost %q", lost)
	}
	if len(resumed) != 1 {
		t.Errorf("resumed %q", resumed)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(requests) < 2 || !strings.Contains(requests[1], `"start_revision":"13"`) {
		t.Errorf("the second watch did not resume after revision 12: %q", requests)
	}
}
