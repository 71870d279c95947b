package uibrowser_test

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

// testNow is the mock clock's start: fixed, so pages are reproducible.
var testNow = time.Date(2031, 5, 17, 12, 0, 0, 0, time.UTC)

const prefix = "/_azq/ui"

// fixture is two accounts of queues behind the UI, on a mock clock, as
// package ui's own tests set them up.
type fixture struct {
	clk      *clock.Mock
	main     *azq.Service
	other    *azq.Service
	hs       *httptest.Server
	leased   azq.Message // a message of "orders" under a Get's lease
	advanced []time.Duration
}

func newFixture(t testing.TB, withAdvance bool, opts ui.Options) *fixture {
	t.Helper()
	ctx := context.Background()
	clk := clock.NewMock()
	clk.Set(testNow)
	f := &fixture{clk: clk, main: azq.NewService(azq.WithClock(clk)), other: azq.NewService(azq.WithClock(clk))}
	t.Cleanup(func() { f.main.Close(); f.other.Close() })

	orders, _, err := f.main.CreateQueue(ctx, "orders", nil)
	if err != nil {
		t.Fatal(err)
	}
	invoices, _, _ := f.main.CreateQueue(ctx, "invoices", nil)
	f.main.CreateQueue(ctx, "empty", nil)
	audit, _, _ := f.other.CreateQueue(ctx, "audit", nil)

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
	f.leased = got[0]

	opts.Accounts = []ui.Account{{Name: "devstoreaccount1", Service: f.main}, {Name: "teststore2", Service: f.other}}
	opts.Clock = clk
	opts.Prefix = prefix
	if withAdvance {
		opts.Advance = func(d time.Duration) (time.Time, error) {
			f.advanced = append(f.advanced, d)
			clk.Add(d)
			return clk.Now(), nil
		}
	}
	mux := http.NewServeMux()
	mux.Handle(prefix+"/", ui.New(opts))
	mux.Handle(prefix, ui.New(opts))
	f.hs = httptest.NewServer(mux)
	t.Cleanup(f.hs.Close)
	return f
}
