package azqwatermill

import (
	"context"
	"errors"

	"github.com/azqlib/azq"
	"github.com/azqlib/azq/azure"
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
	return a.svc.Named(name), nil
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
