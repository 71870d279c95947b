package main

import (
	"archive/zip"
	"bufio"
	"bytes"
	"errors"
	"flag"
	"fmt"
	"go/token"
	"go/types"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"golang.org/x/exp/apidiff"
	"golang.org/x/tools/go/gcexportdata"
	"golang.org/x/tools/go/packages"
)

// baselineDir holds, per module, the exported API of the last release
// (MODULE.zip), and acceptedFile, the incompatible changes made on purpose
// since. Both are committed, so that the check needs no tag and no
// network: a clone without tags, or a shallow one, checks the same. The
// commit that cuts a release writes the baselines ("release api -w"), and
// "release tag" refuses a commit whose baselines are not its API; before
// the first release there are none, as there is no API to keep.
const (
	baselineDir  = "internal/release/api"
	acceptedFile = "accepted.txt"
)

// acceptedHeader opens acceptedFile; "release api -w" leaves it alone.
const acceptedHeader = `# Incompatible API changes made on purpose since the last release, one
# a line, as "release api" prints them: MODULE: CHANGE. Each is also
# written under Unreleased in CHANGELOG.md. Cutting a release empties
# this list ("release api -w"), as the new baselines hold the changes.
`

// baselineFile is the baseline of m in the clone at dir.
func baselineFile(dir string, m module) string {
	return filepath.Join(dir, filepath.FromSlash(baselineDir), strings.ReplaceAll(m.name(), "/", "-")+".zip")
}

// cmdAPI is "release api": it compares every module's exported API with
// its baseline and fails on an incompatible change that acceptedFile does
// not list; with -w it writes the baselines instead, as the commit that
// cuts a release does.
func cmdAPI(args []string, stdout, stderr io.Writer) error {
	fset := flag.NewFlagSet("api", flag.ContinueOnError)
	fset.SetOutput(stderr)
	repoDir := fset.String("repo", ".", "the clone to check")
	write := fset.Bool("w", false, "write every module's API as its baseline, and empty "+acceptedFile)
	if err := fset.Parse(args); err != nil {
		return err
	}
	if fset.NArg() > 0 {
		return fmt.Errorf("api takes flags only, not %q", fset.Args())
	}
	r, err := openRepo(*repoDir)
	if err != nil {
		return err
	}
	if *write {
		return writeBaselines(r, stdout)
	}
	accepted, err := readAccepted(r.dir)
	if err != nil {
		return err
	}
	broken := 0
	for _, m := range r.modules {
		old, now, own, err := apiPair(r, m)
		if err != nil {
			return err
		}
		if old == nil {
			fmt.Fprintf(stdout, "%s: no baseline yet (no release of the module so far): nothing to compare\n", m.path)
			continue
		}
		from := ""
		if !own {
			from = fmt.Sprintf(" (no release of the module so far; its packages %s, against their last release in another module)", packageList(old))
		}
		report := apidiff.ModuleChanges(old, now)
		if len(report.Changes) == 0 {
			fmt.Fprintf(stdout, "%s: the API of the last release, unchanged%s\n", m.path, from)
			continue
		}
		fmt.Fprintf(stdout, "%s%s:\n", m.path, from)
		for _, c := range report.Changes {
			line := m.path + ": " + c.Message
			switch {
			case c.Compatible:
				fmt.Fprintf(stdout, "  compatible:    %s\n", c.Message)
			case accepted[line]:
				fmt.Fprintf(stdout, "  incompatible, on purpose (%s): %s\n", acceptedFile, c.Message)
			default:
				broken++
				fmt.Fprintf(stdout, "  INCOMPATIBLE:  %s\n", c.Message)
			}
		}
	}
	if broken > 0 {
		return fmt.Errorf("%d incompatible API change(s) since the last release. Undo them; or, if they are on purpose "+
			"(before v1, a minor release may break API), add each line, as MODULE: CHANGE, to %s/%s and say so under "+
			"Unreleased in CHANGELOG.md", broken, baselineDir, acceptedFile)
	}
	return nil
}

