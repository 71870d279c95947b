package azq

import (
	"context"
	"errors"
	"time"

	"github.com/benbjohnson/clock"
)

// NamedQueue is a queue of a Service addressed by its name, as a client
// of Azure's REST API addresses one in every request: each operation
// looks the queue up afresh. The queue need not exist when the NamedQueue
// is made (until it does, every operation gives ErrQueueNotFound), and a
// queue deleted and created again is followed, where a *Queue held from
// before the deletion keeps answering ErrQueueNotFound. The zero value is
// not usable; get one from Service.Named.
//
// A NamedQueue keeps the queue contract, so code written against
// MessageQueue (the messaging drivers, the worker) can be given a queue
// name of an in-process Service as it would be given a remote one.
type NamedQueue struct {
	svc  *Service
	name string
}

var (
	_ QueueRef     = NamedQueue{}
	_ QueueOpener  = NamedQueue{}
	_ QueueService = (*Service)(nil)
)

// Named returns the queue name of s, looked up at each operation. It does
// not check the name or create the queue.
func (s *Service) Named(name string) NamedQueue { return NamedQueue{svc: s, name: name} }

// Ref returns Named(name) as the service contract's QueueRef, after
// checking the name: one that breaks Azure's naming rules gives
// ErrInvalidQueueName.
func (s *Service) Ref(name string) (QueueRef, error) {
	if err := ValidateQueueName(name); err != nil {
		return nil, err
	}
	return NamedQueue{svc: s, name: name}, nil
}

// Name returns the queue's name.
func (n NamedQueue) Name() string { return n.name }

// Service returns the Service the name is looked up in.
func (n NamedQueue) Service() *Service { return n.svc }

// Clock returns the clock of the Service's queues.
func (n NamedQueue) Clock() clock.Clock { return n.svc.Clock() }

// OpenQueue returns the queue name of the same Service, creating it if it
// does not exist (an existing queue is opened whatever its metadata), as a
// NamedQueue: the QueueOpener through which package worker opens the
// poison queue of a source in the source's Service.
func (n NamedQueue) OpenQueue(ctx context.Context, name string) (MessageQueue, error) {
	return n.svc.openQueue(ctx, name)
}

// openQueue is OpenQueue of the Service's queues: the queue name, created
// if it does not exist, followed by its name.
func (s *Service) openQueue(ctx context.Context, name string) (MessageQueue, error) {
	r, err := s.Ref(name)
	if err != nil {
		return nil, err
	}
	if _, err := r.Create(ctx, nil); err != nil && !errors.Is(err, ErrQueueAlreadyExists) {
		return nil, err
	}
	return r, nil
}

// Queue returns the queue the name stands for now, or ErrQueueNotFound.
func (n NamedQueue) Queue() (*Queue, error) { return n.svc.Queue(n.name) }

// Put is Queue.Put on the queue the name stands for now.
func (n NamedQueue) Put(ctx context.Context, content string, opts *PutOptions) (Message, error) {
	q, err := n.Queue()
	if err != nil {
		return Message{}, err
	}
	return q.Put(ctx, content, opts)
}

// Get is Queue.Get on the queue the name stands for now.
func (n NamedQueue) Get(ctx context.Context, max int, visibility time.Duration) ([]Message, error) {
	q, err := n.Queue()
	if err != nil {
		return nil, err
	}
	return q.Get(ctx, max, visibility)
}

// AppendGet is Queue.AppendGet on the queue the name stands for now.
func (n NamedQueue) AppendGet(ctx context.Context, dst []Message, max int, visibility time.Duration) ([]Message, error) {
	q, err := n.Queue()
	if err != nil {
		return dst, err
	}
	return q.AppendGet(ctx, dst, max, visibility)
}

// Receive is Queue.Receive on the queue the name stands for when it is
// called; it returns ErrQueueNotFound if that queue is deleted while it
// waits.
func (n NamedQueue) Receive(ctx context.Context, max int, visibility time.Duration) ([]Message, error) {
	q, err := n.Queue()
	if err != nil {
		return nil, err
	}
	return q.Receive(ctx, max, visibility)
}

// Peek is Queue.Peek on the queue the name stands for now.
func (n NamedQueue) Peek(ctx context.Context, max int) ([]Message, error) {
	q, err := n.Queue()
	if err != nil {
		return nil, err
	}
	return q.Peek(ctx, max)
}

// Update is Queue.Update on the queue the name stands for now. A receipt
// of a queue since deleted is not current in the new one: ErrMessageNotFound.
func (n NamedQueue) Update(ctx context.Context, id MessageID, receipt PopReceipt, visibility time.Duration, content *string) (UpdateResult, error) {
	q, err := n.Queue()
	if err != nil {
		return UpdateResult{}, err
	}
	return q.Update(ctx, id, receipt, visibility, content)
}

// Delete is Queue.Delete on the queue the name stands for now.
func (n NamedQueue) Delete(ctx context.Context, id MessageID, receipt PopReceipt) error {
	q, err := n.Queue()
	if err != nil {
		return err
	}
	return q.Delete(ctx, id, receipt)
}

// Clear is Queue.Clear on the queue the name stands for now.
func (n NamedQueue) Clear(ctx context.Context) error {
	q, err := n.Queue()
	if err != nil {
		return err
	}
	return q.Clear(ctx)
}

// ApproximateCount is Queue.ApproximateCount on the queue the name stands
// for now.
func (n NamedQueue) ApproximateCount(ctx context.Context) (int, error) {
	q, err := n.Queue()
	if err != nil {
		return 0, err
	}
	return q.ApproximateCount(ctx)
}

// Create is Service.CreateQueue of the name.
func (n NamedQueue) Create(ctx context.Context, metadata map[string]string) (created bool, err error) {
	_, created, err = n.svc.CreateQueue(ctx, n.name, metadata)
	return created, err
}

// Properties is Queue.Properties on the queue the name stands for now.
func (n NamedQueue) Properties(ctx context.Context) (Properties, error) {
	q, err := n.Queue()
	if err != nil {
		return Properties{}, err
	}
	return q.Properties(ctx)
}

// SetMetadata is Queue.SetMetadata on the queue the name stands for now.
func (n NamedQueue) SetMetadata(ctx context.Context, md map[string]string) error {
	q, err := n.Queue()
	if err != nil {
		return err
	}
	return q.SetMetadata(ctx, md)
}

// AccessPolicies is Queue.AccessPolicies on the queue the name stands for
// now.
func (n NamedQueue) AccessPolicies(ctx context.Context) ([]AccessPolicy, error) {
	q, err := n.Queue()
	if err != nil {
		return nil, err
	}
	return q.AccessPolicies(ctx)
}

// SetAccessPolicies is Queue.SetAccessPolicies on the queue the name
// stands for now.
func (n NamedQueue) SetAccessPolicies(ctx context.Context, ps []AccessPolicy) error {
	q, err := n.Queue()
	if err != nil {
		return err
	}
	return q.SetAccessPolicies(ctx, ps)
}

// Inspect is Queue.Inspect on the queue the name stands for now: what the
// in-memory back end shows beyond the contract, invisible messages
// included, for tools such as package ui.
func (n NamedQueue) Inspect(ctx context.Context, max int) (Snapshot, error) {
	q, err := n.Queue()
	if err != nil {
		return Snapshot{}, err
	}
	return q.Inspect(ctx, max)
}
