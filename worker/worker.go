package worker

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/azqlib/azq"
	"github.com/benbjohnson/clock"
)

// Handler processes one message. Returning nil deletes the message;
// returning an error (or panicking) gives it back for another attempt or,
// on the last attempt, sets it aside as poison. ctx is cancelled with cause
// ErrLeaseLost if the lease is lost, and with ErrShutdown if the worker stops
// before the handler finishes; context.Cause tells which.
type Handler func(ctx context.Context, d *Delivery) error

// Worker runs a Handler over the messages of a queue. Create it with New and
// start it with Run.
type Worker struct {
	q     Queue
	recv  Receiver         // nil: poll q.Get
	mq    azq.MessageQueue // q, if it batches deletes: they go in batches; else nil
	h     Handler
	cfg   config
	err   error // from the options; Run returns it
	clk   clock.Clock
	stats counters
	ran   atomic.Bool

	base   context.Context // Run's context without its cancellation
	freed  chan struct{}   // nothing left in flight; capacity 1, never blocks
	work   dispatch        // to the handler goroutines
	leases leases
	// deletes batches the deletes of handled messages; settling counts
	// the messages whose delete waits in it or is under way, which no
	// longer hold a handler.
	deletes  deletes
	settling atomic.Int64
	// Run's stop, and the error to return, when a fetch fails for good.
	stopRun context.CancelFunc
	fatal   error
	// Fetching state, used only by the goroutine holding the fetch role.
	backoff    *backoff
	pauseNext  time.Duration  // wait before the next fetch
	pauseCause error          // why, for the event
	wg         sync.WaitGroup // delivery goroutines and armed renewal timers

	// running holds, per handler goroutine, the delivery whose handler
	// it runs: what shutdown cancels at the deadline. A slot each rather
	// than a shared set, so that starting a handler takes no lock.
	running  []atomic.Pointer[Delivery]
	stopping atomic.Bool // shutdown has taken stock of running; start no handler

	poisonMu   sync.Mutex // guards poisonQ and poisonNone
	poisonQ    Queue
	poisonNone bool // Poison answered errors.ErrUnsupported: there is none
}

// New returns a worker that will run h over the messages of q with the given
// options. Problems with the options are reported by Run, so that New can be
// used in an expression.
func New(q Queue, h Handler, o Options) *Worker {
	cfg, err := newConfig(q, o)
	w := &Worker{q: q, h: h, cfg: cfg, err: err, clk: cfg.clk,
		freed: make(chan struct{}, 1)}
	w.leases.w = w
	w.deletes.w = w
	if q == nil || h == nil {
		w.err = fmt.Errorf("%w: nil queue or handler", ErrInvalidOptions)
	}
	w.recv, _ = q.(Receiver)
	if _, ok := q.(azq.BatchDeleter); ok && cfg.SettleWindow > 0 {
		// Only a back end that deletes many at the cost of one gains
		// from the wait; elsewhere a batch would be one Delete after
		// another in one goroutine, where each handler's goroutine
		// deletes its own at once, side by side.
		w.mq, _ = q.(azq.MessageQueue)
	}
	return w
}

// Stats returns the worker's counters. It may be called at any time, from
// any goroutine.
func (w *Worker) Stats() Stats { return w.stats.snapshot() }

// Run fetches and handles messages until ctx ends, then shuts down
// gracefully: it stops fetching, lets running handlers finish for up to
// ShutdownTimeout, cancels the rest and releases their messages, and returns
// once every goroutine it started has ended. It returns nil after a shutdown
// caused by ctx, the options' error if they are invalid, and the fetch error
// if the source rejects the worker's request as invalid (for example a
// LeaseDuration the queue does not accept), which no retry would mend.
// Run may be called only once.
func (w *Worker) Run(ctx context.Context) error {
	if w.err != nil {
		return w.err
	}
	if !w.ran.CompareAndSwap(false, true) {
		return errors.New("worker: Run called more than once")
	}
	// Handlers, renewals and the final deletes outlive ctx by the
	// shutdown grace period, so they run on a context that keeps ctx's
	// values but not its cancellation.
	w.base = context.WithoutCancel(ctx)
	// A fixed set of handler goroutines, rather than one per message: a
	// fresh goroutine's stack has to grow on every message, which cost
	// more than everything else the worker does. They fetch as well as
	// handle; see dispatch.
	ctx, stop := context.WithCancel(ctx)
	defer stop()
	w.stopRun = stop
	w.backoff = newBackoff(w.cfg.MinPollInterval, w.cfg.MaxPollInterval, w.cfg.Rand)
	w.work.init(w)
	w.running = make([]atomic.Pointer[Delivery], w.cfg.Concurrency)
	for i := range w.running {
		w.wg.Add(1)
		go w.handle(ctx, i)
	}
	<-ctx.Done()
	w.work.close()
	w.leases.stop()
	w.shutdown()
	return w.fatal
}

