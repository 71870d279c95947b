package main

import (
	"archive/tar"
	"bytes"
	"context"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// The Dockerfile's two COPY instructions of the final stage, each a layer.
const (
	copyBinaries = "COPY --from=build /out/usr/ /usr/"
	copyData     = "COPY --from=build --chown=65532:65532 /out/data /data"
)

// buildImage runs r's build steps in the repository at repo, as the
// Dockerfile's build stage does, and returns the image of its final
// stage: a layer of the binaries (copyBinaries), a layer of the empty
// data directory (copyData), and r's configuration, for linux on the
// architecture Go builds for (GOARCH, by default this machine's). Every
// time in it is created, so that the same source and toolchain give the
// same image, byte for byte.
func buildImage(ctx context.Context, r recipe, repo string, created time.Time) (v1.Image, error) {
	out, err := os.MkdirTemp("", "azqd-image-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(out)
	goarch := os.Getenv("GOARCH")
	if goarch == "" {
		goarch = runtime.GOARCH
	}
	for _, step := range []string{r.build, r.links} {
		sh := exec.CommandContext(ctx, "/bin/sh", "-c", strings.ReplaceAll(step, r.out, out+"/"))
		sh.Dir = repo
		sh.Env = append(append(os.Environ(), r.buildEnv...), "GOOS=linux", "GOARCH="+goarch)
		if b, err := sh.CombinedOutput(); err != nil {
			return nil, fmt.Errorf("RUN %s: %v\n%s", step, err, b)
		}
	}

	binaries, err := treeLayer(out, "usr", created)
	if err != nil {
		return nil, err
	}
	uid, gid, err := owner(r.dataOwner)
	if err != nil {
		return nil, err
	}
	data, err := layer(created, []entry{{hdr: &tar.Header{Typeflag: tar.TypeDir, Name: r.dataDir, Mode: 0o755, Uid: uid, Gid: gid}}})
	if err != nil {
		return nil, err
	}

	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	img, err = mutate.Append(img,
		mutate.Addendum{Layer: binaries, History: v1.History{Created: v1.Time{Time: created}, CreatedBy: copyBinaries}},
		mutate.Addendum{Layer: data, History: v1.History{Created: v1.Time{Time: created}, CreatedBy: copyData}},
	)
	if err != nil {
		return nil, err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture, cf.Created = "linux", goarch, v1.Time{Time: created}
	cf.Config = r.config()
	if v := releaseVersion(ctx, filepath.Join(out, r.binDir, "azqd"), goarch); v != "" {
		cf.Config.Labels["org.opencontainers.image.version"] = v
	}
	return mutate.ConfigFile(img, cf)
}

// config is the image configuration r describes.
func (r recipe) config() v1.Config {
	hc := r.healthcheck
	hc.Test = append([]string(nil), hc.Test...)
	c := v1.Config{
		User:         r.user,
		Env:          append([]string(nil), r.env...),
		Cmd:          append([]string(nil), r.cmd...),
		ExposedPorts: map[string]struct{}{},
		Labels:       map[string]string{},
		Healthcheck:  &hc,
	}
	for _, p := range r.exposedPorts {
		c.ExposedPorts[p+"/tcp"] = struct{}{}
	}
	for k, v := range r.labels {
		c.Labels[k] = v
	}
	return c
}

// releaseVersion is the release azqd reports with -version ("azqd v1.2.3
// …"), or "" when it reports none (a build from a clone says "(devel)"),
// or when the binary cannot run here.
func releaseVersion(ctx context.Context, bin, goarch string) string {
	if runtime.GOOS != "linux" || goarch != runtime.GOARCH {
		return ""
	}
	b, err := exec.CommandContext(ctx, bin, "-version").Output()
	if err != nil {
		return ""
	}
	m := regexp.MustCompile(`^azqd (v\d+\.\d+\.\d+\S*)`).FindSubmatch(b)
	if m == nil {
		return ""
	}
	return string(m[1])
}

// owner parses "uid:gid".
func owner(s string) (uid, gid int, err error) {
	us, gs, _ := strings.Cut(s, ":")
	if uid, err = strconv.Atoi(us); err == nil {
		gid, err = strconv.Atoi(gs)
	}
	if err != nil {
		return 0, 0, fmt.Errorf("owner %q: want uid:gid", s)
	}
	return uid, gid, nil
}

// treeLayer is a layer of the tree under root/dir, as COPY --from makes
// it: root owns everything, modes and symbolic links are kept, and the
// entries come in lexical order.
func treeLayer(root, dir string, created time.Time) (v1.Layer, error) {
	var entries []entry
	err := filepath.WalkDir(filepath.Join(root, dir), func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		h := &tar.Header{Name: filepath.ToSlash(rel), Mode: int64(fi.Mode().Perm())}
		var body []byte
		switch {
		case d.IsDir():
			h.Typeflag = tar.TypeDir
		case fi.Mode()&fs.ModeSymlink != 0:
			h.Typeflag, h.Mode = tar.TypeSymlink, 0o777
			if h.Linkname, err = os.Readlink(p); err != nil {
				return err
			}
		case fi.Mode().IsRegular():
			h.Typeflag = tar.TypeReg
			if body, err = os.ReadFile(p); err != nil {
				return err
			}
			h.Size = int64(len(body))
		default:
			return fmt.Errorf("%s: not a file, directory or symbolic link", p)
		}
		entries = append(entries, entry{h, body})
		return nil
	})
	if err != nil {
		return nil, err
	}
	return layer(created, entries)
}

// entry is a layer's file: its header, and a regular file's contents.
type entry struct {
	hdr  *tar.Header
	body []byte
}

// layer is a gzip-compressed OCI layer of entries, each modified at
// created; directories' names end in a slash, as tar's do.
func layer(created time.Time, entries []entry) (v1.Layer, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		h := *e.hdr
		h.ModTime, h.Format = created, tar.FormatPAX
		h.Name = path.Clean(h.Name)
		if h.Typeflag == tar.TypeDir {
			h.Name += "/"
		}
		if err := tw.WriteHeader(&h); err != nil {
			return nil, err
		}
		if _, err := tw.Write(e.body); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	b := buf.Bytes()
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(b)), nil
	}, tarball.WithMediaType(types.OCILayer))
}
