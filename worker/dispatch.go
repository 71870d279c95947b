package worker

import "sync"

// dispatch hands fetched deliveries to the handler goroutines.
//
// It replaces a channel, which handed every message to a parked goroutine
// and so cost a goroutine switch per message. Here a handler goroutine that
// finishes a message takes the next one itself, and a parked one is woken
// only when work would otherwise wait: at most one at a time, each woken
// goroutine waking the next if work is still left when it takes its
// message. Under a backlog of quick messages a few goroutines run without
// parking; when handlers are slow, every message of a batch still starts
// within a few wake-ups of its fetch.
type dispatch struct {
	mu     sync.Mutex
	cond   sync.Cond
	queued []*Delivery // FIFO from head
	head   int
	idle   int  // goroutines waiting in next
	waking bool // one has been woken and has not yet looked
	closed bool // nothing more will be pushed
}

func (q *dispatch) init() { q.cond.L = &q.mu }

// push queues the deliveries of a batch, in order.
func (q *dispatch) push(ds []*Delivery) {
	q.mu.Lock()
	if q.head > 0 {
		// Keep the slice from creeping forward: it never holds more than
		// Concurrency deliveries.
		n := copy(q.queued, q.queued[q.head:])
		clear(q.queued[n:])
		q.queued, q.head = q.queued[:n], 0
	}
	q.queued = append(q.queued, ds...)
	q.wakeLocked()
	q.mu.Unlock()
}

// wakeLocked wakes one parked goroutine if work is waiting and none is
// already on its way.
func (q *dispatch) wakeLocked() {
	if q.head < len(q.queued) && q.idle > 0 && !q.waking {
		q.waking = true
		q.cond.Signal()
	}
}

// next returns the next delivery to handle, waiting for one; false once the
// queue is closed and empty.
func (q *dispatch) next() (*Delivery, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for q.head == len(q.queued) {
		if q.closed {
			return nil, false
		}
		q.idle++
		q.cond.Wait()
		q.idle--
		q.waking = false
	}
	d := q.queued[q.head]
	q.queued[q.head] = nil
	q.head++
	if q.head == len(q.queued) {
		q.queued, q.head = q.queued[:0], 0
	}
	q.wakeLocked()
	return d, true
}

// close wakes every goroutine: they handle what is queued, then next
// reports false.
func (q *dispatch) close() {
	q.mu.Lock()
	q.closed = true
	q.cond.Broadcast()
	q.mu.Unlock()
}
