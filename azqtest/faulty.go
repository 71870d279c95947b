package azqtest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"syscall"
	"time"

	"github.com/azqlib/azq"
	"github.com/azqlib/azq/faults"
	"github.com/azqlib/azq/observe"
	"github.com/azqlib/azq/server"
	"github.com/google/uuid"
)

// FaultyQueue applies fault rules to any azq.MessageQueue, in process:
// each call is one request to the Injector, named as the REST operation it
// stands for (Put is PutMessage, Get GetMessages, Peek PeekMessages,
// Update UpdateMessage, Delete DeleteMessage, Clear ClearMessages,
// ApproximateCount GetQueueMetadata), on FaultyOptions' account and
// queue. A worker or a consumer can so meet Azure's bad days on the
// in-memory back end, under a mock clock.
//
// Its errors are what package azure returns once the SDK has given up
// retrying: for an error answer, an *azq.Error with Azure's code, status
// and message followed by " (request <id>)", which matches azq's sentinels
// (the adapter's errors also carry the SDK's *azcore.ResponseError, which
// this package, free of the SDK, does not); for a failed connection, a
// *url.Error wrapping io.EOF (closed), a *net.OpError with
// syscall.ECONNRESET (reset) or io.ErrUnexpectedEOF (answer cut off). An
// applied fault runs the call on the wrapped queue first and drops its
// result. A delay is served on the real clock, or until the context ends.
//
// FaultyQueue models one attempt per call: it does not retry, as the
// SDK's retry policy would, so a rule's hit is a failure the caller sees.
type FaultyQueue struct {
	q       azq.MessageQueue
	inj     *faults.Injector
	account string
	queue   string
	observe func(observe.Observation)
}

var _ azq.MessageQueue = (*FaultyQueue)(nil)

// FaultyOptions configure a FaultyQueue.
type FaultyOptions struct {
	// Account is the account the rules see; empty means
	// "devstoreaccount1".
	Account string
	// Queue is the queue name the rules see; empty means the wrapped
	// queue's Name, if it has one (an *azq.Queue, an *azure.Queue).
	Queue string
	// Observe, if set, hears of every call as server.Options.Observe
	// hears of every request; a metrics.Recorder's Observe counts them.
	Observe func(observe.Observation)
}

// NewFaultyQueue wraps q: every call meets what in decides.
func NewFaultyQueue(q azq.MessageQueue, in *faults.Injector, opts FaultyOptions) *FaultyQueue {
	f := &FaultyQueue{q: q, inj: in, account: opts.Account, queue: opts.Queue, observe: opts.Observe}
	if f.account == "" {
		f.account = "devstoreaccount1"
	}
	if f.queue == "" {
		if n, ok := q.(interface{ Name() string }); ok {
			f.queue = n.Name()
		}
	}
	return f
}

// Unwrap returns the wrapped queue.
func (f *FaultyQueue) Unwrap() azq.MessageQueue { return f.q }

// call is one request: op on the queue, asking for n messages (for the
// throttle), served by run on the wrapped queue unless a fault says
// otherwise; status is the answer's status on success.
func (f *FaultyQueue) call(ctx context.Context, op, method string, n, status int, run func() error) error {
	start := time.Now()
	d := f.inj.Decide(faults.Request{Operation: op, Account: f.account, Queue: f.queue, Messages: n})
	o := observe.Observation{Account: f.account, Queue: f.queue, Operation: op, Fault: d.Rule}
	var err error
	switch {
	case faults.Sleep(ctx, d.Delay) != nil:
		err = ctx.Err()
		o.Outcome = observe.NetworkError
	case !d.Fails():
		err = run()
		o.Status, o.ErrorCode, o.Outcome = outcome(err, status)
	default:
		if d.Applied {
			o.Applied = run() == nil
		}
		err = f.failure(d, method)
		if d.Error != nil {
			o.Status, o.ErrorCode = d.Error.StatusCode, string(d.Error.Code)
		}
		o.Outcome = observe.OutcomeOf(o.Status, o.ErrorCode, d.Network != "")
	}
	if f.observe != nil {
		o.Duration = time.Since(start)
		f.observe(o)
	}
	return err
}

