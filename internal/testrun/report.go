package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/azqlib/azq/internal/longrun"
)

// event is one line of go test -json (go doc test2json).
type event struct {
	Action     string
	Package    string
	Test       string
	Output     string
	ImportPath string // of build-output and build-fail, Go 1.24 on
}

// report turns go test -json's events into what go test prints without
// it, each package's line numbered as the package ends, and notes the
// tests that skipped: the long runs, and the others with their reasons.
type report struct {
	w       io.Writer
	verbose bool
	// total is how many packages go test runs, for the progress count
	// before each package's line; 0 if unknown.
	total int

	// pending holds the output of each test, and of each package (Test
	// ""), not yet printed: printed if it fails, dropped if it passes.
	pending map[testID][]string
	long    longRuns
	skipped skippedTests // skipped for another reason than a long run's

	pkgsOK, pkgsFailed              int
	testsPassed, testsFailed, skips int
	failed                          bool // a test, a package or a build failed
}

type testID struct{ pkg, test string }

// newReport returns a report writing to w; total is how many packages
// the run has, 0 if unknown.
func newReport(w io.Writer, verbose bool, total int) *report {
	return &report{w: w, verbose: verbose, total: total, pending: map[testID][]string{},
		long: longRuns{tests: map[string][]string{}}, skipped: skippedTests{}}
}

// maxLine bounds one line of go test -json's output; a test that prints
// a longer line without a newline has it split by test2json anyway.
const maxLine = 4 << 20

// read consumes go test -json's output until its end.
func (r *report) read(rd io.Reader) error {
	sc := bufio.NewScanner(rd)
	sc.Buffer(make([]byte, 64<<10), maxLine)
	for sc.Scan() {
		var e event
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			// Not an event: something printed it around go test, print it.
			fmt.Fprintln(r.w, sc.Text())
			continue
		}
		r.event(e)
	}
	return sc.Err()
}

func (r *report) event(e event) {
	id := testID{e.Package, e.Test}
	switch e.Action {
	case "build-output":
		fmt.Fprint(r.w, e.Output)
	case "build-fail":
		r.failed = true
	case "output":
		if r.verbose {
			fmt.Fprint(r.w, e.Output)
		}
		r.pending[id] = append(r.pending[id], e.Output)
	case "pass", "skip":
		if e.Test == "" {
			r.packageDone(e.Package, false)
			return
		}
		if e.Action == "pass" {
			r.testsPassed++
		} else {
			r.skips++
			if r.isLongRun(id) {
				r.long.add(e.Package, e.Test)
			} else {
				r.skipped.add(skipReason(r.pending[id]), e.Package, e.Test)
			}
		}
		delete(r.pending, id)
	case "fail":
		r.failed = true
		if e.Test == "" {
			r.packageDone(e.Package, true)
			return
		}
		r.testsFailed++
		r.printPending(id, "")
	}
}

// isLongRun reports whether the test's output ends in longrun.Skip's
// reason.
func (r *report) isLongRun(id testID) bool {
	for _, line := range r.pending[id] {
		if strings.HasSuffix(strings.TrimSpace(line), longrun.Reason) {
			return true
		}
	}
	return false
}

// packageDone prints the package's line, after how many packages have
// ended (of how many, unless go test ran more than go list counted), and
// all it printed if it failed, including the output of tests that never
// ended (a panic, a timeout).
func (r *report) packageDone(pkg string, failed bool) {
	done := r.pkgsOK + r.pkgsFailed + 1
	progress := "[" + strconv.Itoa(done) + "] "
	if r.total > 0 && done <= r.total {
		n := strconv.Itoa(r.total)
		progress = fmt.Sprintf("[%*d/%s] ", len(n), done, n)
	}
	if failed {
		r.pkgsFailed++
		for id := range r.pending {
			if id.pkg == pkg && id.test != "" {
				r.printPending(id, "")
			}
		}
		r.printPending(testID{pkg, ""}, progress)
		return
	}
	r.pkgsOK++
	for _, line := range r.pending[testID{pkg, ""}] {
		if !r.verbose && isPackageLine(line) {
			fmt.Fprint(r.w, progress+line)
		}
	}
	delete(r.pending, testID{pkg, ""})
}

// isPackageLine reports whether line is go test's line for a package
// that ended: ok, FAIL, or no test files.
func isPackageLine(line string) bool {
	return strings.HasPrefix(line, "ok ") || strings.HasPrefix(line, "?   ") || strings.HasPrefix(line, "FAIL\t")
}

