package azq

import (
	"context"
	crand "crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/benbjohnson/clock"
)

// Queue is one Azure-style queue held in memory. Create one with New, or as
// a named queue of a Service. All methods are safe for concurrent use.
//
// Messages come out of Get in order of their next-visible time, then of
// insertion; like Azure, azq promises no more than that, and a message whose
// lease lapsed comes back after newer ones that were visible earlier.
type Queue struct {
	name   string
	svc    *Service // the Service that created it; nil for New
	clock  clock.Clock
	mock   *clock.Mock // clock, if it is a mock; see Receive
	real   bool        // clock is the default real clock; see wallNow
	limits Limits

	mu       sync.Mutex
	store    slotStore
	vis      visIndex
	expiry   expiryHeap
	count    int    // stored, unexpired messages
	seq      uint64 // last insertion sequence handed out
	rng      *rand.ChaCha8
	wake     chan struct{} // closed to wake Receive; nil if nobody waits
	waiters  int           // Receive calls waiting on wake
	timer    *clock.Timer  // wakes waiters at timerAt; nil if not armed
	timerAt  int64
	timerGen uint64 // tells the armed timer's firing from a replaced one's
	closed   bool
	metadata map[string]string
	policies []AccessPolicy

	qid     uint64  // the queue's number in its Service, which backups and the log name it by
	j       journal // records every change in the durable mode; nil in memory
	failure error   // the storage failure that closed the queue, if one did
}

// New returns an empty queue that is not part of a Service. Options set its
// clock (WithClock) and limits (WithLimits).
func New(opts ...Option) *Queue {
	return newQueue("", newConfig(opts), nil)
}

func newQueue(name string, cfg config, metadata map[string]string) *Queue {
	// Message IDs and receipt tags come from a ChaCha8 generator seeded
	// from the operating system: unguessable like crypto/rand, but without
	// a system call per message, and without touching the uuid package's
	// global state.
	var seed [32]byte
	if _, err := crand.Read(seed[:]); err != nil {
		panic("azq: cannot seed the random generator: " + err.Error())
	}
	q := &Queue{
		name:     name,
		clock:    cfg.clock,
		limits:   cfg.limits,
		real:     cfg.realTime,
		rng:      rand.NewChaCha8(seed),
		metadata: metadata,
	}
	q.vis = newVisIndex(&q.store)
	q.mock, _ = cfg.clock.(*clock.Mock)
	return q
}

// Name returns the queue's name; a queue made by New has none.
func (q *Queue) Name() string { return q.name }

// Service returns the Service that created the queue, or nil for a queue
// made by New. A queue deleted from its Service still reports it.
func (q *Queue) Service() *Service { return q.svc }

// errOpensNoQueues is what OpenQueue answers for a queue made by New.
var errOpensNoQueues = fmt.Errorf("azq: a queue made by New belongs to no Service and opens no other queue: %w", errors.ErrUnsupported)

// OpenQueue returns the queue name of the queue's Service, creating it if
// it does not exist (an existing queue is opened whatever its metadata),
// as the Service's NamedQueue: the QueueOpener through which package
// worker opens a source's poison queue in the source's Service. A queue
// deleted from its Service still opens queues there. A queue made by New
// belongs to no Service and opens none: its OpenQueue answers an error
// that matches errors.ErrUnsupported, and creates nothing.
func (q *Queue) OpenQueue(ctx context.Context, name string) (MessageQueue, error) {
	if q.svc == nil {
		return nil, errOpensNoQueues
	}
	return q.svc.openQueue(ctx, name)
}

// Limits returns the limits the queue enforces.
func (q *Queue) Limits() Limits { return q.limits }

// Clock returns the clock the queue reads time from.
func (q *Queue) Clock() clock.Clock { return q.clock }

func (q *Queue) now() int64 {
	if q.real {
		return wallNow()
	}
	return clockNanos(q.clock.Now())
}

func (q *Queue) closedErr() error {
	if q.failure != nil {
		return q.failure
	}
	return newError(ErrQueueNotFound, "", "the queue "+quoteTrunc(q.name)+" does not exist: it was deleted or closed")
}

// lock takes the queue's lock for an operation at time now, after checking
// ctx, and purges expired messages. On error the lock is not held.
func (q *Queue) lock(ctx context.Context, now int64) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	q.mu.Lock()
	if q.closed {
		q.mu.Unlock()
		return q.closedErr()
	}
	q.purgeExpired(now)
	return nil
}

