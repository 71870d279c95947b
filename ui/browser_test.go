package ui_test

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/azqlib/azq"
	"github.com/azqlib/azq/ui"
	"github.com/chromedp/chromedp"
)

var screenshots = flag.String("ui.screenshots", "", "write screenshots of the UI (ui.png, ui-queue.png) into this `directory`, such as ../docs")

const installChromium = "install it with: apt-get update && apt-get install -y chromium (Debian's package; .ci/run does this)"

// chromium finds a Chromium or Chrome binary. Without one the browser test
// fails under CI, which must run it, and is skipped elsewhere with a note
// on how to install it.
func chromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("CI") != "" {
		t.Fatalf("the browser test needs Chromium, and CI is set, so it may not be skipped; %s", installChromium)
	}
	t.Skipf("Chromium not found, so the UI is not tested in a browser; %s", installChromium)
	return ""
}

// browser starts a headless Chromium with a fresh profile and returns a
// context for chromedp actions in one tab.
func browser(t *testing.T) context.Context {
	t.Helper()
	// A fresh profile. Chromium's child processes may still be writing
	// to it for a moment after the browser is stopped, so removing it is
	// retried rather than left to t.TempDir, which fails the test.
	profile, err := os.MkdirTemp("", "azq-ui-chromium-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for i := 0; i < 50 && os.RemoveAll(profile) != nil; i++ {
			time.Sleep(100 * time.Millisecond)
		}
	})
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(chromium(t)),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.UserDataDir(profile),
		chromedp.WindowSize(1280, 800),
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	t.Cleanup(cancel)
	ctx, cancelAlloc := chromedp.NewExecAllocator(ctx, opts...)
	t.Cleanup(cancelAlloc)
	// chromedp's protocol tables can lag the installed Chromium, which then
	// sends events they cannot decode; those are noise, anything else is
	// worth seeing in the test log.
	logf := func(format string, args ...any) {
		if msg := fmt.Sprintf(format, args...); !strings.Contains(msg, "could not unmarshal event") {
			t.Log(msg)
		}
	}
	ctx, cancelTab := chromedp.NewContext(ctx, chromedp.WithErrorf(logf))
	t.Cleanup(cancelTab)
	if err := chromedp.Run(ctx); err != nil {
		t.Fatalf("starting Chromium: %v", err)
	}
	return ctx
}

// waitJS polls a JavaScript condition in the page until it holds. A page
// that reloads itself interrupts evaluations now and then, so failed ones
// are retried too; the last failure is reported at the deadline.
func waitJS(expr string) chromedp.Action {
	return chromedp.ActionFunc(func(ctx context.Context) error {
		deadline := time.Now().Add(15 * time.Second)
		for {
			var ok bool
			err := chromedp.Evaluate("Boolean("+expr+")", &ok).Do(ctx)
			if err == nil && ok {
				return nil
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("waiting for %s: still false (last error: %v)", expr, err)
			}
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(100 * time.Millisecond):
			}
		}
	})
}

func textOf(sel string) string {
	return fmt.Sprintf(`(document.querySelector(%q) || {}).textContent`, sel)
}

