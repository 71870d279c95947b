package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestGitRevision checks the AZQD_REVISION the command gives a build: the
// commit checked out, with -dirty once a file differs from it or is new
// (as Go's own VCS stamping counts them), and an error outside a clone,
// which the command turns into a warning and a build naming no revision.
func TestGitRevision(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("git is missing under CI")
		}
		t.Skip("git is needed")
	}
	ctx := context.Background()
	repo := t.TempDir()
	git := func(args ...string) string {
		t.Helper()
		cmd := exec.Command("git", append([]string{"-C", repo}, args...)...)
		cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.com", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.com")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return strings.TrimSpace(string(out))
	}
	if _, err := gitRevision(ctx, repo); err == nil {
		t.Error("no error outside a clone")
	}
	git("init", "-q")
	if err := os.WriteFile(filepath.Join(repo, "Dockerfile"), []byte("FROM scratch\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	git("add", ".")
	git("commit", "-q", "-m", "one")
	check := func(state string, want string) {
		t.Helper()
		if got, err := gitRevision(ctx, repo); err != nil || got != want {
			t.Errorf("%s: %q, %v; want %q", state, got, err, want)
		}
	}
	head := git("rev-parse", "HEAD")
	if !regexp.MustCompile(`^[0-9a-f]{40}$`).MatchString(head) {
		t.Fatalf("rev-parse HEAD: %q", head)
	}
	check("clean", head)
	if err := os.WriteFile(filepath.Join(repo, "new.txt"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	check("a new file", head+"-dirty")
	git("add", ".")
	git("commit", "-q", "-m", "two")
	head = git("rev-parse", "HEAD")
	check("committed", head)
	if err := os.WriteFile(filepath.Join(repo, "Dockerfile"), []byte("FROM scratch\n# changed\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	check("a changed file", head+"-dirty")
}

// TestBuildArgFlag: -build-arg takes NAME=VALUE, repeated, the value
// possibly empty or holding "="; anything else is refused.
func TestBuildArgFlag(t *testing.T) {
	b := buildArgFlag{}
	for _, s := range []string{"A=1", "B=", "C=x=y", "A=2"} {
		if err := b.Set(s); err != nil {
			t.Errorf("Set(%q): %v", s, err)
		}
	}
	if len(b) != 3 || b["A"] != "2" || b["B"] != "" || b["C"] != "x=y" {
		t.Errorf("got %v", b)
	}
	for _, s := range []string{"A", "=1", ""} {
		if err := b.Set(s); err == nil {
			t.Errorf("Set(%q) accepted", s)
		}
	}
}
