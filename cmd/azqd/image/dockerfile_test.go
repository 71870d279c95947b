//go:build linux

package main

import (
	"context"
	"debug/buildinfo"
	"encoding/json"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/moby/buildkit/frontend/dockerfile/instructions"
)

// writeTree writes files (slash-separated path to contents; a path
// ending in "*" is an executable, without the star) under dir.
func writeTree(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, body := range files {
		mode := os.FileMode(0o644)
		if n, ok := strings.CutSuffix(name, "*"); ok {
			name, mode = n, 0o755
		}
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, mode); err != nil {
			t.Fatal(err)
		}
	}
}

// buildFixture builds the image of a build context made of files.
func buildFixture(t *testing.T, files map[string]string) (v1.Image, error) {
	t.Helper()
	return buildFixtureWith(t, files, buildOptions{})
}

// buildFixtureWith is buildFixture with the build arguments and progress
// of opts.
func buildFixtureWith(t *testing.T, files map[string]string, opts buildOptions) (v1.Image, error) {
	t.Helper()
	dir := t.TempDir()
	writeTree(t, dir, files)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	opts.created = time.Unix(1e9, 0).UTC()
	return buildImage(ctx, dir, opts)
}

// TestBuildArgs builds a context whose build stage declares build
// arguments, as docker build carries them out: an ARG takes the value
// given, or its default, or stays unset; an ENV of the same name wins
// over it; a build argument no ARG declares is a warning. The progress
// report names each step and shows a RUN's output as it comes.
func TestBuildArgs(t *testing.T) {
	files := map[string]string{"Dockerfile": `FROM x AS build
WORKDIR /src
ARG GIVEN
ARG DEFAULTED=from-default OVERRIDDEN=default
ARG UNSET
ENV OVERRIDDEN=from-env
RUN echo said by RUN && mkdir /out && printf '%s|%s|%s|%s\n' "$GIVEN" "$DEFAULTED" "$OVERRIDDEN" "${UNSET-unset}" > /out/args.txt
FROM scratch
COPY --from=build /out/ /out/
`}
	var progress strings.Builder
	img, err := buildFixtureWith(t, files, buildOptions{
		args:     map[string]string{"GIVEN": "from-build-arg", "OVERRIDDEN": "from-build-arg", "EXTRA": "x"},
		progress: &progress,
	})
	if err != nil {
		t.Fatal(err)
	}
	layers, err := img.Layers()
	if err != nil {
		t.Fatal(err)
	}
	if got, want := layerBodies(t, layers[0])["out/args.txt"], "from-build-arg|from-default|from-env|unset\n"; got != want {
		t.Errorf("args.txt %q, want %q", got, want)
	}
	for _, want := range []string{
		"image: build stage, step 1/6: WORKDIR /src\n",
		"image: build stage, step 2/6: ARG GIVEN\n",
		"image: build stage, step 6/6: RUN echo said by RUN",
		"\n    said by RUN\nimage: step 6 done in ",
		"image: warning: build argument EXTRA: no ARG of the build stage declares it\n",
		"image: layer 1/1: COPY --from=build /out/ /out/\n",
	} {
		if !strings.Contains(progress.String(), want) {
			t.Errorf("progress lacks %q:\n%s", want, progress.String())
		}
	}
}

