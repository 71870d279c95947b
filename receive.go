package azq

import (
	"context"
	"time"
)

// Receive is Get that waits: it returns as soon as at least one message is
// visible, taking up to n of them with the given visibility timeout, or
// returns ctx.Err() when ctx ends. It does not poll: waiting calls sleep
// until the queue's one timer, armed on the queue's clock for the earliest
// next-visible time, fires, or until a Put or Update makes a message
// visible. With a mock clock it returns at exactly the mock instant at
// which a message becomes visible.
func (q *Queue) Receive(ctx context.Context, n int, visibility time.Duration) ([]Message, error) {
	if err := q.limits.checkGet(n, visibility); err != nil {
		return nil, err
	}
	for {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		now := q.now()
		q.mu.Lock()
		if q.closed {
			q.mu.Unlock()
			return nil, q.closedErr()
		}
		q.purgeExpired(now)
		if msgs, lsn := q.get(nil, now, n, visibility); len(msgs) > 0 {
			if err := q.unlockSynced(lsn); err != nil {
				return nil, err
			}
			return msgs, nil
		}
		// Nothing visible: wait for the earliest next-visible time or for a
		// Put or Update, whichever comes first. Taking the wake channel
		// under the lock means no Put after this point can go unnoticed.
		wake := q.wakeChan()
		if _, next, _, ok := q.vis.front(); ok {
			q.wakeAt(next)
		}
		q.waiters++
		q.mu.Unlock()

		select {
		case <-ctx.Done():
		case <-wake:
		}
		q.unwait()
	}
}

// wakeChan returns the channel that the next Put or Update closes. The
// channel is made only when someone waits, so Put allocates nothing for it
// otherwise. q.mu must be held.
func (q *Queue) wakeChan() chan struct{} {
	if q.wake == nil {
		q.wake = make(chan struct{})
	}
	return q.wake
}

// wakeWaiters wakes every Receive waiting on the queue. q.mu must be held.
// Every waiter re-checks the queue and re-arms the timer, so waking is
// always safe; it happens when a message may have become visible sooner.
func (q *Queue) wakeWaiters() {
	if q.wake != nil {
		close(q.wake)
		q.wake = nil
	}
}

// wakeAt makes sure that waiting Receive calls are woken by the time at
// (Unix nanoseconds), when a message becomes visible. q.mu must be held.
//
// One timer serves the whole queue, however many calls wait: each of them
// arming its own would fire a herd of timers for every message that becomes
// visible, and a mock clock, which pauses after every timer it fires, would
// crawl. A timer armed for a later time is moved earlier; one armed earlier
// already serves, since the waiters it wakes look again and re-arm.
func (q *Queue) wakeAt(at int64) {
	if q.timer != nil && q.timerAt <= at {
		return
	}
	q.stopWakeTimer()
	for {
		now := q.now()
		if at <= now {
			q.wakeWaiters()
			return
		}
		q.timerGen++
		gen := q.timerGen
		// A callback rather than a Timer's channel: a mock clock that
		// another goroutine advances can fire one timer twice, and the
		// second send on a full Timer channel blocks with the mock's lock
		// held, which hangs the clock. The generation makes a late or
		// repeated firing of a replaced timer harmless.
		t := q.clock.AfterFunc(time.Duration(at-now), func() {
			q.mu.Lock()
			if q.timerGen == gen {
				q.timer = nil
				q.wakeWaiters()
			}
			q.mu.Unlock()
		})
		// A mock clock may have moved between reading now and arming the
		// timer, which would then fire late by that much: arm it again. A
		// real clock's drift here is nanoseconds.
		if q.mock != nil && q.now() != now {
			t.Stop()
			continue
		}
		q.timer, q.timerAt = t, at
		return
	}
}

// stopWakeTimer disarms the queue's timer, if armed. q.mu must be held.
func (q *Queue) stopWakeTimer() {
	if q.timer != nil {
		q.timer.Stop()
		q.timer = nil
		q.timerGen++
	}
}

// visibleSoon wakes waiting Receive calls for a message that Put or Update
// made visible at at (Unix nanoseconds), or arms the timer for it. q.mu
// must be held.
func (q *Queue) visibleSoon(at, now int64) {
	switch {
	case q.waiters == 0:
		// Nobody waits; the next Receive arms the timer itself.
	case at <= now:
		q.wakeWaiters()
	default:
		q.wakeAt(at)
	}
}

// unwait ends a Receive's wait. The last waiter to leave disarms the
// timer: a timer armed for a message days away would otherwise keep the
// queue reachable, and fire, long after anyone cared.
func (q *Queue) unwait() {
	q.mu.Lock()
	q.waiters--
	if q.waiters == 0 {
		q.stopWakeTimer()
	}
	q.mu.Unlock()
}
