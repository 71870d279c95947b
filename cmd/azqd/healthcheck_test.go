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
