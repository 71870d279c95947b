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
	want := workModules(t, root)
	slices.Sort(want)
	if !slices.Equal(dirs, want) {
		t.Errorf("modules %q, want go.work's %q", dirs, want)
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
