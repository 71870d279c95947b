package azq_test

import (
	"bufio"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/azqlib/azq"
)

// releaseHeading is a release's heading in CHANGELOG.md:
// "## [v0.1.0] - 2026-11-27".
var releaseHeading = regexp.MustCompile(`^## \[(v[^\]]*)\] - (\d{4}-\d{2}-\d{2})$`)

// semver is a release version as Go modules tag them, without build
// metadata, which module versions cannot carry.
var semver = regexp.MustCompile(`^v(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)(-[0-9A-Za-z-]+(\.[0-9A-Za-z-]+)*)?$`)

// TestVersionIsTheChangelogsNewestRelease keeps azq.Version equal to the
// newest release heading of CHANGELOG.md, so that the version the
// commands print and the release script tags is the one the changelog
// describes; and checks that an Unreleased section sits above it, where
// the next changes go.
func TestVersionIsTheChangelogsNewestRelease(t *testing.T) {
	if !semver.MatchString(azq.Version) {
		t.Errorf("azq.Version %q is not a semantic version vMAJOR.MINOR.PATCH", azq.Version)
	}
	f, err := os.Open("CHANGELOG.md")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	unreleased, newest := false, ""
	for line := 1; sc.Scan(); line++ {
		l := sc.Text()
		if l == "## [Unreleased]" {
			unreleased = true
			continue
		}
		if !strings.HasPrefix(l, "## ") {
			continue
		}
		m := releaseHeading.FindStringSubmatch(l)
		if m == nil {
			t.Fatalf("CHANGELOG.md:%d: %q is neither ## [Unreleased] nor ## [vX.Y.Z] - YYYY-MM-DD", line, l)
		}
		newest = m[1]
		break
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if !unreleased {
		t.Error("CHANGELOG.md has no ## [Unreleased] section above its newest release")
	}
	if newest != azq.Version {
		t.Errorf("CHANGELOG.md's newest release is %q, azq.Version is %q: cutting a release changes both (docs/releasing.md)", newest, azq.Version)
	}
}
