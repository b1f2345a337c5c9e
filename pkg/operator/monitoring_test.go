package operator

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("GET %s: reading the body: %v", url, err)
	}
	return resp.StatusCode, string(body)
}

func TestMonitoringServer(t *testing.T) {
	m, err := StartMonitoring("127.0.0.1:0", NewMonitoringHandler(&RunningController{}, false), nil)
	if err != nil {
		t.Fatal(err)
	}
	base := "http://" + m.Addr()

	if code, body := get(t, base+"/healthz"); code != http.StatusOK || body != "ok" {
		t.Errorf("/healthz = %d %q, want 200 \"ok\"", code, body)
	}
	code, body := get(t, base+"/metrics")
	if code != http.StatusOK {
		t.Errorf("/metrics = %d, want 200", code)
	}
	for _, name := range []string{"mpi_operator_is_leader", "mpi_operator_jobs_created_total", "go_goroutines"} {
		if !strings.Contains(body, name) {
			t.Errorf("/metrics does not contain %s", name)
		}
	}
	if code, _ := get(t, base+"/nothing-here"); code != http.StatusNotFound {
		t.Errorf("/nothing-here = %d, want 404", code)
	}

	m.Stop()
	if resp, err := http.Get(base + "/healthz"); err == nil {
		_ = resp.Body.Close()
		t.Error("the server still answers after Stop")
	}
}

func TestMonitoringProfiling(t *testing.T) {
	for _, on := range []bool{false, true} {
		rec := httptest.NewRecorder()
		NewMonitoringHandler(&RunningController{}, on).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/debug/pprof/heap?debug=1", nil))
		if served := rec.Code == http.StatusOK; served != on {
			t.Errorf("profiling %v: /debug/pprof/heap = %d", on, rec.Code)
		}
	}
}

// fakeChecker is a controller whose health the test sets.
type fakeChecker struct{ err error }

func (f fakeChecker) Healthy() error { return f.err }

func TestHealthz(t *testing.T) {
	stuck := fakeChecker{errors.New("a sync of an MPIJob has been running for 3m1s (limit 3m0s)")}
	cases := []struct {
		name     string
		running  func(r *RunningController)
		wantCode int
		wantBody string
	}{
		{name: "no controller running", running: func(*RunningController) {}, wantCode: http.StatusOK, wantBody: "ok"},
		{name: "healthy controller", running: func(r *RunningController) { r.Set(fakeChecker{}) }, wantCode: http.StatusOK, wantBody: "ok"},
		{
			name:     "stuck controller",
			running:  func(r *RunningController) { r.Set(stuck) },
			wantCode: http.StatusInternalServerError,
			wantBody: "a sync of an MPIJob has been running for 3m1s (limit 3m0s)",
		},
		{
			name:     "stuck controller gone",
			running:  func(r *RunningController) { r.Set(stuck); r.Clear() },
			wantCode: http.StatusOK,
			wantBody: "ok",
		},
		{
			name:     "a new controller replaces a stuck one",
			running:  func(r *RunningController) { r.Set(stuck); r.Set(fakeChecker{}) },
			wantCode: http.StatusOK,
			wantBody: "ok",
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := &RunningController{}
			tc.running(r)
			rec := httptest.NewRecorder()
			NewMonitoringHandler(r, false).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/healthz", nil))
			if rec.Code != tc.wantCode || rec.Body.String() != tc.wantBody {
				t.Errorf("/healthz = %d %q, want %d %q", rec.Code, rec.Body.String(), tc.wantCode, tc.wantBody)
			}
			if ct := rec.Header().Get("Content-Type"); ct != "text/plain; charset=utf-8" {
				t.Errorf("Content-Type = %q, want text/plain", ct)
			}
		})
	}
}

func TestRunningControllerCurrent(t *testing.T) {
	var r RunningController
	if c := r.Current(); c != nil {
		t.Errorf("Current() of the zero value = %v, want nil", c)
	}
	stuck := fakeChecker{errors.New("stuck")}
	r.Set(stuck)
	if c := r.Current(); c != stuck {
		t.Errorf("Current() = %v, want the controller set", c)
	}
	if err := r.Healthy(); err == nil || err.Error() != "stuck" {
		t.Errorf("Healthy() = %v, want the controller's answer", err)
	}
	r.Clear()
	if c := r.Current(); c != nil {
		t.Errorf("Current() after Clear = %v, want nil", c)
	}
	if err := r.Healthy(); err != nil {
		t.Errorf("Healthy() with no controller = %v, want nil", err)
	}
}

func TestMonitoringPortInUse(t *testing.T) {
	m, err := StartMonitoring("127.0.0.1:0", http.NotFoundHandler(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Stop()
	if m2, err := StartMonitoring(m.Addr(), http.NotFoundHandler(), nil); err == nil {
		m2.Stop()
		t.Fatal("a second server started on a port in use")
	}
}