// PutOptions are the optional settings of Put. The zero value puts a message
// that is visible at once and lives for the default time-to-live.
type PutOptions struct {
	// VisibilityTimeout delays the message: it becomes visible this long
	// after Put. 0 to 7 days, and shorter than the time-to-live.
	VisibilityTimeout time.Duration
	// TimeToLive is how long the message lives: 0 means the default (7
	// days), NeverExpires means forever, any other value must be positive.
	TimeToLive time.Duration
}

// Put adds a message with the given content. The returned Message carries
// the new ID, the times, and a pop receipt that can Update or Delete the
// message until its first Get, as Azure's does. Content over the size limit
// gives ErrMessageTooLarge; a bad visibility timeout or time-to-live gives
// ErrOutOfRange, or ErrInvalidArgument when the visibility timeout is not
// shorter than the time-to-live.
func (q *Queue) Put(ctx context.Context, content string, opts *PutOptions) (Message, error) {
	var o PutOptions
	if opts != nil {
		o = *opts
	}
	ttl, err := q.limits.checkPut(content, &o)
	if err != nil {
		return Message{}, err
	}
	now := q.now()
	if err := q.lock(ctx, now); err != nil {
		return Message{}, err
	}
	var m Message
	slot, n := q.insert(now, content, o.VisibilityTimeout, ttl, &m)
	q.visibleSoon(n.visible, now)
	var lsn uint64
	if q.j != nil {
		lsn = q.j.put(slot, n)
	}
	if err := q.unlockSynced(lsn); err != nil {
		return Message{}, err
	}
	return m, nil
}

// insert adds a message put at now, whose options checkPut accepted, and
// fills m with what Put returns of it. q.mu must be held and expired
// messages purged; the caller wakes waiting Receive calls (visibleSoon)
// and records the change.
func (q *Queue) insert(now int64, content string, visibility, ttl time.Duration, m *Message) (uint32, *node) {
	slot, n := q.store.alloc()
	q.seq++
	n.content = content
	binary.LittleEndian.PutUint64(n.id[0:8], q.rng.Uint64())
	binary.LittleEndian.PutUint64(n.id[8:16], q.rng.Uint64())
	n.id[6] = n.id[6]&0x0f | 0x40 // UUID version 4
	n.id[8] = n.id[8]&0x3f | 0x80 // RFC 4122 variant
	n.inserted = now
	n.visible = addNanos(now, visibility)
	n.expires = neverExpires
	if ttl != NeverExpires {
		n.expires = addNanos(now, ttl)
		q.expiry.push(expiryEntry{at: n.expires, slot: slot, stamp: uint32(q.seq)})
	}
	n.seq = q.seq
	n.tag = newTag(q.rng)
	q.vis.add(slot, n, true)
	q.count++
	n.setMessage(m, newReceipt(slot, n.version, n.tag))
	return slot, n
}

// Get takes up to n visible messages (1 to 32) off the front of the queue
// and hides them for the visibility timeout (1 second to 7 days; Azure's
// default is DefaultVisibilityTimeout). Each returned message has a fresh
// pop receipt, which kills the one issued before, and its DequeueCount
// increased by one. Get returns an empty slice, not an error, when nothing
// is visible; Receive waits instead. The slice is made for the messages
// found; AppendGet fills one the caller keeps.
func (q *Queue) Get(ctx context.Context, n int, visibility time.Duration) ([]Message, error) {
	msgs, err := q.AppendGet(ctx, nil, n, visibility)
	if msgs == nil && err == nil {
		msgs = []Message{}
	}
	return msgs, err
}

// AppendGet is Get that appends the messages it takes to dst and returns
// the extended slice, as append does; on error it returns dst unchanged.
// A consumer that passes the same buffer back each time (buf[:0], with
// room for n) takes messages without allocating: Get allocates the slice
// it returns on every call that finds something.
func (q *Queue) AppendGet(ctx context.Context, dst []Message, n int, visibility time.Duration) ([]Message, error) {
	if err := q.limits.checkGet(n, visibility); err != nil {
		return dst, err
	}
	now := q.now()
	if err := q.lock(ctx, now); err != nil {
		return dst, err
	}
	msgs, lsn := q.get(dst, now, n, visibility)
	if err := q.unlockSynced(lsn); err != nil {
		return dst, err
	}
	return msgs, nil
}

