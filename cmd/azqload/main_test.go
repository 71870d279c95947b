package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/azqlib/azq"
	"github.com/azqlib/azq/server"
)

func runJSON(t *testing.T, args ...string) (*result, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var out, errb bytes.Buffer
	if err := run(ctx, append(args, "-json"), &out, &errb); err != nil {
		return nil, err
	}
	var res result
	if err := json.Unmarshal(out.Bytes(), &res); err != nil {
		t.Fatalf("output is not JSON: %v\n%s", err, out.String())
	}
	return &res, nil
}

func TestCyclesAgainstServer(t *testing.T) {
	srv := server.New(server.Options{})
	defer srv.Close()
	ts := httptest.NewServer(srv)
	defer ts.Close()

	res, err := runJSON(t, "-endpoint", ts.URL+"/devstoreaccount1", "-queue", "loadtest",
		"-clients", "3", "-cycles", "30", "-duration", "30s", "-warmup", "0")
	if err != nil {
		t.Fatal(err)
	}
	if res.Cycles != 30 || res.Clients != 3 || res.CyclesPerSec <= 0 {
		t.Fatalf("result %+v, want 30 cycles by 3 clients", res)
	}
	if len(res.Ops) != 3 || res.Ops[0].Name != "put" || res.Ops[0].Count != 30 || res.Ops[2].Count != 30 {
		t.Fatalf("ops %+v, want 30 puts, gets and deletes", res.Ops)
	}
	if res.Ops[1].Count != 30+int(res.EmptyGets) {
		t.Fatalf("%d gets for 30 cycles and %d empty gets", res.Ops[1].Count, res.EmptyGets)
	}
	c := res.Cycle
	if c.Count != 30 || c.P50 <= 0 || c.P50 > c.P90 || c.P90 > c.P99 {
		t.Fatalf("cycle percentiles %+v", c)
	}
	if !strings.HasSuffix(res.Target, "/devstoreaccount1/loadtest") {
		t.Fatalf("target %q", res.Target)
	}
	// Every message put was deleted.
	q, err := srv.Service("devstoreaccount1").Queue("loadtest")
	if err != nil {
		t.Fatal(err)
	}
	if n, err := q.ApproximateCount(context.Background()); err != nil || n != 0 {
		t.Fatalf("%d messages left in the queue (%v), want 0", n, err)
	}

	// A second run with a warm-up and a time bound, text output, and the
	// queue already there.
	var out bytes.Buffer
	err = run(context.Background(), []string{"-connection-string",
		server.DevelopmentAccount().ConnectionString(ts.URL + "/devstoreaccount1"),
		"-queue", "loadtest", "-duration", "100ms", "-warmup", "20ms"}, &out, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"cycles/s", "cycle       p50", "put ", "get ", "delete "} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("text output lacks %q:\n%s", want, out.String())
		}
	}
}

func TestErrorsEndTheRun(t *testing.T) {
	srv := server.New(server.Options{})
	defer srv.Close()
	ts := httptest.NewServer(srv)
	defer ts.Close()
	_, err := runJSON(t, "-endpoint", ts.URL+"/devstoreaccount1", "-key", "d3Jvbmc=", "-cycles", "5", "-warmup", "0")
	if err == nil || !strings.Contains(err.Error(), "403") {
		t.Fatalf("wrong key: %v, want a 403 error", err)
	}
}

func TestFloor(t *testing.T) {
	res, err := runJSON(t, "-floor", "-clients", "2", "-cycles", "50", "-warmup", "0")
	if err != nil {
		t.Fatal(err)
	}
	if res.Cycles != 50 || len(res.Ops) != 1 || res.Ops[0].Count != 50 || !strings.HasPrefix(res.Target, "http://127.0.0.1:") {
		t.Fatalf("floor result %+v", res)
	}
}

