package azqpubsub

import (
	"context"
	"errors"
	"slices"
	"sync"
	"time"

	"github.com/azqlib/azq"
	"github.com/azqlib/azq/azure"
	"github.com/azqlib/azq/envelope"
	"gocloud.dev/gcerrors"
	"gocloud.dev/pubsub"
	"gocloud.dev/pubsub/batcher"
	"gocloud.dev/pubsub/driver"
)

// sendBatcherOpts: the queue service takes one message a request, so a
// batch is a loop of Puts; concurrent batches are what make a remote
// topic fast.
var sendBatcherOpts = &batcher.Options{
	MaxBatchSize: 32,
	MaxHandlers:  64,
}

// TopicOptions configure a topic. The zero value is ready to use.
type TopicOptions struct {
	// TimeToLive is how long each message lives in its queue unless
	// received and acknowledged: 0 for the service's default of 7 days,
	// azq.NeverExpires for no limit.
	TimeToLive time.Duration
	// BatcherOptions adjust how the portable type batches sends.
	BatcherOptions batcher.Options
}

// Fanout is the set of queues a fan-out topic sends to: every message goes
// to each of them, in the order they were added, so that each queue's
// consumers see every message (as an SNS topic delivers to each of its SQS
// queues). The queue service has no topics of its own, so the set lives
// with the producer: every process that sends to the topic must build the
// same set. It is safe for concurrent use; a queue added is sent the
// messages sent after Add returns.
type Fanout struct {
	mu     sync.RWMutex       // guards queues
	queues []azq.MessageQueue // replaced, never changed in place
}

// NewFanout returns the set of the given queues.
func NewFanout(queues ...azq.MessageQueue) *Fanout {
	return &Fanout{queues: slices.Clone(queues)}
}

// Add adds q to the set.
func (f *Fanout) Add(q azq.MessageQueue) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.queues = append(slices.Clip(f.queues), q)
}

// Remove removes q from the set and reports whether it was there.
func (f *Fanout) Remove(q azq.MessageQueue) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	i := slices.Index(f.queues, q)
	if i < 0 {
		return false
	}
	f.queues = slices.Delete(slices.Clone(f.queues), i, i+1)
	return true
}

// Queues returns the queues of the set.
func (f *Fanout) Queues() []azq.MessageQueue {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return slices.Clone(f.queues)
}

func (f *Fanout) snapshot() []azq.MessageQueue {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.queues
}

// errNoQueues is the error of a send to a fan-out topic without queues: a
// message sent there would reach nobody.
var errNoQueues = errors.New("azqpubsub: the fan-out topic has no queues; the message would reach no one")

// topic is the driver.Topic: a message goes, in an envelope, to one queue
// or to each queue of a Fanout.
type topic struct {
	queue  azq.MessageQueue // nil for a fan-out topic
	fanout *Fanout          // nil for a one-queue topic
	put    azq.PutOptions

	mu sync.Mutex // guards progress
	// progress holds how far the messages of batches that failed with a
	// retryable error got, until gocloud's retry of the batch (the same
	// messages) takes it. A retry that never comes (gocloud gave up when
	// its context ended) leaves its batch here, so the map is emptied once
	// it holds maxRemembered messages: a retry that then starts from the
	// top puts again what it had put, a duplicate that at-least-once
	// delivery allows.
	progress map[*driver.Message]*progress
}

// maxRemembered bounds what a topic or subscription keeps of failed tries
// for their retries: enough for every batch gocloud may retry at once
// (its batchers run at most a few hundred messages), and little memory.
const maxRemembered = 4096

// progress is how far one message of a failed batch got.
type progress struct {
	done   bool               // put everywhere, AfterSend called
	queues []azq.MessageQueue // the queues that took it
	sent   []azq.Message      // what they returned, for AfterSend
}

var _ driver.Topic = (*topic)(nil)

// OpenTopic returns a topic that sends every message to q, in an
// envelope (package github.com/azqlib/azq/envelope). q may be any back end
// of the queue contract: an *azq.Queue in memory or on disk, an
// *azure.Queue. A missing queue is reported by Send, as NotFound.
func OpenTopic(q azq.MessageQueue, opts *TopicOptions) *pubsub.Topic {
	return pubsub.NewTopic(newTopic(q, nil, opts), sendBatcherOpts.NewMergedOptions(batcherOptions(opts)))
}

// OpenFanoutTopic returns a topic that sends every message to each queue
// of f (see Fanout).
func OpenFanoutTopic(f *Fanout, opts *TopicOptions) *pubsub.Topic {
	return pubsub.NewTopic(newTopic(nil, f, opts), sendBatcherOpts.NewMergedOptions(batcherOptions(opts)))
}

func batcherOptions(opts *TopicOptions) *batcher.Options {
	if opts == nil {
		return &batcher.Options{}
	}
	return &opts.BatcherOptions
}

func newTopic(q azq.MessageQueue, f *Fanout, opts *TopicOptions) *topic {
	t := &topic{queue: q, fanout: f}
	if opts != nil {
		t.put.TimeToLive = opts.TimeToLive
	}
	return t
}