// get dequeues up to n visible messages and appends them to dst, which
// grows, if it must, by the messages found. q.mu must be held.
// In the durable mode it records the change and returns the record's
// number for unlockSynced.
func (q *Queue) get(dst []Message, now int64, n int, visibility time.Duration) ([]Message, uint64) {
	// The slots taken are gathered first, so that dst grows by the
	// messages there are, not by the n asked for: a Get(32) that finds one
	// message allocates one Message, not 32.
	var buf [azureMaxMessagesPerGet]uint32
	slots := buf[:0]
	hidden := addNanos(now, visibility)
	for len(slots) < n {
		slot, at, src, ok := q.vis.front()
		if !ok || at > now {
			break
		}
		q.vis.popFront(src)
		nd := q.store.at(slot)
		nd.visible = hidden
		nd.dequeues++
		nd.version++
		nd.tag = newTag(q.rng)
		// hidden > now, so the message is not met again in this loop.
		q.vis.add(slot, nd, true)
		slots = append(slots, slot)
	}
	if len(slots) == 0 {
		return dst, 0
	}
	first := len(dst)
	dst = slices.Grow(dst, len(slots))[:first+len(slots)]
	for i, slot := range slots {
		nd := q.store.at(slot)
		nd.setMessage(&dst[first+i], newReceipt(slot, nd.version, nd.tag))
		if q.j != nil {
			q.j.take(slot, nd)
		}
	}
	var lsn uint64
	if q.j != nil {
		lsn = q.j.get(hidden)
	}
	return dst, lsn
}

// Peek returns up to n visible messages (1 to 32) without changing
// anything: no receipt, no change of visibility or DequeueCount.
func (q *Queue) Peek(ctx context.Context, n int) ([]Message, error) {
	if err := q.limits.checkCount(n); err != nil {
		return nil, err
	}
	now := q.now()
	if err := q.lock(ctx, now); err != nil {
		return nil, err
	}
	// As in get, the slice is made for the messages found.
	var buf [azureMaxMessagesPerGet]uint32
	slots := buf[:0]
	q.vis.scan(now, func(slot uint32) bool {
		slots = append(slots, slot)
		return len(slots) < n
	})
	msgs := make([]Message, len(slots))
	for i, slot := range slots {
		msgs[i] = q.store.at(slot).message()
	}
	q.mu.Unlock()
	return msgs, nil
}

// find returns the slot and node that receipt names if it is the current
// receipt of the message id. q.mu must be held and expired messages purged.
// It takes pointers because its arguments, 48 bytes in all, would be
// copied through memory at each call.
func (q *Queue) find(id *MessageID, r *PopReceipt) (uint32, *node, error) {
	if r.IsZero() {
		return 0, nil, errZeroReceipt
	}
	slot := r.slotNo
	n := q.store.lookup(slot)
	// A remote receipt has a zero slot part, so it fails here as any
	// receipt that is not the message's current one does.
	if n == nil || r.remote != "" || n.id != *id || n.version != r.version || n.tag != r.tag {
		return 0, nil, newError(ErrMessageNotFound, "",
			"the message "+id.String()+" does not exist, or the pop receipt is no longer its current one")
	}
	return slot, n, nil
}

// Delete removes the message id. The receipt must be the message's current
// one; a stale receipt (the message was dequeued again or updated since) or
// a message that is gone gives ErrMessageNotFound, as Azure answers. A
// receipt stays current after its visibility timeout lapses as long as
// nobody has dequeued the message again.
func (q *Queue) Delete(ctx context.Context, id MessageID, receipt PopReceipt) error {
	now := q.now()
	if err := q.lock(ctx, now); err != nil {
		return err
	}
	slot, n, err := q.find(&id, &receipt)
	if err != nil {
		q.mu.Unlock()
		return err
	}
	q.vis.remove(n)
	q.forgetExpiry(n)
	q.store.release(slot)
	q.count--
	if q.count == 0 {
		q.trimIdle()
	} else {
		q.compactLazy()
	}
	var lsn uint64
	if q.j != nil {
		lsn = q.j.delete(slot)
	}
	return q.unlockSynced(lsn)
}

