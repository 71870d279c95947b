package main

import (
	"errors"
	"flag"
	"fmt"
	"go/parser"
	"go/token"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
)

// errRefused is a release that a check refused; the checks have said why.
var errRefused = errors.New("no tags made: the checks above failed")

// check is one condition the tags need, and what was found against it.
type check struct {
	what     string
	problems []string
}

// cmdTag is "release tag": it checks the clone, and tags each module at
// azq.Version unless a check fails or -dry-run is given.
func cmdTag(args []string, stdout, stderr io.Writer) error {
	fset := flag.NewFlagSet("tag", flag.ContinueOnError)
	fset.SetOutput(stderr)
	repoDir := fset.String("repo", ".", "the clone to release")
	dryRun := fset.Bool("dry-run", false, "check and print the tags, and make none")
	remote := fset.String("remote", "", "also check that `remote` (such as origin) has none of the tags")
	if err := fset.Parse(args); err != nil {
		return err
	}
	if fset.NArg() > 0 {
		return fmt.Errorf("tag takes flags only, not %q", fset.Args())
	}
	r, err := openRepo(*repoDir)
	if err != nil {
		return err
	}
	version, err := r.version()
	if err != nil {
		return err
	}
	head, err := git(r.dir, "rev-parse", "HEAD")
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "release %s of %s, from commit %s:\n", version, rootPath, head)
	checks, err := releaseChecks(r, version, *remote)
	if err != nil {
		return err
	}
	failed := false
	for _, c := range checks {
		if len(c.problems) == 0 {
			fmt.Fprintf(stdout, "  ok    %s\n", c.what)
			continue
		}
		failed = true
		fmt.Fprintf(stdout, "  FAIL  %s\n", c.what)
		for _, p := range c.problems {
			fmt.Fprintf(stdout, "        %s\n", strings.ReplaceAll(p, "\n", "\n        "))
		}
	}
	if failed {
		return errRefused
	}
	var tags []string
	for _, m := range r.modules {
		tags = append(tags, m.tag(version))
	}
	if *dryRun {
		fmt.Fprintln(stdout, "the tags (a dry run: none made):")
	} else {
		for _, m := range r.modules {
			if _, err := git(r.dir, "tag", "-a", m.tag(version), "-m", m.path+" "+version, head); err != nil {
				return err
			}
		}
		fmt.Fprintln(stdout, "made the tags:")
	}
	for _, m := range r.modules {
		fmt.Fprintf(stdout, "  %-22s %s %s\n", m.tag(version), m.path, version)
	}
	if !*dryRun {
		fmt.Fprintf(stdout, "publish them with: git push origin %s\n", strings.Join(tags, " "))
	}
	return nil
}

