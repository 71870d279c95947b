package azure

import (
	"context"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azqueue"
	"github.com/azqlib/azq"
	"github.com/benbjohnson/clock"
)

// Service is the queue service of one storage account, as azq.Service is
// for queues in memory: it creates, deletes and lists queues and hands
// out Queues that share its client and options. All methods are safe for
// concurrent use.
//
// Service keeps the service contract, azq.QueueService: Ref hands out its
// Queues, which keep azq.QueueRef, so azq's REST server, the worker and
// the messaging drivers run on a storage account as on an *azq.Service.
// Where Azure is coarser than azq, it stays so: times are whole seconds,
// ListQueues lower-cases metadata names (the SDK does) and Properties
// gives them in canonical header case ("Team" for "team"), and a deleted
// queue's name is unusable for a while (QueueBeingDeleted).
type Service struct {
	client *azqueue.ServiceClient
	cfg    config
}

var _ azq.QueueService = (*Service)(nil)

// NewServiceFromConnectionString returns the queue service of the account
// that connectionString describes (see NewQueueFromConnectionString).
func NewServiceFromConnectionString(connectionString string, o *Options) (*Service, error) {
	cfg, err := newConfig(o)
	if err != nil {
		return nil, err
	}
	connectionString, err = expandConnectionString(connectionString)
	if err != nil {
		return nil, err
	}
	c, err := azqueue.NewServiceClientFromConnectionString(connectionString, o.clientOptions())
	if err != nil {
		return nil, err
	}
	return &Service{client: c, cfg: cfg}, nil
}

// NewService returns the queue service at serviceURL (for example
// https://account.queue.core.windows.net/), authenticated with cred,
// typically azidentity's DefaultAzureCredential.
func NewService(serviceURL string, cred azcore.TokenCredential, o *Options) (*Service, error) {
	cfg, err := newConfig(o)
	if err != nil {
		return nil, err
	}
	c, err := azqueue.NewServiceClient(serviceURL, cred, o.clientOptions())
	if err != nil {
		return nil, err
	}
	return &Service{client: c, cfg: cfg}, nil
}

// NewServiceFromClient returns the queue service that c addresses, with
// c's credentials and pipeline. Build c with PrepareClientOptions, or
// Update with nil content fails on its queues. Options.ClientOptions is
// ignored.
func NewServiceFromClient(c *azqueue.ServiceClient, o *Options) (*Service, error) {
	cfg, err := newConfig(o)
	if err != nil {
		return nil, err
	}
	return &Service{client: c, cfg: cfg}, nil
}

// Client returns the SDK client the service sends its requests with.
func (s *Service) Client() *azqueue.ServiceClient { return s.client }

// Clock returns the clock its queues report (Options.Clock).
func (s *Service) Clock() clock.Clock { return s.cfg.clock }

// Queue returns the queue name without a request: the queue need not
// exist, and an operation on a missing one gives azq.ErrQueueNotFound. A
// name that breaks Azure's naming rules gives azq.ErrInvalidQueueName.
func (s *Service) Queue(name string) (*Queue, error) {
	if err := azq.ValidateQueueName(name); err != nil {
		return nil, err
	}
	return &Queue{name: name, client: s.client.NewQueueClient(name), svc: s, cfg: s.cfg}, nil
}

// Ref returns Queue(name) as the service contract's QueueRef: no request
// is made, and the queue need not exist.
func (s *Service) Ref(name string) (azq.QueueRef, error) {
	q, err := s.Queue(name)
	if err != nil {
		return nil, err
	}
	return q, nil
}

// CreateQueue creates the queue name with metadata and returns it with
// created set, as Queue.Create does.
func (s *Service) CreateQueue(ctx context.Context, name string, metadata map[string]string) (q *Queue, created bool, err error) {
	q, err = s.Queue(name)
	if err != nil {
		return nil, false, err
	}
	created, err = q.Create(ctx, metadata)
	if err != nil {
		return nil, false, err
	}
	return q, created, nil
}

// DeleteQueue deletes the queue name and its messages; a missing queue
// gives azq.ErrQueueNotFound, and a name that breaks Azure's rules
// azq.ErrInvalidQueueName without a request (as Queue does: on the wire,
// a name with a slash would address something else). Azure keeps the
// name unusable for a while afterwards (QueueBeingDeleted).
func (s *Service) DeleteQueue(ctx context.Context, name string) error {
	if err := azq.ValidateQueueName(name); err != nil {
		return err
	}
	_, err := s.client.DeleteQueue(ctx, name, nil)
	return mapError(err)
}

// ListQueues returns one page of the account's queues in name order, as
// azq.Service.ListQueues does; NextMarker is the service's own opaque
// marker. The SDK lower-cases the metadata names of a listing. A
// MaxResults outside 0 to 5000 gives azq.ErrOutOfRange without a request,
// as azq.Service's does (the service would cut one above 5000 to 5000).
func (s *Service) ListQueues(ctx context.Context, opts azq.ListQueuesOptions) (azq.ListQueuesPage, error) {
	if _, err := opts.PageSize(); err != nil {
		return azq.ListQueuesPage{}, err
	}
	lo := &azqueue.ListQueuesOptions{Include: azqueue.ListQueuesInclude{Metadata: opts.IncludeMetadata}}
	if opts.Prefix != "" {
		lo.Prefix = &opts.Prefix
	}
	if opts.Marker != "" {
		lo.Marker = &opts.Marker
	}
	if opts.MaxResults != 0 {
		m := clampInt32(int64(opts.MaxResults))
		lo.MaxResults = &m
	}
	resp, err := s.client.NewListQueuesPager(lo).NextPage(ctx)
	if err != nil {
		return azq.ListQueuesPage{}, mapError(err)
	}
	page := azq.ListQueuesPage{Queues: make([]azq.QueueItem, 0, len(resp.Queues))}
	for _, it := range resp.Queues {
		if it == nil || it.Name == nil {
			continue
		}
		qi := azq.QueueItem{Name: *it.Name}
		if opts.IncludeMetadata {
			qi.Metadata = fromSDKMetadata(it.Metadata)
		}
		page.Queues = append(page.Queues, qi)
	}
	if resp.NextMarker != nil {
		page.NextMarker = *resp.NextMarker
	}
	return page, nil
}

// Close implements azq.QueueService. It releases nothing and returns nil:
// a Service holds no files, and its connections belong to the SDK
// client's transport (by default one that all of this package's clients
// share), which outlives it. The account's queues stay where they are,
// and the Service and its Queues keep working.
func (s *Service) Close() error { return nil }
