package azqtest

import (
	"log/slog"
	"strings"
	"sync"
	"testing"
)

// testLogger returns a logger that writes to t.Log, at debug level: the
// server's record of each request (server.Options.Logger), with the
// client's x-ms-client-request-id and trace context, shows in the output
// of a test that fails, or that runs with -v. A benchmark's log is
// printed whatever happens, so a benchmark's gets server errors only. It
// stops writing when the test's cleanup is done, so that a request served
// after the test ended cannot make t.Log panic; register it before the
// server's own cleanup, which then runs first.
func testLogger(t testing.TB) *slog.Logger {
	w := &testLogWriter{t: t}
	t.Cleanup(w.stop)
	level := slog.LevelDebug
	if _, ok := t.(*testing.B); ok {
		level = slog.LevelError
	}
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: level}))
}

// testLogWriter writes each record the handler formats as one t.Log line.
type testLogWriter struct {
	mu      sync.Mutex // guards stopped, and orders Write and stop
	t       testing.TB
	stopped bool
}

func (w *testLogWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.stopped {
		w.t.Log("azqtest server: " + strings.TrimSuffix(string(p), "\n"))
	}
	return len(p), nil
}

func (w *testLogWriter) stop() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.stopped = true
}