// SendBatch implements driver.Topic.SendBatch: each message is put, in
// its envelope, to the topic's queue or to each of its queues in turn. A
// failure stops the batch. If it is retryable, gocloud sends the batch
// again, and the retry resumes where the failure stopped: each message
// goes only to the queues that have not taken it, so that under one fault
// in ten requests a batch of 32 is not put again and again from its start.
func (t *topic) SendBatch(ctx context.Context, ms []*driver.Message) error {
	queues := []azq.MessageQueue{t.queue}
	if t.fanout != nil {
		if queues = t.fanout.snapshot(); len(queues) == 0 {
			return errNoQueues
		}
	}
	resume := t.takeProgress(ms)
	for i, m := range ms {
		p := resume[m]
		if p != nil && p.done {
			continue
		}
		if got, err := t.send(ctx, m, queues, p); err != nil {
			if isRetryable(err) {
				t.keepProgress(ms[:i], m, got)
			}
			return err
		}
	}
	return nil
}

// takeProgress returns, and forgets, how far ms's messages got in an
// earlier try of the batch; nil if there is none, as there is none at all
// unless a batch failed.
func (t *topic) takeProgress(ms []*driver.Message) map[*driver.Message]*progress {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.progress) == 0 {
		return nil
	}
	var resume map[*driver.Message]*progress
	for _, m := range ms {
		if p, ok := t.progress[m]; ok {
			if resume == nil {
				resume = make(map[*driver.Message]*progress)
			}
			resume[m] = p
			delete(t.progress, m)
		}
	}
	return resume
}

// keepProgress records, for the retry of a batch that failed at m, that
// the messages before it are done and that m got as far as p (nil: not
// into any queue).
func (t *topic) keepProgress(done []*driver.Message, m *driver.Message, p *progress) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.progress == nil || len(t.progress)+len(done)+1 > maxRemembered {
		t.progress = make(map[*driver.Message]*progress)
	}
	for _, d := range done {
		t.progress[d] = &progress{done: true}
	}
	if p != nil {
		t.progress[m] = p
	}
}

// send puts m, in its envelope, to each of queues that p (nil: none) does
// not name, and calls its AfterSend once all have taken it. If that
// fails, it returns how far m got.
func (t *topic) send(ctx context.Context, m *driver.Message, queues []azq.MessageQueue, p *progress) (*progress, error) {
	put := &t.put
	if m.BeforeSend != nil {
		own := t.put // this message's, for BeforeSend to change
		put = &own
		asFunc := func(i any) bool {
			if p, ok := i.(**azq.PutOptions); ok {
				*p = put
				return true
			}
			return false
		}
		if err := m.BeforeSend(asFunc); err != nil {
			return p, err
		}
	}
	text, err := envelope.Encode(&envelope.Envelope{Metadata: m.Metadata, Body: m.Body})
	if err != nil {
		return p, err
	}
	var sent []azq.Message // what each queue took, kept for AfterSend only
	if m.AfterSend != nil {
		sent = make([]azq.Message, 0, len(queues))
		if p != nil {
			sent = append(sent, p.sent...)
		}
	}
	for j, q := range queues {
		if p != nil && slices.Contains(p.queues, q) {
			continue
		}
		pm, err := q.Put(ctx, text, put)
		if err != nil {
			// Every queue before q has it, now or from before.
			got := &progress{queues: slices.Clone(queues[:j]), sent: sent}
			if p != nil {
				for _, r := range p.queues {
					if !slices.Contains(got.queues, r) {
						got.queues = append(got.queues, r)
					}
				}
			}
			return got, err
		}
		if m.AfterSend != nil {
			sent = append(sent, pm)
		}
	}
	if m.AfterSend != nil {
		if err := m.AfterSend(afterSendAs(sent)); err != nil {
			return &progress{queues: queues, sent: sent}, err
		}
	}
	return nil, nil
}

// afterSendAs is the As of a message's AfterSend: the message as each
// queue took it.
func afterSendAs(sent []azq.Message) func(any) bool {
	return func(i any) bool {
		switch p := i.(type) {
		case *azq.Message:
			*p = sent[0]
		case *[]azq.Message:
			*p = sent
		default:
			return false
		}
		return true
	}
}

// IsRetryable implements driver.Topic.IsRetryable: the failures that may
// pass (see isRetryable), which gocloud then retries. A batch that failed
// part-way is sent whole again: the messages put before the failure are
// put twice, which at-least-once delivery allows.
func (*topic) IsRetryable(err error) bool { return isRetryable(err) }

// As implements driver.Topic.As. A one-queue topic exposes its queue as
// *azq.MessageQueue and, by its type, as **azq.Queue or **azure.Queue; a
// fan-out topic exposes its **Fanout.
func (t *topic) As(i any) bool {
	if t.fanout != nil {
		if p, ok := i.(**Fanout); ok {
			*p = t.fanout
			return true
		}
		return false
	}
	return queueAs(t.queue, i)
}

// queueAs sets what i points to to q, or to the back end behind it.
func queueAs(q azq.MessageQueue, i any) bool {
	switch p := i.(type) {
	case *azq.MessageQueue:
		*p = q
		return true
	case **azq.Queue:
		switch q := q.(type) {
		case *azq.Queue:
			*p = q
			return true
		case azq.NamedQueue:
			cur, err := q.Queue()
			if err != nil {
				return false
			}
			*p = cur
			return true
		}
	case **azure.Queue:
		if q, ok := q.(*azure.Queue); ok {
			*p = q
			return true
		}
	}
	return false
}

// ErrorAs implements driver.Topic.ErrorAs.
func (*topic) ErrorAs(err error, i any) bool { return errorAs(err, i) }

// ErrorCode implements driver.Topic.ErrorCode.
func (*topic) ErrorCode(err error) gcerrors.ErrorCode { return errorCode(err) }

// Close implements driver.Topic.Close. The queues are the caller's and
// stay open.
func (*topic) Close() error { return nil }
