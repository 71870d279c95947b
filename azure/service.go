package azure

import (
	"context"
	"net/http"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/runtime"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azqueue"
	"github.com/azqlib/azq"
	"github.com/benbjohnson/clock"
)

// Service is the queue service of one storage account, as azq.Service is
// for queues in memory: it creates, deletes and lists queues and hands
// out Queues that share its client and options. All methods are safe for
// concurrent use.
type Service struct {
	client *azqueue.ServiceClient
	cfg    config
}

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

// CreateQueue creates the queue name with metadata and returns it with
// created set. If the queue exists with the same metadata, it returns it
// with created unset; with different metadata the service answers
// azq.ErrQueueAlreadyExists, as azq.Service does.
func (s *Service) CreateQueue(ctx context.Context, name string, metadata map[string]string) (q *Queue, created bool, err error) {
	q, err = s.Queue(name)
	if err != nil {
		return nil, false, err
	}
	var raw *http.Response
	_, err = q.client.Create(runtime.WithCaptureResponse(ctx, &raw), &azqueue.CreateOptions{Metadata: toSDKMetadata(metadata)})
	if err != nil {
		return nil, false, mapError(err)
	}
	return q, raw != nil && raw.StatusCode == http.StatusCreated, nil
}

// DeleteQueue deletes the queue name and its messages; a missing queue
// gives azq.ErrQueueNotFound. Azure keeps the name unusable for a while
// afterwards (QueueBeingDeleted).
func (s *Service) DeleteQueue(ctx context.Context, name string) error {
	_, err := s.client.DeleteQueue(ctx, name, nil)
	return mapError(err)
}

// ListQueues returns one page of the account's queues in name order, as
// azq.Service.ListQueues does; NextMarker is the service's own opaque
// marker. The SDK lower-cases the metadata names of a listing.
func (s *Service) ListQueues(ctx context.Context, opts azq.ListQueuesOptions) (azq.ListQueuesPage, error) {
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
