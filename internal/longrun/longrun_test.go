package longrun

import "testing"

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

func TestSkipSkipsUnlessEnabled(t *testing.T) {
	t.Setenv(Env, "")
	skipped := true
	t.Run("off", func(t *testing.T) {
		Skip(t)
		skipped = false
	})
	if !skipped {
		t.Errorf("Skip ran a long test with %s unset", Env)
	}
	t.Setenv(Env, "1")
	ran := false
	t.Run("on", func(t *testing.T) {
		Skip(t)
		ran = true
	})
	if !ran {
		t.Errorf("Skip skipped a long test with %s=1", Env)
	}
}
