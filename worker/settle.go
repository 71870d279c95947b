package worker

import (
	"fmt"
	"sync"
	"time"

	"github.com/azqlib/azq"
)

// DefaultSettleWindow is how long the delete of a handled message waits, at
// most, for the deletes of other handled messages to join it in one
// azq.DeleteBatch.
const DefaultSettleWindow = 5 * time.Millisecond

// settleLeaseFraction bounds the settle window by a fraction of the lease:
// a delete waits at most LeaseDuration/settleLeaseFraction, and at most half
// the time its lease has left, so that no lease lapses while its delete
// waits.
const settleLeaseFraction = 10

// settleBatch is a batch of deletes: the deliveries, and the requests
// for them, index by index.
type settleBatch struct {
	ds   []*Delivery
	reqs []azq.DeleteRequest
}

// deletes gathers the deletes of handled messages so that many go to the
// queue in one azq.DeleteBatch: one lock, one log sync or one commit for
// many messages, on a back end that batches (an azq.BatchDeleter). A batch goes when it is full (azq.MaxBatchSize), when no
// other message is being handled (nothing would join it soon), when the
// worker shuts down, or when the window of its earliest delete ends, on a
// timer. The caller that completes a batch, or the timer, deletes it.
type deletes struct {
	w *Worker

	mu        sync.Mutex   // guards the fields below
	pending   settleBatch  // waiting for the batch to go
	spare     settleBatch  // a sent batch's slices, emptied, for the next
	timer     *settleTimer // armed at armedFrom for armedAt; nil if none
	armedFrom time.Time
	armedAt   time.Time
	closing   bool // shutdown: every delete goes at once
}

// settleTimer is one arming of the window: a timer on the worker's clock
// and, when that clock is the source's mock, one on the real clock too, as
// for poll waits. Each timer holds a count in the worker's WaitGroup, given
// back by stop if it prevented the callback, else by the callback; claimed
// records which, under deletes.mu (see leaseTimer).
type settleTimer struct {
	clk     interface{ Stop() bool }
	real    *time.Timer
	claimed [2]bool
}

// add queues the delete of d, whose handler succeeded, and sends the batch
// if it should go now. leaseEnd is when d's lease lapses, on the worker's
// clock.
func (b *deletes) add(d *Delivery, receipt azq.PopReceipt, leaseEnd time.Time) {
	w := b.w
	b.mu.Lock()
	if b.pending.ds == nil {
		if b.spare.ds != nil {
			b.pending, b.spare = b.spare, settleBatch{}
		} else {
			// Full size at once: most batches under load fill up.
			b.pending = settleBatch{ds: make([]*Delivery, 0, azq.MaxBatchSize),
				reqs: make([]azq.DeleteRequest, 0, azq.MaxBatchSize)}
		}
	}
	b.pending.ds = append(b.pending.ds, d)
	b.pending.reqs = append(b.pending.reqs, azq.DeleteRequest{ID: d.Message.ID, PopReceipt: receipt})
	// Counted under mu, so that the count below holds only deletes
	// already pending or under way, not those queued for the lock.
	w.settling.Add(1)
	// Nothing being handled (every message held waits for its delete)
	// means that nothing would join the batch before a fetch brings
	// more and they are handled: waiting would only delay.
	now := len(b.pending.ds) >= azq.MaxBatchSize || b.closing ||
		w.stats.inFlight.Load() <= w.settling.Load()
	// A lease that lasts beyond the armed window by as long again as the
	// window lasts from its arming lasts twice as long as what is left of
	// the window, whenever this is: the window needs no reading of the
	// clock, which cost as much as the rest of add. Else this delete's
	// window is worked out, and ends the batch's sooner if it must.
	if !now && (b.timer == nil || leaseEnd.Before(b.armedAt.Add(b.armedAt.Sub(b.armedFrom)))) {
		t := w.clk.Now()
		wait := min(w.cfg.SettleWindow, w.cfg.LeaseDuration/settleLeaseFraction, leaseEnd.Sub(t)/2)
		if wait <= 0 {
			now = true
		} else if due := t.Add(wait); b.timer == nil || due.Before(b.armedAt) {
			b.armLocked(t, due, wait)
		}
	}
	if !now {
		b.mu.Unlock()
		return
	}
	batch := b.takeLocked()
	b.mu.Unlock()
	w.deleteBatch(batch)
}

