package main

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/azqlib/azq/internal/longrun"
)

// tagsOf are the tags of the clone at dir, one a line.
func tagsOf(t *testing.T, dir string) string {
	t.Helper()
	return strings.TrimSpace(runIn(t, dir, nil, "git", "tag", "-l"))
}

// TestTagDryRunThenTags runs the release script on a copy of the working
// tree as a maintainer will on the release commit (cutRelease: the
// version, the requirements, the API baselines): the dry run checks and lists a tag for every module go.work
// names but the test-only ones, and makes none; the run makes them, annotated, on HEAD, and says
// how to push them; a second run refuses, the tags existing. A long run:
// it compiles every module's API.
func TestTagDryRunThenTags(t *testing.T) {
	longrun.Skip(t)
	setGitIdentity(t)
	dir := copyClone(t)
	version := cutRelease(t, dir)
	var want []string
	for _, d := range workModules(t, dir) {
		if slices.Contains(testOnlyModules, d) {
			continue // never released
		}
		tag := version
		if d != "" {
			tag = d + "/" + version
		}
		want = append(want, tag)
	}

	out, err := release("tag", "-dry-run", "-repo", dir)
	if err != nil {
		t.Fatalf("dry run: %v\n%s", err, out)
	}
	if strings.Contains(out, "FAIL") || !strings.Contains(out, "a dry run: none made") {
		t.Errorf("dry run:\n%s", out)
	}
	for _, tag := range want {
		if !strings.Contains(out, "  "+tag+" ") {
			t.Errorf("the dry run does not list %s:\n%s", tag, out)
		}
	}
	if got := tagsOf(t, dir); got != "" {
		t.Fatalf("the dry run made tags: %s", got)
	}

	out, err = release("tag", "-repo", dir)
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if !strings.Contains(out, "publish them with: git push origin "+strings.Join(want, " ")) {
		t.Errorf("the run does not say how to push the tags:\n%s", out)
	}
	head := strings.TrimSpace(runIn(t, dir, nil, "git", "rev-parse", "HEAD"))
	if got := strings.Fields(tagsOf(t, dir)); len(got) != len(want) {
		t.Errorf("tags %q, want %q", got, want)
	}
	for _, tag := range want {
		if typ := strings.TrimSpace(runIn(t, dir, nil, "git", "cat-file", "-t", "refs/tags/"+tag)); typ != "tag" {
			t.Errorf("%s is a %s, not an annotated tag", tag, typ)
		}
		if c := strings.TrimSpace(runIn(t, dir, nil, "git", "rev-parse", tag+"^{commit}")); c != head {
			t.Errorf("%s is on %s, not HEAD %s", tag, c, head)
		}
	}

	out, err = release("tag", "-repo", dir)
	if !errors.Is(err, errRefused) || !strings.Contains(out, "the tag "+version+" exists") {
		t.Errorf("a second run: %v\n%s", err, out)
	}
}

