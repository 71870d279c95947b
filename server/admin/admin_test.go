package admin

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/azqlib/azq/faults"
	"github.com/benbjohnson/clock"
)

// call serves one request from a client on this machine and returns the
// status and the body.
func call(t *testing.T, h http.Handler, method, target string, body io.Reader, hdr map[string]string) (int, string) {
	t.Helper()
	r := httptest.NewRequest(method, "http://127.0.0.1:10001"+target, body)
	r.RemoteAddr = "127.0.0.1:40000"
	for k, v := range hdr {
		r.Header.Set(k, v)
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	if ct := w.Header().Get("Content-Type"); ct != "application/json" && !strings.HasPrefix(target, UIPrefix) {
		t.Errorf("%s %s: Content-Type %q", method, target, ct)
	}
	return w.Code, w.Body.String()
}

// errorOf is the message of a JSON refusal.
func errorOf(t *testing.T, body string) string {
	t.Helper()
	var e errorReply
	if err := json.Unmarshal([]byte(body), &e); err != nil || e.Error == "" {
		t.Fatalf("not a JSON refusal: %v: %s", err, body)
	}
	return e.Error
}

func newMock(t time.Time) *clock.Mock {
	m := clock.NewMock()
	m.Set(t)
	return m
}

func TestHealth(t *testing.T) {
	down := errors.New("account acct2: disk full")
	for _, tc := range []struct {
		name   string
		opts   Options
		status int
		want   Health
	}{
		{"no check", Options{Version: "v"}, 200, Health{Status: "ok", Version: "v"}},
		{"clock control", Options{Version: "v", Clock: NewClock(clock.NewMock(), nil)}, 200, Health{Status: "ok", Version: "v", ClockControl: true}},
		{"healthy", Options{Health: func(context.Context) error { return nil }}, 200, Health{Status: "ok"}},
		{"unavailable", Options{Health: func(context.Context) error { return down }}, 503, Health{Status: "unavailable", Reason: down.Error()}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := New(tc.opts)
			status, body := call(t, h, "GET", "/_azq/health", nil, nil)
			var got Health
			if err := json.Unmarshal([]byte(body), &got); err != nil {
				t.Fatal(err)
			}
			if status != tc.status || got != tc.want {
				t.Fatalf("%d %+v, want %d %+v", status, got, tc.status, tc.want)
			}
			if status, _ := call(t, h, "HEAD", "/_azq/health", nil, nil); status != tc.status {
				t.Errorf("HEAD: %d", status)
			}
			if status, body := call(t, h, "POST", "/_azq/health", nil, nil); status != 405 || errorOf(t, body) != "/_azq/health takes GET" {
				t.Errorf("POST: %d %s", status, body)
			}
		})
	}
}

// The health check's context is the request's: a check that waits on a
// database ends with the client.
func TestHealthTakesTheRequestsContext(t *testing.T) {
	h := New(Options{Health: func(ctx context.Context) error { <-ctx.Done(); return ctx.Err() }})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	r := httptest.NewRequest("GET", "/_azq/health", nil).WithContext(ctx)
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	if w.Code != 503 || !strings.Contains(w.Body.String(), "context canceled") {
		t.Fatalf("%d %s", w.Code, w.Body)
	}
}

func TestReset(t *testing.T) {
	var resets int
	fail := false
	h := New(Options{Reset: func(context.Context) error {
		if fail {
			return errors.New("the disk is gone")
		}
		resets++
		return nil
	}})
	if status, body := call(t, h, "POST", "/_azq/reset", nil, nil); status != 200 || body != `{"status":"reset"}`+"\n" || resets != 1 {
		t.Fatalf("reset: %d %s, %d resets", status, body, resets)
	}
	if status, body := call(t, h, "GET", "/_azq/reset", nil, nil); status != 405 || errorOf(t, body) != "/_azq/reset takes POST" || resets != 1 {
		t.Fatalf("GET: %d %s", status, body)
	}
	fail = true
	if status, body := call(t, h, "POST", "/_azq/reset", nil, nil); status != 500 || errorOf(t, body) != "reset: the disk is gone" {
		t.Fatalf("a failed reset: %d %s", status, body)
	}
}

