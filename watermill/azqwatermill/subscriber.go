package azqwatermill

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/azqlib/azq"
	"github.com/azqlib/azq/envelope"
	"github.com/azqlib/azq/internal/realclock"
	"github.com/azqlib/azq/internal/transient"
	"github.com/benbjohnson/clock"
)

// Defaults of SubscriberConfig.
const (
	DefaultBatchSize       = 16
	DefaultMaxPollInterval = time.Second
	minPollInterval        = 50 * time.Millisecond
	// releaseTimeout bounds the requests a subscription makes after its
	// end: those in flight, and those that hand held messages back.
	releaseTimeout = 10 * time.Second
)

// SubscriberConfig configures a Subscriber. The zero value is ready to
// use.
type SubscriberConfig struct {
	// VisibilityTimeout is a message's lease: how long a fetched message
	// stays hidden from other consumers of the queue. While the message
	// waits to be delivered or for its Ack or Nack, the subscriber renews
	// the lease (an Update) when half of it has passed, so a handler may
	// take as long as it needs; if the process dies, the message comes
	// back after at most this long. Default azq.DefaultVisibilityTimeout
	// (30 seconds); the service takes 1 second to 7 days.
	VisibilityTimeout time.Duration
	// BatchSize is how many messages one Get fetches, 1 to 32; they are
	// delivered one at a time. Default DefaultBatchSize.
	BatchSize int
	// NackDelay is how long a nacked message stays hidden before it is
	// delivered again. Default 0: at once.
	NackDelay time.Duration
	// MaxPollInterval is the longest wait between the Gets of a
	// subscription on an empty queue that cannot wait for messages (a
	// remote one): the interval doubles from 50 ms up to it while the
	// queue stays empty. Default DefaultMaxPollInterval.
	MaxPollInterval time.Duration
	// DoNotCreateQueues makes Subscribe fail on a missing queue; by
	// default it creates the queue. SubscribeInitialize creates it
	// either way.
	DoNotCreateQueues bool
	// QueueName maps a topic to its queue's name; nil means the topic is
	// the name.
	QueueName func(topic string) string
}

// Subscriber consumes the queues of an Account as Watermill topics: a
// topic is a queue, shared by every subscriber of it, so that each
// message goes to one of them (the queue service has no consumer
// groups). Ack deletes the message; Nack makes it visible again, after
// NackDelay. A message that another producer wrote without an envelope is
// delivered with its text as the payload, no metadata, and the queue's
// message ID as its UUID.
//
// Each subscription is one goroutine, which fetches messages in batches,
// hands them out one at a time and waits for each one's Ack or Nack
// before the next, renewing the leases of the messages it holds. Close
// ends every subscription and hands the messages they held back to the
// queue, so that other consumers get them at once; no goroutine is left.
//
// A subscription on a queue that cannot wait for messages (a remote one)
// polls it: at once while messages come, and otherwise after a wait that
// doubles from 50 ms up to MaxPollInterval. The waits run on the queue's
// clock (if it has one, as azq's and package azure's queues do; the real
// clock otherwise) and, when that clock is not the real one (the mock
// clock of azq's test server, which an azure.Queue given
// azure.Options.Clock reports), also end after as long in real time, so
// that a subscription polls whether or not a test moves the clock.
//
// A subscription keeps going through the failures that may pass — the
// service busy (ServerBusy, 429), failing (500, OperationTimedOut, 502,
// 504), a connection refused, reset or cut off, a timeout — logging each
// through the logger and trying again after a back-off on the queue's
// clock (if it has one, as azq's and package azure's queues do; the real
// clock otherwise): a Get after 50 ms, doubling up to MaxPollInterval
// while the failures last; the Delete of an Ack and the Update of a Nack
// after 50 ms, doubling, for up to a quarter of the lease, after which
// the message is left to come back. Any other failure of a Get (the queue
// deleted, the credentials refused: a 4xx answer) ends the subscription:
// it is logged as an error and the channel is closed.
type Subscriber struct {
	account Account
	cfg     SubscriberConfig
	logger  watermill.LoggerAdapter

	closing context.Context // cancelled by Close
	close   context.CancelFunc

	mu     sync.Mutex     // guards closed, and subs.Add against Close's Wait
	closed bool           // Close was called
	subs   sync.WaitGroup // running subscriptions
}