// TestTagRefuses: each condition a release needs, broken in a copy of the
// working tree once cutRelease has made it a release commit, keeps every tag from being made, and the script says
// which and why. The cases whose cheap checks fail do not compile the
// modules' APIs; the last one does, so the whole is a long run.
func TestTagRefuses(t *testing.T) {
	longrun.Skip(t)
	setGitIdentity(t)
	base := copyClone(t)
	version := cutRelease(t, base)
	for _, c := range []struct {
		name   string
		break_ func(t *testing.T, dir string)
		args   []string
		want   string
	}{
		{"changes not committed", func(t *testing.T, dir string) {
			writeFiles(t, dir, map[string]string{"notes.txt": "not committed\n"})
		}, nil, "?? notes.txt"},
		{"the changelog names another version", func(t *testing.T, dir string) {
			editFile(t, dir, "CHANGELOG.md", "## ["+version+"]", "## [v9.9.9]")
			commitAll(t, dir, "changelog")
		}, nil, "CHANGELOG.md's newest release is v9.9.9; azq.Version (version.go) is " + version},
		{"a version a module cannot be tagged with", func(t *testing.T, dir string) {
			editFile(t, dir, "version.go", `const Version = "`+version+`"`, `const Version = "v2.0.0"`)
			commitAll(t, dir, "version")
		}, nil, `azq.Version "v2.0.0" is not a version`},
		{"a driver requires another root version", func(t *testing.T, dir string) {
			runIn(t, filepath.Join(dir, "gocloud"), nil, "go", "mod", "edit", "-require=github.com/azqlib/azq@v0.0.9")
			commitAll(t, dir, "require")
		}, nil, "gocloud/go.mod requires github.com/azqlib/azq v0.0.9"},
		{"a module with commands has a replace", func(t *testing.T, dir string) {
			runIn(t, filepath.Join(dir, "cmd", "azqd"), nil, "go", "mod", "edit", "-replace=github.com/azqlib/azq=../..")
			commitAll(t, dir, "replace")
		}, nil, "cmd/azqd/go.mod replaces github.com/azqlib/azq, and go install …@" + version + " refuses"},
		{"a driver replaces another module", func(t *testing.T, dir string) {
			runIn(t, filepath.Join(dir, "watermill"), nil, "go", "mod", "edit", "-replace=github.com/google/uuid=github.com/google/uuid@v1.5.0")
			commitAll(t, dir, "replace")
		}, nil, "watermill/go.mod replaces github.com/google/uuid with github.com/google/uuid v1.5.0: users' builds ignore it"},
		{"go.work replaces another release of a nested module", func(t *testing.T, dir string) {
			runIn(t, dir, nil, "go", "work", "edit", "-dropreplace=github.com/azqlib/azq/postgres@"+version,
				"-replace=github.com/azqlib/azq/postgres@v0.0.9=./postgres")
			commitAll(t, dir, "go.work")
		}, nil, "go.work replaces github.com/azqlib/azq/postgres v0.0.9, not this release's " + version},
		{"a tag exists", func(t *testing.T, dir string) {
			runIn(t, dir, nil, "git", "tag", "gocloud/"+version)
		}, nil, "the tag gocloud/" + version + " exists"},
		{"a tag exists on the remote", func(t *testing.T, dir string) {
			remote := t.TempDir()
			runIn(t, remote, nil, "git", "init", "-q", "--bare")
			runIn(t, dir, nil, "git", "remote", "add", "upstream", remote)
			runIn(t, dir, nil, "git", "tag", "watermill/"+version)
			runIn(t, dir, nil, "git", "push", "-q", "upstream", "watermill/"+version)
			runIn(t, dir, nil, "git", "tag", "-d", "watermill/"+version)
		}, []string{"-remote", "upstream"}, "the tag watermill/" + version + " exists on upstream"},
		{"no API baselines", func(t *testing.T, dir string) {
			runIn(t, dir, nil, "git", "rm", "-q", filepath.ToSlash(filepath.Join(baselineDir, "gocloud.zip")))
			commitAll(t, dir, "no baseline")
		}, nil, rootPath + "/gocloud has no API baseline"},
		{"the API has changed since the baseline", func(t *testing.T, dir string) {
			writeFiles(t, dir, map[string]string{"release_probe.go": "package azq\n\n// ReleaseProbe is new.\nfunc ReleaseProbe() {}\n"})
			commitAll(t, dir, "new API")
		}, nil, "github.com/azqlib/azq: 1 change(s) since the baseline"},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			runIn(t, dir, nil, "git", "clone", "-q", base, ".")
			c.break_(t, dir)
			before := tagsOf(t, dir)
			out, err := release(append([]string{"tag", "-repo", dir}, c.args...)...)
			if !errors.Is(err, errRefused) || !strings.Contains(out, c.want) {
				t.Errorf("%v, want the tags refused because %q:\n%s", err, c.want, out)
			}
			if after := tagsOf(t, dir); after != before {
				t.Errorf("tags %q before, %q after a refusal", before, after)
			}
		})
	}
}

func mustRepo(t *testing.T, dir string) *repo {
	t.Helper()
	r, err := openRepo(dir)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestHasCommands: a module with a main package outside testdata has
// commands; go install needs its go.mod free of replace directives.
func TestHasCommands(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{
		"go.mod":                "module example.com/m\n",
		"lib.go":                "package m\n",
		"lib_test.go":           "package main\n",
		"testdata/tool/main.go": "package main\n",
		"nested/go.mod":         "module example.com/m/nested\n",
		"nested/main.go":        "package main\n",
	})
	if got, err := hasCommands(dir); got || err != nil {
		t.Errorf("a library: hasCommands = %v, %v", got, err)
	}
	if err := os.MkdirAll(filepath.Join(dir, "cmd", "tool"), 0o755); err != nil {
		t.Fatal(err)
	}
	writeFiles(t, dir, map[string]string{"cmd/tool/main.go": "package main\n\nfunc main() {}\n"})
	if got, err := hasCommands(dir); !got || err != nil {
		t.Errorf("with cmd/tool: hasCommands = %v, %v", got, err)
	}
}
