package azqtest

import (
	"net/http"
	"strings"
	"sync"
	"testing"
)

// recordingTB is a testing.TB that keeps what is logged to it and the
// cleanups registered with it, for the test to run.
type recordingTB struct {
	testing.TB
	mu       sync.Mutex
	lines    []string
	cleanups []func()
}

func (r *recordingTB) Log(args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, a := range args {
		r.lines = append(r.lines, a.(string))
	}
}

func (r *recordingTB) Cleanup(f func()) { r.cleanups = append(r.cleanups, f) }

func (r *recordingTB) logged() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return strings.Join(r.lines, "\n")
}

// NewServer's server logs each request to the test's log, with the
// client's request id, and stops logging once the test's cleanups ran.
func TestServerLogsToTheTest(t *testing.T) {
	rec := &recordingTB{TB: t}
	s := NewServer(rec)
	defer func() {
		for i := len(rec.cleanups) - 1; i >= 0; i-- { // as package testing runs them
			rec.cleanups[i]()
		}
		before := rec.logged()
		s.Handler.ServeHTTP(httptestRecorder{}, mustRequest(t, s.Endpoint+"?comp=list"))
		if after := rec.logged(); after != before {
			t.Errorf("logged after the cleanups:\n%s", strings.TrimPrefix(after, before))
		}
	}()
	req := mustRequest(t, s.Endpoint+"?comp=list")
	req.Header.Set("x-ms-client-request-id", "find-me-42")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if got := rec.logged(); !strings.Contains(got, "client_request_id=find-me-42") || !strings.Contains(got, "op=ListQueues") {
		t.Fatalf("the test's log:\n%s", got)
	}
}

func mustRequest(t *testing.T, url string) *http.Request {
	t.Helper()
	req, err := http.NewRequest("GET", url, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("x-ms-version", "2021-12-02")
	return req
}

// httptestRecorder is a ResponseWriter that keeps nothing.
type httptestRecorder struct{}

func (httptestRecorder) Header() http.Header         { return http.Header{} }
func (httptestRecorder) Write(p []byte) (int, error) { return len(p), nil }
func (httptestRecorder) WriteHeader(int)             {}
