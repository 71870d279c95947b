package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/azqlib/azq/internal/longrun"
)

// defaultPackages are the README's: the root module's packages and those
// of the modules of their own that go.work adds and ./... leaves out
// (azqd's, azqload's, the simulator's and its command's, metrics',
// azure's and azqtest's, the REST server's, the examples', and the test-only modules of
// server's and the worker's tests through the Azure SDK).
var defaultPackages = []string{
	"./cmd/azqd/...", "./cmd/azqload/...", "./cmd/azqsim/...", "./sim/...",
	"./metrics/...", "./azure/...", "./azqtest/...", "./examples/...",
	"./server/...", "./server/sdktest/...", "./worker/sdktest/...", "./...",
}

func main() {
	long := flag.Bool("long", false, "after the tests, run the long runs they skipped, with "+longrun.Env+"=1")
	race := flag.Bool("race", true, "run with the race detector (needs a C compiler: without one, testrun runs without it and says so)")
	verbose := flag.Bool("v", false, "print every test's output, not only failed tests'")
	// Twice go test's default: many of the tests wait on processes,
	// sockets and the disk more than they compute, so that with one
	// package a core the cores idle for a third of the run.
	parallel := flag.Int("p", 2*runtime.GOMAXPROCS(0), "how many packages' tests to build and run at once (go test -p)")
	count := flag.Int("count", 0, "run each test `N` times, and not from go test's cache (go test -count; 0: go test's default, cached results reused)")
	flag.Usage = func() {
		fmt.Fprintf(flag.CommandLine.Output(), "usage: go run ./internal/testrun [-long] [-race=false] [-count N] [-p N] [-v] [packages]\n")
		flag.PrintDefaults()
	}
	flag.Parse()
	pkgs := flag.Args()
	if len(pkgs) == 0 {
		pkgs = defaultPackages
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	os.Exit(run(ctx, os.Stdout, options{long: *long, race: *race, verbose: *verbose, parallel: *parallel, count: *count, pkgs: pkgs}))
}

type options struct {
	long, race, verbose bool
	parallel            int // go test -p; 0 for go test's default
	count               int // go test -count; 0 for go test's default
	pkgs                []string
	dir                 string   // where go test runs; "" for testrun's own
	env                 []string // added to go test's environment
}

// run runs the tests and, with o.long, the long runs; it returns the
// process's exit status.
func run(ctx context.Context, w io.Writer, o options) int {
	if os.Getenv(longrun.Env) == "1" && !slices.Contains(o.env, longrun.Env+"=") {
		// Everything runs in one pass; there is nothing to leave out.
		fmt.Fprintf(w, "%s=1: the long runs run with the rest\n", longrun.Env)
		o.long = false
	}
	var flags []string
	if o.parallel > 0 {
		flags = append(flags, "-p", strconv.Itoa(o.parallel))
	}
	if o.count > 0 {
		flags = append(flags, "-count", strconv.Itoa(o.count))
	}
	if o.race {
		if ok, why := raceAvailable(ctx); ok {
			flags = append(flags, "-race")
		} else {
			fmt.Fprintf(w, "testrun: without the race detector: %s\n", why)
		}
	}
	start := time.Now()
	// go list first, for the number of packages; a first run's module
	// downloads are printed under the line that says what is going on.
	fmt.Fprintf(w, "testrun: go test %s (a first run downloads and compiles modules for minutes before the first package ends)\n",
		strings.Join(append(flags, o.pkgs...), " "))
	total := countPackages(ctx, o.dir, o.env, o.pkgs)
	if total > 0 {
		fmt.Fprintf(w, "testrun: %d packages, each one's line printed as it ends\n", total)
	}
	r := newReport(w, o.verbose, total)
	status := goTest(ctx, o.dir, r, o.env, append(flags, o.pkgs...))
	fmt.Fprintf(w, "%s in %s\n", r.summary(), time.Since(start).Round(time.Second))
	printSkipped(w, r.skippedTests())
	long := r.longRuns()
	if len(long.tests) == 0 {
		return status
	}
	if !o.long {
		fmt.Fprintf(w, "\nleft to the long run (go run ./internal/testrun -long, or %s=1 go test): %s\n%s",
			longrun.Env, long.count(), long)
		return status
	}
	fmt.Fprintf(w, "\nthe long runs, with %s=1: %s\n%s", longrun.Env, long.count(), long)
	start = time.Now()
	lr := newReport(w, o.verbose, len(long.packages()))
	args := append(flags, "-timeout", "60m", "-run", long.pattern())
	args = append(args, long.packages()...)
	if s := goTest(ctx, o.dir, lr, append(o.env, longrun.Env+"=1"), args); s != 0 {
		status = s
	}
	fmt.Fprintf(w, "long runs: %s in %s\n", lr.summary(), time.Since(start).Round(time.Second))
	printSkipped(w, lr.skippedTests())
	return status
}

// printSkipped names the tests that skipped for another reason than a
// long run's, under their reasons.
func printSkipped(w io.Writer, s skippedTests) {
	if n := s.count(); n > 0 {
		fmt.Fprintf(w, "\nskipped, each saying why (-v shows their output): %d tests\n%s", n, s)
	}
}

// countPackages returns how many packages the patterns match, as go
// test will run them, or 0 if go list fails (go test then says why).
func countPackages(ctx context.Context, dir string, env, pkgs []string) int {
	cmd := exec.CommandContext(ctx, "go", append([]string{"list", "-e", "-f", "{{.ImportPath}}"}, pkgs...)...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	cmd.Stderr = os.Stderr // the downloads of a first run
	out, err := cmd.Output()
	if err != nil {
		return 0
	}
	return len(strings.Fields(string(out)))
}

// goTest runs go test -json in dir with args and env added to
// testrun's environment, feeding its events to r; it returns 1 if go
// test failed.
func goTest(ctx context.Context, dir string, r *report, env, args []string) int {
	cmd := exec.CommandContext(ctx, "go", append([]string{"test", "-json"}, args...)...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	cmd.Stderr = os.Stderr // build errors of a Go before 1.24, go's own complaints
	out, err := cmd.StdoutPipe()
	if err != nil {
		fmt.Fprintln(os.Stderr, "testrun:", err)
		return 1
	}
	if err := cmd.Start(); err != nil {
		fmt.Fprintln(os.Stderr, "testrun:", err)
		return 1
	}
	readErr := r.read(out)
	if err := cmd.Wait(); err != nil || readErr != nil || r.failed {
		if readErr != nil {
			fmt.Fprintln(os.Stderr, "testrun: reading go test's output:", readErr)
		}
		return 1
	}
	return 0
}

// raceAvailable reports whether go test -race can build here: the race
// detector's runtime is linked through cgo, which Go turns off by
// default when it finds no C compiler.
func raceAvailable(ctx context.Context) (bool, string) {
	out, err := exec.CommandContext(ctx, "go", "env", "CGO_ENABLED", "CC").Output()
	if err != nil {
		return false, fmt.Sprintf("go env: %v", err)
	}
	f := strings.Fields(string(out))
	if len(f) < 1 || f[0] != "1" {
		return false, "cgo is off (CGO_ENABLED=0): -race needs a C compiler, such as gcc (apt-get install gcc)"
	}
	if len(f) > 1 {
		if _, err := exec.LookPath(f[1]); err != nil {
			return false, fmt.Sprintf("no C compiler %q in PATH: -race needs one, such as gcc (apt-get install gcc)", f[1])
		}
	}
	return true, ""
}
