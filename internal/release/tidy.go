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
// go mod tidy ignores go.work, so a nested module that requires the
// versions of the next release, which no proxy has yet, is tidied with
// the clone's modules in their place: the drivers' go.mod files replace
// the root module with a directive of their own; a module with commands
// has none, as go install …@version refuses it, and gets one for the run
// only, of each of the repository's modules it requires (azqd: the root
// module and the PostgreSQL back end).
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

// tidy runs go mod tidy in m, outside the workspace, with a replace for
// the run of each of the repository's modules that m requires and does
// not replace itself.
func tidy(r *repo, m module) error {
	dir := m.abs(r.dir)
	modFile := filepath.Join(dir, "go.mod")
	original, err := os.ReadFile(modFile)
	if err != nil {
		return err
	}
	temporary := temporaryReplaces(r, m)
	if len(temporary) > 0 {
		f, err := modfile.Parse(modFile, original, nil)
		if err != nil {
			return err
		}
		for _, o := range temporary {
			rel, err := filepath.Rel(dir, o.abs(r.dir))
			if err != nil {
				return err
			}
			if err := f.AddReplace(o.path, "", filepath.ToSlash(rel), ""); err != nil {
				return err
			}
		}
		data, err := f.Format()
		if err != nil {
			return err
		}
		if err := os.WriteFile(modFile, data, 0o644); err != nil {
			return err
		}
	}
	cmd := exec.Command("go", "mod", "tidy")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOWORK=off")
	out, err := cmd.CombinedOutput()
	if err != nil {
		if len(temporary) > 0 {
			os.WriteFile(modFile, original, 0o644)
		}
		return fmt.Errorf("go mod tidy in %s: %v\n%s", m.name(), err, out)
	}
	if len(temporary) == 0 {
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
	for _, o := range temporary {
		if err := f.DropReplace(o.path, ""); err != nil {
			return err
		}
	}
	f.Cleanup()
	if data, err = f.Format(); err != nil {
		return err
	}
	// Format leaves the line the replace stood on empty.
	data = bytes.ReplaceAll(data, []byte("\n\n\n"), []byte("\n\n"))
	return os.WriteFile(modFile, []byte(strings.TrimRight(string(data), "\n")+"\n"), 0o644)
}

// temporaryReplaces are the repository's modules that tidy replaces with
// the clone's for a run in m: those m requires, or the root module for
// any nested module, when m's go.mod does not replace them itself.
func temporaryReplaces(r *repo, m module) []module {
	if m.dir == "" {
		return nil
	}
	replaced := map[string]bool{}
	for _, rp := range m.gomod.Replace {
		replaced[rp.Old.Path] = true
	}
	required := map[string]bool{rootPath: true}
	for _, rq := range m.gomod.Require {
		required[rq.Mod.Path] = true
	}
	var out []module
	for _, o := range r.modules {
		if o.path != m.path && required[o.path] && !replaced[o.path] {
			out = append(out, o)
		}
	}
	return out
}
