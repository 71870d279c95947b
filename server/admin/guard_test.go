package admin

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/azqlib/azq/faults"
)

// guardedHandler has every endpoint on, and counts what changes.
func guardedHandler(t *testing.T, g *Guard) (h *Handler, resets *int) {
	t.Helper()
	inj, err := faults.New(faults.Options{})
	if err != nil {
		t.Fatal(err)
	}
	resets = new(int)
	h = New(Options{Clock: NewClock(newMock(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)), nil), Faults: inj, Guard: g,
		Reset: func(context.Context) error { *resets++; return nil },
		UI:    http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ui") })})
	return h, resets
}

// serve serves one request for host from peer.
func serve(h http.Handler, method, target, host, peer string, hdr map[string]string) *httptest.ResponseRecorder {
	r := httptest.NewRequest(method, "http://"+host+target, strings.NewReader(hdr["body"]))
	r.RemoteAddr = peer
	for k, v := range hdr {
		if k != "body" {
			r.Header.Set(k, v)
		}
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

// Beyond loopback the endpoints answer clients on this machine only,
// unless Remote; the health check answers everyone.
func TestGuardLoopbackOnly(t *testing.T) {
	for _, remote := range []bool{false, true} {
		for _, hint := range []string{"", "start azqd with -admin-remote to serve them to others (they take no credentials)"} {
			h, _ := guardedHandler(t, NewGuard(GuardOptions{Remote: remote, Hints: Hints{Remote: hint}}))
			for _, tc := range []struct {
				path, peer string
				want       int
			}{
				{"/_azq/faults", "192.0.2.7:40000", map[bool]int{false: 403, true: 200}[remote]},
				{"/_azq/ui/", "192.0.2.7:40000", map[bool]int{false: 403, true: 200}[remote]},
				{"/_azq/clock", "[2001:db8::1]:40000", map[bool]int{false: 403, true: 200}[remote]},
				{"/_azq/faults", "127.0.0.1:40000", 200},
				{"/_azq/faults", "[::1]:40000", 200},
				{"/_azq/health", "192.0.2.7:40000", 200},
			} {
				w := serve(h, "GET", tc.path, "127.0.0.1:10001", tc.peer, nil)
				if w.Code != tc.want {
					t.Errorf("remote %v, %s from %s: %d, want %d (%s)", remote, tc.path, tc.peer, w.Code, tc.want, w.Body)
				}
				want := "the admin endpoints answer clients on this machine only; set admin.GuardOptions.Remote to serve them to others (they take no credentials)"
				if hint != "" {
					want = "the admin endpoints answer clients on this machine only; " + hint
				}
				if w.Code == 403 && errorOf(t, w.Body.String()) != want {
					t.Errorf("the refusal: %s, want %q", w.Body, want)
				}
			}
		}
	}
}

// crossSite is what a browser sends with a form another site submits.
var crossSite = map[string]string{"Origin": "https://evil.example", "Sec-Fetch-Site": "cross-site", "Content-Type": "application/x-www-form-urlencoded"}

// A cross-site request changes nothing: reset, clock, faults and web
// view alike answer 403. The same requests from a program (no browser
// metadata) or from the page's own origin are served.
func TestGuardRefusesCrossSite(t *testing.T) {
	h, resets := guardedHandler(t, nil)
	changes := []struct{ method, target, body string }{
		{"POST", "/_azq/reset", ""},
		{"POST", "/_azq/clock/advance?by=24h", ""},
		{"POST", "/_azq/clock/set?to=2100-01-01T00:00:00Z", ""},
		{"POST", "/_azq/faults", `{"rules": [{"then": {"network": "reset"}}]}`},
		{"DELETE", "/_azq/faults", ""},
		{"POST", "/_azq/ui/clock/advance", "by=24h"},
	}
	for _, c := range changes {
		hdr := map[string]string{"body": c.body}
		for k, v := range crossSite {
			hdr[k] = v
		}
		if w := serve(h, c.method, c.target, "127.0.0.1:10001", "127.0.0.1:40000", hdr); w.Code != 403 ||
			errorOf(t, w.Body.String()) != "cross-site requests may not change the emulator" {
			t.Errorf("cross-site %s %s: %d %s", c.method, c.target, w.Code, w.Body)
		}
	}
	if *resets != 0 || !h.opts.Clock.Now().Equal(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)) || len(h.opts.Faults.Status().Rules) != 0 {
		t.Fatalf("cross-site requests changed something: %d resets, clock %v, %d rules", *resets, h.opts.Clock.Now(), len(h.opts.Faults.Status().Rules))
	}
	same := map[string]string{"Origin": "http://127.0.0.1:10001", "Sec-Fetch-Site": "same-origin"}
	for _, hdr := range []map[string]string{nil, same} {
		if w := serve(h, "POST", "/_azq/clock/advance?by=1h", "127.0.0.1:10001", "127.0.0.1:40000", hdr); w.Code != 200 {
			t.Errorf("advance with %v: %d %s", hdr, w.Code, w.Body)
		}
	}
	if w := serve(h, "POST", "/_azq/reset", "127.0.0.1:10001", "127.0.0.1:40000", nil); w.Code != 200 || *resets != 1 {
		t.Errorf("a program's reset: %d %s", w.Code, w.Body)
	}
}

// DNS rebinding: a page under its own name that resolves to 127.0.0.1 is
// same-origin to the browser, but names its Host: the endpoints refuse
// it, reads included (421), unless the name is allowed. The health check
// answers any Host.
func TestGuardRefusesForeignHost(t *testing.T) {
	for _, tc := range []struct{ hint, want string }{
		{"", "allow a name with admin.GuardOptions.Hosts"},
		{"start azqd with -allow-host NAME to allow a name", "start azqd with -allow-host NAME to allow a name"},
	} {
		h, resets := guardedHandler(t, NewGuard(GuardOptions{Hosts: []string{"queues.test"}, Hints: Hints{Host: tc.hint}}))
		foreign := "rebind.evil.example:10001"
		same := map[string]string{"Origin": "http://" + foreign, "Sec-Fetch-Site": "same-origin"}
		for _, r := range []struct{ method, target string }{
			{"GET", "/_azq/ui/"},
			{"GET", "/_azq/clock"},
			{"GET", "/_azq/faults"},
			{"POST", "/_azq/reset"},
			{"POST", "/_azq/clock/advance?by=1h"},
			{"GET", "/_azq/nothing"},
		} {
			w := serve(h, r.method, r.target, foreign, "127.0.0.1:40000", same)
			if msg := errorOf(t, w.Body.String()); w.Code != http.StatusMisdirectedRequest || !strings.HasSuffix(msg, "; "+tc.want) ||
				!strings.Contains(msg, "not to rebind.evil.example:10001") {
				t.Errorf("%s %s for Host %s: %d %s", r.method, r.target, foreign, w.Code, w.Body)
			}
		}
		if *resets != 0 {
			t.Fatal("a foreign Host reset the queues")
		}
		if w := serve(h, "GET", "/_azq/health", foreign, "127.0.0.1:40000", nil); w.Code != 200 {
			t.Errorf("/_azq/health for Host %s: %d", foreign, w.Code)
		}
		for _, host := range []string{"localhost:10001", "[::1]:10001", "devstoreaccount1.localhost:10001", "queues.test:10001", "QUEUES.test."} {
			if w := serve(h, "GET", "/_azq/ui/", host, "127.0.0.1:40000", nil); w.Code != 200 {
				t.Errorf("Host %s: %d", host, w.Code)
			}
		}
	}
}

// Wrap puts anything behind the guard, as azqd's metrics on loopback.
func TestGuardWrap(t *testing.T) {
	g := NewGuard(GuardOptions{})
	if g.Wrap(nil) != nil {
		t.Fatal("Wrap(nil) is not nil")
	}
	var served int
	h := g.Wrap(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { served++ }))
	if w := serve(h, "GET", "/metrics", "127.0.0.1:10001", "127.0.0.1:40000", nil); w.Code != 200 || served != 1 {
		t.Fatalf("loopback: %d", w.Code)
	}
	for _, c := range []struct {
		host, peer string
		want       int
	}{
		{"rebind.evil.example", "127.0.0.1:40000", 421},
		{"127.0.0.1:10001", "192.0.2.7:40000", 403},
	} {
		if w := serve(h, "GET", "/metrics", c.host, c.peer, nil); w.Code != c.want || served != 1 || w.Header().Get("Content-Type") != "application/json" {
			t.Errorf("Host %s from %s: %d %v", c.host, c.peer, w.Code, w.Header())
		}
	}
}
