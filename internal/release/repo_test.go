package main

import (
	"slices"
	"strings"
	"testing"
)

// TestOpenRepo: the release takes its modules from go.work, each tagged
// by its directory, and the version from version.go, which the
// changelog's newest release heading repeats.
func TestOpenRepo(t *testing.T) {
	root := repoRoot(t)
	r, err := openRepo(root)
	if err != nil {
		t.Fatal(err)
	}
	var dirs []string
	for _, m := range r.modules {
		dirs = append(dirs, m.dir)
		want := rootPath
		if m.dir != "" {
			want += "/" + m.dir
		}
		if m.path != want {
			t.Errorf("module in %q is %s, want %s", m.dir, m.path, want)
		}
	}
	var want []string
	for _, d := range workModules(t, root) {
		if !slices.Contains(testOnlyModules, d) {
			want = append(want, d)
		}
	}
	slices.Sort(want)
	if !slices.Equal(dirs, want) {
		t.Errorf("modules %q, want go.work's %q but the test-only %q", dirs, want, testOnlyModules)
	}
	// A test-only module that go.work does not list is a stale entry:
	// its tests would not run, or it was renamed and would be released.
	if !slices.Equal(r.testOnly, testOnlyModules) {
		t.Errorf("go.work's test-only modules %q, want every one of testOnlyModules %q", r.testOnly, testOnlyModules)
	}
	for _, d := range []string{"", "cmd/azqd", "gocloud", "watermill"} {
		if !slices.Contains(dirs, d) {
			t.Errorf("no module in %q", d)
		}
	}
	v, err := r.version()
	if err != nil {
		t.Fatal(err)
	}
	if !validVersion(v) {
		t.Errorf("version %q is not valid", v)
	}
	newest, date, err := r.newestRelease()
	if err != nil || newest != v || len(date) != len("2006-01-02") {
		t.Errorf("newest release %q %q (%v), want %q", newest, date, err, v)
	}
	if got := (module{dir: "cmd/azqd"}).tag("v0.1.0"); got != "cmd/azqd/v0.1.0" {
		t.Errorf("tag %q", got)
	}
	if got := (module{}).tag("v0.1.0"); got != "v0.1.0" {
		t.Errorf("root tag %q", got)
	}
}

func TestValidVersion(t *testing.T) {
	for v, want := range map[string]bool{
		"v0.1.0": true, "v1.2.3": true, "v0.1.0-rc.1": true,
		"v0.1": false, "0.1.0": false, "v2.0.0": false, "v0.1.0+meta": false, "": false,
	} {
		if got := validVersion(v); got != want {
			t.Errorf("validVersion(%q) = %v, want %v", v, got, want)
		}
	}
}

// TestOpenRepoRefusesAModuleItCannotTag: a module whose path is not the
// root's path and its directory would get tags that name another module.
func TestOpenRepoRefusesAModuleItCannotTag(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{
		"go.work":          "go 1.23.0\n\nuse (\n\t.\n\t./drivers/x\n)\n",
		"go.mod":           "module " + rootPath + "\n\ngo 1.23.0\n",
		"drivers/x/go.mod": "module " + rootPath + "/x\n\ngo 1.23.0\n",
	})
	if _, err := openRepo(dir); err == nil || !strings.Contains(err.Error(), "drivers/x/vX.Y.Z names "+rootPath+"/drivers/x only") {
		t.Errorf("openRepo: %v", err)
	}
}

// TestOpenRepoLeavesTestOnlyModulesOut: a module of go.work that
// testOnlyModules names is not released, so the tag, API and proxy steps
// never see it, replace directives and all; tidy still tidies it.
func TestOpenRepoLeavesTestOnlyModulesOut(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{
		"go.work":               "go 1.23.0\n\nuse (\n\t.\n\t./server/sdktest\n\t./sim\n)\n",
		"go.mod":                "module " + rootPath + "\n\ngo 1.23.0\n",
		"sim/go.mod":            "module " + rootPath + "/sim\n\ngo 1.23.0\n",
		"server/sdktest/go.mod": "module " + rootPath + "/server/sdktest\n\ngo 1.23.0\n\nreplace example.com/x => ../x\n",
		"bench/durable/go.mod":  "module " + rootPath + "/bench/durable\n\ngo 1.23.0\n",
		"testdata/other/go.mod": "module other\n\ngo 1.23.0\n",
	})
	r, err := openRepo(dir)
	if err != nil {
		t.Fatal(err)
	}
	var dirs []string
	for _, m := range r.modules {
		dirs = append(dirs, m.dir)
	}
	if want := []string{"", "sim"}; !slices.Equal(dirs, want) {
		t.Errorf("released modules %q, want %q", dirs, want)
	}
	if want := []string{"server/sdktest"}; !slices.Equal(r.testOnly, want) {
		t.Errorf("test-only modules %q, want %q", r.testOnly, want)
	}
	others, err := unreleasedModules(r)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"bench/durable", "server/sdktest"}; !slices.Equal(others, want) {
		t.Errorf("modules tidy tidies as unreleased %q, want %q", others, want)
	}
}