func TestRaw(t *testing.T) {
	srv := server.New(server.Options{AllowAnonymous: true})
	defer srv.Close()
	ts := httptest.NewServer(srv)
	defer ts.Close()
	res, err := runJSON(t, "-raw", "-endpoint", ts.URL+"/devstoreaccount1", "-queue", "rawtest",
		"-clients", "2", "-cycles", "20", "-warmup", "0")
	if err != nil {
		t.Fatal(err)
	}
	if res.Cycles != 20 || len(res.Ops) != 3 || res.Ops[2].Count != 20 {
		t.Fatalf("raw result %+v", res)
	}
	q, err := srv.Service("devstoreaccount1").Queue("rawtest")
	if err != nil {
		t.Fatal(err)
	}
	if n, err := q.ApproximateCount(context.Background()); err != nil || n != 0 {
		t.Fatalf("%d messages left in the queue (%v), want 0", n, err)
	}

	// Without anonymous access the server refuses, and so the run fails.
	strict := httptest.NewServer(server.New(server.Options{}))
	defer strict.Close()
	if _, err := runJSON(t, "-raw", "-endpoint", strict.URL+"/devstoreaccount1", "-cycles", "1"); err == nil {
		t.Fatal("raw run against a server that requires credentials succeeded")
	}
}

func TestServeFloor(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"-serve-floor", "127.0.0.1:0", "-duration", "1m"}, pw, io.Discard)
		pw.Close()
	}()
	line, err := bufio.NewReader(pr).ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	_, rest, _ := strings.Cut(line, " on ")
	u, _, _ := strings.Cut(rest, " ")
	res, err := runJSON(t, "-floor", "-endpoint", u, "-cycles", "10", "-warmup", "0")
	if err != nil {
		t.Fatal(err)
	}
	if res.Cycles != 10 || res.Target != u {
		t.Fatalf("floor against %s: %+v", u, res)
	}
	cancel()
	go io.Copy(io.Discard, pr)
	if err := <-done; err != nil {
		t.Fatalf("serve-floor: %v", err)
	}
	// It also ends by itself after -duration.
	if err := run(context.Background(), []string{"-serve-floor", "127.0.0.1:0", "-duration", "10ms"}, io.Discard, io.Discard); err != nil {
		t.Fatal(err)
	}
}

func TestRefusesRemoteAndBadFlags(t *testing.T) {
	for _, endpoint := range []string{"http://192.0.2.1:10001/devstoreaccount1", "http://example.invalid/devstoreaccount1"} {
		_, err := runJSON(t, "-endpoint", endpoint, "-cycles", "1", "-timeout", "1s")
		if err == nil || !strings.Contains(err.Error(), "not a loopback address") {
			t.Errorf("-endpoint %s: %v, want a refusal", endpoint, err)
		}
	}
	// A connection string without QueueEndpoint means the public cloud.
	_, err := runJSON(t, "-connection-string", "DefaultEndpointsProtocol=https;AccountName=someone;AccountKey=a2V5MQ==;EndpointSuffix=core.windows.net", "-cycles", "1")
	if err == nil || !strings.Contains(err.Error(), "not a loopback address") {
		t.Errorf("cloud connection string: %v, want a refusal", err)
	}
	for _, args := range [][]string{
		{},
		{"-endpoint", "http://127.0.0.1:1/a", "-connection-string", "x"},
		{"-endpoint", "http://127.0.0.1:1/a", "-clients", "0"},
		{"-endpoint", "http://127.0.0.1:1/a", "-duration", "0s"},
		{"-endpoint", "http://127.0.0.1:1/a", "-cycles", "-1"},
		{"-endpoint", "http://127.0.0.1:1/a", "extra"},
		{"-endpoint", "http://127.0.0.1:1/a", "-raw", "-floor"},
		{"-connection-string", "x", "-raw"},
	} {
		err := run(context.Background(), args, io.Discard, io.Discard)
		if !errors.Is(err, errUsage) {
			t.Errorf("run %q: %v, want a usage error", args, err)
		}
	}
}

// TestVersionFlag: -version prints azqload, azq's version and what the
// build recorded on one line of stdout, and needs no endpoint.
func TestVersionFlag(t *testing.T) {
	var out, errb bytes.Buffer
	if err := run(context.Background(), []string{"-version"}, &out, &errb); err != nil {
		t.Fatal(err)
	}
	if s := out.String(); !strings.HasPrefix(s, "azqload "+azq.Version+" (") || !strings.HasSuffix(s, ")\n") || strings.Count(s, "\n") != 1 {
		t.Errorf("-version printed %q, want azqload %s (…) on one line", s, azq.Version)
	}
	if errb.Len() != 0 {
		t.Errorf("-version wrote to stderr: %q", errb.String())
	}
}
