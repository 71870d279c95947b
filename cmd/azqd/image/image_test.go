package main

import (
	"archive/tar"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// The image under test: built once per test binary by run, as .ci/run's
// step does, into a temporary directory; or, when AZQD_IMAGE_OCI and
// AZQD_IMAGE_ARCHIVE name an OCI layout and a docker-archive that the
// command wrote (CI's build step), those.
var (
	imageOnce sync.Once
	theImage  *builtImage
	imageErr  error
	imageDir  string // the temporary directory, removed by TestMain
)

type builtImage struct {
	oci, archive string
	// img is the image read back from the OCI layout; archived, from the
	// docker-archive.
	img, archived v1.Image
	cf            *v1.ConfigFile
}

func TestMain(m *testing.M) {
	code := m.Run()
	if imageDir != "" {
		os.RemoveAll(imageDir)
	}
	os.Exit(code)
}

// repoRoot is the repository's root, from this package's directory.
func repoRoot(t testing.TB) string {
	root, err := filepath.Abs(filepath.Join("..", "..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	return root
}

// image returns the image under test, building it the first time.
func image(t testing.TB) *builtImage {
	t.Helper()
	imageOnce.Do(func() {
		b := &builtImage{oci: os.Getenv("AZQD_IMAGE_OCI"), archive: os.Getenv("AZQD_IMAGE_ARCHIVE")}
		if (b.oci == "") != (b.archive == "") {
			imageErr = errors.New("set both AZQD_IMAGE_OCI and AZQD_IMAGE_ARCHIVE, or neither")
			return
		}
		if b.oci == "" {
			if imageDir, imageErr = os.MkdirTemp("", "azqd-image-test-"); imageErr != nil {
				return
			}
			b.oci, b.archive = filepath.Join(imageDir, "oci"), filepath.Join(imageDir, "azqd.tar")
			// The build compiles azqd, which takes long on a busy machine.
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
			defer cancel()
			var out strings.Builder
			if imageErr = run(ctx, []string{"-repo", repoRoot(t), "-oci", b.oci, "-docker-archive", b.archive}, &out, io.Discard); imageErr != nil {
				return
			}
		}
		b.img, imageErr = readLayout(b.oci)
		if imageErr != nil {
			return
		}
		if b.archived, imageErr = tarball.ImageFromPath(b.archive, nil); imageErr != nil {
			return
		}
		b.cf, imageErr = b.img.ConfigFile()
		theImage = b
	})
	if imageErr != nil {
		t.Fatalf("building the image: %v", imageErr)
	}
	return theImage
}

// readLayout returns the one image of the OCI layout at dir.
func readLayout(dir string) (v1.Image, error) {
	ii, err := layout.ImageIndexFromPath(dir)
	if err != nil {
		return nil, err
	}
	im, err := ii.IndexManifest()
	if err != nil {
		return nil, err
	}
	if len(im.Manifests) != 1 || im.Manifests[0].MediaType != types.OCIManifestSchema1 {
		return nil, fmt.Errorf("the layout's index lists %+v, want one OCI image manifest", im.Manifests)
	}
	return ii.Image(im.Manifests[0].Digest)
}

// TestImageManifest checks the OCI layout's manifest: an OCI image of two
// gzip layers, the Dockerfile's two COPY instructions, whose blobs are in
// the layout with the digests and sizes the manifest gives.
func TestImageManifest(t *testing.T) {
	b := image(t)
	m, err := b.img.Manifest()
	if err != nil {
		t.Fatal(err)
	}
	if m.SchemaVersion != 2 || m.MediaType != types.OCIManifestSchema1 || m.Config.MediaType != types.OCIConfigJSON {
		t.Errorf("manifest %d %s, config %s; want 2, %s, %s", m.SchemaVersion, m.MediaType, m.Config.MediaType, types.OCIManifestSchema1, types.OCIConfigJSON)
	}
	if len(m.Layers) != 2 {
		t.Fatalf("%d layers, want 2: the binaries and /data", len(m.Layers))
	}
	p := layout.Path(b.oci)
	for _, d := range append([]v1.Descriptor{m.Config}, m.Layers...) {
		if d.MediaType != types.OCIConfigJSON && d.MediaType != types.OCILayer {
			t.Errorf("descriptor %s has media type %s", d.Digest, d.MediaType)
		}
		rc, err := p.Blob(d.Digest)
		if err != nil {
			t.Fatalf("blob %s: %v", d.Digest, err)
		}
		h, n, err := v1.SHA256(rc)
		rc.Close()
		if err != nil || h != d.Digest || n != d.Size {
			t.Errorf("blob %s: digest %s, %d bytes (%v); the manifest says %d bytes", d.Digest, h, n, err, d.Size)
		}
	}
	// The docker-archive holds the same image: the same configuration,
	// byte for byte, and the same layers.
	for _, f := range []func(v1.Image) (any, error){
		func(i v1.Image) (any, error) { return i.ConfigName() },
		func(i v1.Image) (any, error) {
			var ids []v1.Hash
			ls, err := i.Layers()
			for _, l := range ls {
				id, _ := l.DiffID()
				ids = append(ids, id)
			}
			return ids, err
		},
	} {
		a, err1 := f(b.img)
		c, err2 := f(b.archived)
		if err1 != nil || err2 != nil || !reflect.DeepEqual(a, c) {
			t.Errorf("OCI layout %v (%v), docker-archive %v (%v)", a, err1, c, err2)
		}
	}
}

// layerFiles lists a layer's entries by name.
func layerFiles(t *testing.T, l v1.Layer) map[string]*tar.Header {
	t.Helper()
	rc, err := l.Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	files := map[string]*tar.Header{}
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return files
		}
		if err != nil {
			t.Fatal(err)
		}
		files[h.Name] = h
	}
}

// layerBodies is a layer's regular files' contents, by name.
func layerBodies(t *testing.T, l v1.Layer) map[string]string {
	t.Helper()
	rc, err := l.Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	bodies := map[string]string{}
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return bodies
		}
		if err != nil {
			t.Fatal(err)
		}
		if h.Typeflag == tar.TypeReg {
			b, err := io.ReadAll(tr)
			if err != nil {
				t.Fatal(err)
			}
			bodies[h.Name] = string(b)
		}
	}
}

