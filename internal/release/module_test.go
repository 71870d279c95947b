package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/azqlib/azq/internal/longrun"
	"golang.org/x/mod/modfile"
	"golang.org/x/mod/semver"
)

// The module tests follow the README's "Use it from your own module" as a
// newcomer would: a module of their own, outside the repository, whose
// program (testdata/yourapp) imports the root module and both drivers,
// after exactly the README's commands; then they build and run it, and
// azqd as the commands installed it.

// readmeBlock is the body of README.md's sh block that contains marker.
func readmeBlock(t *testing.T, marker string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repoRoot(t), "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range regexp.MustCompile("(?s)```sh\n(.*?)```").FindAllStringSubmatch(string(b), -1) {
		if strings.Contains(m[1], marker) {
			return m[1]
		}
	}
	t.Fatalf("README.md has no sh block containing %q", marker)
	return ""
}

// newApp makes the module of a user in base/yourapp, with the program
// that imports azq's modules, and returns its directory.
func newApp(t *testing.T, base string, env []string) string {
	t.Helper()
	app := filepath.Join(base, "yourapp")
	src, err := os.ReadFile(filepath.Join("testdata", "yourapp", "main.go"))
	if err != nil {
		t.Fatal(err)
	}
	writeFiles(t, app, map[string]string{"main.go": string(src)})
	runIn(t, app, env, "go", "mod", "init", "example.com/yourapp")
	return app
}

// checkApp builds and runs the program, and runs the azqd in gobin.
func checkApp(t *testing.T, app, gobin string, env []string, version, azqdBuild string) {
	t.Helper()
	runIn(t, app, env, "go", "build", "-o", "yourapp", ".")
	want := "gocloud: order 42\nwatermill: invoice 7\npostgres: schema version 3\nazq " + version + "\n"
	if got := runIn(t, app, nil, filepath.Join(app, "yourapp")); got != want {
		t.Errorf("the program printed %q, want %q", got, want)
	}
	got := runIn(t, app, nil, filepath.Join(gobin, "azqd"), "-version")
	if want := "azqd " + version + " (" + azqdBuild; !strings.HasPrefix(got, want) {
		t.Errorf("azqd -version printed %q, want %q…", got, want)
	}
}

// TestReadmeFromAClone runs the README's two ways of using a clone, a
// replace of each module and a workspace, with the clone at ../azq. A
// long run: go mod tidy and builds of four modules' dependencies.
func TestReadmeFromAClone(t *testing.T) {
	longrun.Skip(t)
	version, err := mustRepo(t, repoRoot(t)).version()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ name, marker string }{
		{"replace", "-replace=github.com/azqlib/azq="},
		{"workspace", "go work init"},
	} {
		t.Run(c.name, func(t *testing.T) {
			block := readmeBlock(t, c.marker)
			base := t.TempDir()
			if err := os.Symlink(repoRoot(t), filepath.Join(base, "azq")); err != nil {
				t.Fatal(err)
			}
			gobin := t.TempDir()
			env := []string{"GOBIN=" + gobin}
			app := newApp(t, base, env)
			runIn(t, app, env, "bash", "-euo", "pipefail", "-c", block)
			checkApp(t, app, gobin, env, version, "")
		})
	}
}

