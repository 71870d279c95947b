package server

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/benbjohnson/clock"
)

// replayEnv is a server on a mock clock with the queue "victim" holding
// one message, for replaying captured Shared Key requests.
type replayEnv struct {
	s   *Server
	clk *clock.Mock
}

func newReplayEnv(t testing.TB) *replayEnv {
	t.Helper()
	clk := clock.NewMock()
	clk.Set(testNow)
	s := New(Options{Clock: clk})
	t.Cleanup(func() { s.Close() })
	q, _, err := s.Service("devstoreaccount1").CreateQueue(context.Background(), "victim", nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := q.Put(context.Background(), "secret", nil); err != nil {
		t.Fatal(err)
	}
	return &replayEnv{s: s, clk: clk}
}

// signed returns a request signed with the development key, as captured
// off the wire.
func signed(method, target string) *http.Request {
	r := httptest.NewRequest(method, "http://127.0.0.1:10001"+target, nil)
	r.Header.Set("x-ms-date", httpTime(testNow))
	r.Header.Set("x-ms-version", "2018-03-28")
	signSharedKey(r, "devstoreaccount1", developmentAccountKey, false)
	return r
}

// replay sends captured with its query string replaced by rawQuery and
// everything else, the signature included, unchanged.
func (e *replayEnv) replay(captured *http.Request, rawQuery string) *httptest.ResponseRecorder {
	r := captured.Clone(context.Background())
	r.URL.RawQuery = rawQuery
	path, _, _ := strings.Cut(captured.RequestURI, "?")
	r.RequestURI = path + "?" + rawQuery
	w := httptest.NewRecorder()
	e.s.ServeHTTP(w, r)
	return w
}

// victimState is what a replayed Peek must leave alone: the message's
// dequeue count and whether it is visible.
func (e *replayEnv) victimState(t testing.TB) (visible int, dequeues int64, exists bool) {
	t.Helper()
	q, err := e.s.Service("devstoreaccount1").Queue("victim")
	if err != nil {
		return 0, 0, false
	}
	ms, err := q.Peek(context.Background(), 32)
	if err != nil {
		return 0, 0, false
	}
	for _, m := range ms {
		dequeues += m.DequeueCount
	}
	return len(ms), dequeues, true
}

// TestReplayedPeekStaysAPeek: the Shared Key signature covers query names
// in lower case, so a captured Peek replayed with "PeekOnly=true" (or any
// other spelling that folds to "peekonly") carries a valid signature. It
// must still be served as a Peek: nothing dequeued, no receipt handed out.
func TestReplayedPeekStaysAPeek(t *testing.T) {
	for _, query := range []string{
		"peekonly=true",
		"PeekOnly=true",
		"PEEKONLY=true",
		"pee%E2%84%AAonly=true", // K is U+212A KELVIN SIGN, which lower-cases to k
	} {
		t.Run(query, func(t *testing.T) {
			e := newReplayEnv(t)
			captured := signed("GET", "/devstoreaccount1/victim/messages?peekonly=true")
			w := e.replay(captured, query)
			if w.Code != http.StatusOK {
				t.Fatalf("replay: %d %s", w.Code, w.Body)
			}
			if body := w.Body.String(); strings.Contains(body, "PopReceipt") || !strings.Contains(body, "secret") {
				t.Fatalf("replayed Peek was not served as a Peek: %s", body)
			}
			if vis, deq, _ := e.victimState(t); vis != 1 || deq != 0 {
				t.Fatalf("after the replay: %d visible, %d dequeues; want the message untouched", vis, deq)
			}
		})
	}
}

// TestReplayedSetMetadataCannotRecreateQueue: a captured Set Queue
// Metadata replayed with "Comp=metadata" after the queue was deleted is
// Set Queue Metadata still (404 QueueNotFound), never Create Queue.
func TestReplayedSetMetadataCannotRecreateQueue(t *testing.T) {
	e := newReplayEnv(t)
	captured := signed("PUT", "/devstoreaccount1/victim?comp=metadata")
	if err := e.s.Service("devstoreaccount1").DeleteQueue(context.Background(), "victim"); err != nil {
		t.Fatal(err)
	}
	for _, query := range []string{"comp=metadata", "Comp=metadata", "COMP=metadata"} {
		w := e.replay(captured, query)
		if w.Code != http.StatusNotFound || w.Header().Get("x-ms-error-code") != "QueueNotFound" {
			t.Fatalf("replay with %q: %d %s", query, w.Code, w.Body)
		}
		if _, _, exists := e.victimState(t); exists {
			t.Fatalf("replay with %q re-created the deleted queue", query)
		}
	}
}

// TestReplayWithRepeatedParameters: the signature sorts the values of a
// repeated parameter, so their order is not bound by it; a request that
// repeats a parameter is refused, signed or not.
func TestReplayWithRepeatedParameters(t *testing.T) {
	e := newReplayEnv(t)
	for _, query := range []string{
		"peekonly=true&peekonly=false",
		"peekonly=false&peekonly=true",
		"peekonly=true&PeekOnly=false",
		"numofmessages=1&numofmessages=32",
	} {
		captured := signed("GET", "/devstoreaccount1/victim/messages?"+query)
		w := e.replay(captured, query)
		if w.Code != http.StatusBadRequest || w.Header().Get("x-ms-error-code") != "InvalidQueryParameterValue" {
			t.Fatalf("%q: %d %s", query, w.Code, w.Body)
		}
		if vis, deq, _ := e.victimState(t); vis != 1 || deq != 0 {
			t.Fatalf("%q changed the queue: %d visible, %d dequeues", query, vis, deq)
		}
	}
}

// TestRoutingOnTheRawPath: a percent-encoded "/" stays inside its path
// segment, as in the path the signature covers, so it can neither reach
// another queue's messages nor split the account segment.
func TestRoutingOnTheRawPath(t *testing.T) {
	e := newReplayEnv(t)
	for _, c := range []struct {
		method, target string
		status         int
		code           string
	}{
		{"DELETE", "/devstoreaccount1/victim%2Fmessages", 400, "InvalidResourceName"},
		{"DELETE", "/devstoreaccount1/victim%2fmessages", 400, "InvalidResourceName"},
		{"GET", "/devstoreaccount1%2Fvictim/messages", 404, "ResourceNotFound"},
		{"DELETE", "/devstoreaccount1%2Fvictim/messages", 404, "ResourceNotFound"},
		{"GET", "/devstoreaccount1/victim/messages%2F00000000-0000-0000-0000-000000000000", 400, "InvalidUri"},
	} {
		r := signed(c.method, c.target)
		w := httptest.NewRecorder()
		e.s.ServeHTTP(w, r)
		if w.Code != c.status || w.Header().Get("x-ms-error-code") != c.code {
			t.Errorf("%s %s: %d %q, want %d %s", c.method, c.target, w.Code, w.Header().Get("x-ms-error-code"), c.status, c.code)
		}
		if vis, deq, ok := e.victimState(t); !ok || vis != 1 || deq != 0 {
			t.Fatalf("%s %s changed queue victim", c.method, c.target)
		}
	}
	// The same bytes, decoded, still name the queue's messages.
	w := httptest.NewRecorder()
	e.s.ServeHTTP(w, signed("DELETE", "/devstoreaccount1/victim/messages"))
	if w.Code != http.StatusNoContent {
		t.Fatalf("clear: %d %s", w.Code, w.Body)
	}
}

// TestSharedKeyDate: a Shared Key request must carry x-ms-date or Date;
// on the real clock a date more than 15 minutes off is refused.
func TestSharedKeyDate(t *testing.T) {
	build := func(mod func(*http.Request)) authRequest {
		a := newAuthRequest("GET", "/devstoreaccount1/myqueue?comp=metadata", opGetQueueMetadata, "myqueue")
		a.r.Header.Set("x-ms-version", "2018-03-28")
		mod(a.r)
		signSharedKey(a.r, "devstoreaccount1", developmentAccountKey, false)
		if d := a.r.Header.Get("Date"); d != "" && a.r.Header.Get("x-ms-date") == "" {
			// signSharedKey leaves the Date field empty, as for x-ms-date.
			sts := "GET\n\n\n\n\n\n" + d + "\n\n\n\n\n\nx-ms-version:2018-03-28\n/devstoreaccount1/devstoreaccount1/myqueue\ncomp:metadata"
			a.r.Header.Set("Authorization", "SharedKey devstoreaccount1:"+sign(devKey(), sts))
		}
		return a
	}
	at := func(d time.Duration) func(*http.Request) {
		return func(r *http.Request) { r.Header.Set("x-ms-date", httpTime(testNow.Add(d))) }
	}
	cases := []struct {
		name   string
		mod    func(*http.Request)
		skew   bool
		code   string
		status int
	}{
		{"no date", func(*http.Request) {}, false, "AuthenticationFailed", 403},
		{"no date, real clock", func(*http.Request) {}, true, "AuthenticationFailed", 403},
		{"empty x-ms-date", func(r *http.Request) { r.Header.Set("x-ms-date", "") }, false, "AuthenticationFailed", 403},
		{"x-ms-date", at(0), true, "", 0},
		{"Date header only", func(r *http.Request) { r.Header.Set("Date", httpTime(testNow)) }, true, "", 0},
		{"14 min behind", at(-14 * time.Minute), true, "", 0},
		{"14 min ahead", at(14 * time.Minute), true, "", 0},
		{"16 min behind", at(-16 * time.Minute), true, "AuthenticationFailed", 403},
		{"16 min ahead", at(16 * time.Minute), true, "AuthenticationFailed", 403},
		{"a day behind on a mock clock", at(-24 * time.Hour), false, "", 0},
		{"x-ms-date wins over Date", func(r *http.Request) {
			r.Header.Set("Date", httpTime(testNow))
			r.Header.Set("x-ms-date", httpTime(testNow.Add(-time.Hour)))
		}, true, "AuthenticationFailed", 403},
		{"not a date", func(r *http.Request) { r.Header.Set("x-ms-date", "yesterday") }, true, "AuthenticationFailed", 403},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			a := build(c.mod)
			a.checkDateSkew = c.skew
			wantErr(t, authorize(a), c.code, c.status)
		})
	}
	// Shared Key Lite needs a date too.
	lite := newAuthRequest("GET", "/devstoreaccount1/myqueue?comp=metadata", opGetQueueMetadata, "myqueue")
	signSharedKey(lite.r, "devstoreaccount1", developmentAccountKey, true)
	wantErr(t, authorize(lite), "AuthenticationFailed", 403)
}

