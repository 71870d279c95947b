package azq

import (
	"sync/atomic"
	"time"
)

// wallNow returns the current Unix time in nanoseconds for queues on the
// real clock. time.Now reads both the wall and the monotonic clock; here the
// wall time is derived from a wall-clock anchor plus the monotonic time
// elapsed since, which costs one clock read instead of two on the hot path.
// The anchor is renewed every second, so a step of the system clock shows
// within a second, and time never runs backwards.
func wallNow() int64 {
	a := anchor.Load()
	elapsed := time.Since(a.t)
	if elapsed < time.Second && elapsed >= 0 {
		return a.wall + int64(elapsed)
	}
	t := time.Now()
	w := t.UnixNano()
	if prev := a.wall + int64(elapsed); w < prev {
		w = prev // the wall clock stepped back: keep time monotonic
	}
	anchor.Store(&wallAnchor{t: t, wall: w})
	return w
}

type wallAnchor struct {
	t    time.Time // carries the monotonic reading
	wall int64     // Unix nanoseconds at t
}

var anchor atomic.Pointer[wallAnchor]

func init() {
	t := time.Now()
	anchor.Store(&wallAnchor{t: t, wall: t.UnixNano()})
}
