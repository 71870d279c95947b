package buildinfo

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"strings"
	"testing"

	"github.com/azqlib/azq"
	"github.com/azqlib/azq/internal/longrun"
)

func TestDescribe(t *testing.T) {
	const rev = "9d8f06d0e1f2a3b4c5d6e7f8091a2b3c4d5e6f70"
	vcs := func(modified string) []debug.BuildSetting {
		return []debug.BuildSetting{
			{Key: "-buildmode", Value: "exe"},
			{Key: "vcs", Value: "git"},
			{Key: "vcs.revision", Value: rev},
			{Key: "vcs.time", Value: "2026-11-27T13:30:31Z"},
			{Key: "vcs.modified", Value: modified},
		}
	}
	main := func(path, version string) debug.Module { return debug.Module{Path: path, Version: version} }
	for _, c := range []struct {
		name    string
		stamped string // the revision given to the linker
		bi      *debug.BuildInfo
		ok      bool
		want    string
	}{
		{"a clean clone", "", &debug.BuildInfo{GoVersion: "go1.26.8", Main: main("github.com/azqlib/azq/cmd/azqd", "(devel)"), Settings: vcs("false")},
			true, "v0.1.0 (git revision " + rev + "; go1.26.8)"},
		{"a clone with changes", "", &debug.BuildInfo{GoVersion: "go1.26.8", Main: main("github.com/azqlib/azq", "(devel)"), Settings: vcs("true")},
			true, "v0.1.0 (git revision " + rev + ", modified; go1.26.8)"},
		// Go 1.24 and later stamp a pseudo-version from the VCS too; the
		// revision says more.
		{"a clone, pseudo-version", "", &debug.BuildInfo{GoVersion: "go1.26.8", Main: main("github.com/azqlib/azq", "v0.1.1-0.20261127133031-9d8f06d0e1f2+dirty"), Settings: vcs("true")},
			true, "v0.1.0 (git revision " + rev + ", modified; go1.26.8)"},
		{"-buildvcs=false", "", &debug.BuildInfo{GoVersion: "go1.26.8", Main: main("github.com/azqlib/azq", "(devel)"), Settings: []debug.BuildSetting{{Key: "-buildvcs", Value: "false"}}},
			true, "v0.1.0 (no VCS revision in this build; go1.26.8)"},
		{"go install …@v0.1.0", "", &debug.BuildInfo{GoVersion: "go1.26.8", Main: main("github.com/azqlib/azq/cmd/azqd", "v0.1.0")},
			true, "v0.1.0 (module github.com/azqlib/azq/cmd/azqd@v0.1.0; go1.26.8)"},
		{"no build information", "", nil, false, "v0.1.0 (no build information in this binary)"},
		// The container image's build: no VCS information in its
		// context, the revision given to the linker.
		{"the linker's revision", rev, &debug.BuildInfo{GoVersion: "go1.26.8", Main: main("github.com/azqlib/azq/cmd/azqd", "(devel)"), Settings: []debug.BuildSetting{{Key: "-trimpath", Value: "true"}}},
			true, "v0.1.0 (git revision " + rev + "; go1.26.8)"},
		{"the linker's revision, dirty", rev + "-dirty", &debug.BuildInfo{GoVersion: "go1.26.8", Main: main("github.com/azqlib/azq/cmd/azqd", "(devel)")},
			true, "v0.1.0 (git revision " + rev + ", modified; go1.26.8)"},
		{"Go's revision before the linker's", "0123456789abcdef0123456789abcdef01234567", &debug.BuildInfo{GoVersion: "go1.26.8", Main: main("github.com/azqlib/azq", "(devel)"), Settings: vcs("false")},
			true, "v0.1.0 (git revision " + rev + "; go1.26.8)"},
		{"the linker's revision, no build information", rev, nil, false, "v0.1.0 (git revision " + rev + ")"},
	} {
		if got := describe("v0.1.0", c.stamped, c.bi, c.ok); got != c.want {
			t.Errorf("%s:\n got %q\nwant %q", c.name, got, c.want)
		}
	}
}

