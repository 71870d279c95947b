// Package browsertest starts a headless Chromium for the tests that drive
// azq's web pages in a real browser (package ui's page, azqd's admin guard).
//
// A test that needs the browser calls Start. Without Chromium the test is
// skipped with a note on how to install it, except under CI (the CI
// environment variable set), which installs Chromium and must not skip.
package browsertest

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// Install says how to install the browser the tests need.
const Install = "install it with: apt-get update && apt-get install -y chromium (Debian's package; .ci/run does this)"

// Path returns the path of a Chromium or Chrome binary. Without one it
// fails t under CI and skips it elsewhere.
func Path(t testing.TB) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("CI") != "" {
		t.Fatalf("this test needs Chromium, and CI is set, so it may not be skipped; %s", Install)
	}
	t.Skipf("Chromium not found, so the page is not tested in a browser; %s", Install)
	return ""
}

// Start starts a headless Chromium with a fresh profile and returns a
// context for chromedp actions in one tab, valid for 90 seconds at most.
// The browser stops and its profile is removed when t ends.
func Start(t testing.TB) context.Context {
	t.Helper()
	// Chromium's child processes may still be writing to the profile for
	// a moment after the browser stops, so removing it is retried rather
	// than left to t.TempDir, which would fail the test.
	profile, err := os.MkdirTemp("", "azq-chromium-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for i := 0; i < 50 && os.RemoveAll(profile) != nil; i++ {
			time.Sleep(100 * time.Millisecond)
		}
	})
	// The flags keep the browser off the network: a machine without one
	// refuses its background connections by the dozen otherwise.
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(Path(t)),
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

// WaitJS polls a JavaScript condition in the page until it holds, for up
// to 15 seconds. A page that navigates or reloads itself interrupts
// evaluations now and then, so failed ones are retried too; the last
// failure is reported at the deadline.
func WaitJS(expr string) chromedp.Action {
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
