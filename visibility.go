package azq

import (
	"context"
	"math"
	"time"

	"github.com/tidwall/btree"
)

// DefaultVisibilityTimeout is Azure's visibility timeout for Get when the
// request names none.
const DefaultVisibilityTimeout = 30 * time.Second

// The visibility index orders messages by next-visible time, then by
// insertion, so Get takes from its front. It has three parts:
//
//   - a FIFO ring of messages put visible at once, the common case: Put
//     appends and Get pops in O(1).
//   - a second FIFO ring of messages put with a delay whose next-visible
//     time is no earlier than that of the last one appended: scheduled work
//     with a fixed delay, the next most common case, costs O(1) and 16 bytes
//     of index instead of a btree item in a node that sequential inserts
//     leave half full.
//   - a btree of all other messages (delayed out of order by Put, hidden by
//     Get, or moved by Update), ordered by (next-visible time, insertion).
//
// Each ring's entries are in index order, because each is appended with a
// time no earlier than the one before (a Put that would break that, say
// after a mock clock was set back, uses the tree instead); the front of
// the index is the least of the three fronts.
//
// A message leaves a ring only from its front. When one is deleted,
// updated or expires while in a ring, its entry stays behind, dead, and
// is dropped when it reaches the front (or when dead entries outnumber live
// ones, by compaction). An entry is alive while its slot holds the same
// message (seq) with receipt version 0: any Get or Update bumps the version.
// Which ring a version-0 message sits in follows from its times: visible
// at insertion means the first.

// visItem is a btree entry.
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

// before reports whether the message n orders before the btree item t.
func (n *node) before(t visItem) bool {
	return n.visible < t.at || (n.visible == t.at && n.seq < t.seq)
}

// visSentinel stays in the btree for good, after every real entry (no
// message is ever visible at math.MaxInt64), so the tree never empties and
// never frees and reallocates its root on the hot path.
var visSentinel = visItem{at: math.MaxInt64, seq: math.MaxUint64}

// ringEntry is an entry of a ring.
type ringEntry struct {
	seq  uint64
	slot uint32
}

// ring is a FIFO of ring entries in index order.
type ring struct {
	entries []ringEntry // circular; len is a power of two (or zero)
	head    int         // index of the front entry
	n       int         // entries in the ring, alive or dead
	dead    int         // entries known to be dead
	tail    int64       // next-visible time of the last entry appended
}

// The sources of the visibility index, as visFront reports them.
const (
	ringNow   = 0 // the ring of messages put visible at once
	ringLater = 1 // the ring of messages put with a delay
	inTree    = 2
)

type visIndex struct {
	tree  *btree.BTreeG[visItem]
	rings [2]ring // ringNow and ringLater
}

func newVisIndex() visIndex {
	t := btree.NewBTreeGOptions(visLess, btree.Options{NoLocks: true, Degree: 32})
	t.Set(visSentinel)
	return visIndex{tree: t}
}

func (v *visIndex) reset() {
	v.tree.Clear()
	v.tree.Set(visSentinel)
	*v = visIndex{tree: v.tree}
}

// entries returns the number of ring entries, alive or dead.
func (v *visIndex) entries() int { return v.rings[ringNow].n + v.rings[ringLater].n }

// ringOf returns the ring that holds n if n, never dequeued or updated, is
// in a ring at all.
func ringOf(n *node) int {
	if n.visible == n.inserted {
		return ringNow
	}
	return ringLater
}

// visAdd indexes the message n in slot at n.visible. fromPut says Put has
// just stored n, which lets it use a ring.
func (q *Queue) visAdd(slot uint32, n *node, fromPut bool) {
	if fromPut {
		if r := &q.vis.rings[ringOf(n)]; n.visible >= r.tail {
			r.push(ringEntry{seq: n.seq, slot: slot}, n.visible)
			return
		}
	}
	q.vis.tree.Set(visItem{at: n.visible, seq: n.seq, slot: slot})
}

func (r *ring) push(e ringEntry, at int64) {
	if r.n == len(r.entries) {
		r.grow()
	}
	r.entries[(r.head+r.n)&(len(r.entries)-1)] = e
	r.n++
	r.tail = at
}

func (r *ring) grow() {
	size := max(8, 2*len(r.entries))
	e := make([]ringEntry, size)
	for i := 0; i < r.n; i++ {
		e[i] = r.at(i)
	}
	r.entries, r.head = e, 0
}

