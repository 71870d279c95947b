package worker

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/azqlib/azq"
)

// Delivery is one message handed to a handler, with the lease the worker
// keeps alive for it.
type Delivery struct {
	// Message is the message as it was fetched. Its PopReceipt goes stale
	// at the first renewal; the worker keeps the current one, so the
	// handler never needs it. Content is the content at fetch time; see
	// Content for the latest checkpoint. It points into the fetched batch
	// rather than being copied, which cut what the worker allocates per
	// message by a third; the handler must not change it, as the worker
	// deletes and renews by its ID.
	Message *azq.Message

	w *Worker

	mu       sync.Mutex
	receipt  azq.PopReceipt // current receipt
	content  string         // current content
	ctx      handlerCtx     // the handler's context
	due      time.Time      // next renewal, while scheduled
	leaseEnd time.Time      // when the lease lapses unless renewed, on the worker's clock
	hidx     int            // index in the lease heap; -1 if not in it (guarded by leases.mu)
	first    bool           // a live entry in the leases' FIFO of first renewals (guarded by leases.mu)
	retry    time.Duration  // interval of the next renewal after a failed one
	lost     bool           // the lease is lost
	done     bool           // settled; nothing more may touch the message
	released bool           // settled by shutdown
}

// Content returns the message's current content: its content at fetch
// time, or what the last successful Checkpoint saved.
func (d *Delivery) Content() string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.content
}

// errSettled is what Checkpoint returns once the delivery has ended.
var errSettled = errors.New("worker: checkpoint after the delivery ended")

// Checkpoint saves content as the message's new content through Update
// Message, renewing the lease at the same time, so that if this worker
// crashes the next one resumes from there (it sees the content in
// Message.Content). It returns an error wrapping ErrLeaseLost, and cancels
// the handler's context, if the message is no longer this worker's; ErrShutdown
// if the worker released the message at shutdown. Other errors leave the
// previous content and lease in place. Checkpoint is safe for concurrent use
// and serialised with renewals, so each Update carries the newest receipt.
func (d *Delivery) Checkpoint(ctx context.Context, content string) error {
	w := d.w
	d.mu.Lock()
	switch {
	case d.lost:
		d.mu.Unlock()
		return ErrLeaseLost
	case d.released:
		d.mu.Unlock()
		return ErrShutdown
	case d.done:
		d.mu.Unlock()
		return errSettled
	}
	start := w.clk.Now()
	res, err := w.q.Update(ctx, d.Message.ID, d.receipt, w.cfg.LeaseDuration, &content)
	if err == nil {
		d.content = content
	}
	ev, err := w.renewedLocked(d, start, res, err, false)
	d.mu.Unlock()
	w.emit(ev)
	return err
}

func (w *Worker) armLocked(d *Delivery, after time.Duration) { w.leases.schedule(d, after) }

func (w *Worker) stopTimerLocked(d *Delivery) { w.leases.unschedule(d) }

// renew renews d's lease when it is due. d.mu serialises it with
// Checkpoint, so each Update carries the newest receipt.
func (w *Worker) renew(d *Delivery) {
	d.mu.Lock()
	if d.done || d.lost {
		d.mu.Unlock()
		return
	}
	start := w.clk.Now()
	res, err := w.q.Update(w.base, d.Message.ID, d.receipt, w.cfg.LeaseDuration, nil)
	ev, _ := w.renewedLocked(d, start, res, err, true)
	d.mu.Unlock()
	w.emit(ev)
}

// renewedLocked records the result of an Update that renewed the lease and
// arms the next renewal. start is when the Update was sent, from which the
// new lease runs. It returns the event to report once d.mu is released,
// and the error for Checkpoint. d.mu must be held.
func (w *Worker) renewedLocked(d *Delivery, start time.Time, res azq.UpdateResult, err error, fromTimer bool) (Event, error) {
	ev := Event{MessageID: d.Message.ID, DequeueCount: d.Message.DequeueCount}
	half := w.cfg.LeaseDuration / 2
	switch {
	case err == nil:
		d.receipt = res.PopReceipt
		d.leaseEnd = start.Add(w.cfg.LeaseDuration)
		d.retry = half
		w.stopTimerLocked(d)
		w.armLocked(d, half)
		w.stats.renewals.Add(1)
		ev.Kind = EventRenewed
		return ev, nil
	case isGone(err):
		d.lost = true
		w.stopTimerLocked(d)
		w.stats.lost.Add(1)
		d.ctx.cancel(ErrLeaseLost)
		err = fmt.Errorf("%w: %w", ErrLeaseLost, err)
	default:
		w.stats.errors.Add(1)
		if fromTimer {
			// As Functions does after a failed renewal, try again
			// sooner: half the last interval, down to a floor that keeps
			// a short lease from being hammered.
			if d.retry == 0 {
				d.retry = half
			}
			d.retry = max(d.retry/2, min(time.Minute, w.cfg.LeaseDuration/8), time.Millisecond)
			w.armLocked(d, d.retry)
		}
	}
	ev.Kind = EventRenewFailed
	ev.Err = err
	return ev, err
}
