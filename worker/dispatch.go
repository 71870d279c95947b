package worker

import (
	"sync"
	"time"
)

// helperDelay is how long fetched messages may wait while every running
// handler goroutine is busy before idle ones are woken to take them.
const helperDelay = 50 * time.Microsecond

// dispatch decides what each handler goroutine does next: fetch a batch,
// handle a fetched message, or wait.
//
// The goroutine that fetches a batch (the owner) goes on to handle its
// messages itself, and other goroutines are woken to take them only when
// they would otherwise wait: when the owner goes on fetching, or when
// nothing has been taken for helperDelay because every running goroutine
// is in a slow handler. Those woken may take as many messages as were
// waiting then (tickets), and no more, so that helpers do not linger beside
// a quick owner.
//
// Handing each message to another goroutine cost a goroutine switch per
// message, and even with hand-offs made rare, fetching on one core and
// handling on another moved every message's memory between the cores:
// together more than the queue's own work. So when handlers are quick, one
// goroutine fetches and handles on one core; when they are slow, the others
// are woken after helperDelay to take what waits, all at once.
//
// helperDelay is measured on the real clock, not the worker's: it is a
// matter of CPU scheduling, not of queue semantics, and a mock clock that a
// test never advances must not keep handlers from starting.
type dispatch struct {
	w *Worker

	mu       sync.Mutex
	cond     sync.Cond
	queued   []*Delivery // fetched, not yet taken; FIFO from head
	head     int
	idle     int    // goroutines waiting in next
	fetching bool   // a goroutine holds the fetch role
	closed   bool   // Run is stopping: no more fetches
	taken    uint64 // messages taken so far
	owner    int    // the goroutine that queued the last batch
	tickets  int    // how many other goroutines may take a message

	watch      *time.Timer // armed to look for waiting messages; nil if not
	watchTaken uint64      // taken when watch was armed
}

func (q *dispatch) init(w *Worker) {
	q.w = w
	q.cond.L = &q.mu
}

// roomLocked reports whether in-flight work has fallen to the threshold, so
// that the next batch should be fetched. A message whose delete waits for
// its batch holds no handler, so it does not count.
func (q *dispatch) roomLocked() bool {
	return q.w.handling() <= q.w.cfg.NewBatchThreshold
}

// next waits for something for goroutine id to do. It returns a message to
// handle, or fetch=true if the caller now holds the fetch role and must
// fetch and then call fetched, or ok=false once Run is stopping and nothing
// is left.
// Fetching comes first, as in Functions, where the next batch is fetched as
// soon as in-flight work falls to the threshold.
func (q *dispatch) next(id int) (d *Delivery, fetch, ok bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for {
		if !q.closed && !q.fetching && q.roomLocked() {
			q.fetching = true
			return nil, true, true
		}
		waiting := q.head < len(q.queued)
		if waiting && (id == q.owner || q.tickets > 0 || q.closed) {
			if id != q.owner && q.tickets > 0 {
				q.tickets--
			}
			d = q.queued[q.head]
			q.queued[q.head] = nil
			q.head++
			q.taken++
			if q.head == len(q.queued) {
				q.queued, q.head, q.tickets = q.queued[:0], 0, 0
			} else {
				q.watchLocked()
			}
			return d, false, true
		}
		if q.closed {
			return nil, false, false
		}
		q.idle++
		if waiting {
			q.watchLocked() // there is now someone to wake
		}
		q.cond.Wait()
		q.idle--
	}
}

// fetched gives up the fetch role, queueing the batch fetched, if any. It
// returns false, queueing nothing, if Run is stopping: the caller must give
// the batch back.
func (q *dispatch) fetched(id int, ds []*Delivery) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.fetching = false
	if q.closed {
		return len(ds) == 0
	}
	if len(ds) == 0 {
		return true
	}
	if q.head > 0 {
		// Keep the slice from creeping forward: it never holds more than
		// Concurrency deliveries.
		n := copy(q.queued, q.queued[q.head:])
		clear(q.queued[n:])
		q.queued, q.head = q.queued[:n], 0
	}
	q.queued = append(q.queued, ds...)
	q.owner = id
	if q.roomLocked() {
		// The owner will fetch again rather than take these.
		q.helpLocked()
	} else {
		q.watchLocked()
	}
	return true
}

// watchLocked arms the timer that wakes idle goroutines if messages wait
// for helperDelay while nothing is taken.
func (q *dispatch) watchLocked() {
	if q.watch != nil || q.closed || q.idle == 0 {
		return
	}
	q.watchTaken = q.taken
	q.w.wg.Add(1)
	q.watch = time.AfterFunc(helperDelay, q.look)
}

// look runs helperDelay after watchLocked armed it.
func (q *dispatch) look() {
	defer q.w.wg.Done()
	q.mu.Lock()
	defer q.mu.Unlock()
	q.watch = nil
	waiting := len(q.queued) - q.head
	if waiting == 0 || q.closed {
		return
	}
	if q.taken != q.watchTaken {
		// The running goroutines are getting through the messages
		// themselves; look again later.
		q.watchLocked()
		return
	}
	// Nothing taken for helperDelay: every running goroutine is in a
	// slow handler.
	q.helpLocked()
}

// helpLocked lets goroutines other than the owner take every waiting
// message, and wakes an idle goroutine for each, as far as there are idle
// goroutines.
func (q *dispatch) helpLocked() {
	q.tickets = len(q.queued) - q.head
	for range min(q.tickets, q.idle) {
		q.cond.Signal()
	}
}

// close stops fetching and wakes every goroutine: they handle what is
// queued, then next reports false.
func (q *dispatch) close() {
	q.mu.Lock()
	q.closed = true
	if q.watch != nil && q.watch.Stop() {
		q.w.wg.Done()
	}
	q.watch = nil
	q.cond.Broadcast()
	q.mu.Unlock()
}
