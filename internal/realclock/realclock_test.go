package realclock

import (
	"testing"

	"github.com/benbjohnson/clock"
)

// wrapped is a clock that is not clock.New's, though it reads real time.
type wrapped struct{ clock.Clock }

func TestIs(t *testing.T) {
	for _, tc := range []struct {
		name string
		c    clock.Clock
		want bool
	}{
		{"clock.New", clock.New(), true},
		{"mock", clock.NewMock(), false},
		{"wrapped real", wrapped{clock.New()}, false},
		{"nil", nil, false},
	} {
		if got := Is(tc.c); got != tc.want {
			t.Errorf("%s: Is = %v, want %v", tc.name, got, tc.want)
		}
	}
}
