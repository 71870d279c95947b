package azqpubsub

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/azqlib/azq"
	"github.com/azqlib/azq/envelope"
	"github.com/azqlib/azq/internal/realclock"
	"github.com/benbjohnson/clock"
	"gocloud.dev/gcerrors"
	"gocloud.dev/pubsub"
	"gocloud.dev/pubsub/batcher"
	"gocloud.dev/pubsub/driver"
)

// The service gives at most 32 messages a Get and takes one Delete or
// Update a request: receives are batches of up to 32, acks are loops, and
// concurrent handlers make a remote subscription fast.
var (
	recvBatcherOpts = &batcher.Options{MaxBatchSize: 32, MaxHandlers: 8}
	ackBatcherOpts  = &batcher.Options{MaxBatchSize: 32, MaxHandlers: 64}
)

const (
	// maxWait is how long ReceiveBatch waits for a message when none is
	// visible, as gocloud asks of a driver (less than about a second),
	// and as long as its in-memory and SQS drivers wait: the portable
	// type waits for every ReceiveBatch of a round before it starts the
	// next, so a long wait in one stalls the others' successors.
	maxWait = 250 * time.Millisecond
	// minPoll and maxPoll bound the interval between the Gets of a
	// subscription on a queue that cannot wait for messages (a remote
	// one): it doubles while the queue stays empty, so that an idle
	// subscription costs about one request a second however often
	// ReceiveBatch is called, and is reset when a message comes.
	minPoll = 50 * time.Millisecond
	maxPoll = time.Second
)

// SubscriptionOptions configure a subscription. The zero value is ready to
// use.
type SubscriptionOptions struct {
	// VisibilityTimeout is the ack deadline: how long a received message
	// stays hidden from other receivers. A message neither acked nor
	// nacked by then is delivered again. Default azq.DefaultVisibilityTimeout
	// (30 seconds); the service takes 1 second to 7 days.
	VisibilityTimeout time.Duration
	// ReceiveBatcherOptions and AckBatcherOptions adjust how the portable
	// type batches receives and acknowledgements.
	ReceiveBatcherOptions batcher.Options
	AckBatcherOptions     batcher.Options
	// Clock is the clock of the subscription's waits. A mock clock set
	// here is waited on alone: the test must move it for a polled queue
	// to be asked again. Default: the queue's clock, if it reports one (a
	// Clock method), else the real clock; when the queue's clock is not
	// the real one (a mock clock of azq's test server that an azure.Queue
	// reports), a polled queue's waits also end after as long in real
	// time, so that a subscription polls whether or not the test moves
	// the clock, as a worker does.
	Clock clock.Clock
}

// receiver is a queue that can wait for messages, as *azq.Queue and
// azq.NamedQueue can.
type receiver interface {
	Receive(ctx context.Context, n int, visibility time.Duration) ([]azq.Message, error)
}

// subscription is the driver.Subscription over one queue.
type subscription struct {
	q    azq.MessageQueue
	recv receiver // nil: poll q
	clk  clock.Clock
	vis  time.Duration

	// realToo: the waits of a polled queue also end after as long on the
	// real clock, since clk is the queue's and not the real one.
	realToo bool

	mu       sync.Mutex    // guards next, nextReal and interval
	next     time.Time     // when a polled queue may be asked again; zero: now
	nextReal time.Time     // the same on the real clock, if realToo
	interval time.Duration // the current poll interval; 0 while messages come

	// done holds the messages that tries of SendAcks and SendNacks which
	// failed part-way got through, for gocloud's retries to skip.
	done doneSet
}

// doneSet remembers, for the retries of calls on lists of messages that
// failed part-way with a retryable error, which messages the failed tries
// got through, so that each retry resumes where its try stopped: under
// one fault in ten requests, a batch of 32 acks started from the top each
// time would hardly ever get through. gocloud retries a batch with the
// same AckIDs. A retry that never comes (gocloud gave up when its context
// ended) leaves its messages here, so the set forgets everything once it
// holds maxRemembered of them: a retry that then starts from the top acks
// again what is gone already, which the subscription takes as done.
type doneSet struct {
	mu  sync.Mutex // guards ids
	ids map[driver.AckID]bool
}

