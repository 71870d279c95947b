//go:build linux

package main

import (
	"archive/tar"
	"crypto/sha256"
	"debug/elf"
	"encoding/hex"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// TestEngineBuildsTheSameImage has a container engine build the
// Dockerfile, podman build (buildah), and checks that its image is the Go
// builder's: the same layers, file by file (names, types, modes, owners,
// links, contents: the same azqd, byte for byte), and the same
// configuration. Only the base image differs: no registry is reachable,
// so golang:1.23-alpine is stood in for by an image of busybox (a static
// build, for /bin/sh and the tools the RUN steps use) with this machine's
// Go toolchain, module cache and build cache mounted (podman build -v) in
// the golang image's places, and no network; so the toolchain is the Go
// builder's too. The build uses storage of its own, which the test
// removes, so that the machine's images stay as they are. Times differ
// (the engine's are the build's) and are not compared; the engine adds
// its own label (io.buildah.version), and the Go builder the release
// label, and buildah the build container's host name. The build gets
// the revision the Go builder gives (AZQD_REVISION), and its azqd
// -version names it.
func TestEngineBuildsTheSameImage(t *testing.T) {
	needRoot(t) // rootful podman
	p := newPodman(t)
	busybox, err := exec.LookPath("busybox")
	if err == nil && !isStatic(busybox) {
		err = fmt.Errorf("%s is not a static build", busybox)
	}
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("busybox: %v; .ci/run installs busybox-static", err)
		}
		t.Skipf("busybox: %v: apt-get install busybox-static", err)
	}
	// podman refuses a runroot path longer than 50 bytes, which
	// t.TempDir's may be.
	runroot, err := os.MkdirTemp("", "azqd-podman-")
	if err != nil {
		t.Fatal(err)
	}
	p.global = append(p.global, "--root", t.TempDir(), "--runroot", runroot)
	t.Cleanup(func() {
		p.cmd("rmi", "--all", "--force").Run()
		os.RemoveAll(runroot)
	})

	// The stand-in for golang:1.23-alpine, as golang's images set it up:
	// Go in /usr/local/go, GOPATH /go, GOTOOLCHAIN=local; and no proxy.
	base := t.TempDir()
	b, err := os.ReadFile(busybox)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(base, "busybox"), b, 0o755); err != nil {
		t.Fatal(err)
	}
	containerfile := `FROM scratch
COPY busybox /bin/busybox
RUN ["/bin/busybox", "mkdir", "-p", "/usr/bin", "/sbin", "/usr/sbin", "/tmp", "/root", "/go/pkg/mod", "/usr/local/go"]
RUN ["/bin/busybox", "--install", "-s"]
RUN ["/bin/busybox", "chmod", "1777", "/tmp"]
ENV PATH=/usr/local/go/bin:/go/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin GOPATH=/go GOTOOLCHAIN=local GOPROXY=off HOME=/root
`
	if err := os.WriteFile(filepath.Join(base, "Containerfile"), []byte(containerfile), 0o644); err != nil {
		t.Fatal(err)
	}
	p.run("build", "--pull=never", "--network=none", "-t", "localhost/azqd-test-golang:base", base)

	goenv := map[string]string{}
	out, err := exec.Command("go", "env", "GOROOT", "GOMODCACHE", "GOCACHE").Output()
	if err != nil {
		t.Fatal(err)
	}
	for i, v := range strings.Fields(string(out)) {
		goenv[[]string{"GOROOT", "GOMODCACHE", "GOCACHE"}[i]] = v
	}
	p.run("build", "--pull=never", "--network=none", "--format", "docker",
		"--from", "localhost/azqd-test-golang:base",
		"-v", goenv["GOROOT"]+":/usr/local/go:ro",
		"-v", goenv["GOMODCACHE"]+":/go/pkg/mod",
		"-v", goenv["GOCACHE"]+":/root/.cache/go-build",
		"--build-arg", revisionArg+"="+revision(t),
		"-t", "localhost/azqd-test-engine:built", repoRoot(t))
	archive := filepath.Join(t.TempDir(), "engine.tar")
	p.run("save", "--format", "docker-archive", "-o", archive, "localhost/azqd-test-engine:built")
	engine, err := tarball.ImageFromPath(archive, nil)
	if err != nil {
		t.Fatal(err)
	}

	// The engine's azqd names the release and the commit, as the
	// Dockerfile says to build it with AZQD_REVISION.
	azqd := filepath.Join(unpack(t, engine), "usr", "local", "bin", "azqd")
	if out, err := exec.Command(azqd, "-version").Output(); err != nil || !strings.HasPrefix(string(out), wantVersion(t)) {
		t.Errorf("the engine's azqd -version: %q (%v), want %q…", out, err, wantVersion(t))
	}

	ours := image(t).img
	el, err := engine.Layers()
	if err != nil {
		t.Fatal(err)
	}
	ol, err := ours.Layers()
	if err != nil {
		t.Fatal(err)
	}
	if len(el) != len(ol) {
		t.Fatalf("the engine made %d layers, the Go builder %d", len(el), len(ol))
	}
	for i := range el {
		e, o := layerSummary(t, el[i]), layerSummary(t, ol[i])
		if !reflect.DeepEqual(e, o) {
			t.Errorf("layer %d: the engine's\n%s\nthe Go builder's\n%s", i, strings.Join(e, "\n"), strings.Join(o, "\n"))
		}
	}

	ecf, err := engine.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	ocf, err := ours.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	ec, oc := ecf.Config, ocf.Config
	ec.Labels, oc.Labels = maps.Clone(ec.Labels), maps.Clone(oc.Labels)
	delete(ec.Labels, "io.buildah.version")
	delete(oc.Labels, "org.opencontainers.image.version")
	ec.Hostname = "" // the build container's, which buildah records
	for _, c := range []*v1.Config{&ec, &oc} {
		// Empty and absent say the same.
		if len(c.Entrypoint) == 0 {
			c.Entrypoint = nil
		}
		if len(c.Volumes) == 0 {
			c.Volumes = nil
		}
		if len(c.OnBuild) == 0 {
			c.OnBuild = nil
		}
		if len(c.Shell) == 0 {
			c.Shell = nil
		}
	}
	if !reflect.DeepEqual(ec, oc) {
		t.Errorf("the engine's configuration\n%+v\nthe Go builder's\n%+v", ec, oc)
	}
	if ecf.OS != ocf.OS || ecf.Architecture != ocf.Architecture {
		t.Errorf("the engine's platform %s/%s, the Go builder's %s/%s", ecf.OS, ecf.Architecture, ocf.OS, ocf.Architecture)
	}
}

