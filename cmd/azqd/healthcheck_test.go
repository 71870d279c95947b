package main

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// TestHealthcheck runs azqd -healthcheck against a running azqd (healthy)
// and against what a container's check meets when azqd is not well: no
// listener, a 503 with azqd's "unavailable" body (a failed durable
// store), another server's answer, a malformed URL.
func TestHealthcheck(t *testing.T) {
	d := start(t)
	var out strings.Builder
	if err := run(context.Background(), []string{"-healthcheck", d.base + "/_azq/health"}, &out, io.Discard); err != nil {
		t.Fatalf("healthy azqd: %v", err)
	}
	if !strings.Contains(out.String(), `azqd: healthy: {"status":"ok"`) {
		t.Errorf("printed %q, want the health reply", out.String())
	}

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	down := "http://" + ln.Addr().String() + "/_azq/health"
	ln.Close()

	unavailable := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusServiceUnavailable)
		json.NewEncoder(w).Encode(healthReply{Status: "unavailable", Reason: "account devstoreaccount1: disk full"})
	}))
	defer unavailable.Close()
	notAzqd := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte("<html>hello</html>"))
	}))
	defer notAzqd.Close()

	for _, c := range []struct{ name, url, want string }{
		{"down", down, "connection refused"},
		{"503", unavailable.URL + "/_azq/health", "503 Service Unavailable"},
		{"not azqd", notAzqd.URL + "/_azq/health", "200 OK: <html>"},
		{"no URL", "127.0.0.1:10001/_azq/health", "want azqd's health URL"},
	} {
		t.Run(c.name, func(t *testing.T) {
			var out strings.Builder
			err := run(context.Background(), []string{"-healthcheck", c.url}, &out, io.Discard)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v, want an error containing %q", err, c.want)
			}
			if out.Len() > 0 {
				t.Errorf("printed %q on stdout for an unhealthy azqd", out.String())
			}
		})
	}
}

// TestHealthcheckBounded runs azqd -healthcheck against a server that
// accepts the connection and never answers, as a stuck azqd does: the
// check fails, saying so, within its bound, and so before the image's
// HEALTHCHECK --timeout, well before the 30 s container engines default
// to. A real-clock test: the bound is the check's own, on the real clock,
// and it waits for it (2 s).
func TestHealthcheckBounded(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close() // never accepted: the kernel completes the connection, no one answers
	start := time.Now()
	err = run(context.Background(), []string{"-healthcheck", "http://" + ln.Addr().String() + "/_azq/health"}, io.Discard, io.Discard)
	took := time.Since(start)
	if err == nil || !strings.Contains(err.Error(), "did not answer within "+healthcheckTimeout.String()) {
		t.Fatalf("got %v, want unhealthy: did not answer within %v", err, healthcheckTimeout)
	}
	// The image's HEALTHCHECK --timeout, which the image's tests check
	// against the Dockerfile.
	const imageTimeout = 4 * time.Second
	if healthcheckTimeout >= imageTimeout {
		t.Errorf("the check's bound %v is not below the image's HEALTHCHECK --timeout %v", healthcheckTimeout, imageTimeout)
	}
	// Not before its bound; and after it, well within what an engine
	// allows, however busy the machine.
	if took < healthcheckTimeout || took > 15*time.Second {
		t.Errorf("the check took %v, want its bound, %v", took, healthcheckTimeout)
	}
}