// take returns, and forgets, which of ids an earlier try got through;
// nil if none, as there are none at all unless a call failed.
func (s *doneSet) take(ids []driver.AckID) map[driver.AckID]bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.ids) == 0 {
		return nil
	}
	var done map[driver.AckID]bool
	for _, id := range ids {
		if s.ids[id] {
			if done == nil {
				done = make(map[driver.AckID]bool)
			}
			done[id] = true
			delete(s.ids, id)
		}
	}
	return done
}

// keep records that a try got through ids.
func (s *doneSet) keep(ids []driver.AckID) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ids == nil || len(s.ids)+len(ids) > maxRemembered {
		s.ids = make(map[driver.AckID]bool)
	}
	for _, id := range ids {
		s.ids[id] = true
	}
}

// each calls f on each message of ids that an earlier try did not get
// through, stopping at its first error; if that error is retryable, it
// records what this try got through.
func (s *doneSet) each(ids []driver.AckID, f func(m *azq.Message) error) error {
	done := s.take(ids)
	for i, id := range ids {
		if done[id] {
			continue
		}
		if err := f(id.(*azq.Message)); err != nil {
			if isRetryable(err) {
				s.keep(ids[:i])
			}
			return err
		}
	}
	return nil
}

var _ driver.Subscription = (*subscription)(nil)

// OpenSubscription returns a subscription that receives the messages of
// q: envelopes as their body and metadata, and a plain message that
// another producer wrote with its text as the body. q may be any back end
// of the queue contract; a missing queue is reported by Receive, as
// NotFound.
//
// Ack deletes the message; Nack makes it visible again at once. A queue
// that can wait for messages (an *azq.Queue) is waited on; any other is
// polled, at shorter intervals while messages come and up to one a second
// while none do. Waits are measured on the queue's clock if it reports
// one (a Clock method), as azq's and package azure's queues do, and a
// polled queue's also in real time if that clock is not the real one (see
// SubscriptionOptions.Clock).
func OpenSubscription(q azq.MessageQueue, opts *SubscriptionOptions) *pubsub.Subscription {
	var o SubscriptionOptions
	if opts != nil {
		o = *opts
	}
	return pubsub.NewSubscription(newSubscription(q, &o),
		recvBatcherOpts.NewMergedOptions(&o.ReceiveBatcherOptions),
		ackBatcherOpts.NewMergedOptions(&o.AckBatcherOptions))
}

func newSubscription(q azq.MessageQueue, o *SubscriptionOptions) *subscription {
	s := &subscription{q: q, clk: clock.New(), vis: o.VisibilityTimeout}
	if s.vis == 0 {
		s.vis = azq.DefaultVisibilityTimeout
	}
	s.recv, _ = q.(receiver)
	switch c, ok := q.(interface{ Clock() clock.Clock }); {
	case o.Clock != nil:
		s.clk = o.Clock
	case ok && c.Clock() != nil:
		s.clk = c.Clock()
		s.realToo = !realclock.Is(s.clk)
	}
	return s
}

// A received message's AckID is a pointer to it, an element of the
// slice Get returned, and its AsFunc exposes it as *azq.Message.
func messageAs(m *azq.Message) func(any) bool {
	return func(i any) bool {
		if p, ok := i.(*azq.Message); ok {
			*p = *m
			return true
		}
		return false
	}
}

