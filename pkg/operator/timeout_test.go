package operator

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

// TestRequestTimeout: a request the server holds fails after the timeout;
// a watch the server holds longer is left alone, and a quick request's body
// is read whole.
func TestRequestTimeout(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/slow":
			select {
			case <-release:
			case <-r.Context().Done():
			}
		case "/api/v1/pods":
			if r.URL.Query().Get("watch") == "true" {
				w.(http.Flusher).Flush()
				time.Sleep(300 * time.Millisecond)
			}
			_, _ = w.Write([]byte("done"))
		}
	}))
	defer srv.Close()
	defer close(release)
	client := &http.Client{Transport: withRequestTimeout(100 * time.Millisecond)(http.DefaultTransport)}

	start := time.Now()
	_, err := client.Get(srv.URL + "/slow")
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("held request: %v, want a deadline exceeded", err)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("held request failed after %v", took)
	}

	resp, err := client.Get(srv.URL + "/api/v1/pods?watch=true")
	if err != nil {
		t.Fatalf("watch: %v", err)
	}
	body, err := io.ReadAll(resp.Body)
	if err != nil || string(body) != "done" {
		t.Errorf("watch held past the timeout: read %q, %v; want its whole body", body, err)
	}
	_ = resp.Body.Close()

	resp, err = client.Get(srv.URL + "/api/v1/pods")
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
}