var (
	_ message.Subscriber           = (*Subscriber)(nil)
	_ message.SubscribeInitializer = (*Subscriber)(nil)
)

// NewSubscriber returns a Subscriber to the queues of account. A nil
// logger logs nothing.
func NewSubscriber(account Account, cfg SubscriberConfig, logger watermill.LoggerAdapter) (*Subscriber, error) {
	if account == nil {
		return nil, errors.New("azqwatermill: NewSubscriber needs an Account")
	}
	if cfg.VisibilityTimeout == 0 {
		cfg.VisibilityTimeout = azq.DefaultVisibilityTimeout
	}
	if cfg.VisibilityTimeout < time.Second {
		return nil, fmt.Errorf("azqwatermill: VisibilityTimeout %v is under the service's second", cfg.VisibilityTimeout)
	}
	if cfg.BatchSize == 0 {
		cfg.BatchSize = DefaultBatchSize
	}
	if cfg.BatchSize < 1 || cfg.BatchSize > 32 {
		return nil, fmt.Errorf("azqwatermill: BatchSize %d is not 1 to 32", cfg.BatchSize)
	}
	if cfg.MaxPollInterval == 0 {
		cfg.MaxPollInterval = DefaultMaxPollInterval
	}
	if cfg.NackDelay < 0 {
		return nil, fmt.Errorf("azqwatermill: negative NackDelay %v", cfg.NackDelay)
	}
	if logger == nil {
		logger = watermill.NopLogger{}
	}
	s := &Subscriber{account: account, cfg: cfg, logger: logger}
	s.closing, s.close = context.WithCancel(context.Background())
	return s, nil
}

// SubscribeInitialize creates the topic's queue unless it exists.
func (s *Subscriber) SubscribeInitialize(topic string) error {
	return s.account.CreateQueue(s.closing, queueName(topic, s.cfg.QueueName))
}

