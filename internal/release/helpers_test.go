package main

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/mod/semver"
)

// repoRoot is the clone this module is part of.
func repoRoot(t *testing.T) string {
	t.Helper()
	dir, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

// gitIdentity lets the tests commit and make annotated tags wherever
// they run.
var gitIdentity = []string{
	"GIT_AUTHOR_NAME=release test", "GIT_AUTHOR_EMAIL=release-test@example.com",
	"GIT_COMMITTER_NAME=release test", "GIT_COMMITTER_EMAIL=release-test@example.com",
}

// setGitIdentity sets gitIdentity for the test, for git run by the code
// under test too.
func setGitIdentity(t *testing.T) {
	for _, kv := range gitIdentity {
		k, v, _ := strings.Cut(kv, "=")
		t.Setenv(k, v)
	}
}

// runIn runs name with args in dir, with env added to the test's
// environment and GOWORK unset, and returns its output; it fails the test
// if the command fails.
func runIn(t *testing.T, dir string, env []string, name string, args ...string) string {
	t.Helper()
	out, err := tryIn(dir, env, name, args...)
	if err != nil {
		t.Fatalf("in %s: %s %s: %v\n%s", dir, name, strings.Join(args, " "), err, out)
	}
	return out
}

// tryIn is runIn that returns the error.
func tryIn(dir string, env []string, name string, args ...string) (string, error) {
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	// The tests run outside the workspace (GOWORK=off); the commands
	// they run find a clone's go.work unless env says otherwise.
	cmd.Env = append(append(append(os.Environ(), gitIdentity...), "GOWORK="), env...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// copyClone copies the files of the clone that git tracks or would track
// into a new Git repository, committed, and returns its directory: the
// working tree as the next commit would have it, in a clone of its own.
func copyClone(t *testing.T) string {
	t.Helper()
	src := repoRoot(t)
	list := runIn(t, src, nil, "git", "ls-files", "-z", "--cached", "--others", "--exclude-standard")
	dst := t.TempDir()
	for _, f := range strings.Split(strings.Trim(list, "\x00"), "\x00") {
		data, err := os.ReadFile(filepath.Join(src, f))
		if os.IsNotExist(err) {
			continue // deleted, not yet committed
		}
		if err != nil {
			t.Fatal(err)
		}
		info, err := os.Stat(filepath.Join(src, f))
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(dst, f)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, data, info.Mode().Perm()); err != nil {
			t.Fatal(err)
		}
	}
	runIn(t, dst, nil, "git", "init", "-q", "-b", "main")
	runIn(t, dst, nil, "git", "add", "-A")
	runIn(t, dst, nil, "git", "commit", "-q", "-m", "the working tree")
	return dst
}

// commitAll commits every change in the clone at dir.
func commitAll(t *testing.T, dir, message string) {
	t.Helper()
	runIn(t, dir, nil, "git", "add", "-A")
	runIn(t, dir, nil, "git", "commit", "-q", "-m", message)
}

// editFile replaces old by new in the clone's file, which must hold old.
func editFile(t *testing.T, dir, file, old, new string) {
	t.Helper()
	p := filepath.Join(dir, filepath.FromSlash(file))
	data, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(data, []byte(old)) {
		t.Fatalf("%s does not hold %q", file, old)
	}
	if err := os.WriteFile(p, bytes.Replace(data, []byte(old), []byte(new), 1), 0o644); err != nil {
		t.Fatal(err)
	}
}

// workModules are the module directories go.work lists in the clone at
// dir, as the go command reads them: "" for the root.
func workModules(t *testing.T, dir string) []string {
	t.Helper()
	var w struct{ Use []struct{ DiskPath string } }
	if err := json.Unmarshal([]byte(runIn(t, dir, nil, "go", "work", "edit", "-json")), &w); err != nil {
		t.Fatal(err)
	}
	var dirs []string
	for _, u := range w.Use {
		d := filepath.ToSlash(filepath.Clean(u.DiskPath))
		if d == "." {
			d = ""
		}
		dirs = append(dirs, d)
	}
	return dirs
}

// release runs the release command with args and returns its output.
func release(args ...string) (string, error) {
	var out bytes.Buffer
	err := run(args, &out, &out)
	return out.String(), err
}

// writeFiles writes files, by slash-separated path, under dir.
func writeFiles(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, text := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// commitBaselines writes the API baselines in the clone at dir and commits
// them, as the commit that cuts a release does.
func commitBaselines(t *testing.T, dir string) {
	t.Helper()
	if out, err := release("api", "-w", "-repo", dir); err != nil {
		t.Fatalf("api -w: %v\n%s", err, out)
	}
	// The clone may have them already, as it does from a release on:
	// then api -w changes nothing, and there is nothing to commit.
	if runIn(t, dir, nil, "git", "status", "--porcelain") != "" {
		commitAll(t, dir, "API baselines")
	}
}

// cutRelease makes, in the clone at dir, the commit that cuts the release
// its modules are heading for, as docs/releasing.md's steps do, and
// returns its version: the newest version of one of the repository's
// modules that a module requires. A module carved out of another since
// the last release requires the next one already (the first without its
// packages in the module they left), which the others require only once
// the release is cut; with no such module it is azq.Version, and only
// the baselines are written. CHANGELOG.md's Unreleased heading becomes
// the release's, azq.Version the version, every module requires the
// repository's modules at it and go.work replaces its nested modules at
// it; then the baselines are written, and all of it committed.
func cutRelease(t *testing.T, dir string) string {
	t.Helper()
	r := mustRepo(t, dir)
	last, err := r.version()
	if err != nil {
		t.Fatal(err)
	}
	ours := map[string]bool{}
	for _, m := range r.modules {
		ours[m.path] = true
	}
	next := last
	for _, m := range r.nested() {
		for _, rq := range m.gomod.Require {
			if ours[rq.Mod.Path] && semver.Compare(rq.Mod.Version, next) > 0 {
				next = rq.Mod.Version
			}
		}
	}
	if next != last {
		editFile(t, dir, "version.go", `const Version = "`+last+`"`, `const Version = "`+next+`"`)
		editFile(t, dir, "CHANGELOG.md", "## [Unreleased]\n", "## [Unreleased]\n\n## ["+next+"] - "+time.Now().UTC().Format(time.DateOnly)+"\n")
		for _, m := range r.nested() {
			for _, rq := range m.gomod.Require {
				if ours[rq.Mod.Path] && rq.Mod.Version != next {
					runIn(t, m.abs(dir), nil, "go", "mod", "edit", "-require="+rq.Mod.Path+"@"+next)
				}
			}
		}
		for _, rp := range r.workReplace {
			if ours[rp.Old.Path] && rp.Old.Version != next {
				runIn(t, dir, nil, "go", "work", "edit", "-dropreplace="+rp.Old.Path+"@"+rp.Old.Version,
					"-replace="+rp.Old.Path+"@"+next+"="+rp.New.Path)
			}
		}
		commitAll(t, dir, "Release "+next)
	}
	commitBaselines(t, dir)
	t.Logf("the commit that cuts %s (the last release: %s)", next, last)
	return next
}
