package azq

import (
	"math"
	"time"

	"github.com/tidwall/btree"
)

// DefaultVisibilityTimeout is Azure's visibility timeout for Get when the
// request names none.
const DefaultVisibilityTimeout = 30 * time.Second

// The visibility index orders messages by next-visible time, then by
// insertion, so Get takes from its front. It has four parts:
//
//   - a FIFO ring of messages put visible at once, the common case: Put
//     appends and Get pops in O(1).
//   - a second FIFO ring of messages put with a delay whose next-visible
//     time is no earlier than that of the last one appended: scheduled work
//     with a fixed delay, the next most common case, costs O(1) and 16 bytes
//     of index instead of a btree item in a node that sequential inserts
//     leave half full.
//   - a third FIFO ring of messages hidden by Get whose new next-visible
//     time orders after the last one appended: consumers that Get with
//     one visibility timeout hide messages in that order, so the lease of
//     a message costs O(1) instead of a btree insert and delete.
//   - a btree of all other messages (delayed out of order by Put, hidden
//     out of order by Get, or moved by Update), ordered by (next-visible
//     time, insertion).
//
// Each ring's entries are in index order, because each is appended with a
// (time, insertion) pair that orders after the one before (an append that
// would break that, say after a mock clock was set back, uses the tree
// instead); the front of the index is the least of the four fronts.
//
// A message leaves a ring from its front, or from its back when it is the
// last one appended. When one is deleted, updated, dequeued again or
// expires while elsewhere in a ring, its entry stays behind, dead, and is
// dropped when it reaches the front (or when dead entries outnumber live
// ones, by compaction). An entry is alive while its slot holds the same
// message (seq) with the same receipt version: any Get or Update bumps the
// version. Which ring a message sits in, if any, follows from the message:
// a receipt version above 0 means the ring of hidden messages; otherwise,
// visible at insertion means the first ring and delayed the second.

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

// ringEntry is an entry of a ring: the message's insertion sequence and
// receipt version when it was appended, which tell a live entry from a dead
// one, and its slot. It is 16 bytes, like the version-less entry was.
type ringEntry struct {
	seq     uint64
	slot    uint32
	version uint32
}

// ring is a FIFO of ring entries in index order.
type ring struct {
	entries []ringEntry // circular; len is a power of two (or zero)
	head    int         // index of the front entry
	n       int         // entries in the ring, alive or dead
	dead    int         // entries known to be dead
	tail    int64       // next-visible time of the last entry appended
	tailSeq uint64      // and its insertion sequence
}

// The sources of the visibility index, as front reports them.
const (
	ringNow    = 0 // the ring of messages put visible at once
	ringLater  = 1 // the ring of messages put with a delay
	ringHidden = 2 // the ring of messages hidden by Get
	inTree     = 3
)

// visIndex is the visibility index of one queue. It reads the queue's
// slot store, which it never changes, to tell live ring entries from dead
// ones; the queue's lock guards both.
type visIndex struct {
	tree  *btree.BTreeG[visItem]
	rings [3]ring    // ringNow, ringLater and ringHidden
	store *slotStore // the messages the entries name
}

func newVisIndex(store *slotStore) visIndex {
	t := btree.NewBTreeGOptions(visLess, btree.Options{NoLocks: true, Degree: 32})
	t.Set(visSentinel)
	return visIndex{tree: t, store: store}
}

// reset empties the index, keeping its tree's memory.
func (v *visIndex) reset() {
	v.tree.Clear()
	v.tree.Set(visSentinel)
	*v = visIndex{tree: v.tree, store: v.store}
}

// keepRingEntries is the most entries a ring of an emptied queue keeps.
const keepRingEntries = 32

// trimRings empties the rings of a queue that holds no message, all of
// whose ring entries are dead, and gives back ring arrays beyond
// keepRingEntries.
func (v *visIndex) trimRings() {
	for i := range v.rings {
		r := &v.rings[i]
		r.head, r.n, r.dead = 0, 0, 0
		if len(r.entries) > keepRingEntries {
			r.entries = nil
		}
	}
}

// compactDead compacts each ring once its dead entries outnumber the
// live ones, which bounds it to about twice its live size at an amortized
// O(1) cost per removal. Call it after a change that removed something,
// when every dead entry is dead.
func (v *visIndex) compactDead() {
	for i := range v.rings {
		if r := &v.rings[i]; r.dead > 1024 && r.dead > r.n/2 {
			v.compactRing(r)
		}
	}
}

// entries returns the number of ring entries, alive or dead.
func (v *visIndex) entries() int {
	n := 0
	for i := range v.rings {
		n += v.rings[i].n
	}
	return n
}