// apiPair loads m's API at the last release (nil if there is none) and
// its API now; own says whether m has a baseline of its own.
func apiPair(r *repo, m module) (old, now *apidiff.Module, own bool, err error) {
	fset := token.NewFileSet()
	if now, err = loadAPI(fset, r.dir, m); err != nil {
		return nil, nil, false, err
	}
	old, own, err = lastAPI(fset, r, m)
	return old, now, own, err
}

// lastAPI is m's API at the last release: the packages of every module's
// baseline that m holds now. A package carved out of one module into a
// new one keeps its import path, and so its users: the check compares it
// with its API in the baseline of the module it left, and the module it
// left no longer answers for it. It is nil if no baseline has a package of
// m and m has no baseline of its own (a module new since the last
// release, with packages new too); own says whether m has one.
func lastAPI(fset *token.FileSet, r *repo, m module) (api *apidiff.Module, own bool, err error) {
	api = &apidiff.Module{Path: m.path}
	for _, o := range r.modules {
		base, err := readAPI(fset, baselineFile(r.dir, o))
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, false, err
		}
		if o.path == m.path {
			own = true
		}
		for _, p := range base.Packages {
			if r.owner(p.Path()) == m.path {
				api.Packages = append(api.Packages, p)
			}
		}
	}
	if !own && len(api.Packages) == 0 {
		return nil, false, nil
	}
	slices.SortFunc(api.Packages, func(a, b *types.Package) int { return strings.Compare(a.Path(), b.Path()) })
	return api, own, nil
}

// baselinesAreCurrent lists what keeps the baselines from being the
// clone's API: a module whose API differs from its baseline in any way,
// or has none, and changes still listed as accepted.
func baselinesAreCurrent(r *repo) ([]string, error) {
	var problems []string
	for _, m := range r.modules {
		old, now, own, err := apiPair(r, m)
		if err != nil {
			return nil, err
		}
		if !own {
			problems = append(problems, m.path+" has no API baseline")
			continue
		}
		if n := len(apidiff.ModuleChanges(old, now).Changes); n > 0 {
			problems = append(problems, fmt.Sprintf("%s: %d change(s) since the baseline", m.path, n))
		}
	}
	accepted, err := readAccepted(r.dir)
	if err != nil {
		return nil, err
	}
	if len(accepted) > 0 {
		problems = append(problems, fmt.Sprintf("%s lists %d change(s), which the new baselines hold", acceptedFile, len(accepted)))
	}
	if len(problems) > 0 {
		problems = append(problems, "write the baselines in the commit that cuts the release: .ci/release api -w")
	}
	return problems, nil
}

// writeBaselines writes every module's API as its baseline and empties
// acceptedFile.
func writeBaselines(r *repo, stdout io.Writer) error {
	if err := os.MkdirAll(filepath.Join(r.dir, filepath.FromSlash(baselineDir)), 0o755); err != nil {
		return err
	}
	for _, m := range r.modules {
		fset := token.NewFileSet()
		now, err := loadAPI(fset, r.dir, m)
		if err != nil {
			return err
		}
		file := baselineFile(r.dir, m)
		if err := writeAPI(fset, file, now); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "%s: %d packages, written to %s\n", m.path, len(now.Packages), file)
	}
	return os.WriteFile(filepath.Join(r.dir, filepath.FromSlash(baselineDir), acceptedFile), []byte(acceptedHeader), 0o644)
}

