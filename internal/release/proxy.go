package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	modpath "golang.org/x/mod/module"
	modzip "golang.org/x/mod/zip"
)

// cmdProxy is "release proxy": it writes a module proxy holding every
// module of the clone at azq.Version, made from the files git would
// commit, so that GOPROXY=file://DIR resolves the modules as the tags
// would publish them, before they exist: a nested module that requires
// a version nothing publishes fails there as it would for a user. It
// prints the modules and the environment that resolves them.
func cmdProxy(args []string, stdout, stderr io.Writer) error {
	fset := flag.NewFlagSet("proxy", flag.ContinueOnError)
	fset.SetOutput(stderr)
	repoDir := fset.String("repo", ".", "the clone whose modules to publish")
	dir := fset.String("dir", "", "the proxy's `directory` (GOPROXY=file://DIR)")
	if err := fset.Parse(args); err != nil {
		return err
	}
	if *dir == "" || fset.NArg() > 0 {
		return errors.New("proxy takes -dir DIR")
	}
	r, err := openRepo(*repoDir)
	if err != nil {
		return err
	}
	version, err := r.version()
	if err != nil {
		return err
	}
	if err := buildProxy(r, *dir, version); err != nil {
		return err
	}
	for _, m := range r.modules {
		fmt.Fprintf(stdout, "%s@%s\n", m.path, version)
	}
	abs, err := filepath.Abs(*dir)
	if err != nil {
		return err
	}
	fmt.Fprint(stdout, proxyInstructions(abs))
	return nil
}

// proxyInstructions tell how to resolve the modules through the proxy in
// dir, an absolute path: GOPROXY with the proxy first and the usual ones
// after it for every other module, and GONOSUMDB for azq's modules, which
// the checksum database cannot know before the tags are published (go
// get refuses a module it cannot verify there: "verifying module: …
// 404 Not Found").
func proxyInstructions(dir string) string {
	u := filepath.ToSlash(dir)
	if !strings.HasPrefix(u, "/") {
		u = "/" + u // a Windows drive: file:///C:/…
	}
	return "\nTo resolve these modules through this proxy, set, in the shell that runs go get or go install:\n\n" +
		"\texport GOPROXY=file://" + u + ",$(go env GOPROXY) GONOSUMDB=" + rootPath + "\n\n" +
		"GONOSUMDB (or GOSUMDB=off) is required: the checksum database has no record of versions\n" +
		"that are not published, and go get refuses a module it cannot verify there.\n"
}

// buildProxy writes into dir, in the layout of a GOPROXY=file:// proxy,
// every module of r at version: its zip, made by golang.org/x/mod/zip from
// the files of the module git tracks or would track (not those it
// ignores), its go.mod and its info.
func buildProxy(r *repo, dir, version string) error {
	list, err := git(r.dir, "ls-files", "-z", "--cached", "--others", "--exclude-standard")
	if err != nil {
		return err
	}
	files := strings.Split(strings.Trim(list, "\x00"), "\x00")
	info, err := json.Marshal(struct {
		Version string
		Time    time.Time
	}{version, time.Now().UTC().Truncate(time.Second)})
	if err != nil {
		return err
	}
	for _, m := range r.modules {
		mv := modpath.Version{Path: m.path, Version: version}
		esc, err := modpath.EscapePath(m.path)
		if err != nil {
			return err
		}
		vdir := filepath.Join(dir, filepath.FromSlash(esc), "@v")
		if err := os.MkdirAll(vdir, 0o755); err != nil {
			return err
		}
		var zfiles []modzip.File
		prefix := ""
		if m.dir != "" {
			prefix = m.dir + "/"
		}
		for _, f := range files {
			rel, ok := strings.CutPrefix(f, prefix)
			if !ok {
				continue
			}
			abs := filepath.Join(r.dir, filepath.FromSlash(f))
			if _, err := os.Lstat(abs); errors.Is(err, fs.ErrNotExist) {
				continue // deleted, not yet committed
			}
			zfiles = append(zfiles, diskFile{rel: rel, abs: abs})
		}
		z, err := os.Create(filepath.Join(vdir, version+".zip"))
		if err != nil {
			return err
		}
		// Create leaves out the files of nested modules, as a module
		// proxy does.
		err = modzip.Create(z, mv, zfiles)
		if cerr := z.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return fmt.Errorf("%s: %w", m.path, err)
		}
		gomod, err := os.ReadFile(filepath.Join(m.abs(r.dir), "go.mod"))
		if err != nil {
			return err
		}
		for name, data := range map[string][]byte{version + ".mod": gomod, version + ".info": info, "list": []byte(version + "\n")} {
			if err := os.WriteFile(filepath.Join(vdir, name), data, 0o644); err != nil {
				return err
			}
		}
	}
	return nil
}

// diskFile is a file of the clone as golang.org/x/mod/zip takes one.
type diskFile struct{ rel, abs string }

func (f diskFile) Path() string                 { return f.rel }
func (f diskFile) Lstat() (os.FileInfo, error)  { return os.Lstat(f.abs) }
func (f diskFile) Open() (io.ReadCloser, error) { return os.Open(f.abs) }
