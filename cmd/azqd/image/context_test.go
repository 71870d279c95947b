package main

import (
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// sent reports whether docker build would send path (slash-separated,
// relative to the context's root) in the build context.
func sent(t *testing.T, bc *buildContext, path string) bool {
	t.Helper()
	ok, err := bc.sent(path)
	if err != nil {
		t.Fatal(err)
	}
	return ok
}

// TestDockerignore checks the build context docker build would send from
// the repository's root: none of the repository's history, build and
// test outputs, the simulator's output or the JavaScript SDK's
// node_modules; and every file the Dockerfile's go build reads: the
// go.mod and go.sum files it copies, and each Go and embedded file of
// every package azqd is built from, as go list reports them for the
// build the Dockerfile runs: outside the workspace, with azqd's go.mod
// and the clone's root module in place of the released one.
func TestDockerignore(t *testing.T) {
	root := repoRoot(t)
	pm, err := openContext(root)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{
		".git", ".git/HEAD",
		"cmd/azqd/clone.mod", "cmd/azqd/clone.sum",
		"azqsim-out", "azqsim-out/report.html",
		"server/testdata/jssdk/node_modules", "server/testdata/jssdk/node_modules/@azure/storage-queue/package.json",
		"azqd", "azqsim", "cmd/azqd/azqd", "cmd/azqsim/azqsim", "cmd/azqload/azqload",
		"azqd-oci", "azqd-oci/index.json", "azqd.tar",
		"server/server.test", "cpu.prof", "cmd/azqd/mem.prof", "bench/x.txt.tmp",
	} {
		if sent(t, pm, p) {
			t.Errorf("the build context would hold %s", p)
		}
	}

	needed := []string{"go.mod", "go.sum", "cmd/azqd/go.mod", "cmd/azqd/go.sum", "postgres/go.mod", "postgres/go.sum",
		"metrics/go.mod", "metrics/go.sum", "azure/go.mod", "azure/go.sum", "azqtest/go.mod", "azqtest/go.sum", "server/go.mod", "server/go.sum", "Dockerfile"}
	azqd := filepath.Join(root, "cmd", "azqd")
	modfile := filepath.Join(t.TempDir(), "clone.mod")
	for _, f := range [][2]string{{"go.mod", "clone.mod"}, {"go.sum", "clone.sum"}} {
		b, err := os.ReadFile(filepath.Join(azqd, f[0]))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(filepath.Dir(modfile), f[1]), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if out, err := exec.Command("go", "mod", "edit", "-replace=github.com/azqlib/azq=../..", "-replace=github.com/azqlib/azq/postgres=../../postgres",
		"-replace=github.com/azqlib/azq/metrics=../../metrics", "-replace=github.com/azqlib/azq/azure=../../azure",
		"-replace=github.com/azqlib/azq/azqtest=../../azqtest", "-replace=github.com/azqlib/azq/server=../../server", modfile).CombinedOutput(); err != nil {
		t.Fatalf("go mod edit: %v\n%s", err, out)
	}
	list := exec.Command("go", "list", "-modfile="+modfile, "-deps", "-f", `{{if not .Standard}}{{.Dir}}{{range .GoFiles}} {{.}}{{end}}{{range .EmbedFiles}} {{.}}{{end}}{{end}}`, ".")
	list.Dir = azqd
	list.Env = append(os.Environ(), "GOWORK=off", "CGO_ENABLED=0", "GOOS=linux")
	out, err := list.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		fields := strings.Fields(line)
		if len(fields) == 0 {
			continue
		}
		rel, err := filepath.Rel(root, fields[0])
		if err != nil || strings.HasPrefix(rel, "..") {
			continue // a module from the module cache, which go mod download fetches
		}
		for _, f := range fields[1:] {
			needed = append(needed, filepath.ToSlash(filepath.Join(rel, f)))
		}
	}
	if len(needed) < 50 {
		t.Fatalf("go list found %d files azqd is built from; want its packages' files", len(needed))
	}
	for _, p := range needed {
		if !sent(t, pm, p) {
			t.Errorf("the build context lacks %s, which the Dockerfile's build reads", p)
		}
	}

	// And what would be sent, with the files that are there now: nothing
	// of the above, whatever this clone holds.
	err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		rel = filepath.ToSlash(rel)
		if rel == "." {
			return nil
		}
		if !sent(t, pm, rel) {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		if d.Name() == "node_modules" || strings.HasSuffix(rel, ".test") {
			t.Errorf("would send %s", rel)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