// ringOf returns the ring that holds n if n is in a ring at all: that of
// hidden messages once a Get has dequeued it, else that of messages put
// visible at once or that of delayed ones.
func ringOf(n *node) int {
	switch {
	case n.version != 0:
		return ringHidden
	case n.visible == n.inserted:
		return ringNow
	}
	return ringLater
}

// add indexes the message n in slot at n.visible. useRing says the caller
// is Put, which has just stored n, or Get, which has just hidden it: their
// messages may go to the ring ringOf names, if they order after its last
// entry. Update's go to the tree, whatever their order.
func (v *visIndex) add(slot uint32, n *node, useRing bool) {
	if useRing {
		if r := &v.rings[ringOf(n)]; n.visible > r.tail || n.visible == r.tail && n.seq > r.tailSeq {
			r.push(ringEntry{seq: n.seq, slot: slot, version: n.version}, n.visible)
			return
		}
	}
	v.tree.Set(visItem{at: n.visible, seq: n.seq, slot: slot})
}

func (r *ring) push(e ringEntry, at int64) {
	if r.n == len(r.entries) {
		r.grow()
	}
	r.entries[(r.head+r.n)&(len(r.entries)-1)] = e
	r.n++
	r.tail, r.tailSeq = at, e.seq
}

// grow doubles r's room. A ring starts with room for two entries: a queue
// that holds one message at a time, as many idle ones do, keeps its rings
// small (an emptied queue keeps arrays of up to keepRingEntries).
func (r *ring) grow() {
	size := max(2, 2*len(r.entries))
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

// remove takes n out of the index before n's slot is freed or n's
// visible time or version changes.
func (v *visIndex) remove(n *node) {
	// A message that was the last appended to its ring, or is at its
	// front, leaves it at once: a consumer deletes what it took last, or
	// first. Otherwise it is in the tree or further inside the ring.
	r := &v.rings[ringOf(n)]
	if r.n > 0 {
		if e := r.at(r.n - 1); e.seq == n.seq && e.version == n.version {
			r.n--
			return
		}
		if e := r.at(0); e.seq == n.seq && e.version == n.version {
			r.pop()
			return
		}
	}
	if _, ok := v.tree.Delete(visItem{at: n.visible, seq: n.seq}); ok {
		return
	}
	// Not in the tree, so inside a ring: its entry dies with this change.
	// Compaction waits for compactDead, after the change is made, so that
	// it does not keep the dying entry while counting it as dead.
	r.dead++
}

// live reports whether e still names a message that sits in a ring.
func (v *visIndex) live(e ringEntry) bool {
	n := v.store.at(e.slot)
	return n.seq == e.seq && n.version == e.version
}

// compactRing drops the dead entries of r in place, keeping the order.
func (v *visIndex) compactRing(r *ring) {
	kept := 0
	for i := 0; i < r.n; i++ {
		if e := r.at(i); v.live(e) {
			r.entries[(r.head+kept)&(len(r.entries)-1)] = e
			kept++
		}
	}
	r.n, r.dead = kept, 0
}

// ringFront drops the dead entries at the front of r and returns the node
// of the live front entry, or nil if r holds none.
func (v *visIndex) ringFront(r *ring) (ringEntry, *node) {
	for r.n > 0 {
		e := r.at(0)
		if v.live(e) {
			return e, v.store.at(e.slot)
		}
		r.pop()
		r.dead--
	}
	return ringEntry{}, nil
}

// front returns the first message in index order, visible or not: its
// slot and next-visible time, and which source holds it. ok is false when
// the queue is empty.
func (v *visIndex) front() (slot uint32, at int64, src int, ok bool) {
	front := visSentinel
	src = inTree
	if v.tree.Len() > 1 { // more than the sentinel
		front, _ = v.tree.Min()
		slot, at = front.slot, front.at
	}
	for i := range v.rings {
		if v.rings[i].n == 0 {
			continue
		}
		if e, n := v.ringFront(&v.rings[i]); n != nil && n.before(front) {
			slot, at, src = e.slot, n.visible, i
			front = visItem{at: n.visible, seq: n.seq}
		}
	}
	if src == inTree && front == visSentinel {
		return 0, 0, 0, false
	}
	return slot, at, src, true
}

// popFront removes the entry front returned from src.
func (v *visIndex) popFront(src int) {
	if src == inTree {
		v.tree.PopMin()
		return
	}
	v.rings[src].pop()
}

// scan calls f for messages in index order while their next-visible time
// is at most now and f returns true. It changes nothing, not even dead
// ring entries, so Peek can use it.
func (v *visIndex) scan(now int64, f func(slot uint32) bool) {
	var pos [len(v.rings)]int // next entry of each ring
	// ringNext returns the node of ring i's next live entry, or nil.
	ringNext := func(i int) *node {
		r := &v.rings[i]
		for ; pos[i] < r.n; pos[i]++ {
			if e := r.at(pos[i]); v.live(e) {
				return v.store.at(e.slot)
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
