package worker

import (
	"math/rand/v2"
	"time"
)

// backoff is Functions' RandomizedExponentialBackoffStrategy with
// delta = min: after the k-th failure in a row the interval is
// min + 2^(k-1)·U[0.8, 1.2)·min, until that reaches max, where it stays;
// a success resets it to min.
type backoff struct {
	min, max time.Duration
	rng      *rand.Rand
	current  time.Duration
	exp      int // the k of the next failure
}

func newBackoff(min, max time.Duration, rng *rand.Rand) *backoff {
	return &backoff{min: min, max: max, rng: rng, current: min, exp: 1}
}

// success resets the interval to the minimum.
func (b *backoff) success() time.Duration {
	b.current, b.exp = b.min, 1
	return b.current
}

// failure returns the interval to wait after one more failure in a row.
func (b *backoff) failure() time.Duration {
	if b.current == b.max {
		return b.max
	}
	jitter := 0.8 + 0.4*b.rng.Float64()
	step := float64(b.min) * jitter * float64(uint64(1)<<min(b.exp-1, 62))
	next := b.min + time.Duration(step)
	if step >= float64(b.max) || next >= b.max || next < b.min {
		b.current = b.max
		return b.max
	}
	b.current = next
	b.exp++
	return next
}