// handle is a handler goroutine: it fetches when dispatch says so, and
// handles messages, until Run stops.
func (w *Worker) handle(ctx context.Context, id int) {
	defer w.wg.Done()
	slot := &w.running[id]
	for {
		d, fetch, ok := w.work.next(id)
		switch {
		case !ok:
			return
		case fetch:
			ds := w.fetch(ctx)
			if !w.work.fetched(id, ds) {
				// Run stopped while they were fetched.
				for _, d := range ds {
					w.abandon(d)
				}
			}
		default:
			w.process(d, slot)
		}
	}
}

// fetch fetches one batch, after the pause that the last fetch called for,
// and returns its deliveries, leased, for dispatch to queue. The caller
// holds the fetch role, which serialises fetches and guards the back-off
// state. On the way out it gives the batch back if Run stopped meanwhile.
func (w *Worker) fetch(ctx context.Context) []*Delivery {
	if ctx.Err() != nil {
		return nil
	}
	if d := w.pauseNext; d > 0 {
		w.pauseNext = 0
		if !w.pause(ctx, d, w.pauseCause) {
			return nil
		}
	}
	n := min(w.cfg.BatchSize, w.cfg.Concurrency-w.handling())
	var msgs []azq.Message
	var err error
	if w.recv != nil {
		msgs, err = w.recv.Receive(ctx, n, w.cfg.LeaseDuration)
	} else {
		msgs, err = w.q.Get(ctx, n, w.cfg.LeaseDuration)
	}
	if len(msgs) == 0 {
		switch {
		case ctx.Err() != nil:
		case err != nil && errors.Is(err, azq.ErrInvalidArgument):
			// No retry would mend it: stop, and let Run report it.
			w.fatal = fmt.Errorf("worker: fetching from the queue: %w", err)
			w.stopRun()
		default:
			if err != nil {
				w.stats.errors.Add(1)
			}
			w.pauseNext, w.pauseCause = w.backoff.failure(), err
		}
		return nil
	}
	// Leases run from about now, as their renewals do: a Receive may
	// have waited long for the messages before leasing them.
	leaseEnd := w.clk.Now().Add(w.cfg.LeaseDuration)
	w.stats.received.Add(uint64(len(msgs)))
	w.stats.inFlight.Add(int64(len(msgs)))
	w.emit(Event{Kind: EventFetched, N: len(msgs)})
	ds := w.newDeliveries(msgs, leaseEnd)
	if ctx.Err() != nil {
		// Stopping: do not start what there may be no time to finish;
		// give it back at once.
		for _, d := range ds {
			w.release(d)
		}
		return nil
	}
	w.backoff.success()
	// Functions waits its minimum interval after every batch with
	// messages. After a full batch this fetches again as soon as there is
	// room instead: more are probably waiting, and waiting would leave
	// free handlers idle for up to MinPollInterval per batch under a
	// backlog. After a partial batch the queue is probably drained: poll
	// again after the minimum interval, as Functions does. A source that
	// can block is waited on instead.
	if w.recv == nil && len(msgs) < n {
		w.pauseNext, w.pauseCause = w.cfg.MinPollInterval, nil
	}
	// Leases run from the fetch, so their renewals are scheduled now, for
	// the whole batch at once.
	w.leases.scheduleBatch(ds, w.cfg.LeaseDuration/2)
	return ds
}

