package worker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/azqlib/azq"
)

// Errors the worker reports.
var (
	// ErrLeaseLost is the cause of a handler context cancelled because
	// the message's lease was lost (another consumer received it, it was
	// deleted or expired, or its queue was deleted or disabled), and wraps
	// what Checkpoint returns then.
	ErrLeaseLost = errors.New("worker: lease lost")
	// ErrShutdown is the cause of a handler context cancelled because the
	// shutdown deadline passed; the message has been released.
	ErrShutdown = errors.New("worker: shut down before the handler finished")
	// ErrInvalidOptions wraps every problem New found in the Options; Run
	// returns it.
	ErrInvalidOptions = errors.New("worker: invalid options")
)

// PanicError is the error a panicking handler is treated as having returned.
type PanicError struct {
	Value any    // what the handler panicked with
	Stack []byte // the handler goroutine's stack at the panic
}

// Error describes the panic.
func (e *PanicError) Error() string { return fmt.Sprintf("worker: handler panicked: %v", e.Value) }

// Unwrap returns the panic value if it is an error.
func (e *PanicError) Unwrap() error {
	err, _ := e.Value.(error)
	return err
}

// EventKind says what happened.
type EventKind int

// The events. Every message fetched ends in exactly one of EventSucceeded,
// EventRetry, EventPoisoned, EventLeaseLost, EventReleased and
// EventAbandoned; the others report progress.
const (
	// EventFetched: a fetch returned N messages (never 0).
	EventFetched EventKind = iota + 1
	// EventPollWait: the worker will wait Wait before fetching again,
	// after an empty poll or, with Err set, a failed fetch.
	EventPollWait
	// EventRenewed: the lease was renewed (by the timer or a checkpoint).
	EventRenewed
	// EventRenewFailed: renewing failed with Err; if Err wraps
	// ErrLeaseLost the lease is gone, otherwise the worker retries sooner.
	EventRenewFailed
	// EventSucceeded: the handler returned nil and the message was deleted.
	EventSucceeded
	// EventRetry: the handler failed with Err (a *PanicError for a
	// panic) and the message was released for another attempt.
	EventRetry
	// EventPoisoned: the message was copied to the poison queue and
	// deleted; Err is the handler's error, nil if it was not run.
	EventPoisoned
	// EventLeaseLost: the handler's message was lost to another consumer,
	// or went with its queue; nothing more was done with it. Err, if set,
	// is the queue's answer that showed it.
	EventLeaseLost
	// EventReleased: the shutdown deadline passed while the handler ran,
	// or the message was fetched as the worker stopped; it was released.
	EventReleased
	// EventAbandoned: a queue operation needed to settle the message
	// failed with Err (or there is no poison queue), so it was left to
	// reappear when its lease lapses.
	EventAbandoned
	// EventStopping: Run's context ended with N messages in flight; the
	// worker waits up to Wait for their handlers.
	EventStopping
)

var eventNames = [...]string{"", "fetched", "poll-wait", "renewed", "renew-failed", "succeeded",
	"retry", "poisoned", "lease-lost", "released", "abandoned", "stopping"}

// String returns the event's name, e.g. "succeeded".
func (k EventKind) String() string {
	if k > 0 && int(k) < len(eventNames) {
		return eventNames[k]
	}
	return fmt.Sprintf("EventKind(%d)", int(k))
}

// Event is something the worker did, as Options.OnEvent and the logger
// receive it.
type Event struct {
	Kind EventKind
	// Time is when it happened, on the worker's clock.
	Time time.Time
	// MessageID and DequeueCount identify the message, if the event is
	// about one.
	MessageID    azq.MessageID
	DequeueCount int64
	// N is the batch size of EventFetched.
	N int
	// Wait is the back-off of EventPollWait.
	Wait time.Duration
	// Err is the error involved, if any.
	Err error
}

// Stats are the worker's counters, read with Worker.Stats at any time.
type Stats struct {
	Received      uint64 // messages fetched
	Succeeded     uint64 // handled without error and deleted
	Failed        uint64 // handler attempts that returned an error or panicked
	Poisoned      uint64 // messages moved to the poison queue
	Released      uint64 // messages given back unfinished at shutdown
	LeaseRenewals uint64 // successful lease renewals, checkpoints included
	LeasesLost    uint64 // deliveries whose lease was lost
	Errors        uint64 // failed queue operations (fetch, renew, delete, release, poison)
	InFlight      int64  // messages fetched and not yet settled
}

type counters struct {
	received, succeeded, failed, poisoned, released, renewals, lost, errors atomic.Uint64
	inFlight                                                                atomic.Int64
}

func (c *counters) snapshot() Stats {
	return Stats{
		Received:      c.received.Load(),
		Succeeded:     c.succeeded.Load(),
		Failed:        c.failed.Load(),
		Poisoned:      c.poisoned.Load(),
		Released:      c.released.Load(),
		LeaseRenewals: c.renewals.Load(),
		LeasesLost:    c.lost.Load(),
		Errors:        c.errors.Load(),
		InFlight:      c.inFlight.Load(),
	}
}

// emit reports an event to the hook and the logger. It costs nothing when
// neither is set, so the hot path can call it unconditionally.
func (w *Worker) emit(e Event) {
	if w.cfg.OnEvent == nil && w.cfg.Logger == nil {
		return
	}
	e.Time = w.clk.Now()
	if w.cfg.OnEvent != nil {
		w.cfg.OnEvent(e)
	}
	if l := w.cfg.Logger; l != nil {
		level := slog.LevelInfo
		switch e.Kind {
		case EventFetched, EventPollWait, EventRenewed:
			level = slog.LevelDebug
		case EventRenewFailed, EventRetry, EventPoisoned, EventLeaseLost, EventAbandoned:
			level = slog.LevelWarn
		}
		ctx := context.Background()
		if !l.Enabled(ctx, level) {
			return
		}
		attrs := make([]slog.Attr, 0, 5)
		if w.cfg.QueueName != "" {
			attrs = append(attrs, slog.String("queue", w.cfg.QueueName))
		}
		if !e.MessageID.IsZero() {
			attrs = append(attrs, slog.String("message_id", e.MessageID.String()), slog.Int64("dequeue_count", e.DequeueCount))
		}
		if e.Kind == EventFetched || e.Kind == EventStopping {
			attrs = append(attrs, slog.Int("n", e.N))
		}
		if e.Kind == EventPollWait || e.Kind == EventStopping {
			attrs = append(attrs, slog.Duration("wait", e.Wait))
		}
		if e.Err != nil {
			attrs = append(attrs, slog.String("error", e.Err.Error()))
		}
		l.LogAttrs(ctx, level, "worker: "+e.Kind.String(), attrs...)
	}
}