// What is off says so, with the hint of the program that serves it, and
// changes nothing.
func TestOffEndpoints(t *testing.T) {
	for _, tc := range []struct {
		hints               Hints
		clock, reset, fault string
		ui                  string
	}{
		{Hints{}, "clock control is off", "reset is off", "fault injection is off", "the web UI is off\n"},
		{Hints{Clock: "start azqd with -clock-control", Reset: "start azqd with -clock-control", Faults: "start azqd with -faults FILE or -fault-control", UI: "start azqd with -ui"},
			"clock control is off; start azqd with -clock-control", "reset is off; start azqd with -clock-control",
			"fault injection is off; start azqd with -faults FILE or -fault-control", "the web UI is off; start azqd with -ui\n"},
	} {
		h := New(Options{Hints: tc.hints})
		for _, c := range []struct{ method, path, want string }{
			{"GET", "/_azq/clock", tc.clock},
			{"POST", "/_azq/clock/advance?by=1h", tc.clock},
			{"POST", "/_azq/reset", tc.reset},
			{"GET", "/_azq/faults", tc.fault},
			{"DELETE", "/_azq/faults", tc.fault},
		} {
			if status, body := call(t, h, c.method, c.path, nil, nil); status != 404 || errorOf(t, body) != c.want {
				t.Errorf("%s %s: %d %s, want 404 %q", c.method, c.path, status, body, c.want)
			}
		}
		if status, body := call(t, h, "GET", "/_azq/ui/", nil, nil); status != 404 || body != tc.ui {
			t.Errorf("the web view: %d %q, want 404 %q", status, body, tc.ui)
		}
	}
}

// A request for no endpoint is told which there are: those that are on,
// or the program's own list.
func TestNoSuchEndpoint(t *testing.T) {
	inj, err := faults.New(faults.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		opts Options
		want string
	}{
		{Options{}, "no such endpoint; see GET /_azq/health"},
		{Options{Clock: NewClock(clock.NewMock(), nil), Reset: func(context.Context) error { return nil }, Faults: inj},
			"no such endpoint; see GET /_azq/health; GET /_azq/clock; POST /_azq/clock/advance?by=; POST /_azq/clock/set?to=; POST /_azq/reset; GET, POST and DELETE /_azq/faults"},
		{Options{Hints: Hints{Endpoints: "see the manual"}}, "no such endpoint; see the manual"},
	} {
		for _, p := range []string{"/_azq/nothing", "/_azq/", "/_azq"} {
			if status, body := call(t, New(tc.opts), "GET", p, nil, nil); status != 404 || errorOf(t, body) != tc.want {
				t.Errorf("GET %s: %d %s, want 404 %q", p, status, body, tc.want)
			}
		}
	}
}

// Mount hands the admin endpoints' paths to the Handler and every other
// one to the API, /_azqx among them.
func TestMount(t *testing.T) {
	api := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(299)
	})
	m := New(Options{}).Mount(api)
	for p, want := range map[string]int{"/_azq/health": 200, "/_azq": 404, "/_azq/x": 404, "/_azqx": 299, "/devstoreaccount1/q": 299, "/": 299} {
		if status, _ := call(t, m, "GET", p, nil, nil); status != want {
			t.Errorf("GET %s: %d, want %d", p, status, want)
		}
	}
}

// /_azq/metrics is served without the guard, as the caller guards it or
// not; the web view is behind it.
func TestMetricsAndUI(t *testing.T) {
	served := func(name string) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, name+" "+r.URL.Path) })
	}
	h := New(Options{Metrics: served("metrics"), UI: served("ui")})
	for _, tc := range []struct {
		path, host string
		status     int
		body       string
	}{
		{"/_azq/metrics", "127.0.0.1:10001", 200, "metrics /_azq/metrics"},
		{"/_azq/metrics", "rebind.evil.example", 200, "metrics /_azq/metrics"},
		{"/_azq/ui", "127.0.0.1:10001", 200, "ui /_azq/ui"},
		{"/_azq/ui/a/acct/q", "localhost:10001", 200, "ui /_azq/ui/a/acct/q"},
		{"/_azq/ui/", "rebind.evil.example", 421, ""},
		{"/_azq/uix", "127.0.0.1:10001", 404, ""},
	} {
		r := httptest.NewRequest("GET", "http://"+tc.host+tc.path, nil)
		r.RemoteAddr = "127.0.0.1:40000"
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != tc.status || tc.body != "" && w.Body.String() != tc.body {
			t.Errorf("GET %s for Host %s: %d %q, want %d %q", tc.path, tc.host, w.Code, w.Body, tc.status, tc.body)
		}
	}
}