// ReceiveBatch implements driver.Subscription.ReceiveBatch.
func (s *subscription) ReceiveBatch(ctx context.Context, maxMessages int) ([]*driver.Message, error) {
	n := max(1, min(maxMessages, 32))
	var msgs []azq.Message
	var err error
	if s.recv != nil {
		if msgs, err = s.q.Get(ctx, n, s.vis); err == nil && len(msgs) == 0 {
			msgs, err = s.receive(ctx, n)
		}
	} else {
		msgs, err = s.poll(ctx, n)
	}
	if err != nil || len(msgs) == 0 {
		return nil, err
	}
	// One allocation each for the batch's driver messages and their IDs'
	// text.
	dms := make([]driver.Message, len(msgs))
	out := make([]*driver.Message, len(msgs))
	ids := make([]byte, 0, uuidLen*len(msgs))
	for i := range msgs {
		ids = appendUUID(ids, msgs[i].ID)
	}
	idText := string(ids)
	for i := range msgs {
		m := &msgs[i]
		e, _ := envelope.Read(m.Content)
		dms[i] = driver.Message{
			LoggableID: idText[i*uuidLen : (i+1)*uuidLen],
			Body:       e.Body,
			Metadata:   e.Metadata,
			AckID:      m,
			AsFunc:     messageAs(m),
		}
		out[i] = &dms[i]
	}
	return out, nil
}

// uuidLen is the length of a UUID's text, as MessageID.String writes it.
const uuidLen = 36

// appendUUID appends the text of id, as id.String returns it: lower-case
// hex digits in groups of 8, 4, 4, 4 and 12, joined by hyphens.
func appendUUID(dst []byte, id azq.MessageID) []byte {
	var b [uuidLen]byte
	hex.Encode(b[0:8], id[0:4])
	b[8] = '-'
	hex.Encode(b[9:13], id[4:6])
	b[13] = '-'
	hex.Encode(b[14:18], id[6:8])
	b[18] = '-'
	hex.Encode(b[19:23], id[8:10])
	b[23] = '-'
	hex.Encode(b[24:], id[10:])
	return append(dst, b[:]...)
}

// receive waits up to maxWait for messages on a queue that can wait, and
// returns what came (none if the wait ran out).
func (s *subscription) receive(ctx context.Context, n int) ([]azq.Message, error) {
	// A timer of the queue's clock ends the wait (the mock clock's own
	// WithTimeout context is not safe for concurrent use).
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	t := s.clk.AfterFunc(maxWait, cancel)
	defer t.Stop()
	msgs, err := s.recv.Receive(wctx, n, s.vis)
	if err != nil && ctx.Err() == nil && wctx.Err() != nil {
		return nil, nil // waited long enough: nothing
	}
	return msgs, err
}

// poll gets messages from a queue that cannot wait: at once while
// messages come, and otherwise when the poll interval allows, for up to
// maxWait.
func (s *subscription) poll(ctx context.Context, n int) ([]azq.Message, error) {
	deadline := s.clk.Now().Add(maxWait)
	realDeadline := time.Now().Add(maxWait)
	for {
		s.mu.Lock()
		next, nextReal := s.next, s.nextReal
		s.mu.Unlock()
		now, realNow := s.clk.Now(), time.Now()
		if now.Before(next) && (!s.realToo || realNow.Before(nextReal)) {
			// Not due yet: wait until it is, or until the deadline, on the
			// queue's clock or, if realToo, the real one.
			last := !next.Before(deadline)
			wait := next.Sub(now)
			if last {
				wait = deadline.Sub(now)
			}
			t := s.clk.Timer(wait)
			var rt *time.Timer
			var realC <-chan time.Time
			lastReal := false
			if s.realToo {
				lastReal = !nextReal.Before(realDeadline)
				wait := nextReal.Sub(realNow)
				if lastReal {
					wait = realDeadline.Sub(realNow)
				}
				rt = time.NewTimer(wait)
				realC = rt.C
			}
			var ended, done bool
			select {
			case <-ctx.Done():
				ended = true
			case <-t.C:
				done = last
			case <-realC:
				done = lastReal
			}
			t.Stop()
			if rt != nil {
				rt.Stop()
			}
			switch {
			case ended:
				return nil, ctx.Err()
			case done:
				return nil, nil // waited long enough: nothing
			}
		}
		msgs, err := s.q.Get(ctx, n, s.vis)
		if err != nil {
			return nil, err
		}
		s.mu.Lock()
		if len(msgs) > 0 {
			s.interval, s.next, s.nextReal = 0, time.Time{}, time.Time{}
		} else {
			s.interval = min(max(2*s.interval, minPoll), maxPoll)
			s.next, s.nextReal = s.clk.Now().Add(s.interval), time.Now().Add(s.interval)
		}
		s.mu.Unlock()
		if len(msgs) > 0 {
			return msgs, nil
		}
	}
}