// releaseChecks are the conditions the tags of version need, checked in
// the clone r: cheap ones first; the API baselines, which take compiling
// every module, once the others hold.
func releaseChecks(r *repo, version, remote string) ([]check, error) {
	var checks []check

	clean := check{what: "the working tree has no changes, committed or not"}
	status, err := git(r.dir, "status", "--porcelain")
	if err != nil {
		return nil, err
	}
	if status != "" {
		lines := strings.Split(status, "\n")
		if len(lines) > 10 {
			lines = append(lines[:10], "…")
		}
		clean.problems = append(clean.problems, "git status:\n"+strings.Join(lines, "\n"))
	}
	checks = append(checks, clean)

	ver := check{what: fmt.Sprintf("azq.Version %s is CHANGELOG.md's newest release", version)}
	if !validVersion(version) {
		ver.problems = append(ver.problems, fmt.Sprintf("azq.Version %q is not a version vMAJOR.MINOR.PATCH (v0 or v1) a module can be tagged with", version))
	}
	switch newest, _, err := r.newestRelease(); {
	case err != nil:
		ver.problems = append(ver.problems, err.Error())
	case newest != version:
		ver.problems = append(ver.problems, fmt.Sprintf("CHANGELOG.md's newest release is %s; azq.Version (version.go) is %s", newest, version))
	}
	checks = append(checks, ver)

	req := check{what: fmt.Sprintf("every nested module that requires the repository's modules requires them at %s", version)}
	ours := map[string]bool{}
	for _, m := range r.modules {
		ours[m.path] = true
	}
	for _, m := range r.nested() {
		// A module that needs none of the others (the image builder,
		// cmd/azqd/image, builds azqd from the clone's files) is
		// tagged with them and has nothing to check.
		for _, rq := range m.gomod.Require {
			if ours[rq.Mod.Path] && rq.Mod.Version != version {
				req.problems = append(req.problems, fmt.Sprintf("%s/go.mod requires %s %s", m.dir, rq.Mod.Path, rq.Mod.Version))
			}
		}
	}
	checks = append(checks, req)

	rep := check{what: "replace and exclude directives: only of the repository's modules, by directory, and none in a module with commands"}
	for _, m := range r.modules {
		cmds, err := hasCommands(m.abs(r.dir))
		if err != nil {
			return nil, err
		}
		for _, rp := range m.gomod.Replace {
			switch {
			case cmds:
				rep.problems = append(rep.problems, fmt.Sprintf("%s/go.mod replaces %s, and go install …@%s refuses a module with replace directives, "+
					"which this one needs for its commands; the clone's go.work gives the module instead", m.name(), rp.Old.Path, version))
			case !ours[rp.Old.Path] || rp.New.Version != "":
				rep.problems = append(rep.problems, fmt.Sprintf("%s/go.mod replaces %s with %s: users' builds ignore it and would differ from the clone's",
					m.name(), rp.Old.Path, strings.TrimSpace(rp.New.Path+" "+rp.New.Version)))
			}
		}
		for _, ex := range m.gomod.Exclude {
			rep.problems = append(rep.problems, fmt.Sprintf("%s/go.mod excludes %s %s: users' builds ignore it", m.name(), ex.Mod.Path, ex.Mod.Version))
		}
	}
	// go.work replaces a release of a nested module that another requires
	// (azqd, the PostgreSQL back end's) with its directory, for as long as
	// the release is not published: it must name this release, or the
	// clone's builds would look for it on the module proxy.
	for _, rp := range r.workReplace {
		var dir string
		for _, m := range r.modules {
			if m.path == rp.Old.Path {
				dir = m.dir
			}
		}
		switch {
		case dir == "" || rp.New.Version != "" || path.Clean(filepath.ToSlash(rp.New.Path)) != dir:
			rep.problems = append(rep.problems, fmt.Sprintf("go.work replaces %s with %s: want one of the repository's nested modules by its directory",
				rp.Old.Path, strings.TrimSpace(rp.New.Path+" "+rp.New.Version)))
		case rp.Old.Version != version:
			rep.problems = append(rep.problems, fmt.Sprintf("go.work replaces %s %s, not this release's %s", rp.Old.Path, rp.Old.Version, version))
		}
	}
	checks = append(checks, rep)

	tags := check{what: "none of the tags exists yet"}
	if remote != "" {
		tags.what = "none of the tags exists yet, here or on " + remote
	}
	var onRemote map[string]bool
	if remote != "" {
		if onRemote, err = remoteTags(r.dir, remote); err != nil {
			return nil, err
		}
	}
	for _, m := range r.modules {
		t := m.tag(version)
		exists, err := tagExists(r.dir, t)
		if err != nil {
			return nil, err
		}
		if exists {
			tags.problems = append(tags.problems, "the tag "+t+" exists")
		}
		if onRemote[t] {
			tags.problems = append(tags.problems, "the tag "+t+" exists on "+remote)
		}
	}
	checks = append(checks, tags)

	api := check{what: "the API baselines (" + baselineDir + ") are this release's API"}
	for _, c := range checks {
		if len(c.problems) > 0 {
			api.problems = []string{"not checked until the checks above pass"}
		}
	}
	if api.problems == nil {
		if api.problems, err = baselinesAreCurrent(r); err != nil {
			return nil, err
		}
	}
	checks = append(checks, api)
	return checks, nil
}

// hasCommands reports whether the module in dir has a main package, which
// go install can build from a module proxy.
func hasCommands(dir string) (bool, error) {
	found := false
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || found {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if p != dir && (name == "testdata" || name == "vendor" || strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_")) {
				return filepath.SkipDir
			}
			if p != dir {
				if _, err := os.Stat(filepath.Join(p, "go.mod")); err == nil {
					return filepath.SkipDir // a module of its own
				}
			}
			return nil
		}
		if !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(token.NewFileSet(), p, nil, parser.PackageClauseOnly)
		if err != nil {
			return err
		}
		found = f.Name.Name == "main"
		return nil
	})
	return found, err
}
