package uibrowser_test

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/azqlib/azq"
	"github.com/azqlib/azq/cmd/azqd/internal/browsertest"
	"github.com/azqlib/azq/ui"
	"github.com/chromedp/chromedp"
)

var screenshots = flag.String("ui.screenshots", "", "write screenshots of the UI (ui.png, ui-queue.png) into this `directory`, such as ../../../../docs")

func textOf(sel string) string {
	return fmt.Sprintf(`(document.querySelector(%q) || {}).textContent`, sel)
}

// TestBrowser drives the page in Chromium: the figures it shows, its
// reloading itself when the queues change, moving the clock, a queue's
// messages, and clearing a queue.
func TestBrowser(t *testing.T) {
	ctx := browsertest.Start(t)
	f := newFixture(t, true, ui.Options{Refresh: time.Second})
	index := f.Server.URL + prefix + "/"
	orders := `tr[data-queue="orders"]`

	// The index shows every account's queues with their figures.
	if err := chromedp.Run(ctx,
		chromedp.Navigate(index),
		browsertest.WaitJS(textOf(orders+" td.count")+` === "3"`),
		browsertest.WaitJS(textOf(orders+" td.invisible")+` === "2"`),
		browsertest.WaitJS(textOf(`tr[data-queue="invoices"] td.oldest`)+` === "2h03m old"`),
		browsertest.WaitJS(textOf(`tr[data-queue="audit"] td.count`)+` === "1"`),
	); err != nil {
		t.Fatalf("index: %v", err)
	}
	if *screenshots != "" {
		shoot(t, ctx, *screenshots+"/ui.png")
	}

	// The page reloads itself (its script runs under the page's content
	// security policy) and shows a message put behind its back.
	q, _ := f.Main.Queue("orders")
	if _, err := q.Put(context.Background(), "put while the page was open", nil); err != nil {
		t.Fatal(err)
	}
	if err := chromedp.Run(ctx, browsertest.WaitJS(textOf(orders+" td.count")+` === "4"`)); err != nil {
		t.Fatalf("the page did not reload itself: %v", err)
	}

	// Moving the clock by a button: an hour on, the leased and the
	// delayed messages are visible again.
	if err := chromedp.Run(ctx,
		chromedp.Navigate(index+"?refresh=0"),
		chromedp.Click(`button[value="1h"]`, chromedp.ByQuery),
		browsertest.WaitJS(textOf("#clock time")+` === "2031-05-17 15:03:00Z"`),
		browsertest.WaitJS(textOf(orders+" td.invisible")+` === "0"`),
	); err != nil {
		t.Fatalf("advance by a button: %v", err)
	}
	// …and by the field.
	if err := chromedp.Run(ctx,
		chromedp.Navigate(index+"?refresh=0"),
		chromedp.SendKeys(`#advance input[name="by"]`, "90s", chromedp.ByQuery),
		chromedp.Submit(`#advance input[name="by"]`, chromedp.ByQuery),
		browsertest.WaitJS(textOf("#clock time")+` === "2031-05-17 15:04:30Z"`),
	); err != nil {
		t.Fatalf("advance by the field: %v", err)
	}
	if want := []time.Duration{time.Hour, 90 * time.Second}; fmt.Sprint(f.Advanced) != fmt.Sprint(want) {
		t.Fatalf("the clock moved by %v, want %v", f.Advanced, want)
	}

	// A queue's page lists its messages: the one dequeued once shows
	// it; content is text, never markup.
	leased := fmt.Sprintf(`tr[data-id=%q]`, f.Leased.ID.String())
	var alerts int
	if err := chromedp.Run(ctx,
		chromedp.Navigate(index+"?refresh=0"),
		chromedp.Click(orders+" a", chromedp.ByQuery),
		browsertest.WaitJS(`location.pathname === "/_azq/ui/a/devstoreaccount1/orders"`),
		chromedp.Navigate(f.Server.URL+prefix+"/a/devstoreaccount1/orders?refresh=0"),
		browsertest.WaitJS(`document.querySelectorAll("table.messages tbody tr").length === 4`),
		browsertest.WaitJS(textOf(leased+" td.dequeues")+` === "1"`),
		browsertest.WaitJS(textOf(leased+" td.next")+` === "visible"`),
		chromedp.Evaluate(`document.querySelectorAll("td.content script").length`, &alerts),
	); err != nil {
		t.Fatalf("queue page: %v", err)
	}
	if alerts != 0 {
		t.Fatal("message content became markup")
	}

	// Clearing from the queue's page empties the queue.
	if err := chromedp.Run(ctx,
		chromedp.Click(`#summary button`, chromedp.ByQuery),
		browsertest.WaitJS(textOf("#summary .count")+` === "0"`),
		browsertest.WaitJS(`document.querySelectorAll("table.messages").length === 0`),
	); err != nil {
		t.Fatalf("clear: %v", err)
	}
	if n, _ := q.ApproximateCount(context.Background()); n != 0 {
		t.Fatalf("%d messages after clearing", n)
	}

	if *screenshots != "" {
		// A queue with messages of every kind, for the documentation.
		inv, _ := f.Main.Queue("invoices")
		ctx2 := context.Background()
		inv.Put(ctx2, `{"invoice":1018,"total":"99.00"}`, nil)
		inv.Put(ctx2, `{"invoice":1019,"total":"12.75"}`, nil)
		inv.Get(ctx2, 1, 5*time.Minute)
		inv.Put(ctx2, `{"invoice":1020,"total":"310.00"}`, &azq.PutOptions{VisibilityTimeout: 10 * time.Minute})
		f.Clock.Add(42 * time.Second)
		if err := chromedp.Run(ctx,
			chromedp.Navigate(f.Server.URL+prefix+"/a/devstoreaccount1/invoices?refresh=0"),
			browsertest.WaitJS(`document.querySelectorAll("table.messages tbody tr").length === 4`),
		); err != nil {
			t.Fatal(err)
		}
		shoot(t, ctx, *screenshots+"/ui-queue.png")
	}
}

// shoot saves a screenshot of the whole page as PNG.
func shoot(t *testing.T, ctx context.Context, path string) {
	t.Helper()
	var png []byte
	if err := chromedp.Run(ctx, chromedp.EmulateViewport(1200, 420), chromedp.FullScreenshot(&png, 100)); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(string(png), "\x89PNG") {
		t.Fatal("the screenshot is not a PNG")
	}
	if err := os.WriteFile(path, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("wrote %s (%d bytes)", path, len(png))
}
