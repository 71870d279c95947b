package azqwatermill

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/azqlib/azq"
	"github.com/azqlib/azq/envelope"
)

// ErrClosed is the error of Publish and Subscribe after Close.
var ErrClosed = errors.New("azqwatermill: closed")

// PublisherConfig configures a Publisher. The zero value is ready to use.
type PublisherConfig struct {
	// TimeToLive is how long each message lives in its queue unless
	// consumed: 0 for the service's default of 7 days, azq.NeverExpires
	// for no limit.
	TimeToLive time.Duration
	// DoNotCreateQueues makes a publish to a missing queue fail with
	// azq.ErrQueueNotFound; by default the queue is created and the
	// message put again.
	DoNotCreateQueues bool
	// QueueName maps a topic to its queue's name; nil means the topic is
	// the name. Azure's names are 3 to 63 lower-case letters, digits and
	// single hyphens.
	QueueName func(topic string) string
}

// Publisher publishes Watermill messages to queues: a topic is a queue,
// and a message goes into it as an envelope (package
// github.com/azqlib/azq/envelope) that keeps its UUID, metadata and
// payload. It is safe for concurrent use.
type Publisher struct {
	account Account
	cfg     PublisherConfig
	put     azq.PutOptions // every message's, from cfg; only read
	logger  watermill.LoggerAdapter
	closed  atomic.Bool
	queues  sync.Map // topic → azq.MessageQueue
}

var _ message.Publisher = (*Publisher)(nil)

// NewPublisher returns a Publisher to the queues of account. A nil logger
// logs nothing.
func NewPublisher(account Account, cfg PublisherConfig, logger watermill.LoggerAdapter) (*Publisher, error) {
	if account == nil {
		return nil, errors.New("azqwatermill: NewPublisher needs an Account")
	}
	if logger == nil {
		logger = watermill.NopLogger{}
	}
	return &Publisher{account: account, cfg: cfg, put: azq.PutOptions{TimeToLive: cfg.TimeToLive}, logger: logger}, nil
}

// Publish puts the messages, in order, into the topic's queue, in calls of
// azq.PutBatch of up to azq.MaxBatchSize messages (one commit a call where
// the back end batches): consecutive messages with the same context go
// in one call, bounded by that context. It returns at the first failure:
// the messages of the calls before it are in the queue, and, when one
// message of a call fails (too large, say), the others of that call are
// too. It does not retry, whether or not the failure may pass (see the
// package documentation): the caller does, as a router does by nacking the
// message it was handling.
func (p *Publisher) Publish(topic string, messages ...*message.Message) error {
	if p.closed.Load() {
		return ErrClosed
	}
	q, err := p.queue(topic)
	if err != nil {
		return err
	}
	reqs := make([]azq.PutRequest, 0, min(len(messages), azq.MaxBatchSize))
	for i := 0; i < len(messages); {
		ctx := messages[i].Context()
		start := i
		reqs = reqs[:0]
		for ; i < len(messages) && len(reqs) < azq.MaxBatchSize && sameContext(messages[i].Context(), ctx); i++ {
			m := messages[i]
			text, err := envelope.Encode(&envelope.Envelope{ID: m.UUID, Metadata: m.Metadata, Body: m.Payload})
			if err != nil {
				// The messages before it go, as they would one at a time.
				if perr := p.putBatch(ctx, q, topic, messages[start:i], reqs); perr != nil {
					return perr
				}
				return fmt.Errorf("azqwatermill: publish message %s to %s: %w", m.UUID, topic, err)
			}
			reqs = append(reqs, azq.PutRequest{Content: text, Options: &p.put})
		}
		if err := p.putBatch(ctx, q, topic, messages[start:i], reqs); err != nil {
			return err
		}
	}
	return nil
}

// putBatch puts reqs, the envelopes of ms, into q with one azq.PutBatch,
// creating the queue and putting again if it is missing, and returns the
// first failure.
func (p *Publisher) putBatch(ctx context.Context, q azq.MessageQueue, topic string, ms []*message.Message, reqs []azq.PutRequest) error {
	if len(reqs) == 0 {
		return nil
	}
	res, err := azq.PutBatch(ctx, q, reqs)
	if missingQueue(res, err) && !p.cfg.DoNotCreateQueues {
		p.logger.Debug("Creating the topic's queue", watermill.LogFields{"topic": topic})
		if err = p.account.CreateQueue(ctx, queueName(topic, p.cfg.QueueName)); err == nil {
			res, err = p.putAgain(ctx, q, reqs, res)
		}
	}
	if err == nil && len(res) != len(reqs) {
		err = fmt.Errorf("PutBatch answered %d results for %d messages", len(res), len(reqs))
	}
	if err != nil {
		if len(ms) == 1 {
			return fmt.Errorf("azqwatermill: publish message %s to %s: %w", ms[0].UUID, topic, err)
		}
		return fmt.Errorf("azqwatermill: publish messages %s to %s to %s: %w", ms[0].UUID, ms[len(ms)-1].UUID, topic, err)
	}
	for i, r := range res {
		if r.Err != nil {
			return fmt.Errorf("azqwatermill: publish message %s to %s: %w", ms[i].UUID, topic, r.Err)
		}
	}
	return nil
}

// missingQueue reports whether a PutBatch found the queue missing: the whole
// call's error, or, where the back end put one message at a time, a
// message's.
func missingQueue(res []azq.PutResult, err error) bool {
	if err != nil {
		return errors.Is(err, azq.ErrQueueNotFound)
	}
	for _, r := range res {
		if errors.Is(r.Err, azq.ErrQueueNotFound) {
			return true
		}
	}
	return false
}

// putAgain puts again, once the queue exists, the requests that a first
// PutBatch did not put: all of them if it failed as a whole (res nil),
// else those it answered with an error. It returns the results of all.
func (p *Publisher) putAgain(ctx context.Context, q azq.MessageQueue, reqs []azq.PutRequest, res []azq.PutResult) ([]azq.PutResult, error) {
	if len(res) != len(reqs) {
		return azq.PutBatch(ctx, q, reqs)
	}
	var again []azq.PutRequest
	var at []int
	for i, r := range res {
		if r.Err != nil {
			again, at = append(again, reqs[i]), append(at, i)
		}
	}
	got, err := azq.PutBatch(ctx, q, again)
	if err != nil {
		return nil, err
	}
	if len(got) != len(again) {
		return got, nil // reported by the caller
	}
	out := slices.Clone(res)
	for j, i := range at {
		out[i] = got[j]
	}
	return out, nil
}

// sameContext reports whether a and b are the same context, so that
// messages carrying them can share one call. A context of a type that
// cannot be compared is the same as none other.
func sameContext(a, b context.Context) bool {
	t := reflect.TypeOf(a)
	return t == reflect.TypeOf(b) && t.Comparable() && a == b
}

func (p *Publisher) queue(topic string) (azq.MessageQueue, error) {
	if q, ok := p.queues.Load(topic); ok {
		return q.(azq.MessageQueue), nil
	}
	q, err := p.account.Queue(queueName(topic, p.cfg.QueueName))
	if err != nil {
		return nil, fmt.Errorf("azqwatermill: topic %q: %w", topic, err)
	}
	p.queues.Store(topic, q)
	return q, nil
}

func queueName(topic string, f func(string) string) string {
	if f == nil {
		return topic
	}
	return f(topic)
}

// Close makes later Publish calls fail. The queues are the account's and
// stay. It is idempotent.
func (p *Publisher) Close() error {
	p.closed.Store(true)
	return nil
}