// TestImageLayers checks what each layer holds: root's static azqd and
// Azurite's command names linked to it; then /data, empty, the user's.
func TestImageLayers(t *testing.T) {
	b := image(t)
	layers, err := b.img.Layers()
	if err != nil {
		t.Fatal(err)
	}
	bin := layerFiles(t, layers[0])
	var names []string
	for n := range bin {
		names = append(names, n)
	}
	slices.Sort(names)
	want := []string{"usr/", "usr/local/", "usr/local/bin/", "usr/local/bin/azqd", "usr/local/bin/azurite", "usr/local/bin/azurite-queue"}
	if !slices.Equal(names, want) {
		t.Errorf("first layer %q, want %q", names, want)
	}
	if h := bin["usr/local/bin/azqd"]; h == nil || h.Typeflag != tar.TypeReg || h.Mode&0o755 != 0o755 || h.Uid != 0 || h.Size < 1<<20 {
		t.Errorf("azqd: %+v, want root's executable", h)
	}
	for _, n := range []string{"azurite", "azurite-queue"} {
		if h := bin["usr/local/bin/"+n]; h == nil || h.Typeflag != tar.TypeSymlink || h.Linkname != "azqd" {
			t.Errorf("%s: %+v, want a link to azqd", n, h)
		}
	}
	data := layerFiles(t, layers[1])
	uid, gid := 65532, 65532
	if h := data["data/"]; len(data) != 1 || h == nil || h.Typeflag != tar.TypeDir || h.Mode != 0o755 || h.Uid != uid || h.Gid != gid {
		t.Errorf("second layer %v, want data/ alone, 0755, %d:%d", data, uid, gid)
	}
}

