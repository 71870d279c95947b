package sim

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/benbjohnson/clock"
)

// simClock is the simulated time that the queue, and workers of the worker
// model, read. Only the simulation loop moves it, from one event to the
// next, and it never sleeps.
//
// It is not a *clock.Mock because a Mock sleeps a real millisecond on every
// Add or Set and after every timer it fires, to let other goroutines catch
// up: a run of ten million messages would sleep for hours. Here the loop
// knows when everything has caught up (see the worker model), and moves
// time by a store.
//
// Timers are events of the simulation. A *clock.Timer can only be made by
// the clock package, so each one is backed by a real runtime timer set a
// century ahead, which never fires but gives Stop its answer: the loop
// stops the real timer when the simulated one falls due, and runs the
// callback only if that Stop succeeded, that is if nobody stopped the timer
// first. Reset is not supported (neither azq nor the worker uses it), nor
// are tickers.
type simClock struct {
	now atomic.Int64 // Unix nanoseconds

	mu    sync.Mutex // guards added
	added []*simTimer
	// notify, if set, is called (without mu) when a timer is added, so
	// that a loop waiting for goroutines to settle sees the activity.
	notify func(owner int)
}

// simTimer is a timer on the simulated clock.
type simTimer struct {
	at    int64 // Unix nanoseconds
	f     func()
	ch    chan time.Time // for Timer and After, instead of f
	rt    *clock.Timer   // the real timer that answers Stop
	owner int            // who armed it: a worker instance, or -1
}

// farAhead is how far ahead the real timers backing simulated ones are set.
const farAhead = 100 * 365 * 24 * time.Hour

var realClock = clock.New()

func newSimClock(start time.Time) *simClock {
	c := &simClock{}
	c.now.Store(start.UnixNano())
	return c
}

// set moves time to t (Unix nanoseconds). Only the simulation loop calls it.
func (c *simClock) set(t int64) { c.now.Store(t) }

// takeAdded returns the timers armed since the last call.
func (c *simClock) takeAdded() []*simTimer {
	c.mu.Lock()
	a := c.added
	c.added = nil
	c.mu.Unlock()
	return a
}

func (c *simClock) add(owner int, d time.Duration, f func(), ch chan time.Time) *clock.Timer {
	rt := realClock.AfterFunc(farAhead, func() {})
	if ch != nil {
		rt.C = ch
	}
	at := c.now.Load() + int64(max(d, 0))
	c.mu.Lock()
	c.added = append(c.added, &simTimer{at: at, f: f, ch: ch, rt: rt, owner: owner})
	notify := c.notify
	c.mu.Unlock()
	if notify != nil {
		notify(owner)
	}
	return rt
}

// fire runs t if nobody stopped it. It reports whether it ran.
func (t *simTimer) fire(now time.Time) bool {
	if !t.rt.Stop() {
		return false
	}
	if t.ch != nil {
		select {
		case t.ch <- now:
		default:
		}
		return true
	}
	t.f()
	return true
}

// clockView is the simulated clock as one party sees it: the timers it
// arms are attributed to owner.
type clockView struct {
	c     *simClock
	owner int
}

var _ clock.Clock = clockView{}

func (v clockView) Now() time.Time                  { return time.Unix(0, v.c.now.Load()) }
func (v clockView) Since(t time.Time) time.Duration { return v.Now().Sub(t) }
func (v clockView) Until(t time.Time) time.Duration { return t.Sub(v.Now()) }

func (v clockView) AfterFunc(d time.Duration, f func()) *clock.Timer {
	return v.c.add(v.owner, d, f, nil)
}

func (v clockView) Timer(d time.Duration) *clock.Timer {
	return v.c.add(v.owner, d, nil, make(chan time.Time, 1))
}

func (v clockView) After(d time.Duration) <-chan time.Time { return v.Timer(d).C }

func (v clockView) Sleep(d time.Duration) { <-v.After(d) }

// Tick and Ticker are not supported: nothing the simulator runs uses them.
func (v clockView) Tick(time.Duration) <-chan time.Time {
	panic("sim: the simulated clock has no tickers")
}

func (v clockView) Ticker(time.Duration) *clock.Ticker {
	panic("sim: the simulated clock has no tickers")
}

func (v clockView) WithTimeout(parent context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	return v.WithDeadline(parent, v.Now().Add(d))
}

func (v clockView) WithDeadline(parent context.Context, d time.Time) (context.Context, context.CancelFunc) {
	if cur, ok := parent.Deadline(); ok && cur.Before(d) {
		return context.WithCancel(parent)
	}
	ctx, cancel := context.WithCancelCause(parent)
	t := v.AfterFunc(v.Until(d), func() { cancel(context.DeadlineExceeded) })
	return deadlineCtx{ctx, d}, func() {
		t.Stop()
		cancel(context.Canceled)
	}
}

// deadlineCtx is a context cancelled at a deadline on the simulated clock.
type deadlineCtx struct {
	context.Context
	deadline time.Time
}

func (c deadlineCtx) Deadline() (time.Time, bool) { return c.deadline, true }

func (c deadlineCtx) Err() error {
	if err := c.Context.Err(); err != nil && context.Cause(c.Context) == context.DeadlineExceeded {
		return context.DeadlineExceeded
	}
	return c.Context.Err()
}