// TestHandlerDateSkewOnRealClock: through the handler, a server on the
// real clock refuses a correctly signed request dated an hour ago, and a
// server on a mock clock serves it (its time is the test's, not the
// client's).
func TestHandlerDateSkewOnRealClock(t *testing.T) {
	sign := func(date time.Time) *http.Request {
		r := httptest.NewRequest("GET", "http://127.0.0.1:10001/devstoreaccount1?comp=list", nil)
		r.Header.Set("x-ms-date", httpTime(date))
		r.Header.Set("x-ms-version", "2018-03-28")
		signSharedKey(r, "devstoreaccount1", developmentAccountKey, false)
		return r
	}
	real := New(Options{})
	defer real.Close()
	for _, c := range []struct {
		date time.Time
		want int
	}{{time.Now(), 200}, {time.Now().Add(-time.Hour), 403}, {time.Now().Add(time.Hour), 403}} {
		w := httptest.NewRecorder()
		real.ServeHTTP(w, sign(c.date))
		if w.Code != c.want {
			t.Errorf("real clock, date %v: %d %s, want %d", c.date, w.Code, w.Body, c.want)
		}
	}
	clk := clock.NewMock()
	clk.Set(testNow)
	mock := New(Options{Clock: clk})
	defer mock.Close()
	w := httptest.NewRecorder()
	mock.ServeHTTP(w, sign(time.Now().Add(-time.Hour)))
	if w.Code != http.StatusOK {
		t.Errorf("mock clock: %d %s", w.Code, w.Body)
	}
}