// Update changes the visibility of the message id, making it visible again
// after visibility (0 to 7 days), and replaces its content unless content is
// nil. It needs the current receipt (see Delete) and returns a new one; the
// old receipt dies. Update renews a lease (call it before the visibility
// timeout lapses) and saves progress in the content so that another consumer
// can resume. DequeueCount and the expiration time do not change; a
// visibility past the expiration time is allowed, and expiry wins.
func (q *Queue) Update(ctx context.Context, id MessageID, receipt PopReceipt, visibility time.Duration, content *string) (UpdateResult, error) {
	if err := q.limits.checkUpdate(visibility, content); err != nil {
		return UpdateResult{}, err
	}
	now := q.now()
	if err := q.lock(ctx, now); err != nil {
		return UpdateResult{}, err
	}
	slot, n, err := q.find(&id, &receipt)
	if err != nil {
		q.mu.Unlock()
		return UpdateResult{}, err
	}
	q.vis.remove(n)
	n.visible = addNanos(now, visibility)
	n.version++
	q.vis.add(slot, n, false)
	if content != nil {
		n.content = *content
	}
	n.tag = newTag(q.rng)
	res := UpdateResult{PopReceipt: newReceipt(slot, n.version, n.tag), NextVisibleTime: fromNanos(n.visible)}
	// Waiting Receive calls sleep until the earliest next-visible time; if
	// this message now becomes visible sooner, they must look again then.
	q.visibleSoon(n.visible, now)
	q.compactLazy()
	var lsn uint64
	if q.j != nil {
		lsn = q.j.update(slot, n, content != nil)
	}
	if err := q.unlockSynced(lsn); err != nil {
		return UpdateResult{}, err
	}
	return res, nil
}

// Clear deletes every message, visible or not. Every receipt dies.
func (q *Queue) Clear(ctx context.Context) error {
	now := q.now()
	if err := q.lock(ctx, now); err != nil {
		return err
	}
	q.clearLocked()
	var lsn uint64
	if q.j != nil {
		lsn = q.j.clear()
	}
	return q.unlockSynced(lsn)
}

// unlockSynced releases q.mu and then, in the durable mode, waits until
// the journal's record lsn of the change just made is on disk (0: nothing
// was recorded), so that the operation is acknowledged only once it would
// survive a crash. The wait is outside the lock, so concurrent callers
// share a sync.
func (q *Queue) unlockSynced(lsn uint64) error {
	q.mu.Unlock()
	if lsn == 0 {
		return nil
	}
	return q.j.wait(lsn)
}

// keepExpiryEntries is the most entries an emptied queue's expiry heap
// keeps.
const keepExpiryEntries = 32

// trimIdle gives back what an empty queue's messages needed, so that an
// idle queue costs little however many messages it once held. With no
// message left, every ring and expiry entry is dead, so all are dropped;
// arrays beyond a few dozen entries go with them, and the slot store
// trims itself. Small arrays stay, so a queue through which messages
// pass one batch at a time does not reallocate on every batch. q.mu must
// be held and q.count be 0.
func (q *Queue) trimIdle() {
	q.vis.trimRings()
	h := &q.expiry
	h.items, h.stale = h.items[:0], 0
	if cap(h.items) > keepExpiryEntries {
		h.items = nil
	}
	q.store.trim()
}

func (q *Queue) clearLocked() {
	q.vis.reset()
	q.expiry.reset()
	q.store.reset()
	q.count = 0
}

// ApproximateCount returns the number of messages in the queue, visible or
// not. Azure's count is approximate and never below the true count; azq's is
// exact, because expired messages are purged before counting.
func (q *Queue) ApproximateCount(ctx context.Context) (int, error) {
	now := q.now()
	if err := q.lock(ctx, now); err != nil {
		return 0, err
	}
	n := q.count
	q.mu.Unlock()
	return n, nil
}

// Close deletes the queue and its messages and wakes every waiting
// Receive. Afterwards every operation returns ErrQueueNotFound, as it would
// for a deleted queue. Close is idempotent; it returns nil except when a
// durable Service fails to log the deletion (ErrStorageFailure).
func (q *Queue) Close() error {
	q.mu.Lock()
	var lsn uint64
	if !q.closed {
		if q.j != nil {
			lsn = q.j.deleteQueue()
		}
		q.shut()
	} else if q.failure != nil {
		q.mu.Unlock()
		return q.failure // closed by a storage failure, not deleted
	}
	return q.unlockSynced(lsn)
}

// shut closes the queue in memory. q.mu must be held.
func (q *Queue) shut() {
	q.closed = true
	q.clearLocked()
	q.stopWakeTimer()
	q.wakeWaiters()
}