// SendAcks implements driver.Subscription.SendAcks: the messages are
// deleted with azq.DeleteBatch, up to azq.MaxBatchSize a call (one commit
// where the back end batches). A message that is gone already (acked
// before) or whose receipt is stale (its ack deadline passed and another
// receiver took it) is passed over, as gocloud asks of a driver; the queue
// service answers both the same way. Another message's failure fails the
// call, after the rest of its batch; a retry of a call that failed resumes
// with the messages it did not get through.
func (s *subscription) SendAcks(ctx context.Context, ids []driver.AckID) error {
	done := s.done.take(ids)
	var acked []driver.AckID // what this call got through, for a retry
	fail := func(err error) error {
		if isRetryable(err) {
			for id := range done {
				acked = append(acked, id)
			}
			s.done.keep(acked)
		}
		return err
	}
	reqs := make([]azq.DeleteRequest, 0, min(len(ids), azq.MaxBatchSize))
	who := make([]driver.AckID, 0, cap(reqs))
	for i := 0; i < len(ids); {
		reqs, who = reqs[:0], who[:0]
		for ; i < len(ids) && len(reqs) < azq.MaxBatchSize; i++ {
			if done[ids[i]] {
				continue
			}
			m := ids[i].(*azq.Message)
			reqs = append(reqs, azq.DeleteRequest{ID: m.ID, PopReceipt: m.PopReceipt})
			who = append(who, ids[i])
		}
		if len(reqs) == 0 {
			continue
		}
		errs, err := azq.DeleteBatch(ctx, s.q, reqs)
		if err == nil && len(errs) != len(reqs) {
			err = fmt.Errorf("azqpubsub: DeleteBatch answered %d results for %d messages", len(errs), len(reqs))
		}
		if err != nil {
			return fail(err)
		}
		var first error
		for j, err := range errs {
			if err != nil && !errors.Is(err, azq.ErrMessageNotFound) {
				if first == nil {
					first = err
				}
				continue
			}
			acked = append(acked, who[j])
		}
		if first != nil {
			return fail(first)
		}
	}
	return nil
}

// CanNack implements driver.Subscription.CanNack.
func (*subscription) CanNack() bool { return true }

// SendNacks implements driver.Subscription.SendNacks: each message is made
// visible again at once (Update with a visibility timeout of 0, content
// kept). A message that is gone or taken by another receiver is passed
// over. A retry of a call that failed part-way resumes where it stopped.
func (s *subscription) SendNacks(ctx context.Context, ids []driver.AckID) error {
	return s.done.each(ids, func(m *azq.Message) error {
		if _, err := s.q.Update(ctx, m.ID, m.PopReceipt, 0, nil); err != nil && !errors.Is(err, azq.ErrMessageNotFound) {
			return err
		}
		return nil
	})
}

// IsRetryable implements driver.Subscription.IsRetryable: the failures
// that may pass (see isRetryable), which gocloud then retries, so that
// one does not end the subscription. A retried ack finds the messages
// deleted before the failure gone, and passes over them.
func (*subscription) IsRetryable(err error) bool { return isRetryable(err) }

// As implements driver.Subscription.As: the queue as *azq.MessageQueue
// and, by its type, as **azq.Queue or **azure.Queue.
func (s *subscription) As(i any) bool { return queueAs(s.q, i) }

// ErrorAs implements driver.Subscription.ErrorAs.
func (*subscription) ErrorAs(err error, i any) bool { return errorAs(err, i) }

// ErrorCode implements driver.Subscription.ErrorCode.
func (*subscription) ErrorCode(err error) gcerrors.ErrorCode { return errorCode(err) }

// Close implements driver.Subscription.Close. The queue is the caller's
// and stays open.
func (*subscription) Close() error { return nil }

var (
	_ receiver = (*azq.Queue)(nil)
	_ receiver = azq.NamedQueue{}
)
