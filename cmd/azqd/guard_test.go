package main

import (
	"bytes"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/azqlib/azq/server"
	"github.com/azqlib/azq/server/admin"
	"github.com/benbjohnson/clock"
)

// send makes one request and returns its status and body.
func send(t *testing.T, method, u, host string, body io.Reader, hdr map[string]string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, u, body)
	if err != nil {
		t.Fatal(err)
	}
	if host != "" {
		req.Host = host
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := noRedirects.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// noRedirects returns a redirect as the answer, as a test wants to see it.
var noRedirects = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

// seed makes the queue "kept" with one message.
func seed(t *testing.T, d *daemon) {
	t.Helper()
	ctx := testContext(t)
	qc := queueClient(t, d.conns["devstoreaccount1"], "kept")
	if _, err := qc.Create(ctx, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := qc.EnqueueMessage(ctx, "still here", nil); err != nil {
		t.Fatal(err)
	}
}

func messagesIn(t *testing.T, d *daemon, queue string) int {
	t.Helper()
	p, err := queueClient(t, d.conns["devstoreaccount1"], queue).GetProperties(testContext(t), nil)
	if err != nil {
		return -1
	}
	return int(*p.ApproximateMessagesCount)
}

// crossSite is what a browser sends with a form another site submits.
var crossSite = map[string]string{"Origin": "https://evil.example", "Sec-Fetch-Site": "cross-site", "Content-Type": "application/x-www-form-urlencoded"}

// stateChanges are azqd's state-changing admin requests, as a cross-site
// form (or a fetch without preflight) could send them.
func stateChanges(base string) []struct{ method, url, body string } {
	return []struct{ method, url, body string }{
		{"POST", base + "/_azq/reset", ""},
		{"POST", base + "/_azq/clock/advance?by=24h", ""},
		{"POST", base + "/_azq/clock/set?to=2100-01-01T00:00:00Z", ""},
		{"POST", base + "/_azq/ui/a/devstoreaccount1/kept/clear", "back=/"},
		{"POST", base + "/_azq/ui/clock/advance", "by=24h&back=/"},
		{"POST", base + "/_azq/faults", `{"rules": [{"then": {"network": "reset"}}]}`},
		{"DELETE", base + "/_azq/faults", ""},
	}
}

// A cross-site request changes nothing: reset, clock, web view and faults
// alike answer 403. The same requests from a program (no browser
// metadata) are served, so the refusals are the guard's.
func TestCrossSiteRequestsRefused(t *testing.T) {
	dir := t.TempDir()
	rules := filepath.Join(dir, "faults.json")
	if err := os.WriteFile(rules, []byte(`{"rules": [{"name": "slow", "when": {"operations": ["ClearMessages"]}, "then": {"delay": "1ms"}}]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	d := start(t, "-clock-control", "-ui", "-faults", rules)
	seed(t, d)
	before := clockCall(t, "GET", d.base+"/_azq/clock", 200).Now
	for _, r := range stateChanges(d.base) {
		if status, body := send(t, r.method, r.url, "", strings.NewReader(r.body), crossSite); status != http.StatusForbidden {
			t.Errorf("cross-site %s %s: %d %s", r.method, r.url, status, body)
		}
	}
	if n := messagesIn(t, d, "kept"); n != 1 {
		t.Fatalf("after cross-site requests the queue holds %d messages", n)
	}
	if now := clockCall(t, "GET", d.base+"/_azq/clock", 200).Now; !now.Equal(before) {
		t.Fatalf("a cross-site request moved the clock from %v to %v", before, now)
	}
	if _, body := send(t, "GET", d.base+"/_azq/faults", "", nil, nil); !strings.Contains(body, `"name":"slow"`) || strings.Contains(body, "reset") {
		t.Fatalf("a cross-site request changed the rules: %s", body)
	}
	// Programs are served.
	if status, body := send(t, "POST", d.base+"/_azq/ui/a/devstoreaccount1/kept/clear", "", strings.NewReader("back=/"),
		map[string]string{"Content-Type": "application/x-www-form-urlencoded"}); status != http.StatusSeeOther || messagesIn(t, d, "kept") != 0 {
		t.Fatalf("a program's clear: %d %s", status, body)
	}
	if status, _ := send(t, "POST", d.base+"/_azq/reset", "", nil, nil); status != 200 || messagesIn(t, d, "kept") != -1 {
		t.Fatalf("a program's reset: %d", status)
	}
	// And a page of azqd's own origin.
	same := map[string]string{"Origin": d.base, "Sec-Fetch-Site": "same-origin"}
	if status, _ := send(t, "POST", d.base+"/_azq/clock/advance?by=1h", "", nil, same); status != 200 {
		t.Fatalf("a same-origin advance: %d", status)
	}
}

// DNS rebinding: a page under its own name resolving to 127.0.0.1 is
// same-origin to the browser, but names its Host; the admin endpoints
// refuse it, reads included (421), unless -allow-host names it. So do
// the metrics, which name the queues and their depths, while azqd
// listens on loopback (TestAPIForeignHostRefused has the API). The
// health check answers any Host.
func TestForeignHostRefused(t *testing.T) {
	d := start(t, "-clock-control", "-ui", "-fault-control")
	seed(t, d)
	u, _ := url.Parse(d.base)
	foreign := "rebind.evil.example:" + u.Port()
	same := map[string]string{"Origin": "http://" + foreign, "Sec-Fetch-Site": "same-origin"}
	for _, r := range []struct{ method, path string }{
		{"GET", "/_azq/ui/a/devstoreaccount1/kept"},
		{"GET", "/_azq/ui/"},
		{"GET", "/_azq/clock"},
		{"GET", "/_azq/faults"},
		{"POST", "/_azq/reset"},
		{"POST", "/_azq/clock/advance?by=1h"},
	} {
		status, body := send(t, r.method, d.base+r.path, foreign, nil, same)
		if status != http.StatusMisdirectedRequest || strings.Contains(body, "still here") || !strings.Contains(body, "-allow-host") {
			t.Errorf("%s %s for Host %s: %d %s", r.method, r.path, foreign, status, body)
		}
	}
	if n := messagesIn(t, d, "kept"); n != 1 {
		t.Fatalf("the queue holds %d messages", n)
	}
	if status, _ := send(t, "GET", d.base+"/_azq/health", foreign, nil, nil); status != 200 {
		t.Errorf("/_azq/health for Host %s: %d", foreign, status)
	}
	for _, p := range []string{"/metrics", "/_azq/metrics"} {
		if status, body := send(t, "GET", d.base+p, foreign, nil, nil); status != http.StatusMisdirectedRequest ||
			strings.Contains(body, "kept") || !strings.Contains(body, "-allow-host") {
			t.Errorf("%s for Host %s: %d %s", p, foreign, status, body)
		}
		if status, _ := send(t, "GET", d.base+p, "localhost:"+u.Port(), nil, nil); status != 200 {
			t.Errorf("%s for Host localhost: %d", p, status)
		}
	}
	for _, host := range []string{"localhost:" + u.Port(), "[::1]:" + u.Port(), "devstoreaccount1.localhost:" + u.Port()} {
		if status, _ := send(t, "GET", d.base+"/_azq/ui/a/devstoreaccount1/kept", host, nil, nil); status != 200 {
			t.Errorf("Host %s: %d", host, status)
		}
	}

	allowed := start(t, "-ui", "-allow-host", "rebind.evil.example")
	if status, _ := send(t, "GET", allowed.base+"/_azq/ui/", "rebind.evil.example", nil, nil); status != 200 {
		t.Fatalf("an -allow-host name: %d", status)
	}
}

// foreignHosts are Host headers that do not name this machine, in the
// spellings of internal/guard's tests, with port.
func foreignHosts(port string) []string {
	return []string{
		"rebind.evil.example:" + port,
		"REBIND.Evil.Example.:" + port,
		"localhost.evil.example:" + port,
		"127.0.0.1.nip.io:" + port,
		"devstoreaccount1.evil.example:" + port,
		"azqd.evil.example",
	}
}

// On loopback, the Azure API refuses a foreign Host as the admin
// endpoints do (421), so that a rebinding page holding a SAS made from
// the public development key can neither peek at nor clear the queues;
// CORS preflights are refused alike. The names that name this machine
// are served: IP literals, localhost and names under it (host-style
// devstoreaccount1.localhost among them), and -allow-host's names.
func TestAPIForeignHostRefused(t *testing.T) {
	d := start(t, "-allow-anonymous", "-allow-host", "queues.test")
	seed(t, d)
	u, _ := url.Parse(d.base)
	port := u.Port()
	for _, host := range foreignHosts(port) {
		for _, r := range []struct{ method, path string }{
			{"GET", "/devstoreaccount1/kept/messages?peekonly=true"},
			{"DELETE", "/devstoreaccount1/kept/messages"},
			{"GET", "/devstoreaccount1?comp=list"},
			{"OPTIONS", "/devstoreaccount1/kept/messages"},
		} {
			req, err := http.NewRequest(r.method, d.base+r.path, nil)
			if err != nil {
				t.Fatal(err)
			}
			req.Host = host
			req.Header.Set("Origin", "http://"+host)
			req.Header.Set("Access-Control-Request-Method", "DELETE")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusMisdirectedRequest || resp.Header.Get("x-ms-error-code") != "HostNotAllowed" ||
				!strings.Contains(string(body), "<Code>HostNotAllowed</Code>") || !strings.Contains(string(body), "-allow-host") ||
				strings.Contains(string(body), "still here") {
				t.Errorf("%s %s for Host %s: %d %v %s", r.method, r.path, host, resp.StatusCode, resp.Header, body)
			}
		}
	}
	if n := messagesIn(t, d, "kept"); n != 1 {
		t.Fatalf("after the refusals the queue holds %d messages", n)
	}
	for _, host := range []string{"localhost:" + port, "[::1]:" + port, "queues.test:" + port, "QUEUES.test.", "devstoreaccount1.localhost:" + port} {
		if status, body := send(t, "GET", d.base+peekPath(host), host, nil, nil); status != 200 || !strings.Contains(body, "still here") {
			t.Errorf("Host %s: %d %s", host, status, body)
		}
	}
}

// peekPath is the path of a peek at the queue seed made, for a request
// to host: host-style when the host's first label names the account.
func peekPath(host string) string {
	if strings.HasPrefix(host, "devstoreaccount1.") {
		return "/kept/messages?peekonly=true"
	}
	return "/devstoreaccount1/kept/messages?peekonly=true"
}

// Beyond loopback (a container), clients reach azqd by names no one can
// list in advance (a compose file's service name), as with Azurite: the
// API and the metrics answer any Host, while the admin endpoints keep
// their guard.
func TestAPIServiceNamesBeyondLoopback(t *testing.T) {
	d := start(t, "-allow-anonymous", "-addr", "0.0.0.0:0", "-ui")
	seed(t, d)
	u, _ := url.Parse(d.base)
	for _, host := range append(foreignHosts(u.Port()), "azqd:"+u.Port(), "azurite:"+u.Port()) {
		if status, body := send(t, "GET", d.base+peekPath(host), host, nil, nil); status != 200 || !strings.Contains(body, "still here") {
			t.Errorf("Host %s: %d %s", host, status, body)
		}
		if status, _ := send(t, "GET", d.base+"/metrics", host, nil, nil); status != 200 {
			t.Errorf("/metrics for Host %s: %d", host, status)
		}
	}
	if status, _ := send(t, "GET", d.base+"/_azq/ui/", "azqd:"+u.Port(), nil, nil); status != http.StatusMisdirectedRequest {
		t.Errorf("the web view for Host azqd: %d", status)
	}
}

// Beyond loopback the admin endpoints answer clients on this machine only,
// unless -admin-remote; the health check answers everyone.
func TestAdminEndpointsLoopbackOnly(t *testing.T) {
	for _, remote := range []bool{false, true} {
		cfg := &config{addr: "0.0.0.0:10001", admin: adminConfig{remote: remote}}
		h := newAdminHandler(cfg, admin.Options{Version: "test", Clock: admin.NewClock(clock.NewMock(), nil)}, nil, nil)
		for _, tc := range []struct {
			path, peer string
			want       int
		}{
			{"/_azq/faults", "192.0.2.7:40000", map[bool]int{false: 403, true: 404}[remote]},
			{"/_azq/ui/", "192.0.2.7:40000", map[bool]int{false: 403, true: 404}[remote]},
			{"/_azq/faults", "127.0.0.1:40000", 404},
			{"/_azq/faults", "[::1]:40000", 404},
			{"/_azq/health", "192.0.2.7:40000", 200},
		} {
			r := httptest.NewRequest("GET", "http://127.0.0.1:10001"+tc.path, nil)
			r.RemoteAddr = tc.peer
			w := httptest.NewRecorder()
			h.ServeHTTP(w, r)
			if w.Code != tc.want {
				t.Errorf("remote %v, %s from %s: %d, want %d (%s)", remote, tc.path, tc.peer, w.Code, tc.want, w.Body)
			}
			if w.Code == 403 && !strings.Contains(w.Body.String(), "-admin-remote") {
				t.Errorf("the refusal does not name -admin-remote: %s", w.Body)
			}
		}
	}
}

// The start-up lines say who the admin endpoints answer beyond loopback.
func TestAnnounceAdminReach(t *testing.T) {
	wide := &net.TCPAddr{IP: net.IPv4zero, Port: 10001}
	local := &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 10001}
	for _, tc := range []struct {
		name         string
		cfg          config
		addr         net.Addr
		notes, warns string
	}{
		{"beyond loopback", config{ui: true}, wide, "answer clients on this machine only; -admin-remote serves them to every client that can reach 0.0.0.0:10001", ""},
		{"-admin-remote", config{clockControl: true, admin: adminConfig{remote: true}}, wide, "", "warning: -admin-remote: the web view and the reset, clock and fault endpoints answer every client that can reach 0.0.0.0:10001, without credentials"},
		{"loopback", config{ui: true}, local, "", ""},
		{"no admin features", config{}, wide, "", ""},
	} {
		var notes, warns bytes.Buffer
		announceAdmin(&notes, &warns, &tc.cfg, "http://127.0.0.1:10001", tc.addr, nil, nil)
		if tc.notes == "" && notes.Len() > 0 || !strings.Contains(notes.String(), tc.notes) {
			t.Errorf("%s: notes %q", tc.name, notes.String())
		}
		if tc.warns == "" && warns.Len() > 0 || !strings.Contains(warns.String(), tc.warns) {
			t.Errorf("%s: warnings %q", tc.name, warns.String())
		}
	}
}

// The web view's clock buttons go through the clock endpoints' code: with
// -data the move is saved, and the clock cannot pass 2262.
func TestUIClockIsTheEndpoints(t *testing.T) {
	dir := t.TempDir()
	d := start(t, "-clock-control", "-ui", "-data", dir)
	before := clockCall(t, "GET", d.base+"/_azq/clock", 200).Now
	form := map[string]string{"Content-Type": "application/x-www-form-urlencoded"}
	if status, body := send(t, "POST", d.base+"/_azq/ui/clock/advance", "", strings.NewReader("by=3h&back=/"), form); status != http.StatusSeeOther {
		t.Fatalf("advance: %d %s", status, body)
	}
	want := before.Add(3 * time.Hour)
	saved, err := os.ReadFile(clockFile(dir, "devstoreaccount1"))
	if err != nil {
		t.Fatal(err)
	}
	if got, err := time.Parse(time.RFC3339Nano, strings.TrimSpace(string(saved))); err != nil || !got.Equal(want) {
		t.Fatalf("saved clock %q, want %v", saved, want)
	}
	status, body := send(t, "POST", d.base+"/_azq/ui/clock/advance", "", strings.NewReader("by=2562047h&back=/"), form)
	if status != http.StatusBadRequest || !strings.Contains(body, "cannot pass 2262-04-11T23:47:16.854775807Z") {
		t.Fatalf("advance past 2262: %d %s", status, body)
	}
	if now := clockCall(t, "GET", d.base+"/_azq/clock", 200).Now; !now.Equal(want) {
		t.Fatalf("the clock is %v, want %v", now, want)
	}
	if err := d.stop(); err != nil {
		t.Fatal(err)
	}
	again := start(t, "-clock-control", "-data", dir)
	if now := clockCall(t, "GET", again.base+"/_azq/clock", 200).Now; !now.Equal(want) {
		t.Fatalf("after a restart the clock is %v, want %v", now, want)
	}
}

// The name -addr listens on is allowed through the whole admin surface,
// the web view included, which checks the Host itself.
func TestAddrNameReachesTheWebView(t *testing.T) {
	cfg, _, err := parseArgs([]string{"-addr", "queues.internal:10001", "-ui"})
	if err != nil {
		t.Fatal(err)
	}
	api := server.New(server.Options{Accounts: cfg.accounts})
	t.Cleanup(func() { api.Close() })
	h := newAdminHandler(cfg, admin.Options{Version: "test", UI: newUI(cfg, api, nil, nil, nil)}, nil, nil)
	for host, want := range map[string]int{"queues.internal:10001": 200, "rebind.evil.example:10001": http.StatusMisdirectedRequest} {
		r := httptest.NewRequest("GET", "http://"+host+"/_azq/ui/", nil)
		r.RemoteAddr = "127.0.0.1:40000"
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != want {
			t.Errorf("Host %s: %d, want %d (%s)", host, w.Code, want, w.Body)
		}
	}
}