// TestReadmeFromTheModuleProxy runs the README's commands for the
// published modules against a module proxy made from the working tree's
// modules at azq.Version (release proxy), as the tags will publish them:
// no replace, no workspace, so a nested module that requires a root
// version nothing publishes, or a go.mod that go install refuses, fails
// here as it would for a user. A long run: it builds three modules'
// dependencies and azqd from a module cache of its own.
//
// A working tree whose modules require a release after azq.Version (a
// package carved out since: the drivers require azure's module, which
// the next release publishes first) cannot be published at azq.Version:
// the test then cuts that release in a copy of the clone, as
// TestCarvedModulesFromTheNextRelease does, and runs the README's
// commands at the new version, as the cut writes them.
func TestReadmeFromTheModuleProxy(t *testing.T) {
	longrun.Skip(t)
	r := mustRepo(t, repoRoot(t))
	readmeVersion, err := r.version()
	if err != nil {
		t.Fatal(err)
	}
	block := readmeBlock(t, "go get github.com/azqlib/azq@")
	if !strings.Contains(block, "@"+readmeVersion+" ") {
		t.Fatalf("the README's commands do not name %s, azq.Version:\n%s", readmeVersion, block)
	}
	version := readmeVersion
	if requiresNextRelease(r, version) {
		setGitIdentity(t)
		dir := copyClone(t)
		version = cutRelease(t, dir)
		r = mustRepo(t, dir)
		block = strings.ReplaceAll(block, "@"+readmeVersion, "@"+version)
	}
	env := proxyEnv(t, r, version)
	gobin := t.TempDir()
	env = append(env, "GOBIN="+gobin)
	app := newApp(t, t.TempDir(), env)
	runIn(t, app, env, "bash", "-euo", "pipefail", "-c", block)
	gomod, err := os.ReadFile(filepath.Join(app, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range []string{rootPath, rootPath + "/gocloud", rootPath + "/watermill", rootPath + "/postgres"} {
		if !strings.Contains(string(gomod), "\t"+m+" "+version+"\n") {
			t.Errorf("go.mod does not require %s %s:\n%s", m, version, gomod)
		}
	}
	if strings.Contains(string(gomod), "replace") {
		t.Errorf("go.mod has a replace:\n%s", gomod)
	}
	checkApp(t, app, gobin, env, version, "module "+rootPath+"/cmd/azqd@"+version)
}

// requiresNextRelease reports whether a nested module of r requires one
// of the repository's modules at a version after version.
func requiresNextRelease(r *repo, version string) bool {
	ours := map[string]bool{}
	for _, m := range r.modules {
		ours[m.path] = true
	}
	for _, m := range r.nested() {
		for _, rq := range m.gomod.Require {
			if ours[rq.Mod.Path] && semver.Compare(rq.Mod.Version, version) > 0 {
				return true
			}
		}
	}
	return false
}

// TestProxyCatchesAMissingVersion: with a driver that requires a root
// version the release does not make, the README's commands fail through
// the proxy, as they would for a user once the tags are out: what the
// proxy test is for.
func TestProxyCatchesAMissingVersion(t *testing.T) {
	longrun.Skip(t)
	setGitIdentity(t)
	dir := copyClone(t)
	runIn(t, filepath.Join(dir, "gocloud"), nil, "go", "mod", "edit", "-require=github.com/azqlib/azq@v0.99.0")
	r := mustRepo(t, dir)
	version, err := r.version()
	if err != nil {
		t.Fatal(err)
	}
	env := proxyEnv(t, r, version)
	app := newApp(t, t.TempDir(), env)
	out, err := tryIn(app, env, "bash", "-euo", "pipefail", "-c", readmeBlock(t, "go get github.com/azqlib/azq@"))
	if err == nil || !strings.Contains(out, "requires "+rootPath+"@v0.99.0") {
		t.Errorf("the README's commands with a driver requiring a root version no one publishes: %v\n%s", err, out)
	}
}

// proxyEnv builds a module proxy of r's modules at version and returns
// the environment that resolves modules through it, in a module cache of
// the test's own, so that the modules it makes never reach the machine's.
// Other modules come from the machine's module cache, as a proxy, or else
// from the usual proxy.
func proxyEnv(t *testing.T, r *repo, version string) []string {
	t.Helper()
	proxy := t.TempDir()
	if err := buildProxy(r, proxy, version); err != nil {
		t.Fatal(err)
	}
	return proxiesEnv(t, proxy)
}

// proxiesEnv is proxyEnv's environment for the module proxies in dirs,
// asked in that order.
func proxiesEnv(t *testing.T, dirs ...string) []string {
	t.Helper()
	var proxies []string
	for _, d := range dirs {
		proxies = append(proxies, "file://"+filepath.ToSlash(d))
	}
	cache := strings.TrimSpace(runIn(t, ".", nil, "go", "env", "GOMODCACHE"))
	upstream := strings.TrimSpace(runIn(t, ".", nil, "go", "env", "GOPROXY"))
	modcache := t.TempDir()
	t.Cleanup(func() {
		// The module cache is read-only; go clean empties it.
		tryIn(".", []string{"GOMODCACHE=" + modcache}, "go", "clean", "-modcache")
	})
	return []string{
		"GOPROXY=" + strings.Join(proxies, ",") + ",file://" + filepath.ToSlash(filepath.Join(cache, "cache", "download")) + "," + upstream,
		"GOMODCACHE=" + modcache,
		// No checksum database has the proxy's modules; third-party
		// modules' checksums are what the other tests check.
		"GOSUMDB=off",
		// -trimpath lets the build cache serve what other builds of the
		// same files compiled.
		"GOFLAGS=-mod=mod -trimpath -buildvcs=false",
		"GOWORK=off",
	}
}

// TestCarvedModulesFromTheNextRelease: the packages carved out of the
// root module since the last release, through a module proxy of both
// releases. The last release is rebuilt from the working tree with the
// carved modules folded back into the root module, as it held them; the
// next is the working tree once cutRelease has cut it. A user's module
// that imports package sim from the last release's root module and then
// gets the sim module of the next finds the package in one module only:
// sim requires the first root release without it, so MVS moves the root
// module along. The carved commands install with go install …@version,
// at their import paths. A long run: it builds the simulator's
// dependencies and two commands from a module cache of its own.
func TestCarvedModulesFromTheNextRelease(t *testing.T) {
	longrun.Skip(t)
	setGitIdentity(t)
	carved := []string{"sim", "cmd/azqsim", "cmd/azqload", "metrics", "azure", "azqtest", "server"}

	// The last release, with the carved directories in the root module.
	last := copyClone(t)
	lastVersion, err := mustRepo(t, last).version()
	if err != nil {
		t.Fatal(err)
	}
	var carvedMods []*modfile.File
	carvedPaths := map[string]bool{}
	for _, d := range carved {
		carvedMods = append(carvedMods, readModFile(t, filepath.Join(last, filepath.FromSlash(d), "go.mod")))
		carvedPaths[rootPath+"/"+d] = true
		runIn(t, last, nil, "go", "work", "edit", "-dropuse=./"+d)
		for _, f := range []string{"go.mod", "go.sum"} {
			if err := os.Remove(filepath.Join(last, filepath.FromSlash(d), f)); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, rp := range mustRepo(t, last).workReplace {
		if carvedPaths[rp.Old.Path] {
			runIn(t, last, nil, "go", "work", "edit", "-dropreplace="+rp.Old.Path+"@"+rp.Old.Version)
		}
	}
	// The root module then requires what the carved modules do, at the
	// versions they require (tidy would take the newest).
	for _, mf := range carvedMods {
		for _, rq := range mf.Require {
			if !strings.HasPrefix(rq.Mod.Path, rootPath) {
				runIn(t, last, []string{"GOWORK=off"}, "go", "mod", "edit", "-require="+rq.Mod.Path+"@"+rq.Mod.Version)
			}
		}
	}
	runIn(t, last, []string{"GOWORK=off", "GOFLAGS=-mod=mod"}, "go", "mod", "tidy")
	commitAll(t, last, "the last release's layout")
	lastProxy := t.TempDir()
	if err := buildProxy(mustRepo(t, last), lastProxy, lastVersion); err != nil {
		t.Fatal(err)
	}

	// The next release.
	next := copyClone(t)
	nextVersion := cutRelease(t, next)
	if nextVersion == lastVersion {
		t.Fatalf("no module requires a release after %s: nothing carved out since", lastVersion)
	}
	nextProxy := t.TempDir()
	if err := buildProxy(mustRepo(t, next), nextProxy, nextVersion); err != nil {
		t.Fatal(err)
	}

	env := proxiesEnv(t, nextProxy, lastProxy)
	gobin := t.TempDir()
	env = append(env, "GOBIN="+gobin)
	app := filepath.Join(t.TempDir(), "yourapp")
	src, err := os.ReadFile(filepath.Join("testdata", "carved", "main.go"))
	if err != nil {
		t.Fatal(err)
	}
	writeFiles(t, app, map[string]string{"main.go": string(src)})
	runIn(t, app, env, "go", "mod", "init", "example.com/yourapp")

	// sim from the last release's root module.
	runIn(t, app, env, "go", "get", rootPath+"@"+lastVersion)
	runIn(t, app, env, "go", "mod", "tidy")
	runIn(t, app, env, "go", "build", "-o", "yourapp", ".")
	if got, want := runIn(t, app, nil, filepath.Join(app, "yourapp")), carvedOutput+"azq "+lastVersion+"\n"; got != want {
		t.Errorf("with the root module at %s, the program printed %q, want %q", lastVersion, got, want)
	}

	// sim, metrics and azure from their own modules: the root module
	// moves to the release without them.
	imported := []string{rootPath + "/sim", rootPath + "/metrics", rootPath + "/azure"}
	for _, m := range imported {
		runIn(t, app, env, "go", "get", m+"@"+nextVersion)
	}
	runIn(t, app, env, "go", "mod", "tidy")
	gomod := readModFile(t, filepath.Join(app, "go.mod"))
	required := map[string]string{}
	for _, rq := range gomod.Require {
		required[rq.Mod.Path] = rq.Mod.Version
	}
	for _, m := range append([]string{rootPath}, imported...) {
		if required[m] != nextVersion {
			t.Errorf("go.mod requires %s at %q, want %s", m, required[m], nextVersion)
		}
	}
	runIn(t, app, env, "go", "build", "-o", "yourapp", ".")
	if got, want := runIn(t, app, nil, filepath.Join(app, "yourapp")), carvedOutput+"azq "+nextVersion+"\n"; got != want {
		t.Errorf("with the carved modules at %s, the program printed %q, want %q", nextVersion, got, want)
	}

	// The carved commands.
	for _, c := range []string{"azqsim", "azqload"} {
		pkg := rootPath + "/cmd/" + c
		runIn(t, app, env, "go", "install", pkg+"@"+nextVersion)
		got := runIn(t, app, nil, filepath.Join(gobin, c), "-version")
		if want := c + " " + nextVersion + " (module " + pkg + "@" + nextVersion; !strings.HasPrefix(got, want) {
			t.Errorf("%s -version printed %q, want %q…", c, got, want)
		}
	}
}

// carvedOutput is what testdata/carved's program prints before azq's
// version.
const carvedOutput = "sim: scenario carved\nmetrics: 1 PutMessage\nazure: answer too large\n"

// readModFile parses the go.mod file at file.
func readModFile(t *testing.T, file string) *modfile.File {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	f, err := modfile.Parse(file, data, nil)
	if err != nil {
		t.Fatal(err)
	}
	return f
}