// fixture is a small build context whose Dockerfile uses every
// instruction the builder carries out, in the forms azqd's uses and some
// more: variables, a relative destination, a file copied into a
// directory, the context's root, a path in ENV, a link, a file and a
// directory copied from the build stage, an owner.
var fixture = map[string]string{
	"Dockerfile": `# syntax is docker build's
FROM golang:1.23-alpine AS build
WORKDIR /src
ENV OUT=/out BIN=bin LC_ALL=C
ENV DEST=$OUT/$BIN
COPY a.txt sub/b.txt ./first/
RUN mkdir -p "$DEST" && \
    ls -A . first > /out/before.txt && umask > /out/umask.txt
COPY . .
RUN ls -A . sub > $OUT/after.txt && root=$(cd .. && pwd) && \
    pwd | sed "s|^$root|ROOT|" > /out/pwd.txt && echo "$DEST" | sed "s|^$root|ROOT|" > /out/dest.txt && \
    cp tool.sh "$DEST/tool" && ln -s tool /out/bin/tool-link
RUN mkdir /out/data

FROM scratch
COPY --from=build /out/ /stage/
COPY --from=build --chown=7:8 /out/data /data
ENV PATH=/stage/bin
ENV GREETING="hello world"
USER 0:0
EXPOSE 8080 9090/udp
LABEL a="b c"
HEALTHCHECK --interval=2s --retries=4 CMD ["tool", "health"]
CMD ["tool", "serve"]
`,
	".dockerignore": "ignored.txt\nsecret/\n",
	"a.txt":         "a",
	"sub/b.txt":     "b",
	"tool.sh*":      "#!/bin/sh\necho 'azqd v9.8.7 (a tool)'\n",
	"ignored.txt":   "left out",
	"secret/key":    "left out",
}

// TestBuildStage builds the fixture and checks that the builder carried
// out its Dockerfile as a container engine does: the build stage's
// instructions in order, COPY of files into a directory, then of the
// whole context less what .dockerignore leaves out, ENV with variables,
// RUN under /bin/sh in WORKDIR with the stage's own paths (WORKDIR, the
// output) in place and umask 022, whatever the builder's; then the final
// stage's layers, owners and configuration, and the version label from
// the program CMD starts. Building again, under another umask, gives the
// same image.
func TestBuildStage(t *testing.T) {
	img, err := buildFixture(t, fixture)
	if err != nil {
		t.Fatal(err)
	}
	layers, err := img.Layers()
	if err != nil || len(layers) != 2 {
		t.Fatalf("%d layers (%v), want the two COPY --from", len(layers), err)
	}
	stage := layerFiles(t, layers[0])
	var names []string
	for n, h := range stage {
		names = append(names, n)
		if h.Uid != 0 || h.Gid != 0 {
			t.Errorf("%s belongs to %d:%d, want root: COPY --from without --chown", n, h.Uid, h.Gid)
		}
	}
	slices.Sort(names)
	want := []string{"stage/", "stage/after.txt", "stage/before.txt", "stage/bin/", "stage/bin/tool", "stage/bin/tool-link",
		"stage/data/", "stage/dest.txt", "stage/pwd.txt", "stage/umask.txt"}
	if !slices.Equal(names, want) {
		t.Fatalf("first layer %q, want %q", names, want)
	}
	body := layerBodies(t, layers[0])
	for name, want := range map[string]string{
		// Before COPY . ., WORKDIR holds the first COPY's files alone,
		// in the directory it names.
		"stage/before.txt": ".:\nfirst\n\nfirst:\na.txt\nb.txt\n",
		// Then the context, less ignored.txt and secret/.
		"stage/after.txt": ".:\n.dockerignore\nDockerfile\na.txt\nfirst\nsub\ntool.sh\n\nsub:\nb.txt\n",
		"stage/umask.txt": "0022\n",
	} {
		if body[name] != want {
			t.Errorf("%s: %q, want %q", name, body[name], want)
		}
	}
	// The stage's /src and /out are directories of one directory here
	// (ROOT, which stands for the stage's /), in RUN and in ENV alike.
	for name, want := range map[string]string{"stage/pwd.txt": "ROOT/src\n", "stage/dest.txt": "ROOT/out/bin\n"} {
		if body[name] != want {
			t.Errorf("%s: %q, want %q", name, body[name], want)
		}
	}
	if h := stage["stage/bin/tool"]; h.Mode != 0o755 || body["stage/bin/tool"] != fixture["tool.sh*"] {
		t.Errorf("stage/bin/tool: mode %o, %q; want the context's executable", h.Mode, body["stage/bin/tool"])
	}
	if h := stage["stage/bin/tool-link"]; h.Linkname != "tool" {
		t.Errorf("tool-link: %+v, want a link to tool", h)
	}
	if h := stage["stage/"]; h.Mode != 0o755 {
		t.Errorf("stage/ mode %o, want the source directory's, 0755", h.Mode)
	}
	data := layerFiles(t, layers[1])
	if h := data["data/"]; len(data) != 1 || h == nil || h.Uid != 7 || h.Gid != 8 || h.Mode != 0o755 {
		t.Errorf("second layer %v, want data/ alone, 7:8, 0755", data)
	}

	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	wantConfig := v1.Config{
		Env:          []string{"PATH=/stage/bin", "GREETING=hello world"},
		User:         "0:0",
		ExposedPorts: map[string]struct{}{"8080/tcp": {}, "9090/udp": {}},
		Labels:       map[string]string{"a": "b c", "org.opencontainers.image.version": "v9.8.7"},
		Healthcheck:  &v1.HealthConfig{Test: []string{"CMD", "tool", "health"}, Interval: 2 * time.Second, Retries: 4},
		Cmd:          []string{"tool", "serve"},
	}
	if !reflect.DeepEqual(cf.Config, wantConfig) {
		got, _ := json.Marshal(cf.Config)
		w, _ := json.Marshal(wantConfig)
		t.Errorf("config\n%s\nwant\n%s", got, w)
	}
	var history []string
	for _, h := range cf.History {
		history = append(history, h.CreatedBy)
	}
	if want := []string{"COPY --from=build /out/ /stage/", "COPY --from=build --chown=7:8 /out/data /data"}; !slices.Equal(history, want) {
		t.Errorf("history %q, want %q", history, want)
	}

	old := syscall.Umask(0o077)
	again, err := buildFixture(t, fixture)
	syscall.Umask(old)
	if err != nil {
		t.Fatal(err)
	}
	d1, _ := img.Digest()
	d2, err := again.Digest()
	if err != nil || d1 != d2 {
		t.Errorf("built again under umask 077: %s (%v), first %s", d2, err, d1)
	}
}