// Subscribe starts consuming the topic's queue and returns the channel
// its messages come on, which is closed when ctx ends or the Subscriber
// is closed. The queue is created unless it exists (see
// DoNotCreateQueues).
func (s *Subscriber) Subscribe(ctx context.Context, topic string) (<-chan *message.Message, error) {
	name := queueName(topic, s.cfg.QueueName)
	q, err := s.account.Queue(name)
	if err != nil {
		return nil, fmt.Errorf("azqwatermill: topic %q: %w", topic, err)
	}
	if !s.cfg.DoNotCreateQueues {
		if err := s.account.CreateQueue(ctx, name); err != nil {
			return nil, fmt.Errorf("azqwatermill: topic %q: %w", topic, err)
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, ErrClosed
	}
	c := &consumer{
		q:      q,
		cfg:    &s.cfg,
		clk:    clock.New(),
		out:    make(chan *message.Message),
		logger: s.logger.With(watermill.LogFields{"topic": topic}),
		poll:   minPollInterval,
	}
	c.recv, _ = q.(receiver)
	if cq, ok := q.(interface{ Clock() clock.Clock }); ok && cq.Clock() != nil {
		c.clk = cq.Clock()
		c.pollRealToo = !realclock.Is(c.clk)
	}
	ctx, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(s.closing, cancel)
	s.subs.Add(1)
	go func() {
		defer s.subs.Done()
		defer close(c.out)
		defer stop()
		defer cancel()
		c.run(ctx)
	}()
	return c.out, nil
}

// Close ends every subscription, waits for their goroutines to return and
// closes their channels. It is idempotent.
func (s *Subscriber) Close() error {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	s.close()
	s.subs.Wait()
	return nil
}

// receiver is a queue that can wait for messages, as *azq.Queue can.
type receiver interface {
	Receive(ctx context.Context, n int, visibility time.Duration) ([]azq.Message, error)
}

// lease is a message the consumer holds: fetched, and not yet acked,
// nacked or handed back.
type lease struct {
	msg     azq.Message
	renewAt time.Time // on the consumer's clock
	lost    bool      // a renewal found the receipt stale: another consumer has it
}

// consumer is one subscription: the goroutine's state.
type consumer struct {
	q      azq.MessageQueue
	recv   receiver        // nil: poll q
	req    context.Context // of requests to q (see graceContext)
	cfg    *SubscriberConfig
	clk    clock.Clock
	out    chan *message.Message
	logger watermill.LoggerAdapter
	held   []lease       // held[0] is the one being delivered
	poll   time.Duration // the next wait of an empty polled queue
	timer  *clock.Timer  // the renewal timer; nil until a first delivery
	// timerAt is when timer fires; zero once it has fired.
	timerAt time.Time
	// pollRealToo: the waits between Gets also end after as long in real
	// time, since clk is the queue's and not the real one.
	pollRealToo bool
}

func (c *consumer) run(ctx context.Context) {
	var endRequests func()
	c.req, endRequests = graceContext(ctx, releaseTimeout)
	defer endRequests()
	defer c.release()
	defer func() {
		if c.timer != nil {
			c.timer.Stop()
		}
	}()
	for ctx.Err() == nil {
		if len(c.held) == 0 {
			if !c.fetch(ctx) {
				return
			}
			continue
		}
		if c.held[0].lost {
			c.held = c.held[1:]
			continue
		}
		c.deliver(ctx)
	}
}

// fetch gets a batch of messages into c.held, waiting for them (or,
// after a transient failure, backing off) if none come. It reports false
// if the subscription must end: a failure that will not pass.
func (c *consumer) fetch(ctx context.Context) bool {
	start := c.clk.Now()
	msgs, err := c.q.Get(c.req, c.cfg.BatchSize, c.cfg.VisibilityTimeout)
	if err == nil && len(msgs) == 0 && c.recv != nil {
		msgs, err = c.recv.Receive(ctx, c.cfg.BatchSize, c.cfg.VisibilityTimeout)
		start = c.clk.Now()
	}
	// Whatever came is held, and handed back by run if the subscription
	// is ending.
	renewAt := start.Add(c.cfg.VisibilityTimeout / 2)
	for _, m := range msgs {
		c.held = append(c.held, lease{msg: m, renewAt: renewAt})
	}
	if len(msgs) > 0 {
		c.poll = minPollInterval
		return true
	}
	if ctx.Err() != nil {
		return true
	}
	if err != nil {
		if !transient.Is(err) {
			c.logger.Error("Cannot get messages; the subscription ends", err, nil)
			return false
		}
		c.logger.Error("Cannot get messages; trying again", err, watermill.LogFields{"wait": c.poll})
	}
	// Nothing came (or the Get failed): wait before the next Get.
	c.pollWait(ctx, c.poll)
	c.poll = min(2*c.poll, c.cfg.MaxPollInterval)
	return true
}

// sleep waits d on the consumer's clock, or until ctx ends.
func (c *consumer) sleep(ctx context.Context, d time.Duration) {
	t := c.clk.Timer(d)
	select {
	case <-ctx.Done():
		t.Stop()
	case <-t.C:
	}
}

// pollWait waits d before the next Get: on the consumer's clock and, if
// that is the queue's clock and not the real one, no longer than d of real
// time either, so that a mock clock nobody moves (azq's test server's,
// which an azure.Queue reports) does not stall the subscription.
func (c *consumer) pollWait(ctx context.Context, d time.Duration) {
	if !c.pollRealToo {
		c.sleep(ctx, d)
		return
	}
	t := c.clk.Timer(d)
	defer t.Stop()
	real := time.NewTimer(d)
	defer real.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	case <-real.C:
	}
}

