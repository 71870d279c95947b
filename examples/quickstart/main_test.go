package main

import (
	"io"
	"os"
	"regexp"
	"testing"
)

// TestQuickstart runs the program that README.md's first command runs and
// checks that each flow it names happens, on the mock clock: a put, get
// and delete, a lease renewed three times, a crashed consumer's message
// taken again with its progress, its stale receipt refused, and nothing
// left.
func TestQuickstart(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout := os.Stdout
	os.Stdout = w
	defer func() { os.Stdout = stdout }()
	main() // its output is far smaller than a pipe's buffer
	w.Close()
	os.Stdout = stdout
	out, err := io.ReadAll(r)
	if err != nil {
		t.Fatal(err)
	}
	id := regexp.MustCompile(`[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}`)
	got := id.ReplaceAllString(string(out), "ID")
	const want = `got "resize photo 1" (dequeue count 1), hidden until 09:00:30
done and deleted
renewed lease until 09:00:50, saved "resize photo 2: step 1 done"
renewed lease until 09:01:10, saved "resize photo 2: step 2 done"
renewed lease until 09:01:30, saved "resize photo 2: step 3 done"
after the crash another consumer got "resize photo 2: step 3 done" (dequeue count 2)
stale receipt: true azq: the message ID does not exist, or the pop receipt is no longer its current one (MessageNotFound)
messages left: 0
`
	if got != want {
		t.Errorf("output:\n%s\nwant:\n%s", got, want)
	}
}