// TestBrowser drives the page in Chromium: the figures it shows, its
// reloading itself when the queues change, moving the clock, a queue's
// messages, and clearing a queue.
func TestBrowser(t *testing.T) {
	ctx := browser(t)
	f := newFixture(t, true, ui.Options{Refresh: time.Second})
	index := f.hs.URL + prefix + "/"
	orders := `tr[data-queue="orders"]`

	// The index shows every account's queues with their figures.
	if err := chromedp.Run(ctx,
		chromedp.Navigate(index),
		waitJS(textOf(orders+" td.count")+` === "3"`),
		waitJS(textOf(orders+" td.invisible")+` === "2"`),
		waitJS(textOf(`tr[data-queue="invoices"] td.oldest`)+` === "2h03m old"`),
		waitJS(textOf(`tr[data-queue="audit"] td.count`)+` === "1"`),
	); err != nil {
		t.Fatalf("index: %v", err)
	}
	if *screenshots != "" {
		shoot(t, ctx, *screenshots+"/ui.png")
	}

	// The page reloads itself (its script runs under the page's content
	// security policy) and shows a message put behind its back.
	q, _ := f.main.Queue("orders")
	if _, err := q.Put(context.Background(), "put while the page was open", nil); err != nil {
		t.Fatal(err)
	}
	if err := chromedp.Run(ctx, waitJS(textOf(orders+" td.count")+` === "4"`)); err != nil {
		t.Fatalf("the page did not reload itself: %v", err)
	}

	// Moving the clock by a button: an hour on, the leased and the
	// delayed messages are visible again.
	if err := chromedp.Run(ctx,
		chromedp.Navigate(index+"?refresh=0"),
		chromedp.Click(`button[value="1h"]`, chromedp.ByQuery),
		waitJS(textOf("#clock time")+` === "2031-05-17 15:03:00Z"`),
		waitJS(textOf(orders+" td.invisible")+` === "0"`),
	); err != nil {
		t.Fatalf("advance by a button: %v", err)
	}
	// …and by the field.
	if err := chromedp.Run(ctx,
		chromedp.Navigate(index+"?refresh=0"),
		chromedp.SendKeys(`#advance input[name="by"]`, "90s", chromedp.ByQuery),
		chromedp.Submit(`#advance input[name="by"]`, chromedp.ByQuery),
		waitJS(textOf("#clock time")+` === "2031-05-17 15:04:30Z"`),
	); err != nil {
		t.Fatalf("advance by the field: %v", err)
	}
	if want := []time.Duration{time.Hour, 90 * time.Second}; fmt.Sprint(f.advanced) != fmt.Sprint(want) {
		t.Fatalf("the clock moved by %v, want %v", f.advanced, want)
	}

	// A queue's page lists its messages: the one dequeued once shows
	// it; content is text, never markup.
	leased := fmt.Sprintf(`tr[data-id=%q]`, f.leased.ID.String())
	var alerts int
	if err := chromedp.Run(ctx,
		chromedp.Navigate(index+"?refresh=0"),
		chromedp.Click(orders+" a", chromedp.ByQuery),
		waitJS(`location.pathname === "/_azq/ui/a/devstoreaccount1/orders"`),
		chromedp.Navigate(f.hs.URL+prefix+"/a/devstoreaccount1/orders?refresh=0"),
		waitJS(`document.querySelectorAll("table.messages tbody tr").length === 4`),
		waitJS(textOf(leased+" td.dequeues")+` === "1"`),
		waitJS(textOf(leased+" td.next")+` === "visible"`),
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
		waitJS(textOf("#summary .count")+` === "0"`),
		waitJS(`document.querySelectorAll("table.messages").length === 0`),
	); err != nil {
		t.Fatalf("clear: %v", err)
	}
	if n, _ := q.ApproximateCount(context.Background()); n != 0 {
		t.Fatalf("%d messages after clearing", n)
	}

	if *screenshots != "" {
		// A queue with messages of every kind, for the documentation.
		inv, _ := f.main.Queue("invoices")
		ctx2 := context.Background()
		inv.Put(ctx2, `{"invoice":1018,"total":"99.00"}`, nil)
		inv.Put(ctx2, `{"invoice":1019,"total":"12.75"}`, nil)
		inv.Get(ctx2, 1, 5*time.Minute)
		inv.Put(ctx2, `{"invoice":1020,"total":"310.00"}`, &azq.PutOptions{VisibilityTimeout: 10 * time.Minute})
		f.clk.Add(42 * time.Second)
		if err := chromedp.Run(ctx,
			chromedp.Navigate(f.hs.URL+prefix+"/a/devstoreaccount1/invoices?refresh=0"),
			waitJS(`document.querySelectorAll("table.messages tbody tr").length === 4`),
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