// TestImageConfig checks the image's configuration, field by field, as
// the container engine reads it, against what the Dockerfile says.
func TestImageConfig(t *testing.T) {
	b := image(t)
	cf := b.cf
	if cf.OS != "linux" || cf.Architecture == "" {
		t.Errorf("platform %s/%s, want linux", cf.OS, cf.Architecture)
	}
	if os.Getenv("AZQD_IMAGE_OCI") == "" && cf.Architecture != runtime.GOARCH {
		t.Errorf("architecture %s, want this machine's, %s", cf.Architecture, runtime.GOARCH)
	}
	c := cf.Config
	if c.User != "0:0" {
		t.Errorf("User %q, want 0:0: azqd starts as root and becomes AZQD_USER", c.User)
	}
	if !slices.Equal(c.Env, []string{"PATH=/usr/local/bin", "AZQD_USER=65532:65532"}) {
		t.Errorf("Env %q", c.Env)
	}
	if !slices.Equal(c.Cmd, []string{"azqd", "-addr", "0.0.0.0:10001"}) || len(c.Entrypoint) != 0 {
		t.Errorf("Cmd %q, Entrypoint %q; want azqd -addr 0.0.0.0:10001 and none: Azurite's command lines replace the Cmd", c.Cmd, c.Entrypoint)
	}
	if !reflect.DeepEqual(c.ExposedPorts, map[string]struct{}{"10001/tcp": {}}) {
		t.Errorf("ExposedPorts %v", c.ExposedPorts)
	}
	want := &v1.HealthConfig{Test: []string{"CMD", "azqd", "-healthcheck", "http://127.0.0.1:10001/_azq/health"},
		Interval: 5 * time.Second, Timeout: 4 * time.Second, StartPeriod: 5 * time.Second, Retries: 3}
	if !reflect.DeepEqual(c.Healthcheck, want) {
		t.Errorf("Healthcheck %+v, want %+v", c.Healthcheck, want)
	}
	for k, v := range map[string]string{
		"org.opencontainers.image.title":       "azqd",
		"org.opencontainers.image.description": "Azure Queue Storage emulator: the Azure Queue REST API, in memory or durable",
		"org.opencontainers.image.licenses":    "MIT",
	} {
		if c.Labels[k] != v {
			t.Errorf("label %s = %q, want %q", k, c.Labels[k], v)
		}
	}
	if v, ok := c.Labels["org.opencontainers.image.version"]; ok && !regexp.MustCompile(`^v\d+\.\d+\.\d+`).MatchString(v) {
		t.Errorf("version label %q, want a release version or none", v)
	}
	if len(cf.RootFS.DiffIDs) != 2 || len(cf.History) != 2 || cf.History[0].CreatedBy != "COPY --from=build /out/usr/ /usr/" ||
		cf.History[1].CreatedBy != "COPY --from=build --chown=65532:65532 /out/data /data" {
		t.Errorf("rootfs %v, history %+v; want the two COPY layers", cf.RootFS.DiffIDs, cf.History)
	}
	// What the config's JSON says, in the names a container engine reads.
	raw, err := b.img.RawConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	var j struct {
		Config struct {
			User        string
			Healthcheck struct{ Test []string }
		} `json:"config"`
	}
	if err := json.Unmarshal(raw, &j); err != nil || j.Config.User != "0:0" || len(j.Config.Healthcheck.Test) != 4 {
		t.Errorf("config JSON: %s (%v)", raw, err)
	}
}

// TestImageReproducible builds the image a second time, from the same
// sources with the same toolchain and creation time: the digest is the
// image's, byte for byte. Under CI the first image is the one the build
// step made with the command, so the command and the test agree too.
func TestImageReproducible(t *testing.T) {
	b := image(t)
	want, err := b.img.Digest()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	again, err := buildImage(ctx, repoRoot(t), buildOptions{created: b.cf.Created.Time, args: map[string]string{revisionArg: revision(t)}})
	if err != nil {
		t.Fatal(err)
	}
	if got, err := again.Digest(); err != nil || got != want {
		t.Errorf("built again: %s (%v), first %s", got, err, want)
	}
	if _, err := name.NewTag(defaultTag); err != nil {
		t.Error(err)
	}
}

// revision is the AZQD_REVISION the command gives a build of this
// clone, which the image under test was built with.
func revision(t testing.TB) string {
	t.Helper()
	rev, err := gitRevision(context.Background(), repoRoot(t))
	if err != nil {
		t.Fatalf("the clone's revision: %v", err)
	}
	return rev
}

// wantVersion is the start of what azqd -version in the image under test
// prints: azq's release, from the clone's version.go, and the clone's
// revision, which the build gave it.
func wantVersion(t testing.TB) string {
	t.Helper()
	src, err := os.ReadFile(filepath.Join(repoRoot(t), "version.go"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^const Version = "(v[^"]+)"`).FindSubmatch(src)
	if m == nil {
		t.Fatal("version.go declares no const Version")
	}
	rev, dirty := strings.CutSuffix(revision(t), "-dirty")
	want := fmt.Sprintf("azqd %s (git revision %s", m[1], rev)
	if dirty {
		want += ", modified"
	}
	return want + "; go"
}

// TestImageSize measures the image and checks the Dockerfile's figures
// against it, within a quarter: the compressed size is what a registry
// stores and a pull downloads, the uncompressed one what the layers
// unpack to (the binary, in tar's headers).
func TestImageSize(t *testing.T) {
	b := image(t)
	s, err := imageSizes(b.img)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%.1f MB compressed, %.1f MB uncompressed", float64(s.compressed)/1e6, float64(s.uncompressed)/1e6)
	df, err := os.ReadFile(filepath.Join(repoRoot(t), "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`([\d.]+) MB unpacked(?s:.*?)([\d.]+) MB compressed`).FindSubmatch(df)
	if m == nil {
		t.Fatal("the Dockerfile states no size as \"N MB unpacked … N MB compressed\"")
	}
	for _, c := range []struct {
		what   string
		stated []byte
		got    int64
	}{{"unpacked", m[1], s.uncompressed}, {"compressed", m[2], s.compressed}} {
		stated, _ := strconv.ParseFloat(string(c.stated), 64)
		got := float64(c.got) / 1e6
		if got < stated*0.75 || got > stated*1.25 {
			t.Errorf("the Dockerfile says %.1f MB %s; the image is %.1f MB: update the figure", stated, c.what, got)
		}
	}
}