// at returns the i-th entry from the front.
func (r *ring) at(i int) ringEntry {
	return r.entries[(r.head+i)&(len(r.entries)-1)]
}

func (r *ring) pop() {
	r.head = (r.head + 1) & (len(r.entries) - 1)
	r.n--
}

// visRemove takes n out of the index before n's slot is freed or n's
// visible time or version changes.
func (q *Queue) visRemove(n *node) {
	v := &q.vis
	if _, ok := v.tree.Delete(visItem{at: n.visible, seq: n.seq}); ok || n.version != 0 {
		return
	}
	// Not in the tree, so in a ring: its entry dies with this change.
	// Compaction waits for compactLazy, after the change is made, so that
	// it does not keep the dying entry while counting it as dead.
	v.rings[ringOf(n)].dead++
}

// ringLive reports whether e still names a message that sits in a ring.
func (q *Queue) ringLive(e ringEntry) bool {
	n := q.store.at(e.slot)
	return n.seq == e.seq && n.version == 0
}

// compactRing drops the dead entries of r in place, keeping the order.
func (q *Queue) compactRing(r *ring) {
	kept := 0
	for i := 0; i < r.n; i++ {
		if e := r.at(i); q.ringLive(e) {
			r.entries[(r.head+kept)&(len(r.entries)-1)] = e
			kept++
		}
	}
	r.n, r.dead = kept, 0
}

// ringFront drops the dead entries at the front of r and returns the node
// of the live front entry, or nil if r holds none.
func (q *Queue) ringFront(r *ring) (ringEntry, *node) {
	for r.n > 0 {
		e := r.at(0)
		if q.ringLive(e) {
			return e, q.store.at(e.slot)
		}
		r.pop()
		r.dead--
	}
	return ringEntry{}, nil
}

// visFront returns the first message in index order, visible or not: its
// slot and next-visible time, and which source holds it. ok is false when
// the queue is empty.
func (q *Queue) visFront() (slot uint32, at int64, src int, ok bool) {
	t, _ := q.vis.tree.Min() // never empty: the sentinel is there
	slot, at, src = t.slot, t.at, inTree
	front := t
	for i := range q.vis.rings {
		if e, n := q.ringFront(&q.vis.rings[i]); n != nil && n.before(front) {
			slot, at, src = e.slot, n.visible, i
			front = visItem{at: n.visible, seq: n.seq}
		}
	}
	if src == inTree && t == visSentinel {
		return 0, 0, 0, false
	}
	return slot, at, src, true
}

// visPopFront removes the entry visFront returned from src.
func (q *Queue) visPopFront(src int) {
	if src == inTree {
		q.vis.tree.PopMin()
		return
	}
	q.vis.rings[src].pop()
}

// visScan calls f for messages in index order while their next-visible time
// is at most now and f returns true. It changes nothing, not even dead
// ring entries, so Peek can use it.
func (q *Queue) visScan(now int64, f func(slot uint32) bool) {
	v := &q.vis
	var pos [2]int // next entry of each ring
	// ringNext returns the node of ring i's next live entry, or nil.
	ringNext := func(i int) *node {
		r := &v.rings[i]
		for ; pos[i] < r.n; pos[i]++ {
			if e := r.at(pos[i]); q.ringLive(e) {
				return q.store.at(e.slot)
			}
		}
		return nil
	}
	it := v.tree.Iter()
	defer it.Release()
	it.First() // the sentinel is always there
	for {
		t := it.Item()
		slot, at, src := t.slot, t.at, inTree
		front := t
		for i := range v.rings {
			if n := ringNext(i); n != nil && n.before(front) {
				slot, at, src = v.rings[i].at(pos[i]).slot, n.visible, i
				front = visItem{at: n.visible, seq: n.seq}
			}
		}
		if at > now || !f(slot) { // at > now includes the sentinel
			return
		}
		if src == inTree {
			it.Next()
		} else {
			pos[src]++
		}
	}
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
// returns ctx.Err() when ctx ends. It does not poll: waiting calls sleep
// until the queue's one timer, armed on the queue's clock for the earliest
// next-visible time, fires, or until a Put or Update makes a message
// visible. With a mock clock it returns at exactly the mock instant at
// which a message becomes visible.
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
		wake := q.wakeChan()
		if _, next, _, ok := q.visFront(); ok {
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
