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

// buildOptions are what a build takes besides its context.
type buildOptions struct {
	// created is every time in the image.
	created time.Time
	// args are the build arguments, as docker build --build-arg gives
	// them, by name.
	args map[string]string
	// progress is where the build reports each step, and the output of
	// its RUN steps; nil discards them.
	progress io.Writer
}

// buildImage builds the image of the Dockerfile at the repository's root
// repo, as a container engine would with repo as the build context: it
// carries out the build stage here (runBuildStage) and makes a layer of
// each COPY --from of the final stage, with the final stage's
// configuration, for linux on the architecture Go builds for (GOARCH, by
// default this machine's). Every time in it is opts.created, so that the
// same source, build arguments and toolchain give the same image, byte
// for byte.
func buildImage(ctx context.Context, repo string, opts buildOptions) (v1.Image, error) {
	progress := opts.progress
	if progress == nil {
		progress = io.Discard
	}
	created := opts.created
	f, err := os.Open(filepath.Join(repo, "Dockerfile"))
	if err != nil {
		return nil, err
	}
	d, err := readDockerfile(f)
	f.Close()
	if err != nil {
		return nil, fmt.Errorf("Dockerfile: %v", err)
	}
	final, err := d.finalStage()
	if err != nil {
		return nil, fmt.Errorf("Dockerfile: %v", err)
	}
	bc, err := openContext(repo)
	if err != nil {
		return nil, err
	}
	goarch := os.Getenv("GOARCH")
	if goarch == "" {
		goarch = runtime.GOARCH
	}
	// A container's processes create files with umask 022, whatever
	// this process's is.
	defer setUmask(setUmask(0o022))
	stage, unused, err := runBuildStage(ctx, d, bc, final.sources(), baseEnv(goarch), opts.args, progress)
	if stage != nil {
		defer os.RemoveAll(stage.root)
	}
	if err != nil {
		return nil, fmt.Errorf("Dockerfile: %v", err)
	}
	for _, k := range unused {
		// As docker build, which warns and builds.
		fmt.Fprintf(progress, "image: warning: build argument %s: no ARG of the build stage declares it\n", k)
	}

	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	files := map[string]string{} // the image's files: path in the image (no leading /) to path here
	for i, c := range final.copies {
		fmt.Fprintf(progress, "image: layer %d/%d: %s\n", i+1, len(final.copies), c.createdBy)
		src, err := stage.host(c.src)
		if err != nil {
			return nil, fmt.Errorf("Dockerfile: %s: %v", c.createdBy, err)
		}
		l, err := copyLayer(src, c, created, files)
		if err != nil {
			return nil, fmt.Errorf("Dockerfile: %s: %v", c.createdBy, err)
		}
		img, err = mutate.Append(img, mutate.Addendum{Layer: l, History: v1.History{Created: v1.Time{Time: created}, CreatedBy: c.createdBy}})
		if err != nil {
			return nil, err
		}
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture, cf.Created = "linux", goarch, v1.Time{Time: created}
	cf.Config = final.config
	if bin := program(final.config, files); bin != "" {
		if v := releaseVersion(ctx, bin, goarch); v != "" {
			cf.Config.Labels["org.opencontainers.image.version"] = v
		}
	}
	return mutate.ConfigFile(img, cf)
}

// program is the path here of the program the image's CMD starts, found
// on the image's PATH among files, or "".
func program(c v1.Config, files map[string]string) string {
	if len(c.Cmd) == 0 {
		return ""
	}
	name := c.Cmd[0]
	if strings.Contains(name, "/") {
		return files[strings.TrimPrefix(path.Clean(name), "/")]
	}
	for _, kv := range c.Env {
		if dirs, ok := strings.CutPrefix(kv, "PATH="); ok {
			for _, dir := range strings.Split(dirs, ":") {
				if p, ok := files[strings.TrimPrefix(path.Join(dir, name), "/")]; ok {
					return p
				}
			}
		}
	}
	return ""
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

// copyLayer is the layer of c, whose source is src here, as COPY --from
// makes it: a directory's contents at the destination directory, which
// gets the source directory's mode; a file at the destination, or in it
// when the destination ends in a slash. Modes and symbolic links are
// kept, every entry belongs to c's owner, and a directory's entries come
// in lexical order. It adds each entry's path here to files.
func copyLayer(src string, c layerCopy, created time.Time, files map[string]string) (v1.Layer, error) {
	fi, err := os.Lstat(src)
	if err != nil {
		return nil, err
	}
	dest := strings.TrimPrefix(path.Clean(c.dest), "/")
	if !fi.IsDir() && strings.HasSuffix(c.dest, "/") {
		dest = path.Join(dest, filepath.Base(src))
	}
	var entries []entry
	err = filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		name := path.Join(dest, filepath.ToSlash(rel))
		h := &tar.Header{Name: name, Mode: int64(fi.Mode().Perm()), Uid: c.uid, Gid: c.gid}
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
		files[name] = p
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