// TestDockerfileRefused checks that the builder refuses, with the
// reason, what it would not carry out as a container engine does, rather
// than skip it or run it on this machine.
func TestDockerfileRefused(t *testing.T) {
	const final = "\nFROM scratch\nCOPY --from=build /out/ /out/\n"
	// A path of this machine, which a refused RUN would make.
	probe := filepath.Join(t.TempDir(), "made-by-run")
	for _, c := range []struct {
		name, dockerfile, want string
	}{
		{"a path of this machine in RUN", "FROM x AS build\nWORKDIR /src\nRUN mkdir /tmp/x && touch /out" + final, "names /tmp/x: outside a container"},
		{"a path of this machine in ENV", "FROM x AS build\nWORKDIR /src\nENV GOFLAGS=-modfile=/tmp/x/go.mod\nRUN true" + final, "ENV GOFLAGS: it names /tmp/x/go.mod"},
		{"a path next to the output", "FROM x AS build\nWORKDIR /src\nRUN touch /outside" + final, "names /outside"},
		{"RUN before WORKDIR", "FROM x AS build\nRUN true" + final, "no WORKDIR yet"},
		{"RUN --mount", "FROM x AS build\nWORKDIR /src\nRUN --mount=type=cache,target=/root/.cache true" + final, "not supported"},
		{"RUN exec form", "FROM x AS build\nWORKDIR /src\nRUN [\"true\"]" + final, "exec form is not supported"},
		{"ARG in the final stage", "FROM x AS build\nWORKDIR /src" + final + "ARG V=1\n", "line 5: ARG in the final stage"},
		{"a meta ARG", "ARG V=1\nFROM x AS build" + final, "build arguments are not supported"},
		{"ADD", "FROM x AS build\nWORKDIR /src\nADD a.txt ." + final, "line 3: ADD"},
		{"COPY of a file .dockerignore leaves out", "FROM x AS build\nWORKDIR /src\nCOPY ignored.txt ." + final, "ignored.txt: not in the build context"},
		{"COPY of a pattern", "FROM x AS build\nWORKDIR /src\nCOPY *.txt ./" + final, "patterns are not supported"},
		{"COPY --chown in the build stage", "FROM x AS build\nWORKDIR /src\nCOPY --chown=1:1 a.txt ." + final, "takes no options"},
		{"COPY outside the context", "FROM x AS build\nWORKDIR /src\nCOPY ../a.txt ." + final, "outside the build context"},
		{"an unnamed build stage", "FROM x\nWORKDIR /src\nFROM scratch\nCOPY --from=0 /out/ /out/\n", "has no name"},
		{"a final stage FROM an image", "FROM x AS build\nWORKDIR /src\nFROM alpine\nCMD [\"x\"]\n", "FROM alpine"},
		{"three stages", "FROM x AS build\nFROM y AS other" + final, "3 stages"},
		{"COPY from another stage", "FROM x AS build\nWORKDIR /src\nFROM scratch\nCOPY --from=other /out/ /out/\n", "copies from the build stage"},
		{"COPY --from a relative path", "FROM x AS build\nWORKDIR /src\nFROM scratch\nCOPY --from=build out/ /out/\n", "want one absolute path"},
		{"COPY --from into a nested directory", "FROM x AS build\nWORKDIR /src\nFROM scratch\nCOPY --from=build /out/ /usr/local/\n", "at the image's root"},
		{"COPY --chown by name", "FROM x AS build\nWORKDIR /src\nFROM scratch\nCOPY --from=build --chown=azqd /out/ /out/\n", "no user names"},
		{"CMD in the shell form", "FROM x AS build\nWORKDIR /src" + final + "CMD azqd\n", "a scratch image has no shell"},
		{"ENTRYPOINT", "FROM x AS build\nWORKDIR /src" + final + "ENTRYPOINT [\"azqd\"]\n", "ENTRYPOINT in the final stage"},
		{"VOLUME", "FROM x AS build\nWORKDIR /src" + final + "VOLUME /data\n", "VOLUME in the final stage"},
		{"HEALTHCHECK --start-interval", "FROM x AS build\nWORKDIR /src" + final + "HEALTHCHECK --start-interval=1s CMD [\"azqd\"]\n", "--start-interval"},
		{"EXPOSE of a range", "FROM x AS build\nWORKDIR /src" + final + "EXPOSE 10000-10002\n", "want a port number"},
	} {
		t.Run(c.name, func(t *testing.T) {
			want := strings.ReplaceAll(c.want, "/tmp/x", probe)
			files := map[string]string{"Dockerfile": strings.ReplaceAll(c.dockerfile, "/tmp/x", probe), ".dockerignore": "ignored.txt\n", "a.txt": "a", "ignored.txt": "i"}
			_, err := buildFixture(t, files)
			if err == nil || !strings.Contains(err.Error(), want) {
				t.Errorf("%v, want an error saying %q", err, want)
			}
		})
	}
	// The refused RUN did not run.
	if _, err := os.Stat(probe); err == nil {
		t.Errorf("%s exists: the refused RUN ran", probe)
	}
}

