package server_test

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/azqlib/azq/faults"
	"github.com/azqlib/azq/observe"
	"github.com/azqlib/azq/server"
)

// The JavaScript SDK, with its default retry policy, meets the same
// faults as the Go SDK: a 503 ServerBusy is retried and the send
// succeeds; a Put applied with its answer lost (500) is retried and
// leaves two messages.
func TestJavaScriptSDKRetries(t *testing.T) {
	inj, err := faults.New(faults.Options{Config: faults.Config{Rules: []faults.Rule{
		{Name: "busy", When: faults.When{Operations: []string{"PutMessage"}, Queue: "jsbusy", Times: 1}, Then: faults.Then{Error: faults.CodeServerBusy}},
		{Name: "lost", When: faults.When{Operations: []string{"PutMessage"}, Queue: "jslost", Times: 1}, Then: faults.Then{Applied: true, Error: faults.CodeInternalError}},
	}}})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var puts []observe.Observation
	srv := server.New(server.Options{Faults: inj, Observe: func(o observe.Observation) {
		if o.Operation == "PutMessage" {
			mu.Lock()
			puts = append(puts, o)
			mu.Unlock()
		}
	}})
	hs := httptest.NewServer(srv)
	t.Cleanup(func() { hs.Close(); srv.Close() })
	out := runJavaScript(t, "retry.mjs", server.DevelopmentAccount().ConnectionString(hs.URL+"/devstoreaccount1"))
	var sent map[string]string
	if err := json.Unmarshal(out, &sent); err != nil || sent["jsbusy"] == "" || sent["jslost"] == "" {
		t.Fatalf("retry.mjs printed %s (%v)", out, err)
	}
	if inj.Hits("busy") != 1 || inj.Hits("lost") != 1 {
		t.Fatalf("hits %+v", inj.Status().Rules)
	}
	mu.Lock()
	defer mu.Unlock()
	want := []struct {
		queue   string
		status  int
		outcome observe.Outcome
	}{
		{"jsbusy", 503, observe.ThrottlingError}, {"jsbusy", 201, observe.Success},
		{"jslost", 500, observe.ServerError}, {"jslost", 201, observe.Success},
	}
	if len(puts) != len(want) {
		t.Fatalf("Put Message requests %+v", puts)
	}
	for i, w := range want {
		if p := puts[i]; p.Queue != w.queue || p.Status != w.status || p.Outcome != w.outcome {
			t.Fatalf("request %d: %+v, want %+v", i, p, w)
		}
	}
	for name, n := range map[string]int{"jsbusy": 1, "jslost": 2} {
		q, err := srv.Service("devstoreaccount1").Queue(name)
		if err != nil {
			t.Fatal(err)
		}
		if got, _ := q.ApproximateCount(context.Background()); got != n {
			t.Fatalf("%s holds %d messages, want %d", name, got, n)
		}
	}
}
