package faults

import (
	"math"
	"time"
)

// Throttle sets the rates past which requests are refused with 503
// ServerBusy, as Azure refuses them past its scalability targets. Each
// rate is a token bucket holding one second's worth, refilled on the
// Injector's clock: a burst of more than a second's worth is refused, a
// client paced at the rate never is. Zero turns a limit off.
type Throttle struct {
	// QueueMessagesPerSecond limits the messages of one queue: each Put,
	// Update, Delete and Clear counts one, each Get and Peek the number
	// of messages it asks for. Azure's target is 2,000. Refused with
	// ServerBusy, ReasonBusy's message.
	QueueMessagesPerSecond float64
	// AccountRequestsPerSecond limits the requests to one account,
	// whatever the operation. Azure's target is 20,000. Refused with
	// ServerBusy, ReasonOperations's message.
	AccountRequestsPerSecond float64
}

// AzureTargets are Azure's published scalability targets for a storage
// account's queues: 2,000 messages a second per queue and 20,000 requests
// a second per account.
var AzureTargets = Throttle{QueueMessagesPerSecond: 2000, AccountRequestsPerSecond: 20000}

// maxRate bounds a configured rate; a bucket of more is no limit.
const maxRate = 1e9

// Validate reports an invalid rate as a *FieldError.
func (t *Throttle) Validate() error {
	for _, f := range []struct {
		name string
		v    float64
	}{{"queue_messages_per_second", t.QueueMessagesPerSecond}, {"account_requests_per_second", t.AccountRequestsPerSecond}} {
		if math.IsNaN(f.v) || f.v < 0 || f.v > maxRate {
			return fieldErr(f.name, "%v: want a rate from 0 (no limit) to %g", f.v, float64(maxRate))
		}
	}
	return nil
}

// bucket is a token bucket: tokens, as of at, out of capacity, refilled
// at rate a second.
type bucket struct {
	tokens float64
	at     time.Time
}

// level is b's tokens at now, filled up since b.at.
func (b *bucket) level(now time.Time, rate float64) float64 {
	capacity := math.Max(rate, 1)
	if b.at.IsZero() {
		return capacity
	}
	if d := now.Sub(b.at); d > 0 {
		return math.Min(capacity, b.tokens+d.Seconds()*rate)
	}
	return b.tokens
}

// maxBuckets bounds the buckets a throttle keeps of each kind: those of
// the queues used last, and those of the accounts used last. Past it, the
// bucket used longest ago is dropped (see table).
const maxBuckets = 10000

// limiter is the state of a Throttle: a table of buckets for the accounts
// and one for the queues. Its owner's lock guards it.
type limiter struct {
	cfg      Throttle
	accounts *table[string]
	queues   *table[[2]string]
}

func newLimiter(t Throttle, capacity int) *limiter {
	return &limiter{cfg: t, accounts: newTable[string](capacity), queues: newTable[[2]string](capacity)}
}

// admit takes a request's tokens, or refuses it with the reason Azure
// gives, taking nothing.
func (l *limiter) admit(r Request, now time.Time) (Reason, bool) {
	arate, qrate := l.cfg.AccountRequestsPerSecond, l.cfg.QueueMessagesPerSecond
	aslot := int32(none)
	var alevel float64
	if arate > 0 {
		var ab bucket
		ab, aslot = l.accounts.get(r.Account, now, arate)
		if alevel = ab.level(now, arate); alevel < 1 {
			return ReasonOperations, false
		}
	}
	if need := float64(r.Messages); qrate > 0 && r.Queue != "" && need > 0 {
		key := [2]string{r.Account, r.Queue}
		qb, qslot := l.queues.get(key, now, qrate)
		// A request for more than a bucket holds (Get of 32 with a rate
		// under 32) waits for a full bucket rather than never passing.
		qlevel := qb.level(now, qrate)
		if qlevel < math.Min(need, math.Max(qrate, 1)) {
			return ReasonBusy, false
		}
		l.queues.put(qslot, key, bucket{tokens: qlevel - need, at: now}, now, qrate)
	}
	if arate > 0 {
		l.accounts.put(aslot, r.Account, bucket{tokens: alevel - 1, at: now}, now, arate)
	}
	return "", true
}

