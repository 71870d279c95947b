package main

import (
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
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

// TestReadmeCurlPath runs the README's curl walk-through, as written, on
// azqd -allow-anonymous: every line but the one that starts azqd, with
// the test's address for 127.0.0.1:10001.
func TestReadmeCurlPath(t *testing.T) {
	_, errCurl := exec.LookPath("curl")
	_, errBash := exec.LookPath("bash")
	needProgram(t, "curl and bash are needed: apt-get install curl", errCurl == nil && errBash == nil)
	block := readmeBlock(t, "sh", "curl")
	var lines []string
	for _, l := range strings.Split(block, "\n") {
		if !strings.HasPrefix(l, "go run ./cmd/azqd") {
			lines = append(lines, l)
		}
	}
	d := start(t, "-allow-anonymous")
	script := strings.ReplaceAll(strings.Join(lines, "\n"), "127.0.0.1:10001", strings.TrimPrefix(d.base, "http://"))
	cmd := exec.CommandContext(testContext(t), "bash", "-euo", "pipefail", "-c", script)
	cmd.Dir = t.TempDir()
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	for _, want := range []string{`"status":"ok"`, "201\n", "<MessageText>hello</MessageText>", "204\n"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	resp, err := http.Get(d.base + "/devstoreaccount1/jobs?comp=metadata")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if n := resp.Header.Get("x-ms-approximate-messages-count"); n != "0" {
		t.Errorf("%s messages left in jobs, want 0: Delete Message did not delete", n)
	}
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
