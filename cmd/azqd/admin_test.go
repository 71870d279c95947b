package main

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/azqlib/azq/server/admin"
)

// healthReply is the answer of GET /_azq/health, as the tests decode it.
type healthReply = admin.Health

// The admin endpoints' refusals name azqd's flags, word for word as azqd
// has always answered them.
func TestAdminRefusalsNameTheFlags(t *testing.T) {
	h := newAdminHandler(&config{}, admin.Options{Version: "test"}, nil, nil)
	for _, tc := range []struct{ method, path, want string }{
		{"GET", "/_azq/clock", `{"error":"clock control is off; start azqd with -clock-control"}`},
		{"POST", "/_azq/reset", `{"error":"reset is off; start azqd with -clock-control"}`},
		{"GET", "/_azq/faults", `{"error":"fault injection is off; start azqd with -faults FILE or -fault-control"}`},
		{"GET", "/_azq/ui/", "the web UI is off; start azqd with -ui"},
		{"GET", "/_azq/nothing", `{"error":"no such endpoint; see GET /_azq/health and /_azq/metrics; with -clock-control GET /_azq/clock, POST /_azq/clock/advance?by=, POST /_azq/clock/set?to=, POST /_azq/reset; with -faults or -fault-control GET, POST and DELETE /_azq/faults"}`},
	} {
		r := httptest.NewRequest(tc.method, "http://127.0.0.1:10001"+tc.path, nil)
		r.RemoteAddr = "127.0.0.1:40000"
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != http.StatusNotFound || w.Body.String() != tc.want+"\n" {
			t.Errorf("%s %s: %d %q, want 404 %q", tc.method, tc.path, w.Code, w.Body, tc.want)
		}
	}
}
