package main

import (
	"fmt"
	"html"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/azqlib/azq/cmd/azqd/internal/browsertest"
	"github.com/chromedp/chromedp"
)

// A page of another site (localhost, while azqd is addressed as
// 127.0.0.1) auto-submits a plain form to each state-changing admin
// endpoint: Chromium sends them, with its cross-site metadata, and azqd
// refuses every one; nothing changes. The same browser clearing the queue
// from azqd's own page succeeds, so the refusals are the guard's.
func TestCrossSiteFormInChromium(t *testing.T) {
	t.Parallel()
	ctx := browsertest.Start(t)
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
			browsertest.WaitJS(`location.href.startsWith(`+jsString(d.base)+`) && document.readyState === "complete"`),
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
		browsertest.WaitJS(`(document.querySelector("#summary .count") || {}).textContent === "0"`),
	); err != nil {
		t.Fatalf("same-origin clear: %v", err)
	}
	if n := messagesIn(t, d, "kept"); n != 0 {
		t.Fatalf("after the same-origin clear the queue holds %d messages", n)
	}
}

func jsString(s string) string { return fmt.Sprintf("%q", s) }
