package azq

import (
	"math"
	"time"
)

// NeverExpires, as PutOptions.TimeToLive, makes a message that never
// expires (messagettl=-1 on the wire). Azure reports its expiration time as
// 9999-12-31T23:59:59Z.
const NeverExpires time.Duration = -1

// neverExpires is the internal expiration time of a message that never
// expires; it sorts after every real time.
const neverExpires int64 = math.MaxInt64

// farFuture is the expiration time Azure reports for a message that never
// expires.
var farFuture = time.Date(9999, time.December, 31, 23, 59, 59, 0, time.UTC)

// expirationTime is the expiration time a message reports. A time-to-live
// that reaches past what Unix nanoseconds hold saturates at
// neverExpires-1 (see addNanos); Azure reports such an expiry, like that
// of a message that never expires, as 9999-12-31T23:59:59Z, the latest
// time it writes.
func expirationTime(ns int64) time.Time {
	if ns >= neverExpires-1 {
		return farFuture
	}
	return fromNanos(ns)
}

// lastInstant is the latest time azq represents, a few nanoseconds before
// Unix nanoseconds overflow on 2262-04-11. It leaves room for addNanos'
// saturated neverExpires-1 to stay later than now, so a message hidden at
// the last instant is not visible again at once.
const lastInstant = neverExpires - 2

// clockNanos converts a clock reading to Unix nanoseconds, saturating at
// lastInstant. time.Time.UnixNano wraps past 2262, which would put a mock
// clock set beyond it back in 1678.
func clockNanos(t time.Time) int64 {
	if sec := t.Unix(); sec > lastInstant/1e9 ||
		sec == lastInstant/1e9 && int64(t.Nanosecond()) > lastInstant%1e9 {
		return lastInstant
	}
	return t.UnixNano()
}

// addNanos returns now+d, saturating below neverExpires so that a finite
// time-to-live never turns into "never".
func addNanos(now int64, d time.Duration) int64 {
	if int64(d) > neverExpires-1-now {
		return neverExpires - 1
	}
	return now + int64(d)
}

// expiryEntry records when the message in slot expires. Entries are not
// removed when a message is deleted: the stamp (the low bits of the
// message's sequence number) and the time tell a live entry from a stale
// one, and stale entries are dropped when they reach the top of the heap or
// when the heap is compacted. That keeps Delete away from the expiry index.
type expiryEntry struct {
	at    int64
	slot  uint32
	stamp uint32
}

// expiryHeap is a binary min-heap of expiry entries, ordered by time.
type expiryHeap struct {
	items []expiryEntry
	stale int // entries known to refer to deleted messages
}

func (h *expiryHeap) push(e expiryEntry) {
	h.items = append(h.items, e)
	h.up(len(h.items) - 1)
}

// popMin removes the earliest entry.
func (h *expiryHeap) popMin() {
	last := len(h.items) - 1
	h.items[0] = h.items[last]
	h.items = h.items[:last]
	if last > 0 {
		h.down(0)
	}
}

func (h *expiryHeap) up(i int) {
	it := h.items
	for i > 0 {
		p := (i - 1) / 2
		if it[p].at <= it[i].at {
			break
		}
		it[p], it[i] = it[i], it[p]
		i = p
	}
}

func (h *expiryHeap) down(i int) {
	it := h.items
	n := len(it)
	for {
		l := 2*i + 1
		if l >= n {
			return
		}
		m := l
		if r := l + 1; r < n && it[r].at < it[l].at {
			m = r
		}
		if it[i].at <= it[m].at {
			return
		}
		it[i], it[m] = it[m], it[i]
		i = m
	}
}

// compact drops every stale entry and restores the heap order in O(n).
func (h *expiryHeap) compact(live func(expiryEntry) bool) {
	kept := h.items[:0]
	for _, e := range h.items {
		if live(e) {
			kept = append(kept, e)
		}
	}
	clear(h.items[len(kept):])
	h.items = kept
	h.stale = 0
	for i := len(kept)/2 - 1; i >= 0; i-- {
		h.down(i)
	}
}

func (h *expiryHeap) reset() { *h = expiryHeap{} }

// expiryLive reports whether e still describes the message in its slot.
func (q *Queue) expiryLive(e expiryEntry) bool {
	n := q.store.lookup(e.slot)
	return n != nil && uint32(n.seq) == e.stamp && n.expires == e.at
}

// purgeExpired removes every message whose expiration time has come. It
// runs at the start of each operation, so expired messages are never seen,
// without a background goroutine and without scanning: the heap's top says
// whether anything is due. That check is all it costs when nothing is,
// and it is inlined into each operation.
func (q *Queue) purgeExpired(now int64) {
	if it := q.expiry.items; len(it) > 0 && it[0].at <= now {
		q.purgeDue(now)
	}
}

// purgeDue is purgeExpired once the heap's top is due.
func (q *Queue) purgeDue(now int64) {
	h := &q.expiry
	expired := false
	for len(h.items) > 0 && h.items[0].at <= now {
		e := h.items[0]
		h.popMin()
		if !q.expiryLive(e) {
			h.stale--
			continue
		}
		n := q.store.at(e.slot)
		q.vis.remove(n)
		q.store.release(e.slot)
		q.count--
		expired = true
	}
	switch {
	case expired && q.count == 0:
		// The last messages expired: give back what they needed.
		q.trimIdle()
	case expired:
		// Only a removal adds dead entries; dropping stale ones from the
		// heap's top leaves fewer to compact.
		q.compactLazy()
	}
}

// forgetExpiry records that the message n, about to be removed, leaves a
// stale expiry entry behind.
func (q *Queue) forgetExpiry(n *node) {
	if n.expires != neverExpires {
		q.expiry.stale++
	}
}

// compactLazy compacts the expiry heap and the visibility rings once their
// dead entries outnumber the live ones, which bounds each to about twice
// its live size at an amortized O(1) cost per removal. It runs at the end
// of an operation that removed something, when every dead entry is dead.
func (q *Queue) compactLazy() {
	if h := &q.expiry; h.stale > 1024 && h.stale > len(h.items)/2 {
		h.compact(q.expiryLive)
	}
	q.vis.compactDead()
}