// readAccepted reads acceptedFile's lines, without comments and blanks.
func readAccepted(dir string) (map[string]bool, error) {
	f, err := os.Open(filepath.Join(dir, filepath.FromSlash(baselineDir), acceptedFile))
	if errors.Is(err, os.ErrNotExist) {
		return map[string]bool{}, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	lines := map[string]bool{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if l := strings.TrimSpace(sc.Text()); l != "" && !strings.HasPrefix(l, "#") {
			lines[l] = true
		}
	}
	return lines, sc.Err()
}

// loadAPI type-checks m's packages that other modules can import: not
// its commands, not its internal packages, in the clone's workspace, as
// the clone builds them. It builds with -trimpath, so
// that the build cache serves a clone anywhere on disk and the positions
// a baseline records name no one's directories.
func loadAPI(fset *token.FileSet, dir string, m module) (*apidiff.Module, error) {
	cfg := &packages.Config{
		Mode:       packages.NeedName | packages.NeedTypes | packages.NeedModule,
		Dir:        m.abs(dir),
		Env:        append(os.Environ(), "GOWORK="+filepath.Join(dir, "go.work")),
		Fset:       fset,
		BuildFlags: []string{"-trimpath"},
	}
	pkgs, err := packages.Load(cfg, "./...")
	if err != nil {
		return nil, fmt.Errorf("loading %s: %w", m.path, err)
	}
	api := &apidiff.Module{Path: m.path}
	var errs []error
	for _, p := range pkgs {
		if p.Module == nil || p.Module.Path != m.path || p.Name == "main" || isInternal(strings.TrimPrefix(p.PkgPath, m.path)) {
			continue
		}
		for _, e := range p.Errors {
			errs = append(errs, e)
		}
		if p.Types != nil {
			api.Packages = append(api.Packages, p.Types)
		}
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("loading %s: %w", m.path, errors.Join(errs...))
	}
	slices.SortFunc(api.Packages, func(a, b *types.Package) int { return strings.Compare(a.Path(), b.Path()) })
	return api, nil
}

// packageList names api's packages, for messages.
func packageList(api *apidiff.Module) string {
	var paths []string
	for _, p := range api.Packages {
		paths = append(paths, p.Path())
	}
	return strings.Join(paths, ", ")
}

// isInternal reports whether a module-relative package path is internal
// to its module.
func isInternal(rel string) bool {
	rel = "/" + strings.TrimPrefix(rel, "/") + "/"
	return strings.Contains(rel, "/internal/")
}

// writeAPI writes api to file as the apidiff command writes a module's
// export data (apidiff -m -w), so that the stock command reads it too: a
// zip archive whose entry "module" holds the module path and whose entry
// PACKAGE.x holds each package's export data.
func writeAPI(fset *token.FileSet, file string, api *apidiff.Module) error {
	var buf bytes.Buffer
	w := zip.NewWriter(&buf)
	entry, err := w.Create("module")
	if err != nil {
		return err
	}
	if _, err := io.WriteString(entry, api.Path); err != nil {
		return err
	}
	for _, p := range api.Packages {
		entry, err := w.Create(p.Path() + ".x")
		if err != nil {
			return err
		}
		if err := gcexportdata.Write(entry, fset, p); err != nil {
			return fmt.Errorf("writing the API of %s: %w", p.Path(), err)
		}
	}
	if err := w.Close(); err != nil {
		return err
	}
	return os.WriteFile(file, buf.Bytes(), 0o644)
}

// readAPI reads a file writeAPI wrote. Each package's export data carries
// what it needs of its dependencies, so each is read on its own.
func readAPI(fset *token.FileSet, file string) (*apidiff.Module, error) {
	z, err := zip.OpenReader(file)
	if err != nil {
		return nil, err
	}
	defer z.Close()
	api := &apidiff.Module{}
	for _, e := range z.File {
		rc, err := e.Open()
		if err != nil {
			return nil, err
		}
		data, err := io.ReadAll(rc)
		rc.Close()
		if err != nil {
			return nil, err
		}
		if e.Name == "module" {
			api.Path = string(data)
			continue
		}
		path, ok := strings.CutSuffix(e.Name, ".x")
		if !ok {
			return nil, fmt.Errorf("%s: unexpected entry %q", file, e.Name)
		}
		p, err := gcexportdata.Read(bytes.NewReader(data), fset, map[string]*types.Package{}, path)
		if err != nil {
			return nil, fmt.Errorf("%s: reading %s: %w", file, path, err)
		}
		api.Packages = append(api.Packages, p)
	}
	if api.Path == "" {
		return nil, fmt.Errorf("%s names no module", file)
	}
	return api, nil
}
