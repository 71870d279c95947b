// Package longrun selects the test suite's long runs: crash loops, soak
// tests, long property runs and sweeps, which take minutes where the rest
// of a package's tests take seconds. They run only when the environment
// variable AZQ_LONG is set to 1, as .ci/run sets it; without it, each is
// skipped with a message that names the switch, so that `go test -v` shows
// what the default run left out.
package longrun

import (
	"os"
	"testing"
)

// Env is the environment variable that selects the long runs.
const Env = "AZQ_LONG"

// Reason is what Skip says when it skips a long run: the last words of
// the test's output, by which a runner tells a long run from a test
// skipped for another reason.
const Reason = "a long run: " + Env + "=1 selects it"

// Enabled reports whether the long runs are selected.
func Enabled() bool { return os.Getenv(Env) == "1" }

// Skip skips t unless the long runs are selected, saying why.
func Skip(t testing.TB) {
	t.Helper()
	if !Enabled() {
		t.Skip(Reason)
	}
}
