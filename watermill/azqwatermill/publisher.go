package azqwatermill

import (
	"errors"
	"fmt"
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

// Publish puts the messages, in order, into the topic's queue, each with
// its own context. It returns at the first failure; the messages before
// it are in the queue. It does not retry, whether or not the failure may
// pass (see the package documentation): the caller does, as a router
// does by nacking the message it was handling.
func (p *Publisher) Publish(topic string, messages ...*message.Message) error {
	if p.closed.Load() {
		return ErrClosed
	}
	q, err := p.queue(topic)
	if err != nil {
		return err
	}
	for _, m := range messages {
		text, err := envelope.Encode(&envelope.Envelope{ID: m.UUID, Metadata: m.Metadata, Body: m.Payload})
		if err != nil {
			return fmt.Errorf("azqwatermill: publish message %s to %s: %w", m.UUID, topic, err)
		}
		_, err = q.Put(m.Context(), text, &p.put)
		if errors.Is(err, azq.ErrQueueNotFound) && !p.cfg.DoNotCreateQueues {
			p.logger.Debug("Creating the topic's queue", watermill.LogFields{"topic": topic})
			if err = p.account.CreateQueue(m.Context(), queueName(topic, p.cfg.QueueName)); err == nil {
				_, err = q.Put(m.Context(), text, &p.put)
			}
		}
		if err != nil {
			return fmt.Errorf("azqwatermill: publish message %s to %s: %w", m.UUID, topic, err)
		}
	}
	return nil
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