// outcome sorts the wrapped queue's result.
func outcome(err error, status int) (int, string, observe.Outcome) {
	if err == nil {
		return status, "", observe.Success
	}
	var e *azq.Error
	if errors.As(err, &e) {
		return e.StatusCode, string(e.Code), observe.OutcomeOf(e.StatusCode, string(e.Code), false)
	}
	return 0, "", observe.NetworkError
}

// failure is the error the fault d makes a call of method return.
func (f *FaultyQueue) failure(d faults.Decision, method string) error {
	if d.Error != nil {
		e := *d.Error
		if e.Message == "" {
			e.Message = server.AzureMessage(e.Code, e.StatusCode)
		}
		e.Message = fmt.Sprintf("%s (request %s)", e.Message, uuid.NewString())
		return &e
	}
	var err error
	switch d.Network {
	case faults.NetworkClose:
		err = io.EOF
	case faults.NetworkReset:
		err = &net.OpError{Op: "read", Net: "tcp", Err: os.NewSyscallError("read", syscall.ECONNRESET)}
	default:
		err = io.ErrUnexpectedEOF
	}
	return &url.Error{Op: method, URL: fmt.Sprintf("https://%s.queue.core.windows.net/%s/messages", f.account, url.PathEscape(f.queue)), Err: err}
}

// Put adds a message (PutMessage).
func (f *FaultyQueue) Put(ctx context.Context, content string, opts *azq.PutOptions) (azq.Message, error) {
	var m azq.Message
	err := f.call(ctx, "PutMessage", "Post", 1, http.StatusCreated, func() (err error) {
		m, err = f.q.Put(ctx, content, opts)
		return err
	})
	if err != nil {
		return azq.Message{}, err
	}
	return m, nil
}

// Get takes up to n messages (GetMessages).
func (f *FaultyQueue) Get(ctx context.Context, n int, visibility time.Duration) ([]azq.Message, error) {
	var ms []azq.Message
	err := f.call(ctx, "GetMessages", "Get", n, http.StatusOK, func() (err error) {
		ms, err = f.q.Get(ctx, n, visibility)
		return err
	})
	if err != nil {
		return nil, err
	}
	return ms, nil
}

// Peek returns up to n visible messages (PeekMessages).
func (f *FaultyQueue) Peek(ctx context.Context, n int) ([]azq.Message, error) {
	var ms []azq.Message
	err := f.call(ctx, "PeekMessages", "Get", n, http.StatusOK, func() (err error) {
		ms, err = f.q.Peek(ctx, n)
		return err
	})
	if err != nil {
		return nil, err
	}
	return ms, nil
}

// Update changes a message's visibility and content (UpdateMessage).
func (f *FaultyQueue) Update(ctx context.Context, id azq.MessageID, receipt azq.PopReceipt, visibility time.Duration, content *string) (azq.UpdateResult, error) {
	var res azq.UpdateResult
	err := f.call(ctx, "UpdateMessage", "Put", 1, http.StatusNoContent, func() (err error) {
		res, err = f.q.Update(ctx, id, receipt, visibility, content)
		return err
	})
	if err != nil {
		return azq.UpdateResult{}, err
	}
	return res, nil
}

// Delete removes a message (DeleteMessage).
func (f *FaultyQueue) Delete(ctx context.Context, id azq.MessageID, receipt azq.PopReceipt) error {
	return f.call(ctx, "DeleteMessage", "Delete", 1, http.StatusNoContent, func() error {
		return f.q.Delete(ctx, id, receipt)
	})
}

// Clear deletes every message (ClearMessages).
func (f *FaultyQueue) Clear(ctx context.Context) error {
	return f.call(ctx, "ClearMessages", "Delete", 1, http.StatusNoContent, func() error {
		return f.q.Clear(ctx)
	})
}

// ApproximateCount returns the number of messages (GetQueueMetadata).
func (f *FaultyQueue) ApproximateCount(ctx context.Context) (int, error) {
	var n int
	err := f.call(ctx, "GetQueueMetadata", "Get", 0, http.StatusOK, func() (err error) {
		n, err = f.q.ApproximateCount(ctx)
		return err
	})
	if err != nil {
		return 0, err
	}
	return n, nil
}