// close is called when Run shuts down: it sends what is pending, and makes
// every later delete go at once.
func (b *deletes) close() {
	b.mu.Lock()
	b.closing = true
	batch := b.takeLocked()
	b.mu.Unlock()
	if len(batch.ds) > 0 {
		b.w.deleteBatch(batch)
	}
}

// takeLocked returns the pending batch, emptied, and disarms the window.
func (b *deletes) takeLocked() settleBatch {
	b.stopLocked()
	batch := b.pending
	b.pending = settleBatch{} // the batch is the deleting goroutine's now
	return batch
}

// armLocked arms the window for due, wait from now, replacing any armed
// one.
func (b *deletes) armLocked(now, due time.Time, wait time.Duration) {
	b.stopLocked()
	w := b.w
	tk := &settleTimer{}
	b.timer, b.armedFrom, b.armedAt = tk, now, due
	w.wg.Add(1)
	tk.clk = w.clk.AfterFunc(wait, func() { b.fire(tk, 0) })
	if w.cfg.pollRealToo {
		w.wg.Add(1)
		tk.real = time.AfterFunc(wait, func() { b.fire(tk, 1) })
	}
}

// stopLocked disarms the window, if armed.
func (b *deletes) stopLocked() {
	tk := b.timer
	if tk == nil {
		return
	}
	b.timer = nil
	if tk.clk.Stop() && !tk.claimed[0] {
		tk.claimed[0] = true
		b.w.wg.Done()
	}
	if tk.real != nil && tk.real.Stop() && !tk.claimed[1] {
		tk.claimed[1] = true
		b.w.wg.Done()
	}
}

// fire runs when timer i of tk ends the window: it sends the batch, unless
// the batch went already.
func (b *deletes) fire(tk *settleTimer, i int) {
	b.mu.Lock()
	if tk.claimed[i] {
		b.mu.Unlock() // stopped, and its count given back by stop
		return
	}
	tk.claimed[i] = true
	defer b.w.wg.Done()
	if tk != b.timer {
		b.mu.Unlock() // the batch went, or the other timer sent it
		return
	}
	batch := b.takeLocked()
	b.mu.Unlock()
	b.w.deleteBatch(batch)
}

// deleteBatch deletes a batch of handled messages in one azq.DeleteBatch
// and settles each on its answer. If the batch as a whole fails, each
// message is deleted on its own instead, and settled on that answer, as if
// there had been no batch: a message the failed batch did delete then
// answers as one whose lease was lost.
func (w *Worker) deleteBatch(batch settleBatch) {
	reqs := batch.reqs
	errs, err := azq.DeleteBatch(w.base, w.mq, reqs)
	if err == nil && len(errs) != len(reqs) {
		err = fmt.Errorf("worker: DeleteBatch answered %d results for %d deletes", len(errs), len(reqs))
	}
	for i, d := range batch.ds {
		var derr error
		if err != nil {
			derr = w.q.Delete(w.base, reqs[i].ID, reqs[i].PopReceipt)
		} else {
			derr = errs[i]
		}
		// No longer waiting: counted out before finish counts it out of
		// flight, so that the handlers counted never dip below the truth.
		w.settling.Add(-1)
		w.deleted(d, derr)
	}
	w.deletes.recycle(batch)
}

// recycle keeps the slices of a sent batch for a later one, unless one is
// kept already.
func (b *deletes) recycle(batch settleBatch) {
	clear(batch.ds) // no hold on the deliveries
	batch.ds, batch.reqs = batch.ds[:0], batch.reqs[:0]
	b.mu.Lock()
	if b.spare.ds == nil {
		b.spare = batch
	}
	b.mu.Unlock()
}
