// Command image builds azqd's container image without a container
// engine, by carrying out the repository's Dockerfile, and writes it as
// an OCI image layout, a docker-archive tarball (what docker load and
// podman load read), or both:
//
//	go run ./cmd/azqd/image -oci out/azqd-oci -docker-archive out/azqd.tar
//
// from the repository's root. It reads the Dockerfile with BuildKit's
// parser, the one docker build uses, and runs its build stage here: the
// build context (the repository, less what .dockerignore leaves out) is
// copied into a temporary directory standing for the stage's
// filesystem, and each instruction is carried out in order, each RUN
// with /bin/sh -c and this machine's Go toolchain in place of the base
// image's; then each COPY --from of the final stage, FROM scratch,
// becomes a layer, and its other instructions the configuration. An
// instruction it cannot carry out as a container engine does is an
// error (dockerfile.go, stage.go). This is the build that CI runs and
// tests (image_test.go unpacks the image and runs it; .ci/run builds it
// and loads it into podman). It is a module of its own so that its
// dependencies (go-containerregistry, BuildKit's Dockerfile parser) are
// no one else's.
//
// The image is reproducible: its times are SOURCE_DATE_EPOCH, or the Unix
// epoch when that is unset, as ko makes them.
//
// It gives the Dockerfile's build arguments as -build-arg NAME=VALUE, as
// docker build --build-arg does, and AZQD_REVISION, unless given, as the
// commit the repository has checked out (git rev-parse HEAD, with
// "-dirty" when git status lists changes), which azqd -version in the
// image then names: the build context has no .git, so Go records none.
// It reports each step on stderr as it goes; the first build downloads
// azqd's modules and compiles them, which takes minutes.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

func main() {
	if err := run(context.Background(), os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "image:", err)
		os.Exit(1)
	}
}

// run is the command: it prints the image's digest and sizes on stdout,
// and its progress on stderr.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("image", flag.ContinueOnError)
	fs.SetOutput(stderr)
	repo := fs.String("repo", ".", "the repository's root `dir`, where the Dockerfile is")
	oci := fs.String("oci", "", "write the image as an OCI image layout into `dir` (created; must not hold one already)")
	archive := fs.String("docker-archive", "", "write the image as a docker-archive tarball to `file`, for docker load and podman load")
	tag := fs.String("tag", defaultTag, "the image's `name` in the docker-archive")
	buildArgs := buildArgFlag{}
	fs.Var(buildArgs, "build-arg", "a build argument, `NAME=VALUE`, as docker build --build-arg gives it; repeatable. AZQD_REVISION defaults to the checked-out commit")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 || (*oci == "" && *archive == "") {
		return errors.New("usage: image [-repo dir] [-build-arg NAME=VALUE]… -oci dir | -docker-archive file [-tag name]")
	}
	created, err := sourceDate()
	if err != nil {
		return err
	}
	if _, ok := buildArgs[revisionArg]; !ok {
		rev, err := gitRevision(ctx, *repo)
		if err != nil {
			fmt.Fprintf(stderr, "image: warning: %v: azqd -version in the image will name no revision (give -build-arg %s=COMMIT)\n", err, revisionArg)
		} else {
			buildArgs[revisionArg] = rev
		}
	}
	fmt.Fprintf(stderr, "image: building %s (%s=%s); a first build downloads azqd's modules and compiles them, which takes minutes\n",
		filepath.Join(*repo, "Dockerfile"), revisionArg, buildArgs[revisionArg])
	img, err := buildImage(ctx, *repo, buildOptions{created: created, args: buildArgs, progress: stderr})
	if err != nil {
		return err
	}
	if err := write(img, *oci, *archive, *tag, stderr); err != nil {
		return err
	}
	return summary(stdout, img)
}

// defaultTag names the image in a docker-archive: what docker build -t
// azqd names it, which docker load and podman load then give it, so
// that the docs' docker run … azqd and compose's image: azqd find it.
const defaultTag = "azqd:latest"

// revisionArg is the Dockerfile's build argument for the commit azqd is
// built from, which its build gives to the linker for azqd -version.
const revisionArg = "AZQD_REVISION"

// buildArgFlag is -build-arg NAME=VALUE, repeated.
type buildArgFlag map[string]string

func (b buildArgFlag) String() string { return "" }

func (b buildArgFlag) Set(s string) error {
	k, v, ok := strings.Cut(s, "=")
	if !ok || k == "" {
		return fmt.Errorf("%q: want NAME=VALUE", s)
	}
	b[k] = v
	return nil
}

// gitRevision is the commit the clone at repo has checked out, with
// "-dirty" when git status lists changes (untracked files included, as
// Go's own VCS stamping counts them), as azqd -version reads
// AZQD_REVISION.
func gitRevision(ctx context.Context, repo string) (string, error) {
	git := func(args ...string) (string, error) {
		cmd := exec.CommandContext(ctx, "git", append([]string{"-C", repo}, args...)...)
		var stderr strings.Builder
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			return "", fmt.Errorf("git %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
		}
		return strings.TrimSpace(string(out)), nil
	}
	rev, err := git("rev-parse", "HEAD")
	if err != nil {
		return "", err
	}
	status, err := git("status", "--porcelain")
	if err != nil {
		return "", err
	}
	if status != "" {
		rev += "-dirty"
	}
	return rev, nil
}

// write writes img as an OCI image layout into oci and as a
// docker-archive tarball to archive, each unless "", saying so on
// progress.
func write(img v1.Image, oci, archive, tag string, progress io.Writer) error {
	if oci != "" {
		fmt.Fprintf(progress, "image: writing the OCI image layout %s\n", oci)
		p, err := layout.Write(oci, empty.Index)
		if err != nil {
			return err
		}
		if err := p.AppendImage(img); err != nil {
			return err
		}
	}
	if archive != "" {
		ref, err := name.NewTag(tag)
		if err != nil {
			return err
		}
		fmt.Fprintf(progress, "image: writing the docker-archive %s, image %s (docker load -i %s)\n", archive, tag, archive)
		if err := tarball.WriteToFile(archive, ref, img); err != nil {
			return err
		}
	}
	return nil
}

// sourceDate is SOURCE_DATE_EPOCH, or the Unix epoch.
func sourceDate() (time.Time, error) {
	s := os.Getenv("SOURCE_DATE_EPOCH")
	if s == "" {
		return time.Unix(0, 0).UTC(), nil
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return time.Time{}, fmt.Errorf("SOURCE_DATE_EPOCH=%q: want seconds since 1970", s)
	}
	return time.Unix(n, 0).UTC(), nil
}

// sizes are an image's layers' sizes, compressed (what a registry stores
// and a pull downloads) and not.
type sizes struct{ compressed, uncompressed int64 }

// imageSizes adds up img's layers.
func imageSizes(img v1.Image) (sizes, error) {
	var s sizes
	layers, err := img.Layers()
	if err != nil {
		return s, err
	}
	for _, l := range layers {
		n, err := l.Size()
		if err != nil {
			return s, err
		}
		s.compressed += n
		rc, err := l.Uncompressed()
		if err != nil {
			return s, err
		}
		m, err := io.Copy(io.Discard, rc)
		rc.Close()
		if err != nil {
			return s, err
		}
		s.uncompressed += m
	}
	return s, nil
}

// summary prints img's digest and sizes.
func summary(w io.Writer, img v1.Image) error {
	d, err := img.Digest()
	if err != nil {
		return err
	}
	s, err := imageSizes(img)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "image: %s, layers %.1f MB compressed, %.1f MB uncompressed\n", d, float64(s.compressed)/1e6, float64(s.uncompressed)/1e6)
	return nil
}
