package main

import (
	"bytes"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"golang.org/x/mod/modfile"
)

// cmdTidy is "release tidy": go mod tidy in every module of go.work, and
// then in the repository's other modules (benchmarks, test modules and
// this tool), which are never released and replace the repository's
// modules they use with the clone's themselves: a change to the root
// module's requirements leaves their go.sum behind, and CI, which runs
// them with GOWORK=off, fails until they are tidied too.
//
// go mod tidy ignores go.work, so a nested module that requires the
// versions of the next release, which no proxy has yet, is tidied with
// the clone's modules in their place: the drivers' go.mod files replace
// the root module with a directive of their own; a module with commands
// has none, as go install …@version refuses it, and gets one for the run
// only, of each of the repository's modules it does not replace itself.
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
	others, err := unreleasedModules(r)
	if err != nil {
		return err
	}
	for _, dir := range others {
		cmd := exec.Command("go", "mod", "tidy")
		cmd.Dir = filepath.Join(r.dir, filepath.FromSlash(dir))
		cmd.Env = append(os.Environ(), "GOWORK=off")
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("go mod tidy in %s: %v\n%s", dir, err, out)
		}
		fmt.Fprintf(stdout, "%s (not released): tidy\n", dir)
	}
	return nil
}

// unreleasedModules are the directories, relative to the clone and
// slash-separated, of the modules that are never released: go.work's
// test-only modules, and every go.mod below the clone that go.work does
// not list, but those in testdata, node_modules and hidden directories,
// which the go command ignores too.
func unreleasedModules(r *repo) ([]string, error) {
	listed := map[string]bool{}
	for _, m := range r.modules {
		listed[m.dir] = true
	}
	var dirs []string
	err := filepath.WalkDir(r.dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			name := d.Name()
			if path != r.dir && (name == "testdata" || name == "node_modules" || strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_")) {
				return filepath.SkipDir
			}
			return nil
		}
		if d.Name() != "go.mod" {
			return nil
		}
		rel, err := filepath.Rel(r.dir, filepath.Dir(path))
		if err != nil {
			return err
		}
		if rel = filepath.ToSlash(rel); rel == "." {
			rel = ""
		}
		if !listed[rel] {
			dirs = append(dirs, rel)
		}
		return nil
	})
	return dirs, err
}

// tidy runs go mod tidy in m, outside the workspace, with a replace for
// the run of each of the repository's modules that m does not replace
// itself.
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
			rel = filepath.ToSlash(rel)
			if !strings.HasPrefix(rel, "../") {
				rel = "./" + rel // a directory, not a module path
			}
			if err := f.AddReplace(o.path, "", rel, ""); err != nil {
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
// the clone's for a run in m: every one but m that m's go.mod does not
// replace itself, for any nested module. Not only those m requires: go
// mod tidy also reads the modules the tests of m's dependencies need
// (azure's tests need azqtest), and a module of the next release is on
// no proxy yet. A replace of a module outside m's graph changes nothing.
func temporaryReplaces(r *repo, m module) []module {
	if m.dir == "" {
		return nil
	}
	replaced := map[string]bool{}
	for _, rp := range m.gomod.Replace {
		replaced[rp.Old.Path] = true
	}
	var out []module
	for _, o := range r.modules {
		if o.path != m.path && !replaced[o.path] {
			out = append(out, o)
		}
	}
	return out
}
