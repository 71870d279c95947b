package azqpubsub

import (
	"context"
	"errors"
	"fmt"
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

// sendBatcherOpts: a batch is one azq.PutBatch a queue, of at most
// azq.MaxBatchSize messages; where the back end cannot batch (the queue
// service takes one message a request) it is a loop of Puts, and
// concurrent batches are what make a remote topic fast.
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

// SendBatch implements driver.Topic.SendBatch: the messages are put, each
// in its envelope, to the topic's queue or to each of its queues in turn,
// in order, with azq.PutBatch: one call for up to azq.MaxBatchSize
// messages, and one commit where the back end batches. A failure stops
// the batch. If it is retryable, gocloud sends the batch again, and the
// retry resumes where the failure stopped: each message goes only to the
// queues that have not taken it, so that under one fault in ten requests a
// batch of 32 is not put again and again from its start.
func (t *topic) SendBatch(ctx context.Context, ms []*driver.Message) error {
	queues := []azq.MessageQueue{t.queue}
	if t.fanout != nil {
		if queues = t.fanout.snapshot(); len(queues) == 0 {
			return errNoQueues
		}
	}
	resume := t.takeProgress(ms)
	sends := make([]pending, 0, len(ms))
	err := func() error {
		for _, m := range ms {
			p := resume[m]
			if p != nil && p.done {
				sends = append(sends, pending{m: m, p: p})
				continue
			}
			s, err := t.prepare(m, p, len(queues))
			if err != nil {
				return err
			}
			sends = append(sends, s)
		}
		return nil
	}()
	// The messages before one that could not be prepared are still
	// sent, as a batch that stops at that message would have sent them.
	if perr := t.putAll(ctx, sends, queues); perr != nil {
		err = perr
	}
	// Those that every queue took are sent, whatever became of the
	// others.
	if aerr := t.afterSend(sends, queues); err == nil {
		err = aerr
	}
	if err != nil && isRetryable(err) {
		t.keepProgress(sends)
	}
	return err
}

// pending is one message of a SendBatch on its way: its envelope, its put
// options, and how far it got.
type pending struct {
	m    *driver.Message
	text string
	put  *azq.PutOptions
	p    *progress // never nil once prepared
}

// prepare runs m's BeforeSend and encodes its envelope, for queues queues;
// p (nil: none) is how far an earlier try got.
func (t *topic) prepare(m *driver.Message, p *progress, queues int) (pending, error) {
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
			return pending{}, err
		}
	}
	text, err := envelope.Encode(&envelope.Envelope{Metadata: m.Metadata, Body: m.Body})
	if err != nil {
		return pending{}, err
	}
	got := &progress{}
	if p != nil {
		got.queues, got.sent = slices.Clone(p.queues), slices.Clone(p.sent)
	} else if m.AfterSend != nil {
		got.sent = make([]azq.Message, 0, queues)
	}
	return pending{m: m, text: text, put: put, p: got}, nil
}

// putAll puts each message of sends to each of queues that has not taken it,
// a queue after the other, in calls of up to azq.MaxBatchSize messages. It
// stops at the first failure, a whole call's or a message's, and returns
// it; each message's progress says which queues took it.
func (t *topic) putAll(ctx context.Context, sends []pending, queues []azq.MessageQueue) error {
	reqs := make([]azq.PutRequest, 0, min(len(sends), azq.MaxBatchSize))
	who := make([]*pending, 0, cap(reqs))
	for _, q := range queues {
		for i := 0; i < len(sends); {
			reqs, who = reqs[:0], who[:0]
			for ; i < len(sends) && len(reqs) < azq.MaxBatchSize; i++ {
				s := &sends[i]
				if s.p.done || slices.Contains(s.p.queues, q) {
					continue
				}
				reqs = append(reqs, azq.PutRequest{Content: s.text, Options: s.put})
				who = append(who, s)
			}
			if len(reqs) == 0 {
				continue
			}
			res, err := azq.PutBatch(ctx, q, reqs)
			if err == nil && len(res) != len(reqs) {
				err = fmt.Errorf("azqpubsub: PutBatch answered %d results for %d messages", len(res), len(reqs))
			}
			if err != nil {
				return err
			}
			var first error
			for j, r := range res {
				if r.Err != nil {
					if first == nil {
						first = r.Err
					}
					continue
				}
				s := who[j]
				s.p.queues = append(s.p.queues, q)
				if s.m.AfterSend != nil {
					s.p.sent = append(s.p.sent, r.Message)
				}
			}
			if first != nil {
				return first
			}
		}
	}
	return nil
}

// afterSend calls the AfterSend of each message of sends that every one of
// queues took, in order, stopping at the first error.
func (t *topic) afterSend(sends []pending, queues []azq.MessageQueue) error {
	for i := range sends {
		s := &sends[i]
		if s.p.done || !took(s.p.queues, queues) {
			continue
		}
		if s.m.AfterSend != nil {
			if err := s.m.AfterSend(afterSendAs(s.p.sent)); err != nil {
				return err
			}
		}
		s.p.done = true
	}
	return nil
}

// took reports whether every queue of queues is one of got.
func took(got, queues []azq.MessageQueue) bool {
	for _, q := range queues {
		if !slices.Contains(got, q) {
			return false
		}
	}
	return true
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

// keepProgress records, for the retry of a batch that failed, how far each
// of its messages got that got anywhere.
func (t *topic) keepProgress(sends []pending) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.progress == nil || len(t.progress)+len(sends) > maxRemembered {
		t.progress = make(map[*driver.Message]*progress)
	}
	for _, s := range sends {
		if s.p.done || len(s.p.queues) > 0 {
			t.progress[s.m] = s.p
		}
	}
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
