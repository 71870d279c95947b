package main

import (
	"go/constant"
	"go/token"
	"go/types"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/azqlib/azq/internal/longrun"
	"golang.org/x/exp/apidiff"
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

	// azq.Version becomes a variable: a user's constant expression that
	// names it is broken. (Removing it would break the build of azqtest,
	// which names it, before the check could say so.)
	editFile(t, dir, "version.go", "const Version =", "var Version =")
	out, err = release("api", "-repo", dir)
	if err == nil || !strings.Contains(err.Error(), "1 incompatible API change") {
		t.Fatalf("with azq.Version a variable: %v, want one incompatible change\n%s", err, out)
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

// TestLastAPIFollowsACarvedPackage: a package carved out of the root
// module into a module of its own keeps its import path; its last
// release's API, in the root module's baseline, is the new module's to
// keep, and no longer the root module's.
func TestLastAPIFollowsACarvedPackage(t *testing.T) {
	dir := t.TempDir()
	r := &repo{dir: dir, modules: []module{
		{dir: "", path: rootPath},
		{dir: "sim", path: rootPath + "/sim"},
		{dir: "cmd/azqsim", path: rootPath + "/cmd/azqsim"},
	}}
	pkg := func(path, name string) *types.Package {
		p := types.NewPackage(path, name)
		p.Scope().Insert(types.NewConst(token.NoPos, p, "Exported", types.Typ[types.UntypedInt], constant.MakeInt64(1)))
		p.MarkComplete()
		return p
	}
	if err := os.MkdirAll(filepath.Join(dir, filepath.FromSlash(baselineDir)), 0o755); err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	root := &apidiff.Module{Path: rootPath, Packages: []*types.Package{
		pkg(rootPath, "azq"), pkg(rootPath+"/simulation", "simulation"), pkg(rootPath+"/sim", "sim"), pkg(rootPath+"/sim/plot", "plot"),
	}}
	if err := writeAPI(fset, baselineFile(dir, r.modules[0]), root); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		m     module
		own   bool
		paths string // of the packages, or "nil" for no API at all
	}{
		{r.modules[0], true, rootPath + ", " + rootPath + "/simulation"},
		{r.modules[1], false, rootPath + "/sim, " + rootPath + "/sim/plot"},
		{r.modules[2], false, "nil"},
	} {
		api, own, err := lastAPI(token.NewFileSet(), r, c.m)
		if err != nil {
			t.Fatal(err)
		}
		got := "nil"
		if api != nil {
			got = packageList(api)
			if api.Path != c.m.path {
				t.Errorf("%s: the API is of module %s", c.m.path, api.Path)
			}
		}
		if got != c.paths || own != c.own {
			t.Errorf("%s: packages %s, own baseline %v; want %s, %v", c.m.path, got, own, c.paths, c.own)
		}
	}
}
