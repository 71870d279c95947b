package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/azqlib/azq/internal/longrun"
	"golang.org/x/mod/modfile"
)

// keptOut are the modules, by path prefix, that the root module must not
// require, directly or not: a plotting library, a browser driver,
// Prometheus and the Azure SDK, which the modules of their own that need
// them (sim, cmd/azqd, metrics, azure and azqtest) require, so that they
// stay out of the module graph of every module using azq.
var keptOut = []string{"gonum.org/", "github.com/chromedp/", "github.com/prometheus/", "github.com/Azure/azure-sdk-for-go/", "github.com/golang-jwt/"}

// keptOutOf lists the modules of keptOut among paths.
func keptOutOf(paths []string) []string {
	var found []string
	for _, p := range paths {
		for _, k := range keptOut {
			if strings.HasPrefix(p, k) {
				found = append(found, p)
			}
		}
	}
	return found
}

// TestRootModuleRequiresNoneKeptOut reads the root go.mod: it lists every
// module the root module's packages and tests need, so a package or a
// test that brought a plotting library, a browser driver, Prometheus or
// the Azure SDK back into the root module fails here.
func TestRootModuleRequiresNoneKeptOut(t *testing.T) {
	file := filepath.Join(repoRoot(t), "go.mod")
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	f, err := modfile.Parse(file, data, nil)
	if err != nil {
		t.Fatal(err)
	}
	var paths []string
	for _, r := range f.Require {
		paths = append(paths, r.Mod.Path)
	}
	if found := keptOutOf(paths); len(found) > 0 {
		t.Errorf("the root go.mod requires %s: move what needs it into a module of its own (sim, cmd/azqd, metrics, azure, azqtest, server; a test into server/sdktest or worker/sdktest)", strings.Join(found, ", "))
	}
}

// TestTidy runs "release tidy" on a copy of the working tree: every
// module is tidy already, so nothing changes; and with a requirement
// dropped from cmd/azqd/go.mod, which has no replace of the root module,
// tidy puts it back, and leaves the go.mod without a replace; the root
// module's whole graph (go mod graph), tidied, has none of keptOut. A
// long run: go mod tidy in every module, twice.
func TestTidy(t *testing.T) {
	longrun.Skip(t)
	setGitIdentity(t)
	dir := copyClone(t)
	if out, err := release("tidy", "-repo", dir); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if st := runIn(t, dir, nil, "git", "status", "--porcelain"); st != "" {
		t.Errorf("tidy changed a tidy working tree:\n%s\n%s", st, runIn(t, dir, nil, "git", "diff"))
	}

	var graph []string
	for _, l := range strings.Split(runIn(t, dir, []string{"GOWORK=off"}, "go", "mod", "graph"), "\n") {
		if f := strings.Fields(l); len(f) == 2 {
			path, _, _ := strings.Cut(f[1], "@")
			graph = append(graph, path)
		}
	}
	if found := keptOutOf(graph); len(found) > 0 {
		t.Errorf("the root module's graph has %s", strings.Join(found, ", "))
	}

	gomod := filepath.Join(dir, "cmd", "azqd", "go.mod")
	runIn(t, filepath.Dir(gomod), nil, "go", "mod", "edit", "-droprequire=github.com/benbjohnson/clock")
	if out, err := release("tidy", "-repo", dir); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	data, err := os.ReadFile(gomod)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(data), "\tgithub.com/benbjohnson/clock ") || strings.Contains(string(data), "replace") {
		t.Errorf("cmd/azqd/go.mod after tidy:\n%s", data)
	}
	if st := runIn(t, dir, nil, "git", "status", "--porcelain"); st != "" {
		t.Errorf("tidy left changes:\n%s\n%s", st, runIn(t, dir, nil, "git", "diff"))
	}
}
