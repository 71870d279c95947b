package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/azqlib/azq/internal/longrun"
)

// TestAPICheck runs the API check on a copy of the working tree: with no
// baselines, before the first release, it has nothing to compare; once
// the baselines are written, as a release writes them, removing an
// exported name (azq.Version, part of every release's API) fails it,
// naming the change; listing the change in accepted.txt, as an intended
// break, passes it again; and an addition passes, reported as compatible.
// A long run: it compiles every module's API, several times.
func TestAPICheck(t *testing.T) {
	longrun.Skip(t)
	setGitIdentity(t)
	dir := copyClone(t)
	for _, m := range mustRepo(t, dir).modules {
		os.Remove(baselineFile(dir, m))
	}
	out, err := release("api", "-repo", dir)
	if err != nil || strings.Count(out, "no baseline yet") != len(mustRepo(t, dir).modules) {
		t.Fatalf("without baselines: %v\n%s", err, out)
	}

	commitBaselines(t, dir)
	out, err = release("api", "-repo", dir)
	if err != nil || strings.Contains(out, "INCOMPATIBLE") || strings.Contains(out, "no baseline") {
		t.Fatalf("the working tree against its own baselines: %v\n%s", err, out)
	}

	// azq.Version goes: the name a user's code may use is broken.
	if err := os.Remove(filepath.Join(dir, "version.go")); err != nil {
		t.Fatal(err)
	}
	out, err = release("api", "-repo", dir)
	if err == nil || !strings.Contains(err.Error(), "1 incompatible API change") {
		t.Fatalf("with azq.Version removed: %v, want one incompatible change\n%s", err, out)
	}
	m := regexp.MustCompile(`(?m)^  INCOMPATIBLE:  (.*Version.*)$`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("the report does not name Version:\n%s", out)
	}

	// Listed as intended, the change passes.
	accepted := filepath.Join(dir, filepath.FromSlash(baselineDir), acceptedFile)
	f, err := os.OpenFile(accepted, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString(rootPath + ": " + m[1] + "\n"); err != nil {
		t.Fatal(err)
	}
	f.Close()
	out, err = release("api", "-repo", dir)
	if err != nil || !strings.Contains(out, "incompatible, on purpose") {
		t.Fatalf("with the change listed in %s: %v\n%s", acceptedFile, err, out)
	}

	// An addition is compatible.
	writeFiles(t, dir, map[string]string{"envelope/release_probe.go": "package envelope\n\n// ReleaseProbe is new.\nconst ReleaseProbe = 1\n"})
	out, err = release("api", "-repo", dir)
	if err != nil || !regexp.MustCompile(`compatible: +\./envelope\.ReleaseProbe: added`).MatchString(out) {
		t.Fatalf("with an addition: %v\n%s", err, out)
	}
}
