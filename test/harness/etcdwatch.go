package harness

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	"k8s.io/client-go/kubernetes/scheme"
)

// The API server's watches end when it restarts, and each watch of a
// client resumes (or lists again, skipping versions) on its own, so two
// kinds can reach a client out of order and versions written meanwhile can
// be missed. etcd's own watch is one stream of every write in revision
// order, and an API server restart does not touch it: WatchEtcd follows
// that, through etcd's JSON gateway, for the harnesses that restart the
// API server.

// etcdKV and etcdEvent are the fields of etcd's watch responses used here;
// byte fields come base64-encoded, int64 fields as strings.
type etcdKV struct {
	Key         []byte `json:"key"`
	ModRevision string `json:"mod_revision"`
	Value       []byte `json:"value"`
}

type etcdEvent struct {
	Type   string  `json:"type"` // "DELETE", or empty for a put
	KV     etcdKV  `json:"kv"`
	PrevKV *etcdKV `json:"prev_kv"`
}

type etcdWatchResponse struct {
	Result struct {
		Created         bool        `json:"created"`
		Canceled        bool        `json:"canceled"`
		CancelReason    string      `json:"cancel_reason"`
		CompactRevision string      `json:"compact_revision"`
		Events          []etcdEvent `json:"events"`
	} `json:"result"`
	Error *struct {
		Message string `json:"message"`
	} `json:"error"`
}

// storageCodec decodes the protobuf the API server stores built-in
// objects in.
var storageCodec = protobuf.NewSerializer(scheme.Scheme, scheme.Scheme)

// EtcdWatch follows the writes to pods, ConfigMaps and Roles of one
// namespace in etcd.
type EtcdWatch struct {
	endpoint string
	prefixes map[string]string // key prefix -> kind
	on       func(obj any, deleted bool)

	cancel context.CancelFunc
	done   chan struct{}
	mu     sync.Mutex
	// last is the revision of the last event handled.
	last int64
	// lost are the events of the namespace that could not be handled;
	// resumed the streams that broke and were resumed, which loses nothing.
	lost, resumed []string
}

// WatchEtcd starts following, from etcd's client endpoint (such as
// http://127.0.0.1:2379), every write to the pods, ConfigMaps and Roles of
// namespace ns from now on, and calls on with each object, decoded, its
// resourceVersion set to the write's revision; for a deletion, with the
// last version and deleted set. Calls come from one goroutine, in revision
// order. It returns once etcd has started the watch.
func WatchEtcd(ctx context.Context, endpoint, ns string, on func(obj any, deleted bool)) (*EtcdWatch, error) {
	w := &EtcdWatch{endpoint: strings.TrimSuffix(endpoint, "/"), on: on, done: make(chan struct{}),
		prefixes: map[string]string{
			"/registry/pods/" + ns + "/":       "pod",
			"/registry/configmaps/" + ns + "/": "configmap",
			"/registry/roles/" + ns + "/":      "role",
		}}
	ctx, w.cancel = context.WithCancel(ctx)
	started := make(chan error, 1)
	go w.run(ctx, started)
	select {
	case err := <-started:
		if err != nil {
			w.cancel()
			<-w.done
			return nil, err
		}
		return w, nil
	case <-time.After(30 * time.Second):
		w.cancel()
		<-w.done
		return nil, fmt.Errorf("etcd at %s did not start a watch within 30 s", endpoint)
	}
}

// Stop ends the watch and returns what went wrong meanwhile: the events
// that could not be handled (their checks are then incomplete), and the
// streams that broke and were resumed after their last revision.
func (w *EtcdWatch) Stop() (lost, resumed []string) {
	w.cancel()
	<-w.done
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.lost, w.resumed
}

func (w *EtcdWatch) note(list *[]string, format string, args ...any) {
	w.mu.Lock()
	defer w.mu.Unlock()
	*list = append(*list, fmt.Sprintf(format, args...))
}

// run keeps a watch stream open, resuming after the last revision handled
// when one breaks.
func (w *EtcdWatch) run(ctx context.Context, started chan<- error) {
	defer close(w.done)
	first := true
	for ctx.Err() == nil {
		err := w.stream(ctx, func() {
			if first {
				first = false
				started <- nil
			}
		})
		if ctx.Err() != nil {
			return
		}
		if first {
			started <- err
			return
		}
		w.note(&w.resumed, "etcd watch stream ended (%v); resumed after revision %d", err, w.last)
		time.Sleep(200 * time.Millisecond)
	}
}

func (w *EtcdWatch) stream(ctx context.Context, created func()) error {
	req := map[string]any{
		"key":       []byte("/registry/"),
		"range_end": []byte("/registry0"),
		"prev_kv":   true,
	}
	if w.last > 0 {
		req["start_revision"] = strconv.FormatInt(w.last+1, 10)
	}
	body, err := json.Marshal(map[string]any{"create_request": req})
	if err != nil {
		return err
	}
	hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, w.endpoint+"/v3/watch", bytes.NewReader(body))
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(hreq)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("POST /v3/watch: %s", resp.Status)
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 256<<20)
	for sc.Scan() {
		var r etcdWatchResponse
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			return fmt.Errorf("reading the watch stream: %w", err)
		}
		switch {
		case r.Error != nil:
			return fmt.Errorf("etcd: %s", r.Error.Message)
		case r.Result.Canceled:
			return fmt.Errorf("etcd canceled the watch: %s (compacted to %s)", r.Result.CancelReason, r.Result.CompactRevision)
		case r.Result.Created:
			created()
		}
		for _, e := range r.Result.Events {
			w.handle(e)
		}
	}
	if err := sc.Err(); err != nil {
		return err
	}
	return fmt.Errorf("end of stream")
}

func (w *EtcdWatch) handle(e etcdEvent) {
	rev, _ := strconv.ParseInt(e.KV.ModRevision, 10, 64)
	w.last = max(w.last, rev)
	kind := ""
	for prefix, k := range w.prefixes {
		if strings.HasPrefix(string(e.KV.Key), prefix) {
			kind = k
		}
	}
	if kind == "" {
		return
	}
	deleted := e.Type == "DELETE"
	value := e.KV.Value
	if deleted {
		if e.PrevKV == nil {
			w.note(&w.lost, "deletion of %s at revision %d without its last version", e.KV.Key, rev)
			return
		}
		value = e.PrevKV.Value
	}
	obj, err := DecodeStored(value, rev)
	if err != nil {
		w.note(&w.lost, "decoding %s at revision %d: %v", e.KV.Key, rev, err)
		return
	}
	w.on(obj, deleted)
}

// DecodeStored decodes an object as the API server stores it in etcd and
// gives it the resourceVersion rev.
func DecodeStored(value []byte, rev int64) (runtime.Object, error) {
	obj, _, err := storageCodec.Decode(value, nil, nil)
	if err != nil {
		return nil, err
	}
	m, err := meta.Accessor(obj)
	if err != nil {
		return nil, err
	}
	m.SetResourceVersion(strconv.FormatInt(rev, 10))
	return obj, nil
}
