package azqwatermill

import (
	"context"
	"errors"

	"github.com/azqlib/azq"
)

// Account is where topics' queues live: the queues of any back end of
// azq's service contract, through ServiceAccount. The Publisher and
// Subscriber need nothing else of a back end.
type Account interface {
	// Queue returns the queue named name, which need not exist:
	// operations on a missing queue fail with azq.ErrQueueNotFound.
	Queue(name string) (azq.MessageQueue, error)
	// CreateQueue creates the queue named name, without metadata, unless
	// it exists.
	CreateQueue(ctx context.Context, name string) error
}

// ServiceAccount returns the Account of the queues of svc: an in-memory
// or durable *azq.Service, an *azure.Service (Azure Queue Storage or
// azq's REST server), or any other back end of the service contract. Its
// queues are addressed by name at each operation (QueueService.Ref), so a
// queue may be created after a publisher or subscriber names it.
func ServiceAccount(svc azq.QueueService) Account { return serviceAccount{svc} }

type serviceAccount struct{ svc azq.QueueService }

func (a serviceAccount) Queue(name string) (azq.MessageQueue, error) {
	q, err := a.svc.Ref(name)
	if err != nil {
		return nil, err
	}
	return q, nil
}

func (a serviceAccount) CreateQueue(ctx context.Context, name string) error {
	q, err := a.svc.Ref(name)
	if err != nil {
		return err
	}
	_, err = q.Create(ctx, nil)
	if errors.Is(err, azq.ErrQueueAlreadyExists) {
		return nil // it exists, with metadata of its own
	}
	return err
}