// pause waits d on the worker's clock, reporting why; false if ctx ended.
// On a source's clock that is not the real one, the wait also ends after d
// of real time (see Options.Clock).
func (w *Worker) pause(ctx context.Context, d time.Duration, cause error) bool {
	c, stop := w.after(d)
	defer stop()
	var real <-chan time.Time
	if w.cfg.pollRealToo {
		t := time.NewTimer(d)
		defer t.Stop()
		real = t.C
	}
	// Reported once the timer is armed, so that a test that advances a
	// mock clock on this event cannot move time before the wait starts.
	w.emit(Event{Kind: EventPollWait, Wait: d, Err: cause})
	select {
	case <-c:
		return true
	case <-real:
		return true
	case <-ctx.Done():
		return false
	}
}

// after returns a channel that receives once d has passed on the worker's
// clock, and a function that disarms it. It is a callback that sends
// without blocking into a channel of its own with room for one, rather than
// a clock Timer's channel: a mock clock advanced while another goroutine
// arms a timer can fire one timer twice, and the second send on a full
// Timer channel blocks with the mock's lock held, which hangs every user of
// the clock. A second run of the callback here finds the channel full and
// does nothing.
func (w *Worker) after(d time.Duration) (<-chan struct{}, func()) {
	c := make(chan struct{}, 1)
	t := w.clk.AfterFunc(d, func() {
		select {
		case c <- struct{}{}:
		default:
		}
	})
	return c, func() { t.Stop() }
}

// handling returns how many messages fetched hold a handler or wait for
// one: those in flight but for those whose delete waits in a batch.
func (w *Worker) handling() int {
	return int(w.stats.inFlight.Load() - w.settling.Load())
}

// newDeliveries wraps the messages of a fetched batch, leased until
// leaseEnd.
func (w *Worker) newDeliveries(msgs []azq.Message, leaseEnd time.Time) []*Delivery {
	ds := make([]*Delivery, len(msgs))
	for i := range msgs {
		m := &msgs[i]
		ds[i] = &Delivery{Message: m, w: w, receipt: m.PopReceipt, content: m.Content, hidx: -1, leaseEnd: leaseEnd}
		ds[i].ctx.parent = w.base
	}
	return ds
}

// process runs the handler for d in the handler goroutine that owns slot,
// and acts on its result.
func (w *Worker) process(d *Delivery, slot *atomic.Pointer[Delivery]) {
	if d.Message.DequeueCount > int64(w.cfg.MaxDequeueCount) {
		// An earlier attempt ended without an outcome (a crash or a lost
		// lease) and used up the last try: set it aside unprocessed.
		d.mu.Lock()
		d.done = true
		w.stopTimerLocked(d)
		d.mu.Unlock()
		w.poison(d, d.receipt, d.content, ReasonDequeueCountExceeded, nil)
		return
	}
	// Published before stopping is read, while shutdown sets stopping
	// before it reads the slots: one of the two sees the other, so a
	// handler either is not started or is cancelled at the deadline.
	slot.Store(d)
	if w.stopping.Load() {
		// Shutdown has already cancelled what was running: a handler
		// started now would escape the deadline. Give the message back
		// instead, as for those it cancelled.
		slot.Store(nil)
		w.abandon(d)
		return
	}

	err := w.invoke(&d.ctx, d)

	slot.Store(nil)
	w.settle(d, err)
	d.ctx.cancel(context.Canceled)
}

// invoke calls the handler, turning a panic into a *PanicError.
func (w *Worker) invoke(ctx context.Context, d *Delivery) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = &PanicError{Value: r, Stack: debug.Stack()}
		}
	}()
	return w.h(ctx, d)
}

