package main

import (
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// readmeBlock returns the body of the first fenced block of README.md
// whose language is lang and which contains marker.
func readmeBlock(t *testing.T, lang, marker string) string {
	t.Helper()
	b, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	re := regexp.MustCompile("(?s)```" + lang + "\n(.*?)```")
	for _, m := range re.FindAllStringSubmatch(string(b), -1) {
		if strings.Contains(m[1], marker) {
			return m[1]
		}
	}
	t.Fatalf("README.md has no %s block containing %q", lang, marker)
	return ""
}

// needProgram finds an outside program a test drives, or skips the test
// saying how to install it; under CI, which installs them (.ci/run), a
// missing one fails the test instead.
func needProgram(t *testing.T, hint string, found bool) {
	t.Helper()
	if found {
		return
	}
	if os.Getenv("CI") != "" {
		t.Fatalf("missing under CI: %s", hint)
	}
	t.Skip(hint)
}

// TestReadmeCurlPath runs the README's curl walk-through, as written,
// with two changes for the test: a free port for 127.0.0.1:10001, and the
// binary built into the script's temporary directory (go build -C with
// the repository) rather than into the clone; and, before the stop, a
// look at the queue's message count. The walk-through builds
// azqd, starts the binary itself in the background, and ends with
// "kill %1; wait": the test checks that this stopped azqd, gracefully,
// and freed the port, which "go run ... &" did not do (kill %1 killed go
// run and left its child azqd serving).
func TestReadmeCurlPath(t *testing.T) {
	_, errCurl := exec.LookPath("curl")
	_, errBash := exec.LookPath("bash")
	needProgram(t, "curl and bash are needed: apt-get install curl", errCurl == nil && errBash == nil)
	block := readmeBlock(t, "sh", "curl")
	const build = "go build -o azqd ./cmd/azqd"
	if !strings.HasPrefix(block, build) || !strings.Contains(block, "\n./azqd -allow-anonymous -addr 127.0.0.1:10001 &\n") ||
		!strings.Contains(block, "\nkill %1; wait ") {
		t.Fatalf("the README's walk-through no longer builds azqd, starts ./azqd in the background and stops it with kill %%1; wait:\n%s", block)
	}
	repo, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	script := strings.Replace(block, build, "go build -C "+repo+` -o "$PWD/azqd" ./cmd/azqd`, 1)
	// Before the stop, the test asks how many messages are left, to see
	// that Delete Message deleted.
	script = strings.Replace(script, "\nkill %1; wait ", "\ncurl -sS -o /dev/null -D - \"$Q?comp=metadata\" | tr -d '\\r' | grep -i '^x-ms-approximate-messages-count:'\nkill %1; wait ", 1)
	script = strings.ReplaceAll(script, "127.0.0.1:10001", addr)
	// The script builds azqd, which takes long on a busy machine.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-euo", "pipefail", "-c", script)
	cmd.Dir = t.TempDir()
	cmd.WaitDelay = 5 * time.Second // if azqd outlived the script, do not wait on its output forever
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	for _, want := range []string{`"status":"ok"`, "201\n", "<MessageText>hello</MessageText>", "204\n", "X-Ms-Approximate-Messages-Count: 0\n", "azqd: shutting down\nazqd: stopped\n"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	// kill %1 stopped azqd itself: its port is free again.
	free, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("after kill %%1; wait, %s is still taken: %v", addr, err)
	}
	free.Close()
}

// TestReadmePythonPath runs the README's Python example, as written, on
// azqd, with the test's address for 127.0.0.1:10001, through the Python
// Azure SDK (Debian's python3-azure, which .ci/run installs, or
// azure-storage-queue from PyPI).
func TestReadmePythonPath(t *testing.T) {
	python := ""
	for _, p := range []string{"python3", "/usr/bin/python3"} {
		if exec.Command(p, "-c", "import azure.storage.queue").Run() == nil {
			python = p
			break
		}
	}
	needProgram(t, "the Python Azure SDK is needed: apt-get install python3-azure, or pip install azure-storage-queue", python != "")
	d := start(t)
	script := strings.ReplaceAll(readmeBlock(t, "python", "QueueClient"), "127.0.0.1:10001", strings.TrimPrefix(d.base, "http://"))
	cmd := exec.CommandContext(testContext(t), python, "-c", script)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if string(out) != "got: hello\n" {
		t.Errorf("output %q, want %q", out, "got: hello\n")
	}
}
