package main

import (
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"
)

func get(t *testing.T, u string) (int, string) {
	t.Helper()
	resp, err := http.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestUI: -ui serves the page under /_azq/ui beside the REST API, showing
// every account's queues; with -clock-control the page moves the same
// clock as /_azq/clock. The ui package's own tests cover the page itself.
func TestUI(t *testing.T) {
	d := start(t, "-ui", "-clock-control")
	if !strings.Contains(strings.Join(d.printed, "\n"), "azqd: the queues are on view at "+d.base+"/_azq/ui/") {
		t.Fatalf("printed %q", d.printed)
	}
	ctx := testContext(t)
	qc := queueClient(t, d.conns["devstoreaccount1"], "watched")
	if _, err := qc.Create(ctx, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := qc.EnqueueMessage(ctx, "look at me", nil); err != nil {
		t.Fatal(err)
	}
	status, body := get(t, d.base+"/_azq/ui/")
	if status != 200 || !strings.Contains(body, `<tr data-queue="watched">`) || !strings.Contains(body, "/_azq/ui/clock/advance") {
		t.Fatalf("index: %d\n%s", status, body)
	}
	status, body = get(t, d.base+"/_azq/ui/a/devstoreaccount1/watched")
	if status != 200 || !strings.Contains(body, "look at me") {
		t.Fatalf("queue page: %d\n%s", status, body)
	}

	before := clockCall(t, "GET", d.base+"/_azq/clock", 200).Now
	resp, err := http.PostForm(d.base+"/_azq/ui/clock/advance", url.Values{"by": {"2h"}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if after := clockCall(t, "GET", d.base+"/_azq/clock", 200).Now; !after.Equal(before.Add(2 * time.Hour)) {
		t.Fatalf("the page moved the clock from %v to %v, want two hours on", before, after)
	}
	// The REST API is unaffected by the page beside it.
	if _, err := qc.PeekMessage(ctx, nil); err != nil {
		t.Fatal(err)
	}
}

func TestUIOff(t *testing.T) {
	d := start(t)
	for _, p := range []string{"/_azq/ui", "/_azq/ui/", "/_azq/ui/a/devstoreaccount1/q"} {
		if status, body := get(t, d.base+p); status != 404 || !strings.Contains(body, "start azqd with -ui") {
			t.Errorf("GET %s without -ui: %d %q", p, status, body)
		}
	}
	// With -ui but a real clock, the page does not offer to move it.
	d = start(t, "-ui")
	if _, body := get(t, d.base+"/_azq/ui/"); strings.Contains(body, "/clock/advance") || !strings.Contains(body, "(real time)") {
		t.Fatalf("-ui without -clock-control:\n%s", body)
	}
}
