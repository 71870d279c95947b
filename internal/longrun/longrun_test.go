package longrun

import (
	"fmt"
	"testing"
)

func TestEnabledFollowsTheEnvironment(t *testing.T) {
	for _, c := range []struct {
		v    string
		want bool
	}{{"", false}, {"0", false}, {"true", false}, {"1", true}} {
		t.Setenv(Env, c.v)
		if got := Enabled(); got != c.want {
			t.Errorf("%s=%q: Enabled() = %v, want %v", Env, c.v, got, c.want)
		}
	}
}

// skipRecorder is a testing.TB whose Skip only records that it was
// called: a test of Skip that skipped a real subtest would print
// Reason, and look like a long run to internal/testrun.
type skipRecorder struct {
	testing.TB
	skipped bool
	reason  string
}

func (r *skipRecorder) Helper()          {}
func (r *skipRecorder) Skip(args ...any) { r.skipped, r.reason = true, fmt.Sprint(args...) }

func TestSkipSkipsUnlessEnabled(t *testing.T) {
	for _, c := range []struct {
		v    string
		skip bool
	}{{"", true}, {"1", false}} {
		t.Setenv(Env, c.v)
		var r skipRecorder
		Skip(&r)
		if r.skipped != c.skip {
			t.Errorf("%s=%q: Skip skipped = %v, want %v", Env, c.v, r.skipped, c.skip)
		}
		if r.skipped && r.reason != Reason {
			t.Errorf("Skip said %q, want %q, by which a runner knows a long run", r.reason, Reason)
		}
	}
}