// TestDescribeThisBinary: the test binary has build information, and the
// description starts with azq's version.
func TestDescribeThisBinary(t *testing.T) {
	if got := Describe(); !strings.HasPrefix(got, azq.Version+" (") || !strings.Contains(got, "go1.") {
		t.Errorf("Describe() = %q, want %s (…; go1.…)", got, azq.Version)
	}
}

// TestDescribeRealBuilds builds a program that prints Describe() twice,
// in a Git repository of its own, with and without -buildvcs, and runs
// both builds: the first names the repository's revision, the second says
// it has none, unless the revision is given to the linker, as the
// container image's build does. (A build in a clone records the revision the same way; the
// test makes a repository of its own as Go records none in a linked
// worktree, where the repository's .git is a file.) It runs the go
// command four times, seconds even with a warm build cache: a long run.
func TestDescribeRealBuilds(t *testing.T) {
	longrun.Skip(t)
	gitPath, err := exec.LookPath("git")
	if err != nil {
		t.Skip("git is needed")
	}
	repo, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	sum, err := os.ReadFile(filepath.Join(repo, "go.sum"))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	files := map[string]string{
		"go.mod": "module github.com/azqlib/azq/internal/buildinfo/probe\n\ngo 1.23.0\n\n" +
			"require github.com/azqlib/azq v0.1.0\n\nreplace github.com/azqlib/azq => " + repo + "\n",
		"go.sum": string(sum),
		"main.go": "package main\n\nimport (\n\t\"fmt\"\n\n\t\"github.com/azqlib/azq/internal/buildinfo\"\n)\n\n" +
			"func main() { fmt.Println(buildinfo.Describe()) }\n",
	}
	for name, text := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	run := func(env []string, name string, args ...string) string {
		t.Helper()
		cmd := exec.Command(name, args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), env...)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
		}
		return strings.TrimSpace(string(out))
	}
	git := func(args ...string) string {
		return run([]string{"GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.com", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.com"}, gitPath, args...)
	}
	goEnv := []string{"GOWORK=off", "GOPROXY=off", "GOFLAGS="}
	run(goEnv, "go", "mod", "tidy")
	git("init", "-q")
	git("add", ".")
	git("commit", "-q", "-m", "probe")
	rev := git("rev-parse", "HEAD")

	bins := t.TempDir() // outside the repository, which they would modify
	build := func(buildvcs string, flags ...string) string {
		t.Helper()
		bin := filepath.Join(bins, "probe-"+buildvcs)
		run(goEnv, "go", append(append([]string{"build", "-buildvcs=" + buildvcs}, flags...), "-o", bin, ".")...)
		return run(nil, bin)
	}
	if got, want := build("true"), azq.Version+" (git revision "+rev+"; go"; !strings.HasPrefix(got, want) {
		t.Errorf("built with -buildvcs=true in a clean repository: %q, want %q…", got, want)
	}
	if got, want := build("false"), azq.Version+" (no VCS revision in this build; go"; !strings.HasPrefix(got, want) {
		t.Errorf("built with -buildvcs=false: %q, want %q…", got, want)
	}
	// The container image's build: no VCS information, the revision
	// given to the linker.
	if got, want := build("false", "-ldflags=-X github.com/azqlib/azq/internal/buildinfo.revision="+rev), azq.Version+" (git revision "+rev+"; go"; !strings.HasPrefix(got, want) {
		t.Errorf("built with -buildvcs=false and the revision given to the linker: %q, want %q…", got, want)
	}
	if err := os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("not committed\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got, want := build("true"), azq.Version+" (git revision "+rev+", modified; go"; !strings.HasPrefix(got, want) {
		t.Errorf("built with -buildvcs=true with a change not committed: %q, want %q…", got, want)
	}
}
