package azq

import (
	"context"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/tidwall/btree"
)

// DefaultVisibilityTimeout is Azure's visibility timeout for Get when the
// request names none.
const DefaultVisibilityTimeout = 30 * time.Second

// visItem orders a message in the visibility index: by next-visible time,
// then by insertion. Get takes messages from the front while their time has
// come, so it costs O(log n) per message at any depth.
type visItem struct {
	at   int64  // next-visible time, Unix nanoseconds
	seq  uint64 // insertion sequence: ties keep insertion order
	slot uint32 // where the message lives; not part of the order
}

func visLess(a, b visItem) bool {
	if a.at != b.at {
		return a.at < b.at
	}
	return a.seq < b.seq
}

func newVisIndex() *btree.BTreeG[visItem] {
	return btree.NewBTreeGOptions(visLess, btree.Options{NoLocks: true, Degree: 64})
}

// checkVisibility validates a visibility timeout against [min, max].
func checkVisibility(v, min, max time.Duration) error {
	if v < min || v > max {
		return outOfRange("visibilitytimeout", v, min, max)
	}
	return nil
}

// Receive is Get that waits: it returns as soon as at least one message is
// visible, taking up to n of them with the given visibility timeout, or
// returns ctx.Err() when ctx ends. It does not poll: it sleeps on a timer of
// the queue's clock armed for the earliest next-visible time, and Put and
// Update wake it early. With a mock clock it returns at exactly the mock
// instant at which a message becomes visible.
func (q *Queue) Receive(ctx context.Context, n int, visibility time.Duration) ([]Message, error) {
	if err := q.checkGet(n, visibility); err != nil {
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
		if msgs := q.get(now, n, visibility); len(msgs) > 0 {
			q.mu.Unlock()
			return msgs, nil
		}
		// Nothing visible: wait for the earliest next-visible time or for a
		// Put or Update, whichever comes first. Taking the wake channel
		// under the lock means no Put after this point can go unnoticed.
		next, hasNext := q.vis.Min()
		wake := q.wakeChan()
		q.waiters++
		q.mu.Unlock()

		var timerC <-chan time.Time
		var timer *clock.Timer
		if hasNext {
			timer = q.clock.Timer(time.Duration(next.at - now))
			timerC = timer.C
			// A mock clock may have moved between reading now and arming
			// the timer, which would then fire late by that much. Start
			// over in that case; a real clock's drift here is nanoseconds.
			if q.mock != nil && q.mock.Now().UnixNano() != now {
				timer.Stop()
				q.unwait()
				continue
			}
		}
		select {
		case <-ctx.Done():
		case <-wake:
		case <-timerC:
		}
		if timer != nil {
			timer.Stop()
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
// Every waiter re-checks the queue and re-arms its timer, so waking is
// always safe; it happens when a message may have become visible sooner.
func (q *Queue) wakeWaiters() {
	if q.wake != nil {
		close(q.wake)
		q.wake = nil
	}
}

func (q *Queue) unwait() {
	q.mu.Lock()
	q.waiters--
	q.mu.Unlock()
}
