// Package uitest sets up the queues and the web view of package ui that
// the view's tests read: its own, and the browser test in azqd's module.
package uitest

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/azqlib/azq"
	"github.com/azqlib/azq/ui"
	"github.com/benbjohnson/clock"
)

// Now is the mock clock's start: fixed, so pages are reproducible.
var Now = time.Date(2031, 5, 17, 12, 0, 0, 0, time.UTC)

// Prefix is the path the UI is served under, as azqd serves it.
const Prefix = "/_azq/ui"

// Fixture is two accounts of queues behind the UI, on a mock clock: the
// page's tests in package ui and its browser test in azqd's module read
// the same queues.
type Fixture struct {
	Clock    *clock.Mock
	Main     *azq.Service     // devstoreaccount1: orders, invoices, empty
	Other    *azq.Service     // teststore2: audit
	Server   *httptest.Server // the UI under Prefix
	Leased   azq.Message      // a message of "orders" under a Get's lease
	Advanced []time.Duration  // the clock moves the page asked for, with withAdvance
}

// New returns the queues and the UI of opts over them, served until the
// test ends; withAdvance lets the page move the clock.
func New(t testing.TB, withAdvance bool, opts ui.Options) *Fixture {
	t.Helper()
	ctx := context.Background()
	clk := clock.NewMock()
	clk.Set(Now)
	f := &Fixture{Clock: clk, Main: azq.NewService(azq.WithClock(clk)), Other: azq.NewService(azq.WithClock(clk))}
	t.Cleanup(func() { f.Main.Close(); f.Other.Close() })

	orders, _, err := f.Main.CreateQueue(ctx, "orders", nil)
	if err != nil {
		t.Fatal(err)
	}
	invoices, _, _ := f.Main.CreateQueue(ctx, "invoices", nil)
	f.Main.CreateQueue(ctx, "empty", nil)
	audit, _, _ := f.Other.CreateQueue(ctx, "audit", nil)

	invoices.Put(ctx, `{"invoice":1017,"total":"120.50"}`, nil)
	clk.Add(2 * time.Hour)
	orders.Put(ctx, `{"order":42,"items":3}`, nil)
	orders.Put(ctx, `{"order":43,"items":1}`, nil)
	clk.Add(3 * time.Minute)
	orders.Put(ctx, `{"order":44,"note":"<script>alert(1)</script>"}`, &azq.PutOptions{VisibilityTimeout: 10 * time.Minute})
	audit.Put(ctx, "kept forever", &azq.PutOptions{TimeToLive: azq.NeverExpires})
	got, err := orders.Get(ctx, 1, 30*time.Second)
	if err != nil || len(got) != 1 {
		t.Fatalf("get: %v %v", got, err)
	}
	f.Leased = got[0]

	opts.Accounts = []ui.Account{{Name: "devstoreaccount1", Service: f.Main}, {Name: "teststore2", Service: f.Other}}
	opts.Clock = clk
	opts.Prefix = Prefix
	if withAdvance {
		opts.Advance = func(d time.Duration) (time.Time, error) {
			f.Advanced = append(f.Advanced, d)
			clk.Add(d)
			return clk.Now(), nil
		}
	}
	mux := http.NewServeMux()
	mux.Handle(Prefix+"/", ui.New(opts))
	mux.Handle(Prefix, ui.New(opts))
	f.Server = httptest.NewServer(mux)
	t.Cleanup(f.Server.Close)
	return f
}
