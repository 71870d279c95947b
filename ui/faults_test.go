package ui_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/azqlib/azq/faults"
	"github.com/azqlib/azq/ui"
)

// The page lists the fault rules with their hits, and the throttle.
func TestFaultsShown(t *testing.T) {
	inj, err := faults.New(faults.Options{Config: faults.Config{
		Rules: []faults.Rule{
			{Name: "busy-puts", When: faults.When{Operations: []string{"PutMessage"}, Every: 2, Times: 1}, Then: faults.Then{Error: faults.CodeServerBusy}},
			{Name: "slow", Then: faults.Then{Delay: 5e6}},
		},
		Throttle: &faults.Throttle{QueueMessagesPerSecond: 5},
	}})
	if err != nil {
		t.Fatal(err)
	}
	put := faults.Request{Operation: "PutMessage", Account: "devstoreaccount1", Queue: "orders", Messages: 1}
	inj.Decide(put) // slow: busy-puts waits for the 2nd
	inj.Decide(put) // busy-puts, which ends the search before slow
	f := newFixture(t, false, ui.Options{Faults: inj})
	page := f.do(t, "GET", prefix+"/", nil, nil).body
	busy := row(t, page, `data-rule="busy-puts"`)
	if cell(t, busy, "hits") != "1 (done)" || !strings.Contains(busy, "PutMessage · every 2nd · at most 1 times") ||
		!strings.Contains(busy, "503 ServerBusy") || !strings.Contains(busy, `class="muted"`) {
		t.Fatalf("busy-puts row: %s", busy)
	}
	if slow := row(t, page, `data-rule="slow"`); cell(t, slow, "hits") != "1" || !strings.Contains(slow, "wait 5ms") {
		t.Fatalf("slow row: %s", slow)
	}
	if !strings.Contains(page, "Throttled past 5 messages/s per queue: 0 requests refused") {
		t.Fatal("throttle not shown")
	}
	// Without rules or throttle there is no section.
	inj.Clear()
	inj.SetThrottle(nil)
	if page := f.do(t, "GET", prefix+"/", nil, nil).body; strings.Contains(page, "Faults on") {
		t.Fatal("an empty injector is shown")
	}
}

// A request naming another Host (DNS rebinding: a page under its own name
// resolving to this machine) is refused, reads included; the allowed
// names and localhost are served.
func TestForeignHostRefused(t *testing.T) {
	f := newFixture(t, false, ui.Options{Hosts: []string{"azqd"}})
	for host, want := range map[string]int{
		"rebind.evil.example:10001": http.StatusMisdirectedRequest,
		"azqd:10001":                http.StatusOK,
		"localhost:10001":           http.StatusOK,
	} {
		r := f.do(t, "GET", prefix+"/a/devstoreaccount1/orders", nil, map[string]string{"Host": host})
		if r.status != want {
			t.Errorf("Host %s: %d, want %d", host, r.status, want)
		}
		if want != http.StatusOK && strings.Contains(r.body, "data-id=") {
			t.Errorf("Host %s: messages shown", host)
		}
	}
}
