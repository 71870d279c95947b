package sdktest_test

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/runtime"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azqueue"
	"github.com/azqlib/azq/server"
)

// sentHeader is an SDK transport that records a header of each request
// the SDK sends, as it goes on the wire.
type sentHeader struct {
	name string
	got  []string
}

func (s *sentHeader) Do(req *http.Request) (*http.Response, error) {
	s.got = append(s.got, req.Header.Get(s.name))
	return http.DefaultClient.Do(req)
}

// The log record of a request holds the x-ms-client-request-id the
// official Go SDK sends, so that a failing test's request can be found
// in the server's log. azqueue sends one when given azcore's request id
// policy (the other languages' SDKs send one by default).
func TestLogHoldsSDKClientRequestID(t *testing.T) {
	var logs syncBuffer
	e := newEnv(t, server.Options{Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	sent := &sentHeader{name: "x-ms-client-request-id"}
	opts := clientOptions()
	opts.Transport = sent
	opts.PerCallPolicies = append(opts.PerCallPolicies, runtime.NewRequestIDPolicy())
	svc, err := azqueue.NewServiceClientWithSharedKeyCredential(e.endpoint+"/", e.cred, opts)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := svc.CreateQueue(context.Background(), "traced", nil); err != nil {
		t.Fatal(err)
	}
	if len(sent.got) != 1 || sent.got[0] == "" {
		t.Fatalf("the SDK sent x-ms-client-request-id %q", sent.got)
	}
	if want := "client_request_id=" + sent.got[0]; !strings.Contains(logs.String(), want) {
		t.Fatalf("no %s in the log:\n%s", want, logs.String())
	}
}

// A W3C traceparent is logged as its trace-id and parent-id; a malformed
// one is logged as such and does not fail the request.
func TestLogHoldsTraceparent(t *testing.T) {
	var logs syncBuffer
	h := server.New(server.Options{AllowAnonymous: true, Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	defer h.Close()
	send := func(traceparent ...string) {
		t.Helper()
		logs.Reset()
		req := httptest.NewRequest("GET", "http://127.0.0.1/devstoreaccount1?comp=list", nil)
		req.Header.Set("x-ms-version", "2021-12-02")
		for _, v := range traceparent {
			req.Header.Add("traceparent", v)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		if w.Code != http.StatusOK {
			t.Fatalf("traceparent %q: %d %s", traceparent, w.Code, w.Body)
		}
	}
	const tid, pid = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
	send(fmt.Sprintf("00-%s-%s-01", tid, pid))
	if l := logs.String(); !strings.Contains(l, "trace_id="+tid+" parent_id="+pid) || strings.Contains(l, "traceparent_invalid") {
		t.Fatalf("log:\n%s", l)
	}
	send("00-" + tid + "-" + pid + "-01\n" + strings.Repeat("x", 10000))
	if l := logs.String(); !strings.Contains(l, "traceparent_invalid=") || strings.Contains(l, "trace_id=") || len(l) > 2000 {
		t.Fatalf("log of a malformed traceparent (%d bytes):\n%s", len(l), l)
	}
	send(fmt.Sprintf("00-%s-%s-01", tid, pid), fmt.Sprintf("00-%s-%s-01", tid, pid))
	if l := logs.String(); !strings.Contains(l, "traceparent_invalid=") {
		t.Fatalf("log of two traceparents:\n%s", l)
	}
	send()
	if l := logs.String(); strings.Contains(l, "trace") {
		t.Fatalf("log of a request without traceparent:\n%s", l)
	}
}