// settle acts on the handler's result, unless shutdown already released
// the message.
func (w *Worker) settle(d *Delivery, herr error) {
	d.mu.Lock()
	if d.done {
		d.mu.Unlock()
		return
	}
	d.done = true
	w.stopTimerLocked(d)
	lost, receipt, content, leaseEnd := d.lost, d.receipt, d.content, d.leaseEnd
	d.mu.Unlock()

	id := d.Message.ID
	switch {
	case lost:
		w.finish(d, EventLeaseLost, nil)
	case herr == nil && w.mq != nil:
		w.deletes.add(d, receipt, leaseEnd)
	case herr == nil:
		w.deleted(d, w.q.Delete(w.base, id, receipt))
	default:
		w.stats.failed.Add(1)
		if d.Message.DequeueCount >= int64(w.cfg.MaxDequeueCount) {
			w.poison(d, receipt, content, ReasonHandlerFailed, herr)
			return
		}
		_, err := w.q.Update(w.base, id, receipt, w.cfg.RetryDelay, nil)
		switch {
		case err == nil:
			w.finish(d, EventRetry, herr)
		case isGone(err):
			w.stats.lost.Add(1)
			w.finish(d, EventLeaseLost, err)
		default:
			w.stats.errors.Add(1)
			w.finish(d, EventAbandoned, err)
		}
	}
}

// deleted settles d, whose handler succeeded, on the answer to its delete.
func (w *Worker) deleted(d *Delivery, err error) {
	switch {
	case err == nil:
		w.stats.succeeded.Add(1)
		w.finish(d, EventSucceeded, nil)
	case isGone(err):
		w.stats.lost.Add(1)
		w.finish(d, EventLeaseLost, err)
	default:
		w.stats.errors.Add(1)
		w.finish(d, EventAbandoned, err)
	}
}

// errNoPoisonQueue is the Err of EventAbandoned for a message that should
// be set aside when there is no poison queue.
var errNoPoisonQueue = errors.New("worker: no poison queue; message left invisible until its lease lapses")

// poison copies the message to the poison queue, then deletes it. Like
// Functions it copies first: a crash in between leaves a duplicate in the
// poison queue rather than losing the message.
func (w *Worker) poison(d *Delivery, receipt azq.PopReceipt, content, reason string, herr error) {
	pq, err := w.poisonQueue()
	if pq == nil {
		if err != nil {
			w.stats.errors.Add(1)
		} else {
			err = errNoPoisonQueue
		}
		// Left invisible, not released: releasing would hand it straight
		// back to be set aside again, a hot loop.
		w.finish(d, EventAbandoned, err)
		return
	}
	body := content
	if !w.cfg.PoisonBodyOnly {
		rec := PoisonRecord{Queue: w.cfg.QueueName, MessageID: d.Message.ID,
			InsertionTime: d.Message.InsertionTime, DequeueCount: d.Message.DequeueCount,
			Reason: reason, PoisonedAt: w.clk.Now()}
		rec.setBody(content)
		if herr != nil {
			rec.Error = herr.Error()
		}
		body = rec.marshal()
	}
	_, err = pq.Put(w.base, body, nil)
	if err != nil && body != content && errors.Is(err, azq.ErrMessageTooLarge) {
		// The record did not fit where the body alone does: keep the
		// message, lose the annotation (the event still carries why).
		_, err = pq.Put(w.base, content, nil)
	}
	if err != nil {
		w.stats.errors.Add(1)
		w.finish(d, EventAbandoned, fmt.Errorf("worker: putting to the poison queue: %w", err))
		return
	}
	if err := w.q.Delete(w.base, d.Message.ID, receipt); err != nil && !isGone(err) {
		// The copy exists; the original reappears after its lease and is
		// set aside again, a duplicate in the poison queue.
		w.stats.errors.Add(1)
	}
	w.stats.poisoned.Add(1)
	w.finish(d, EventPoisoned, herr)
}

// poisonQueue opens the poison queue on first use. It returns nil, nil when
// there is none.
func (w *Worker) poisonQueue() (Queue, error) {
	w.poisonMu.Lock()
	defer w.poisonMu.Unlock()
	if w.poisonQ != nil || w.poisonNone || w.cfg.Poison == nil || w.cfg.poisonName == "" {
		return w.poisonQ, nil
	}
	q, err := w.cfg.Poison(w.base, w.cfg.poisonName)
	if errors.Is(err, errors.ErrUnsupported) {
		// The source opens no queues (one made by azq.New): there is
		// no poison queue, as if Poison were nil, from now on.
		w.poisonNone = true
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("worker: opening poison queue %q: %w", w.cfg.poisonName, err)
	}
	w.poisonQ = q
	return q, nil
}