// retry makes a request about a held message, and again while it fails
// transiently, after 50 ms and doubling waits up to MaxPollInterval, for
// up to a quarter of the lease (so that the renewals of the other held
// messages, due at half of theirs, are not held up past their end), or
// until the subscription ends. It logs each failure it retries, and
// returns the last error.
func (c *consumer) retry(ctx context.Context, what string, id azq.MessageID, req func() error) error {
	err := req()
	deadline := c.clk.Now().Add(c.cfg.VisibilityTimeout / 4)
	for wait := minPollInterval; err != nil && transient.Is(err) && ctx.Err() == nil; wait = min(2*wait, c.cfg.MaxPollInterval) {
		if c.clk.Now().Add(wait).After(deadline) {
			break
		}
		c.logger.Error("Cannot "+what+"; trying again", err, watermill.LogFields{"message_id": id.String(), "wait": wait})
		c.sleep(ctx, wait)
		err = req()
	}
	return err
}

// deliver hands out c.held[0] and waits for its Ack or Nack, renewing the
// leases of the messages held meanwhile.
func (c *consumer) deliver(ctx context.Context) {
	l := &c.held[0]
	e, _ := envelope.Read(l.msg.Content)
	uuid := e.ID
	if uuid == "" {
		uuid = l.msg.ID.String()
	}
	wm := message.NewMessage(uuid, e.Body)
	if e.Metadata != nil {
		wm.Metadata = e.Metadata
	}
	mctx, cancel := context.WithCancel(ctx)
	defer cancel()
	wm.SetContext(mctx)
	out := c.out // nil once sent
	for {
		if !c.await(ctx, wm, &out) {
			return
		}
	}
}

// await waits for one event of a delivery: the message taken from the
// channel (out, set to nil then), its Ack or Nack, a lease due for
// renewal, or the subscription's end. It reports whether the delivery
// goes on.
func (c *consumer) await(ctx context.Context, wm *message.Message, out *chan *message.Message) bool {
	l := &c.held[0]
	renewal := c.renewalTimer()
	select {
	case *out <- wm:
		*out = nil
		return true
	case <-wm.Acked():
		c.ack(ctx, l)
	case <-wm.Nacked():
		c.nack(ctx, l)
	case <-renewal:
		c.timerAt = time.Time{} // spent
		c.renew()
		return true
	case <-ctx.Done():
		select {
		case <-wm.Acked():
			// Acked as the subscription ended: delete it rather than
			// hand it back.
			c.ack(ctx, l)
		default:
			return false // handed back by run
		}
	}
	c.held = c.held[1:]
	return false
}

// graceContext returns the context of the requests a subscription makes
// to its queue: ctx's values, ending grace after ctx ends (or when end is
// called). A request that the subscription's end cancelled in flight may
// still have been carried out by a remote service: a Get would have
// hidden messages whose receipts never arrive, an Update changed a
// receipt, and those messages would stay out of everyone's reach until
// their leases end. So a request is let finish, within the grace, and
// what it took is handed back; only the wait for messages (Receive) ends
// with the subscription.
func graceContext(ctx context.Context, grace time.Duration) (req context.Context, end func()) {
	req, cancel := context.WithCancel(context.WithoutCancel(ctx))
	var (
		mu    sync.Mutex  // guards timer and ended
		timer *time.Timer // the grace, once ctx has ended
		ended bool        // end was called
	)
	stop := context.AfterFunc(ctx, func() {
		mu.Lock()
		defer mu.Unlock()
		if !ended {
			timer = time.AfterFunc(grace, cancel)
		}
	})
	return req, func() {
		stop()
		mu.Lock()
		ended = true
		if timer != nil {
			timer.Stop()
		}
		mu.Unlock()
		cancel()
	}
}

