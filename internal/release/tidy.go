package main

import (
	"bytes"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"golang.org/x/mod/modfile"
)

// cmdTidy is "release tidy": go mod tidy in every module of go.work.
//
// go mod tidy ignores go.work, so a nested module that requires the root
// version of the next release, which no proxy has yet, is tidied with the
// clone's root module in its place: the drivers' go.mod files say so with
// a replace directive of their own; a module with commands has none, as
// go install …@version refuses it, and gets one for the run only.
func cmdTidy(args []string, stdout, stderr io.Writer) error {
	fset := flag.NewFlagSet("tidy", flag.ContinueOnError)
	fset.SetOutput(stderr)
	repoDir := fset.String("repo", ".", "the clone to tidy")
	if err := fset.Parse(args); err != nil {
		return err
	}
	if fset.NArg() > 0 {
		return fmt.Errorf("tidy takes flags only, not %q", fset.Args())
	}
	r, err := openRepo(*repoDir)
	if err != nil {
		return err
	}
	for _, m := range r.modules {
		if err := tidy(r, m); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "%s: tidy\n", m.path)
	}
	return nil
}

// tidy runs go mod tidy in m, outside the workspace, with a replace of the
// root module by the clone's for the run when m has none.
func tidy(r *repo, m module) error {
	dir := m.abs(r.dir)
	modFile := filepath.Join(dir, "go.mod")
	original, err := os.ReadFile(modFile)
	if err != nil {
		return err
	}
	temporary := false
	if m.dir != "" && !replacesRoot(m.gomod) {
		rel, err := filepath.Rel(dir, r.dir)
		if err != nil {
			return err
		}
		f, err := modfile.Parse(modFile, original, nil)
		if err != nil {
			return err
		}
		if err := f.AddReplace(rootPath, "", filepath.ToSlash(rel), ""); err != nil {
			return err
		}
		data, err := f.Format()
		if err != nil {
			return err
		}
		if err := os.WriteFile(modFile, data, 0o644); err != nil {
			return err
		}
		temporary = true
	}
	cmd := exec.Command("go", "mod", "tidy")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOWORK=off")
	out, err := cmd.CombinedOutput()
	if err != nil {
		if temporary {
			os.WriteFile(modFile, original, 0o644)
		}
		return fmt.Errorf("go mod tidy in %s: %v\n%s", m.name(), err, out)
	}
	if !temporary {
		return nil
	}
	data, err := os.ReadFile(modFile)
	if err != nil {
		return err
	}
	f, err := modfile.Parse(modFile, data, nil)
	if err != nil {
		return err
	}
	if err := f.DropReplace(rootPath, ""); err != nil {
		return err
	}
	f.Cleanup()
	if data, err = f.Format(); err != nil {
		return err
	}
	// Format leaves the line the replace stood on empty.
	data = bytes.ReplaceAll(data, []byte("\n\n\n"), []byte("\n\n"))
	return os.WriteFile(modFile, []byte(strings.TrimRight(string(data), "\n")+"\n"), 0o644)
}

// replacesRoot reports whether f replaces the root module.
func replacesRoot(f *modfile.File) bool {
	for _, rp := range f.Replace {
		if rp.Old.Path == rootPath {
			return true
		}
	}
	return false
}
