package operator

import (
	"context"
	"io"
	"net/http"
	"strings"
	"time"
)

// RequestTimeout bounds every request of the operator to the API server
// but its watches: a request that an admission webhook (one tenant's) or an
// overloaded server holds fails after it, and its sync is retried with
// backoff, instead of holding a queue worker that every other job needs.
// The API server's own limits are looser: a webhook may take up to 30 s and
// a request up to a minute.
const RequestTimeout = 20 * time.Second

// withRequestTimeout wraps a client's transport so that each request but a
// watch ends after timeout, the reading of its response included.
func withRequestTimeout(timeout time.Duration) func(http.RoundTripper) http.RoundTripper {
	return func(next http.RoundTripper) http.RoundTripper {
		return roundTripperFunc(func(req *http.Request) (*http.Response, error) {
			if isWatch(req) {
				return next.RoundTrip(req)
			}
			ctx, cancel := context.WithTimeout(req.Context(), timeout)
			resp, err := next.RoundTrip(req.WithContext(ctx))
			if err != nil {
				cancel()
				return nil, err
			}
			resp.Body = &cancelOnClose{ReadCloser: resp.Body, cancel: cancel}
			return resp, nil
		})
	}
}

// isWatch tells a watch (or a streamed list) from a request that ends.
func isWatch(req *http.Request) bool {
	q := req.URL.Query()
	return q.Get("watch") == "true" || q.Get("watch") == "1" || strings.Contains(req.URL.Path, "/watch/")
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

// cancelOnClose releases a request's deadline once its body is closed.
type cancelOnClose struct {
	io.ReadCloser
	cancel context.CancelFunc
}

func (c *cancelOnClose) Close() error {
	err := c.ReadCloser.Close()
	c.cancel()
	return err
}
