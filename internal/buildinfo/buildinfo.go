// Package buildinfo describes a build of azq's commands for their
// -version flags: azq's release version (azq.Version) with what the Go
// toolchain recorded about the build, the VCS revision above all, which
// tells apart the builds made from the commits after a release.
package buildinfo

import (
	"runtime/debug"
	"strings"

	"github.com/azqlib/azq"
)

// Describe describes the running program's build:
//
//	v0.1.0 (git revision 9d8f06d0e1f2…, modified; go1.26.8)
//	v0.1.0 (module github.com/azqlib/azq/cmd/azqd@v0.1.0; go1.26.8)
//	v0.1.0 (no VCS revision in this build; go1.26.8)
//
// The first is a build in a clone (modified: with changes not committed),
// or one whose builder gave the revision to the linker (revision); the
// second is one by go install …@version, which records no revision; the
// third is a build without VCS information, as -buildvcs=false or a
// source tree outside version control gives.
func Describe() string {
	bi, ok := debug.ReadBuildInfo()
	return describe(azq.Version, revision, bi, ok)
}

// revision is the commit a build without VCS information was made from,
// which its builder gives to the linker:
//
//	go build -ldflags="-X github.com/azqlib/azq/internal/buildinfo.revision=$(git rev-parse HEAD)"
//
// A "-dirty" suffix (git describe --dirty's) says that the sources had
// changes not committed. The container image's build sets it from its
// AZQD_REVISION build argument: its build context has no .git, so Go
// records no revision there. "" when no builder set it.
var revision string

// dirtySuffix marks a revision given to the linker whose sources had
// changes not committed.
const dirtySuffix = "-dirty"

// describe is Describe for version, the revision given to the linker
// (stamped, or ""), and the build information bi, which ok says was
// available. The revision Go recorded comes first; the linker's stands in
// for it when Go recorded none.
func describe(version, stamped string, bi *debug.BuildInfo, ok bool) string {
	if !ok || bi == nil {
		if stamped == "" {
			return version + " (no build information in this binary)"
		}
		bi = &debug.BuildInfo{}
	}
	var vcs, rev string
	modified := false
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs":
			vcs = s.Value
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			modified = s.Value == "true"
		}
	}
	if rev == "" && stamped != "" {
		vcs = "git"
		rev, modified = strings.CutSuffix(stamped, dirtySuffix)
	}
	var about []string
	switch {
	case rev != "":
		if vcs == "" {
			vcs = "VCS"
		}
		r := vcs + " revision " + rev
		if modified {
			r += ", modified"
		}
		about = append(about, r)
	case bi.Main.Version != "" && bi.Main.Version != "(devel)":
		about = append(about, "module "+bi.Main.Path+"@"+bi.Main.Version)
	default:
		about = append(about, "no VCS revision in this build")
	}
	if bi.GoVersion != "" {
		about = append(about, bi.GoVersion)
	}
	return version + " (" + strings.Join(about, "; ") + ")"
}
