package worker

import (
	"context"
	"sync"
	"time"
)

// handlerCtx is the context a handler runs with: Run's context without its
// cancellation, cancelled with a cause when the lease is lost, at shutdown,
// or when the handler returns.
//
// It is a context.WithCancelCause made only when the handler first needs
// one. Most handlers never wait on Done, and making the context up front
// (two allocations and a cancellation per message) cost a tenth of the
// worker's time per message. Until then, cancelling records the cause and
// Err answers from it. Done, Value and everything the context package
// does with a parent (context.Cause, WithCancel, AfterFunc) go through the
// real context, so they behave exactly as with one made up front: Value
// is how context.Cause and child contexts find their cancelable parent.
type handlerCtx struct {
	parent context.Context

	mu      sync.Mutex
	real    context.Context // nil until first needed
	stopper context.CancelCauseFunc
	cause   error // set when cancelled
}

func (c *handlerCtx) Deadline() (time.Time, bool) { return c.parent.Deadline() }
func (c *handlerCtx) Done() <-chan struct{}       { return c.materialize().Done() }
func (c *handlerCtx) Value(key any) any           { return c.materialize().Value(key) }

func (c *handlerCtx) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.real != nil {
		return c.real.Err()
	}
	if c.cause != nil {
		return context.Canceled
	}
	return nil
}

func (c *handlerCtx) String() string { return "worker.handlerContext" }

// materialize returns the real context, making it on first use, already
// cancelled if c was.
func (c *handlerCtx) materialize() context.Context {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.real == nil {
		c.real, c.stopper = context.WithCancelCause(c.parent)
		if c.cause != nil {
			c.stopper(c.cause)
		}
	}
	return c.real
}

// cancel cancels c with cause; only the first cancellation counts.
func (c *handlerCtx) cancel(cause error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cause != nil {
		return
	}
	c.cause = cause
	if c.real != nil {
		c.stopper(cause)
	}
}