// none is the slot of no bucket.
const none = -1

// table holds the buckets of at most capacity names, in a list from the
// one used last to the one used longest ago. A name without a bucket
// has a full one, unless the table dropped a bucket that was not full:
// then, until that bucket would have filled, a name without a bucket is
// given a copy of the emptiest bucket dropped, which is never fuller than
// the bucket the name had, if it had one. A client cannot empty its
// bucket, make the table drop it by naming capacity other queues, and
// come back to a full one.
//
// Every operation takes constant time: a map lookup and a few links.
type table[K comparable] struct {
	capacity int
	index    map[K]int32 // the slot of each name
	slots    []slot[K]   // at most capacity; a slot is never freed
	// head is the slot used last, tail the one used longest ago; none
	// when the table is empty.
	head, tail int32
	// dropped is the emptiest bucket dropped before it was full.
	dropped bucket
}

type slot[K comparable] struct {
	key        K
	b          bucket
	prev, next int32
}

func newTable[K comparable](capacity int) *table[K] {
	return &table[K]{capacity: capacity, index: map[K]int32{}, head: none, tail: none}
}

// len is the number of buckets held.
func (t *table[K]) len() int { return len(t.slots) }

// get returns key's bucket and its slot, and makes it the one used last;
// for a key without one, it returns the bucket a new name starts with
// and the slot none.
func (t *table[K]) get(key K, now time.Time, rate float64) (bucket, int32) {
	i, ok := t.index[key]
	if !ok {
		if !t.dropped.at.IsZero() && t.dropped.level(now, rate) >= math.Max(rate, 1) {
			t.dropped = bucket{} // it has filled: forget it
		}
		return t.dropped, none
	}
	t.unlink(i)
	t.pushFront(i)
	return t.slots[i].b, i
}

// put stores key's bucket b in slot i, which get returned for key. For
// a key without a slot, it takes a new one while the table has room, or
// else the slot used longest ago, dropping its bucket.
func (t *table[K]) put(i int32, key K, b bucket, now time.Time, rate float64) {
	if i != none {
		t.slots[i].b = b
		return
	}
	if len(t.slots) < t.capacity {
		i = int32(len(t.slots))
		t.slots = append(t.slots, slot[K]{})
	} else {
		i = t.tail
		old := &t.slots[i]
		t.drop(old.b, now, rate)
		delete(t.index, old.key)
		t.unlink(i)
	}
	t.slots[i].key, t.slots[i].b = key, b
	t.index[key] = i
	t.pushFront(i)
}

// drop keeps the lower of b and the emptiest bucket dropped so far. All
// buckets of a table fill at the same rate to the same capacity, so the
// lower of two now stays the lower until both are full.
func (t *table[K]) drop(b bucket, now time.Time, rate float64) {
	level := unfilled(b, now, rate)
	if level >= math.Max(rate, 1) {
		return // a full bucket is the same as none
	}
	// A full bucket dropped earlier is above level too.
	if t.dropped.at.IsZero() || level < unfilled(t.dropped, now, rate) {
		t.dropped = b
	}
}

// unfilled is b's tokens at now without the cap of a full bucket: it
// orders two buckets of a table as their levels do, at now and after.
func unfilled(b bucket, now time.Time, rate float64) float64 {
	return b.tokens + now.Sub(b.at).Seconds()*rate
}

func (t *table[K]) unlink(i int32) {
	s := &t.slots[i]
	if s.prev != none {
		t.slots[s.prev].next = s.next
	} else {
		t.head = s.next
	}
	if s.next != none {
		t.slots[s.next].prev = s.prev
	} else {
		t.tail = s.prev
	}
	s.prev, s.next = none, none
}

func (t *table[K]) pushFront(i int32) {
	s := &t.slots[i]
	s.prev, s.next = none, t.head
	if t.head != none {
		t.slots[t.head].prev = i
	} else {
		t.tail = i
	}
	t.head = i
}