// isStatic reports whether the program at p needs no dynamic loader.
func isStatic(p string) bool {
	f, err := elf.Open(p)
	if err != nil {
		return false
	}
	defer f.Close()
	for _, prog := range f.Progs {
		if prog.Type == elf.PT_INTERP {
			return false
		}
	}
	return true
}

// layerSummary is a line for each of l's entries, in order: name, type,
// permissions, owner, link, and a regular file's size and SHA-256; not
// times.
func layerSummary(t *testing.T, l v1.Layer) []string {
	t.Helper()
	rc, err := l.Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	var lines []string
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return lines
		}
		if err != nil {
			t.Fatal(err)
		}
		sum := sha256.New()
		if _, err := io.Copy(sum, tr); err != nil {
			t.Fatal(err)
		}
		// The mode's permission bits: an engine's headers also carry
		// the file type's, which Typeflag says.
		line := fmt.Sprintf("%s %c %o %d:%d", h.Name, h.Typeflag, h.Mode&0o7777, h.Uid, h.Gid)
		switch h.Typeflag {
		case tar.TypeSymlink:
			line += " -> " + h.Linkname
		case tar.TypeReg:
			line += fmt.Sprintf(" %d %s", h.Size, hex.EncodeToString(sum.Sum(nil)))
		}
		lines = append(lines, line)
	}
}