// FuzzSignedReplay replays a captured, correctly signed Peek with the
// query string the fuzzer chooses and the signature unchanged. Whatever
// the handler does with it, it must not dequeue the message or hand out
// a receipt: only a request whose meaning the signature covers may pass.
func FuzzSignedReplay(f *testing.F) {
	for _, q := range []string{
		"peekonly=true", "PeekOnly=true", "PEEKONLY=TRUE", "pee%E2%84%AAonly=true",
		"peekonly=true&peekonly=false", "peekonly=false&PeekOnly=true", "peekonly=true;peekonly=false",
		"peekonly=true&numofmessages=32", "Comp=metadata", "peekonly=true&", "&peekonly=true", "peekonly=%74rue",
	} {
		f.Add(q)
	}
	f.Fuzz(func(t *testing.T, query string) {
		e := newReplayEnv(t)
		captured := signed("GET", "/devstoreaccount1/victim/messages?peekonly=true")
		w := e.replay(captured, query)
		if strings.Contains(w.Body.String(), "PopReceipt") {
			t.Fatalf("replay with %q handed out a receipt: %s", query, w.Body)
		}
		if vis, deq, _ := e.victimState(t); vis != 1 || deq != 0 {
			t.Fatalf("replay with %q dequeued the message (%d visible, %d dequeues)", query, vis, deq)
		}
	})
}