// ack deletes an acked message.
func (c *consumer) ack(ctx context.Context, l *lease) {
	err := c.retry(ctx, "delete an acked message", l.msg.ID, func() error {
		return c.q.Delete(c.req, l.msg.ID, l.msg.PopReceipt)
	})
	switch {
	case err == nil:
	case errors.Is(err, azq.ErrMessageNotFound):
		// Gone already (a try before took effect), or its lease was
		// lost and another consumer has it: it will be delivered
		// again.
		c.logger.Info("An acked message was taken by another consumer before its deletion", watermill.LogFields{"message_id": l.msg.ID.String()})
	default:
		c.logger.Error("Cannot delete an acked message; it will be delivered again", err, watermill.LogFields{"message_id": l.msg.ID.String()})
	}
}

// nack makes a nacked message visible again after NackDelay.
func (c *consumer) nack(ctx context.Context, l *lease) {
	err := c.retry(ctx, "hand a nacked message back", l.msg.ID, func() error {
		_, err := c.q.Update(c.req, l.msg.ID, l.msg.PopReceipt, c.cfg.NackDelay, nil)
		return err
	})
	if err != nil && !errors.Is(err, azq.ErrMessageNotFound) {
		c.logger.Error("Cannot hand a nacked message back; it comes back when its lease ends", err, watermill.LogFields{"message_id": l.msg.ID.String()})
	}
}

// renewalTimer returns the channel of a timer set for the next renewal
// of a held lease, or nil if every held lease is lost. The one timer is
// kept across the events of deliveries and reset only when the next
// renewal moves.
func (c *consumer) renewalTimer() <-chan time.Time {
	next := c.nextRenewal()
	if next.IsZero() {
		return nil
	}
	switch {
	case c.timer == nil:
		c.timer = c.clk.Timer(next.Sub(c.clk.Now()))
	case !next.Equal(c.timerAt):
		c.timer.Reset(next.Sub(c.clk.Now()))
	}
	c.timerAt = next
	return c.timer.C
}

// nextRenewal is when the first held lease is due for renewal.
func (c *consumer) nextRenewal() time.Time {
	var next time.Time
	for i := range c.held {
		if l := &c.held[i]; !l.lost && (next.IsZero() || l.renewAt.Before(next)) {
			next = l.renewAt
		}
	}
	return next
}

// renew renews the leases that are due.
func (c *consumer) renew() {
	now := c.clk.Now()
	for i := range c.held {
		l := &c.held[i]
		if l.lost || l.renewAt.After(now) {
			continue
		}
		res, err := c.q.Update(c.req, l.msg.ID, l.msg.PopReceipt, c.cfg.VisibilityTimeout, nil)
		switch {
		case err == nil:
			l.msg.PopReceipt, l.msg.NextVisibleTime = res.PopReceipt, res.NextVisibleTime
			l.renewAt = now.Add(c.cfg.VisibilityTimeout / 2)
		case errors.Is(err, azq.ErrMessageNotFound):
			l.lost = true
			c.logger.Info("A held message's lease was lost; another consumer has it", watermill.LogFields{"message_id": l.msg.ID.String()})
		default:
			// Try again soon, well before the lease ends.
			l.renewAt = now.Add(min(c.cfg.VisibilityTimeout/8, time.Second))
			c.logger.Error("Cannot renew a held message's lease; trying again", err, watermill.LogFields{"message_id": l.msg.ID.String()})
		}
	}
}

// release hands every held message back to the queue, visible at once,
// as the subscription ends.
func (c *consumer) release() {
	ctx := c.req
	for _, l := range c.held {
		if l.lost {
			continue
		}
		if _, err := c.q.Update(ctx, l.msg.ID, l.msg.PopReceipt, 0, nil); err != nil && !errors.Is(err, azq.ErrMessageNotFound) {
			c.logger.Error("Cannot hand a held message back; it comes back when its lease ends", err, watermill.LogFields{"message_id": l.msg.ID.String()})
		}
	}
	c.held = nil
}
