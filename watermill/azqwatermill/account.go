package azqwatermill

import (
	"context"
	"errors"
	"time"

	"github.com/azqlib/azq"
	"github.com/azqlib/azq/azure"
	"github.com/benbjohnson/clock"
)

// Account is where topics' queues live: the queues of an in-process
// *azq.Service (ServiceAccount) or of a storage account (AzureAccount).
// The Publisher and Subscriber need nothing else of a back end.
type Account interface {
	// Queue returns the queue named name, which need not exist:
	// operations on a missing queue fail with azq.ErrQueueNotFound.
	Queue(name string) (azq.MessageQueue, error)
	// CreateQueue creates the queue named name, without metadata, unless
	// it exists.
	CreateQueue(ctx context.Context, name string) error
}

// ServiceAccount returns the Account of the queues of svc, in memory or on
// disk. Its queues are looked up by name at each operation, so a queue
// may be created after a publisher or subscriber names it.
func ServiceAccount(svc *azq.Service) Account { return serviceAccount{svc} }

// AzureAccount returns the Account of the queues of a storage account
// (or of azq's REST server), through package azure.
func AzureAccount(svc *azure.Service) Account { return azureAccount{svc} }

type serviceAccount struct{ svc *azq.Service }

func (a serviceAccount) Queue(name string) (azq.MessageQueue, error) {
	if err := azq.ValidateQueueName(name); err != nil {
		return nil, err
	}
	return namedQueue{svc: a.svc, name: name}, nil
}

func (a serviceAccount) CreateQueue(ctx context.Context, name string) error {
	_, _, err := a.svc.CreateQueue(ctx, name, nil)
	if errors.Is(err, azq.ErrQueueAlreadyExists) {
		return nil // it exists, with metadata of its own
	}
	return err
}

type azureAccount struct{ svc *azure.Service }

func (a azureAccount) Queue(name string) (azq.MessageQueue, error) { return a.svc.Queue(name) }

func (a azureAccount) CreateQueue(ctx context.Context, name string) error {
	_, _, err := a.svc.CreateQueue(ctx, name, nil)
	if errors.Is(err, azq.ErrQueueAlreadyExists) {
		return nil
	}
	return err
}

// namedQueue is the queue name of an in-process Service, looked up at
// each operation.
type namedQueue struct {
	svc  *azq.Service
	name string
}

var _ azq.MessageQueue = namedQueue{}

func (n namedQueue) Clock() clock.Clock { return n.svc.Clock() }

func (n namedQueue) Put(ctx context.Context, content string, opts *azq.PutOptions) (azq.Message, error) {
	q, err := n.svc.Queue(n.name)
	if err != nil {
		return azq.Message{}, err
	}
	return q.Put(ctx, content, opts)
}

func (n namedQueue) Get(ctx context.Context, max int, visibility time.Duration) ([]azq.Message, error) {
	q, err := n.svc.Queue(n.name)
	if err != nil {
		return nil, err
	}
	return q.Get(ctx, max, visibility)
}

func (n namedQueue) Receive(ctx context.Context, max int, visibility time.Duration) ([]azq.Message, error) {
	q, err := n.svc.Queue(n.name)
	if err != nil {
		return nil, err
	}
	return q.Receive(ctx, max, visibility)
}

func (n namedQueue) Peek(ctx context.Context, max int) ([]azq.Message, error) {
	q, err := n.svc.Queue(n.name)
	if err != nil {
		return nil, err
	}
	return q.Peek(ctx, max)
}

func (n namedQueue) Update(ctx context.Context, id azq.MessageID, receipt azq.PopReceipt, visibility time.Duration, content *string) (azq.UpdateResult, error) {
	q, err := n.svc.Queue(n.name)
	if err != nil {
		return azq.UpdateResult{}, err
	}
	return q.Update(ctx, id, receipt, visibility, content)
}

func (n namedQueue) Delete(ctx context.Context, id azq.MessageID, receipt azq.PopReceipt) error {
	q, err := n.svc.Queue(n.name)
	if err != nil {
		return err
	}
	return q.Delete(ctx, id, receipt)
}

func (n namedQueue) Clear(ctx context.Context) error {
	q, err := n.svc.Queue(n.name)
	if err != nil {
		return err
	}
	return q.Clear(ctx)
}

func (n namedQueue) ApproximateCount(ctx context.Context) (int, error) {
	q, err := n.svc.Queue(n.name)
	if err != nil {
		return 0, err
	}
	return q.ApproximateCount(ctx)
}
