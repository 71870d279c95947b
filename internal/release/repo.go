package main

import (
	"bufio"
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/mod/modfile"
	"golang.org/x/mod/semver"
)

// rootPath is the root module's path; every other module of the
// repository is rootPath/DIR, tagged DIR/vX.Y.Z.
const rootPath = "github.com/azqlib/azq"

// testOnlyModules are the directories of the modules go.work lists that
// are never released: they hold tests (and the examples) that need
// modules the packages they test do not require, such as server's tests
// through the Azure SDK, and are in the workspace only so that the
// README's test command runs them. They may replace any module with the
// clone's, as no one depends on them. release tidy tidies them with the
// repository's other unreleased modules; tag, api and proxy leave them
// out.
var testOnlyModules = []string{"examples", "server/sdktest", "worker/sdktest"}

// repo is a clone of the repository: its modules, as go.work lists them,
// and the version in its code.
type repo struct {
	dir     string   // the clone's root
	modules []module // the released ones: the root module first, then by directory
	// testOnly are the directories of go.work's testOnlyModules.
	testOnly []string
	// workReplace are go.work's replace directives: of a nested module's
	// release that another requires, by its directory in the clone.
	workReplace []*modfile.Replace
}

// module is one module of the repository.
type module struct {
	dir   string // slash-separated, relative to the clone; "" for the root
	path  string // the module path
	gomod *modfile.File
}

// tag is the module's tag for version: v0.1.0 for the root module,
// gocloud/v0.1.0 for the module in gocloud/.
func (m module) tag(version string) string {
	if m.dir == "" {
		return version
	}
	return m.dir + "/" + version
}

// name is the module's directory, or "root" for the root module, for
// messages and file names.
func (m module) name() string {
	if m.dir == "" {
		return "root"
	}
	return m.dir
}

// abs is the module's directory in the clone at dir.
func (m module) abs(dir string) string { return filepath.Join(dir, filepath.FromSlash(m.dir)) }

// openRepo reads the clone at dir: go.work names its modules, the one
// place the release takes them from, so that a module added to the
// workspace is released with the others.
func openRepo(dir string) (*repo, error) {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	workFile := filepath.Join(dir, "go.work")
	data, err := os.ReadFile(workFile)
	if err != nil {
		return nil, err
	}
	work, err := modfile.ParseWork(workFile, data, nil)
	if err != nil {
		return nil, err
	}
	r := &repo{dir: dir, workReplace: work.Replace}
	for _, u := range work.Use {
		rel := path.Clean(filepath.ToSlash(u.Path))
		if path.IsAbs(rel) || rel == ".." || strings.HasPrefix(rel, "../") {
			return nil, fmt.Errorf("go.work uses %s, outside the repository", u.Path)
		}
		if rel == "." {
			rel = ""
		}
		if slices.Contains(testOnlyModules, rel) {
			r.testOnly = append(r.testOnly, rel)
			continue
		}
		m := module{dir: rel}
		modFile := filepath.Join(m.abs(dir), "go.mod")
		data, err := os.ReadFile(modFile)
		if err != nil {
			return nil, err
		}
		if m.gomod, err = modfile.Parse(modFile, data, nil); err != nil {
			return nil, err
		}
		if m.gomod.Module == nil {
			return nil, fmt.Errorf("%s has no module line", modFile)
		}
		m.path = m.gomod.Module.Mod.Path
		want := rootPath
		if rel != "" {
			want = rootPath + "/" + rel
		}
		if m.path != want {
			return nil, fmt.Errorf("go.work uses %s, whose module is %s: the tag %s names %s only",
				u.Path, m.path, m.tag("vX.Y.Z"), want)
		}
		r.modules = append(r.modules, m)
	}
	slices.SortFunc(r.modules, func(a, b module) int { return strings.Compare(a.dir, b.dir) })
	if len(r.modules) == 0 || r.modules[0].dir != "" {
		return nil, errors.New("go.work does not use the root module, .")
	}
	return r, nil
}

// owner is the path of the module that holds the package at pkgPath: the
// longest module path of the repository that is the package's or a
// prefix of it, as the go command resolves an import when every module
// is at the same release.
func (r *repo) owner(pkgPath string) string {
	owner := ""
	for _, m := range r.modules {
		if (pkgPath == m.path || strings.HasPrefix(pkgPath, m.path+"/")) && len(m.path) > len(owner) {
			owner = m.path
		}
	}
	return owner
}

// root is the root module.
func (r *repo) root() module { return r.modules[0] }

// nested are the modules other than the root.
func (r *repo) nested() []module { return r.modules[1:] }

// version is azq.Version, from version.go.
func (r *repo) version() (string, error) {
	file := filepath.Join(r.dir, "version.go")
	f, err := parser.ParseFile(token.NewFileSet(), file, nil, parser.SkipObjectResolution)
	if err != nil {
		return "", err
	}
	for _, d := range f.Decls {
		g, ok := d.(*ast.GenDecl)
		if !ok || g.Tok != token.CONST {
			continue
		}
		for _, s := range g.Specs {
			vs := s.(*ast.ValueSpec)
			for i, n := range vs.Names {
				if n.Name != "Version" || i >= len(vs.Values) {
					continue
				}
				lit, ok := vs.Values[i].(*ast.BasicLit)
				if !ok || lit.Kind != token.STRING {
					return "", fmt.Errorf("%s: Version is not a string literal", file)
				}
				return strconv.Unquote(lit.Value)
			}
		}
	}
	return "", fmt.Errorf("%s declares no const Version", file)
}

// releaseHeading is a release's heading in CHANGELOG.md, as the root
// module's TestVersionIsTheChangelogsNewestRelease reads it.
var releaseHeading = regexp.MustCompile(`^## \[(v[^\]]*)\] - (\d{4}-\d{2}-\d{2})$`)

// newestRelease is the version and date of CHANGELOG.md's newest release
// heading, the first one below ## [Unreleased].
func (r *repo) newestRelease() (version, date string, err error) {
	file := filepath.Join(r.dir, "CHANGELOG.md")
	f, err := os.Open(file)
	if err != nil {
		return "", "", err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		l := sc.Text()
		if l == "## [Unreleased]" || !strings.HasPrefix(l, "## ") {
			continue
		}
		m := releaseHeading.FindStringSubmatch(l)
		if m == nil {
			return "", "", fmt.Errorf("%s: %q is not a release heading, ## [vX.Y.Z] - YYYY-MM-DD", file, l)
		}
		return m[1], m[2], nil
	}
	if err := sc.Err(); err != nil {
		return "", "", err
	}
	return "", "", fmt.Errorf("%s has no release heading", file)
}

// validVersion reports whether v is a release version a module can be
// tagged with: canonical semantic version, v0 or v1 (the modules' paths
// have no major version suffix).
func validVersion(v string) bool {
	return semver.IsValid(v) && semver.Canonical(v) == v && (semver.Major(v) == "v0" || semver.Major(v) == "v1")
}