// readRepoDockerfile reads the repository's Dockerfile.
func readRepoDockerfile(t *testing.T) *dockerfile {
	t.Helper()
	f, err := os.Open(filepath.Join(repoRoot(t), "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	d, err := readDockerfile(f)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// TestDockerfileDownloadsFirst checks that the build stage downloads the
// modules in a layer of its own, which depends on the go.mod and go.sum
// files alone: every COPY before the module download copies those files
// and nothing else, and the sources come after it, so that a container
// engine keeps the download in its cache across source changes.
func TestDockerfileDownloadsFirst(t *testing.T) {
	d := readRepoDockerfile(t)
	downloaded := false
	for _, c := range d.build.Commands {
		switch c := c.(type) {
		case *instructions.CopyCommand:
			if downloaded {
				return
			}
			for _, src := range c.SourcePaths {
				if b := path.Base(src); b != "go.mod" && b != "go.sum" {
					t.Fatalf("%s comes before the module download, which then runs again on every change of %s", c.String(), src)
				}
			}
		case *instructions.RunCommand:
			if strings.Contains(strings.Join(c.CmdLine, " "), "go mod download") {
				downloaded = true
			}
		}
	}
	t.Fatalf("downloaded %v, and no COPY of the sources after it", downloaded)
}

// TestImageBuildsAzqdsModule checks that the image's azqd was built as
// azqd's module resolves its dependencies, as go install …@version would
// build it, with the clone's root module in place of the released one:
// the main module is azqd's, every module linked in is at the version
// cmd/azqd/go.mod requires, and the root module is the clone's, which
// replaces it. A build in the workspace would give the root module
// without the replacement and the versions go.work unifies. And that it
// is static and trimmed, as the build RUN asks.
func TestImageBuildsAzqdsModule(t *testing.T) {
	info, err := buildinfo.ReadFile(filepath.Join(unpack(t, image(t).img), "usr", "local", "bin", "azqd"))
	if err != nil {
		t.Fatal(err)
	}
	gomod := exec.Command("go", "mod", "edit", "-json")
	gomod.Dir = filepath.Join(repoRoot(t), "cmd", "azqd")
	out, err := gomod.Output()
	if err != nil {
		t.Fatalf("go mod edit -json: %v", err)
	}
	var mod struct {
		Module  struct{ Path string }
		Require []struct{ Path, Version string }
		Replace []any
	}
	if err := json.Unmarshal(out, &mod); err != nil {
		t.Fatal(err)
	}
	if len(mod.Replace) > 0 {
		t.Errorf("cmd/azqd/go.mod has replace directives %v: go install …@version refuses it", mod.Replace)
	}
	if info.Main.Path != mod.Module.Path {
		t.Errorf("main module %q, want %q", info.Main.Path, mod.Module.Path)
	}
	required := map[string]string{}
	for _, r := range mod.Require {
		required[r.Path] = r.Version
	}
	if len(info.Deps) < 2 {
		t.Fatalf("modules linked in: %+v", info.Deps)
	}
	// The repository's modules azqd requires come from the clone, as
	// clone.mod says; every other module is the version go.mod requires.
	clone := map[string]string{
		"github.com/azqlib/azq":          "../..",
		"github.com/azqlib/azq/postgres": "../../postgres",
		"github.com/azqlib/azq/metrics":  "../../metrics",
		"github.com/azqlib/azq/azure":    "../../azure",
		"github.com/azqlib/azq/azqtest":  "../../azqtest",
		"github.com/azqlib/azq/server":   "../../server",
	}
	for _, dep := range info.Deps {
		if want, ok := clone[dep.Path]; ok {
			if dep.Replace == nil || dep.Replace.Path != want {
				t.Errorf("%s %s is replaced by %+v, want the clone's, %s", dep.Path, dep.Version, dep.Replace, want)
			}
		} else if dep.Replace != nil {
			t.Errorf("%s is replaced by %+v", dep.Path, dep.Replace)
		}
		if v, ok := required[dep.Path]; !ok || dep.Version != v {
			t.Errorf("linked %s %s; cmd/azqd/go.mod requires %q", dep.Path, dep.Version, v)
		}
	}
	settings := map[string]string{}
	for _, s := range info.Settings {
		settings[s.Key] = s.Value
	}
	for k, v := range map[string]string{"CGO_ENABLED": "0", "-trimpath": "true", "GOOS": "linux"} {
		if settings[k] != v {
			t.Errorf("build setting %s=%q, want %q", k, settings[k], v)
		}
	}
}
