package main

import (
	"context"
	"fmt"
	"html"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// chromium finds Chromium; under CI (which installs it) a missing browser
// fails the test, elsewhere it skips with a note.
func chromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("CI") != "" {
		t.Fatal("the cross-site test needs Chromium, and CI is set; .ci/run installs it (apt-get install chromium)")
	}
	t.Skip("Chromium not found; install it with apt-get install chromium (.ci/run does)")
	return ""
}

// headless starts a headless Chromium with a fresh profile.
func headless(t *testing.T) context.Context {
	t.Helper()
	profile, err := os.MkdirTemp("", "azqd-chromium-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// Chromium's children may write to the profile for a moment
		// after it stops.
		for i := 0; i < 50 && os.RemoveAll(profile) != nil; i++ {
			time.Sleep(100 * time.Millisecond)
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	t.Cleanup(cancel)
	ctx, cancelAlloc := chromedp.NewExecAllocator(ctx,
		chromedp.ExecPath(chromium(t)), chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU,
		chromedp.NoFirstRun, chromedp.NoDefaultBrowserCheck, chromedp.UserDataDir(profile),
		chromedp.Flag("disable-background-networking", true), chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true))
	t.Cleanup(cancelAlloc)
	ctx, cancelTab := chromedp.NewContext(ctx, chromedp.WithErrorf(func(string, ...any) {}))
	t.Cleanup(cancelTab)
	if err := chromedp.Run(ctx); err != nil {
		t.Fatalf("starting Chromium: %v", err)
	}
	return ctx
}

// A page of another site (localhost, while azqd is addressed as
// 127.0.0.1) auto-submits a plain form to each state-changing admin
// endpoint: Chromium sends them, with its cross-site metadata, and azqd
// refuses every one; nothing changes. The same browser clearing the queue
// from azqd's own page succeeds, so the refusals are the guard's.
func TestCrossSiteFormInChromium(t *testing.T) {
	ctx := headless(t)
	d := start(t, "-clock-control", "-ui", "-fault-control")
	seed(t, d)
	before := clockCall(t, "GET", d.base+"/_azq/clock", 200).Now

	var mu sync.Mutex
	seen := map[string]string{} // what the evil site was asked to serve
	evil := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		target := r.URL.Query().Get("target")
		mu.Lock()
		seen[target] = r.Host
		mu.Unlock()
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprintf(w, `<!DOCTYPE html><form method="post" action="%s"><input name="by" value="24h"><input name="back" value="/"></form><script>document.forms[0].submit()</script>`,
			html.EscapeString(target))
	}))
	defer evil.Close()
	evilBase := strings.Replace(evil.URL, "127.0.0.1", "localhost", 1)

	for _, path := range []string{
		"/_azq/reset",
		"/_azq/clock/advance?by=24h",
		"/_azq/ui/a/devstoreaccount1/kept/clear",
		"/_azq/ui/clock/advance",
		"/_azq/faults",
	} {
		var body string
		err := chromedp.Run(ctx,
			chromedp.Navigate(evilBase+"/?target="+d.base+path),
			waitJS(`location.href.startsWith(`+jsString(d.base)+`) && document.readyState === "complete"`),
			chromedp.Text("body", &body, chromedp.ByQuery),
		)
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if !strings.Contains(body, "cross-site requests may not change the emulator") {
			t.Errorf("%s: the browser got %q", path, body)
		}
	}
	mu.Lock()
	if len(seen) != 5 {
		t.Fatalf("the evil page was loaded %d times", len(seen))
	}
	mu.Unlock()
	if n := messagesIn(t, d, "kept"); n != 1 {
		t.Fatalf("after the cross-site forms the queue holds %d messages", n)
	}
	if now := clockCall(t, "GET", d.base+"/_azq/clock", 200).Now; !now.Equal(before) {
		t.Fatalf("a cross-site form moved the clock from %v to %v", before, now)
	}

	// azqd's own page, same origin, may clear the queue.
	if err := chromedp.Run(ctx,
		chromedp.Navigate(d.base+"/_azq/ui/a/devstoreaccount1/kept?refresh=0"),
		chromedp.Click(`#summary button`, chromedp.ByQuery),
		waitJS(`(document.querySelector("#summary .count") || {}).textContent === "0"`),
	); err != nil {
		t.Fatalf("same-origin clear: %v", err)
	}
	if n := messagesIn(t, d, "kept"); n != 0 {
		t.Fatalf("after the same-origin clear the queue holds %d messages", n)
	}
}

func jsString(s string) string { return fmt.Sprintf("%q", s) }

// waitJS polls a JavaScript condition until it holds; an evaluation that
// a navigation interrupts is retried.
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
			case <-time.After(50 * time.Millisecond):
			}
		}
	})
}
