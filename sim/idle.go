package sim

import (
	"math"

	"github.com/tidwall/btree"
)

// Idle consumers are not simulated poll by poll. A consumer that polls at a
// fixed interval and found the queue empty keeps polling, and finding
// nothing, until a message becomes visible; its empty Gets can be counted
// afterwards from its phase. So such a consumer leaves the event queue and
// waits in a poll group, the set of idle consumers with one interval,
// ordered by phase (the time of their last real poll modulo the interval).
//
// When a message may have become visible at time T (a Put, a lease lapsing,
// a delayed message coming due), the simulator wakes the one idle consumer
// that would poll first after T: the phase order finds it in O(log n). It
// gets a real poll event at that time; the polls it made in between are
// counted as empty Gets. If that poll returns a full batch, more messages
// may be waiting, and the next consumer is woken the same way. Consumers
// that wait in Receive are woken in the order they began to wait, at T
// itself.
//
// That is exact: a consumer left idle polls only at times when no message
// is visible. The order convention is that an idle consumer's poll at the
// very instant a message becomes visible comes before it, as if the poll
// had reached the queue first.

// idleKey orders a poll group.
type idleKey struct {
	phase int64 // last real poll modulo the interval
	id    int32 // the listener; ties keep a fixed order
}

func idleLess(a, b idleKey) bool {
	if a.phase != b.phase {
		return a.phase < b.phase
	}
	return a.id < b.id
}

// pollGroup holds the idle consumers that poll every interval.
type pollGroup struct {
	interval int64
	tree     *btree.BTreeG[idleKey]
}

func newPollGroup(interval int64) *pollGroup {
	return &pollGroup{interval: interval,
		tree: btree.NewBTreeGOptions(idleLess, btree.Options{NoLocks: true, Degree: 32})}
}

func (g *pollGroup) key(l *listener) idleKey {
	return idleKey{phase: l.lastPoll % g.interval, id: l.idx}
}

func (g *pollGroup) add(l *listener)    { g.tree.Set(g.key(l)) }
func (g *pollGroup) remove(l *listener) { g.tree.Delete(g.key(l)) }

// first returns the idle consumer of g that polls first strictly after t,
// and when. ok is false if g is empty.
func (g *pollGroup) first(t int64) (id int32, at int64, ok bool) {
	x := t % g.interval
	var k idleKey
	found := false
	g.tree.Ascend(idleKey{phase: x, id: math.MaxInt32}, func(it idleKey) bool {
		k, found = it, true
		return false
	})
	if !found {
		if k, found = g.tree.Min(); !found {
			return 0, 0, false
		}
	}
	d := k.phase - x
	if d <= 0 {
		d += g.interval
	}
	return k.id, t + d, true
}

// pollsBetween returns how many polls a consumer that last polled at last,
// and polls every interval, makes after last and before t.
func pollsBetween(last, t, interval int64) int64 {
	if t <= last {
		return 0
	}
	return (t - last - 1) / interval
}

// receiveWait is one consumer waiting in Receive.
type receiveWait struct {
	id  int32
	gen uint32
}

// waitQueue is the FIFO of consumers waiting in Receive. Entries of
// consumers that stopped waiting (retired) are skipped when they reach the
// front.
type waitQueue struct {
	items []receiveWait
	head  int
}

func (w *waitQueue) push(x receiveWait) {
	if w.head > 0 && w.head == len(w.items) {
		w.items, w.head = w.items[:0], 0
	}
	w.items = append(w.items, x)
}

func (w *waitQueue) pop() (receiveWait, bool) {
	if w.head == len(w.items) {
		return receiveWait{}, false
	}
	x := w.items[w.head]
	w.head++
	if w.head > 1024 && w.head*2 > len(w.items) {
		n := copy(w.items, w.items[w.head:])
		w.items, w.head = w.items[:n], 0
	}
	return x, true
}

func (w *waitQueue) len() int { return len(w.items) - w.head }