// printPending prints a test's output without the lines go test -v adds
// to say a test started, paused or continued, as go test does without -v;
// progress goes before a package's line.
func (r *report) printPending(id testID, progress string) {
	if !r.verbose {
		for _, line := range r.pending[id] {
			switch {
			case strings.HasPrefix(line, "=== "):
			case progress != "" && isPackageLine(line):
				fmt.Fprint(r.w, progress+line)
			default:
				fmt.Fprint(r.w, line)
			}
		}
	}
	delete(r.pending, id)
}

func (r *report) summary() string {
	s := fmt.Sprintf("%d packages ok, %d tests passed, %d skipped", r.pkgsOK, r.testsPassed, r.skips)
	if r.failed {
		s = fmt.Sprintf("FAIL: %d packages failed, %d tests failed; %s", r.pkgsFailed, r.testsFailed, s)
	}
	return s
}

func (r *report) longRuns() longRuns { return r.long }

func (r *report) skippedTests() skippedTests { return r.skipped }

// logEntry matches the first line of what t.Log, t.Skip and friends
// print: the file and line, indented by the test's depth.
var logEntry = regexp.MustCompile(`^\s+[^\s:]+\.go:\d+: `)

// skipReason is what a skipped test said last: its t.Skip message, with
// the lines it continues on joined by spaces.
func skipReason(output []string) string {
	var reason []string
	for _, line := range output {
		switch {
		case strings.HasPrefix(line, "=== "), strings.HasPrefix(strings.TrimSpace(line), "--- SKIP: "):
		case logEntry.MatchString(line):
			reason = []string{strings.TrimSpace(line[len(logEntry.FindString(line)):])}
		case reason != nil:
			reason = append(reason, strings.TrimSpace(line))
		}
	}
	if s := strings.TrimSpace(strings.Join(reason, " ")); s != "" {
		return s
	}
	return "(no reason given)"
}

// skippedTests are the tests that skipped for another reason than a long
// run's: by reason, by package, the tests (subtests by their full name).
type skippedTests map[string]map[string][]string

func (s skippedTests) add(reason, pkg, test string) {
	if s[reason] == nil {
		s[reason] = map[string][]string{}
	}
	s[reason][pkg] = append(s[reason][pkg], test)
}

func (s skippedTests) count() int {
	n := 0
	for _, pkgs := range s {
		for _, ts := range pkgs {
			n += len(ts)
		}
	}
	return n
}

// String lists the tests under their reasons, each list in order.
func (s skippedTests) String() string {
	var b strings.Builder
	reasons := make([]string, 0, len(s))
	for r := range s {
		reasons = append(reasons, r)
	}
	slices.Sort(reasons)
	for _, r := range reasons {
		fmt.Fprintf(&b, "  %s\n", r)
		pkgs := make([]string, 0, len(s[r]))
		for p := range s[r] {
			pkgs = append(pkgs, p)
		}
		slices.Sort(pkgs)
		for _, p := range pkgs {
			tests := slices.Clone(s[r][p])
			slices.Sort(tests)
			fmt.Fprintf(&b, "    %s: %s\n", p, strings.Join(tests, " "))
		}
	}
	return b.String()
}

// longRuns are the tests that skipped as long runs: by package, the
// top-level tests (for a subtest, its top-level test, which runs it).
type longRuns struct {
	tests map[string][]string
}

func (l longRuns) add(pkg, test string) {
	top, _, _ := strings.Cut(test, "/")
	if !slices.Contains(l.tests[pkg], top) {
		l.tests[pkg] = append(l.tests[pkg], top)
	}
}

func (l longRuns) packages() []string {
	pkgs := make([]string, 0, len(l.tests))
	for p := range l.tests {
		pkgs = append(pkgs, p)
	}
	slices.Sort(pkgs)
	return pkgs
}

func (l longRuns) count() string {
	n := 0
	for _, ts := range l.tests {
		n += len(ts)
	}
	return fmt.Sprintf("%d tests in %d packages", n, len(l.tests))
}

// pattern is a go test -run pattern that selects exactly the long runs'
// top-level tests (in any of the packages; a name that is a long run in
// one package and a short test in another runs in both).
func (l longRuns) pattern() string {
	var names []string
	for _, ts := range l.tests {
		for _, t := range ts {
			if q := regexp.QuoteMeta(t); !slices.Contains(names, q) {
				names = append(names, q)
			}
		}
	}
	slices.Sort(names)
	return "^(" + strings.Join(names, "|") + ")$"
}

func (l longRuns) String() string {
	var b strings.Builder
	for _, p := range l.packages() {
		fmt.Fprintf(&b, "  %s: %s\n", p, strings.Join(l.tests[p], " "))
	}
	return b.String()
}
