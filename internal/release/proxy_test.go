package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	modpath "golang.org/x/mod/module"

	"github.com/azqlib/azq/internal/longrun"
)

// TestProxySaysWhatToSet: release proxy prints, after the modules, the
// environment that resolves them through it: GOPROXY with the proxy
// first, and a GONOSUMDB that covers every module it wrote, which the
// checksum database cannot know before the tags are published.
func TestProxySaysWhatToSet(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "azq-proxy")
	var stdout, stderr bytes.Buffer
	if err := cmdProxy([]string{"-repo", repoRoot(t), "-dir", dir}, &stdout, &stderr); err != nil {
		t.Fatalf("%v\n%s", err, &stderr)
	}
	var modules []string
	var export string
	for _, line := range strings.Split(stdout.String(), "\n") {
		if path, _, ok := strings.Cut(line, "@"); ok && !strings.Contains(line, " ") {
			modules = append(modules, path)
		}
		if e, ok := strings.CutPrefix(strings.TrimSpace(line), "export "); ok {
			export = e
		}
	}
	if len(modules) == 0 || export == "" {
		t.Fatalf("no modules, or no export line:\n%s", &stdout)
	}
	goproxy, nosumdb, _ := strings.Cut(export, " GONOSUMDB=")
	vars := map[string]string{"GONOSUMDB": nosumdb}
	vars["GOPROXY"], _ = strings.CutPrefix(goproxy, "GOPROXY=")
	if want := "file://" + filepath.ToSlash(dir) + ",$(go env GOPROXY)"; vars["GOPROXY"] != want {
		t.Errorf("GOPROXY=%s, want %s", vars["GOPROXY"], want)
	}
	for _, m := range modules {
		if !modpath.MatchPrefixPatterns(vars["GONOSUMDB"], m) {
			t.Errorf("GONOSUMDB=%s does not cover %s", vars["GONOSUMDB"], m)
		}
	}
	if modpath.MatchPrefixPatterns(vars["GONOSUMDB"], "github.com/azqlib/azqother") {
		t.Errorf("GONOSUMDB=%s covers modules that are not azq's", vars["GONOSUMDB"])
	}
	if !strings.Contains(stdout.String(), "GOSUMDB=off") {
		t.Errorf("the instructions do not name GOSUMDB=off as the alternative:\n%s", &stdout)
	}
}

// TestReadmeLocalProxy runs the README's commands for the release tool's
// local proxy as written (but for the proxy's directory, the test's own),
// then fetches the root module and azqd's through it, outside any
// module: with the README's GONOSUMDB they resolve, and without it the go
// command refuses them, having no checksum database entry to verify them
// by (verifying go.mod, or the module). A long run: it builds the
// release tool, as .ci/release does.
func TestReadmeLocalProxy(t *testing.T) {
	longrun.Skip(t)
	version, err := mustRepo(t, repoRoot(t)).version()
	if err != nil {
		t.Fatal(err)
	}
	block := readmeBlock(t, ".ci/release proxy")
	if !strings.Contains(block, readmeProxyDir) || !strings.Contains(block, " GONOSUMDB=") {
		t.Fatalf("the README's local proxy is not in %s, or its commands set no GONOSUMDB:\n%s", readmeProxyDir, block)
	}
	block = strings.ReplaceAll(block, readmeProxyDir, filepath.Join(t.TempDir(), "azq-proxy"))
	base := t.TempDir()
	if err := os.Symlink(repoRoot(t), filepath.Join(base, "azq")); err != nil {
		t.Fatal(err)
	}
	here := filepath.Join(base, "elsewhere")
	if err := os.Mkdir(here, 0o755); err != nil {
		t.Fatal(err)
	}
	// The machine's module cache, as the only proxy after the README's,
	// builds the release tool without the network; azq's modules come
	// from the README's proxy into a module cache of the test's own.
	cache := strings.TrimSpace(runIn(t, ".", nil, "go", "env", "GOMODCACHE"))
	env := []string{
		"GOPROXY=file://" + filepath.ToSlash(filepath.Join(cache, "cache", "download")),
		"GOMODCACHE=" + t.TempDir(),
		"GOFLAGS=-modcacherw", // so that the test's cache can be removed
		"GOWORK=off",
	}
	download := "\ngo mod download " + rootPath + "@" + version + " " + rootPath + "/cmd/azqd@" + version + "\n"
	runIn(t, here, env, "bash", "-euo", "pipefail", "-c", block+download)

	without := strings.Replace(block, " GONOSUMDB=", " NOT_GONOSUMDB=", 1)
	env[1] = "GOMODCACHE=" + t.TempDir()
	out, err := tryIn(here, env, "bash", "-euo", "pipefail", "-c", without+download)
	if err == nil || !strings.Contains(out, ": verifying ") {
		t.Errorf("without GONOSUMDB the modules were not refused as unverified: %v\n%s", err, out)
	}
}

// readmeProxyDir is where the README's commands have the release tool
// write the local module proxy.
const readmeProxyDir = "/tmp/azq-proxy"