// release gives d's message back at once (visibility 0): used at shutdown
// so that nobody waits out a long lease for work that was dropped.
func (w *Worker) release(d *Delivery) {
	_, err := w.q.Update(w.base, d.Message.ID, d.receipt, 0, nil)
	switch {
	case err == nil:
		w.stats.released.Add(1)
		w.finish(d, EventReleased, nil)
	case isGone(err):
		w.stats.lost.Add(1)
		w.finish(d, EventLeaseLost, err)
	default:
		w.stats.errors.Add(1)
		w.finish(d, EventAbandoned, err)
	}
}

// finish ends a delivery: it frees its slot, then reports the outcome.
func (w *Worker) finish(d *Delivery, k EventKind, err error) {
	// Shutdown waits for none to be in flight; fetching needs no signal,
	// as the goroutine calling finish goes back to dispatch, which fetches
	// when in-flight work is at the threshold.
	if w.stats.inFlight.Add(-1) == 0 {
		select {
		case w.freed <- struct{}{}:
		default:
		}
	}
	w.emit(Event{Kind: k, MessageID: d.Message.ID, DequeueCount: d.Message.DequeueCount, Err: err})
}

// shutdown runs after fetching stopped: it sends the pending deletes,
// waits for handlers up to the deadline, releases what is still running,
// and waits for every goroutine.
func (w *Worker) shutdown() {
	// From here on each delete goes at once: there is no more work for
	// a batch to wait for.
	w.deletes.close()
	if n := w.stats.inFlight.Load(); n > 0 && w.cfg.ShutdownTimeout > 0 {
		deadline, stop := w.after(w.cfg.ShutdownTimeout)
		w.emit(Event{Kind: EventStopping, N: int(n), Wait: w.cfg.ShutdownTimeout})
	wait:
		for w.stats.inFlight.Load() > 0 {
			select {
			case <-w.freed:
			case <-deadline:
				break wait
			}
		}
		stop()
	}
	// From here on process starts no handler: a delivery still queued for
	// a handler goroutine, or picked up but not yet active, is released
	// there rather than run past the deadline.
	w.stopping.Store(true)
	var left []*Delivery
	for i := range w.running {
		if d := w.running[i].Load(); d != nil {
			left = append(left, d)
		}
	}
	for _, d := range left {
		w.abandon(d)
	}
	w.wg.Wait()
}

// abandon stops a delivery at shutdown, running or about to start: it
// cancels the handler's context and releases the message. The handler's
// later result, if it runs, is ignored.
func (w *Worker) abandon(d *Delivery) {
	d.mu.Lock()
	if d.done {
		d.mu.Unlock()
		return
	}
	d.done, d.released = true, true
	w.stopTimerLocked(d)
	lost := d.lost
	d.mu.Unlock()
	// Cancel first, so the handler stops its side effects before another
	// worker can take the message.
	d.ctx.cancel(ErrShutdown)
	if lost {
		w.finish(d, EventLeaseLost, nil)
		return
	}
	w.release(d)
}

// isGone reports whether err says the message is no longer ours, so that
// its lease is lost and there is nothing left to delete: the message is
// gone (Azure's 404 MessageNotFound for a stale receipt, or the 400
// PopReceiptMismatch that some services and emulators answer instead; both
// match azq.ErrMessageNotFound), or its queue is (QueueNotFound; and
// QueueBeingDeleted or QueueDisabled from the service, which match no
// sentinel). Functions stops renewing on the same codes and ignores them on
// delete. An error built by a remote source's client matches by its code.
func isGone(err error) bool {
	if errors.Is(err, azq.ErrMessageNotFound) || errors.Is(err, azq.ErrQueueNotFound) {
		return true
	}
	var ae *azq.Error
	if !errors.As(err, &ae) {
		return false
	}
	return ae.Code == azq.CodeQueueBeingDeleted || ae.Code == azq.CodeQueueDisabled
}
