package azq

import (
	"context"
	"encoding/base64"
	"strings"
	"sync"

	"github.com/azqlib/azq/internal/queuemeta"
	"github.com/benbjohnson/clock"
	"github.com/tidwall/btree"
)

// Service holds named queues, as an Azure storage account does. Its queues
// share the Service's clock and limits. All methods are safe for concurrent
// use.
type Service struct {
	cfg     config
	mu      sync.Mutex                 // guards the fields below
	queues  *btree.Map[string, *Queue] // ordered by name, for ListQueues
	closed  bool
	nextQID uint64 // number of the next queue created, for logs and snapshots
	failure error  // the storage failure that stopped it (durable mode)

	j serviceJournal // records the creation of queues in the durable mode; nil in memory
}

// NewService returns a Service with no queues. Options set the clock and
// limits of every queue it creates.
func NewService(opts ...Option) *Service {
	return &Service{cfg: newConfig(opts), queues: new(btree.Map[string, *Queue]), nextQID: 1}
}

// Clock returns the clock the Service's queues read time from.
func (s *Service) Clock() clock.Clock { return s.cfg.clock }

// Limits returns the limits the Service's queues enforce.
func (s *Service) Limits() Limits { return s.cfg.limits }

func (s *Service) closedErr() error {
	if s.failure != nil {
		return s.failure
	}
	return newError(ErrQueueNotFound, "", "the service is closed")
}

// CreateQueue creates the queue name with a copy of metadata and returns
// it with created set. If the queue exists with the same metadata (names
// compared ignoring case, values exactly), CreateQueue returns it with
// created unset, as Azure answers 204 then; with different metadata it
// returns ErrQueueAlreadyExists. A bad name gives ErrInvalidQueueName and
// bad metadata ErrInvalidMetadata.
func (s *Service) CreateQueue(ctx context.Context, name string, metadata map[string]string) (q *Queue, created bool, err error) {
	if err := ctx.Err(); err != nil {
		return nil, false, err
	}
	if err := ValidateQueueName(name); err != nil {
		return nil, false, err
	}
	if err := ValidateMetadata(metadata); err != nil {
		return nil, false, err
	}
	s.mu.Lock()
	if s.closed || s.failure != nil {
		s.mu.Unlock()
		return nil, false, s.closedErr()
	}
	if q, ok := s.queues.Get(name); ok {
		q.mu.Lock()
		same := queuemeta.Equal(q.metadata, metadata)
		q.mu.Unlock()
		var lsn uint64
		if s.j != nil {
			lsn = s.j.last() // the queue's creation may not be durable yet
		}
		s.mu.Unlock()
		if !same {
			return nil, false, newError(ErrQueueAlreadyExists, "", "the queue "+quoteTrunc(name)+" already exists with different metadata")
		}
		if lsn != 0 {
			if err := s.j.wait(lsn); err != nil {
				return nil, false, err
			}
		}
		return q, false, nil
	}
	q = newQueue(name, s.cfg, cloneMetadata(metadata))
	q.svc, q.qid = s, s.nextQID
	s.nextQID++
	var lsn uint64
	if s.j != nil {
		q.j, lsn = s.j.create(q)
	}
	s.queues.Set(name, q)
	s.mu.Unlock()
	if lsn != 0 {
		if err := q.j.wait(lsn); err != nil {
			return nil, false, err
		}
	}
	return q, true, nil
}

// Queue returns the queue name, or ErrQueueNotFound.
func (s *Service) Queue(name string) (*Queue, error) {
	s.mu.Lock()
	q, ok := s.queues.Get(name)
	s.mu.Unlock()
	if !ok {
		return nil, newError(ErrQueueNotFound, "", "the queue "+quoteTrunc(name)+" does not exist")
	}
	return q, nil
}

// DeleteQueue deletes the queue name and its messages. Handles to it
// already held get ErrQueueNotFound from then on, and waiting Receive calls
// return. A queue that does not exist gives ErrQueueNotFound; a name that
// breaks Azure's rules gives ErrInvalidQueueName, as Azure answers.
func (s *Service) DeleteQueue(ctx context.Context, name string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := ValidateQueueName(name); err != nil {
		return err
	}
	s.mu.Lock()
	if s.failure != nil {
		// The deletion cannot be logged, so it is not made.
		s.mu.Unlock()
		return s.failure
	}
	q, ok := s.queues.Delete(name)
	var lsn uint64
	if ok && q.j != nil {
		// Record the deletion before the name is free again, so that a
		// new queue of the same name is created after it in the log too.
		q.mu.Lock()
		if !q.closed {
			lsn = q.j.deleteQueue()
			q.shut()
		}
		q.mu.Unlock()
	}
	s.mu.Unlock()
	if !ok {
		return newError(ErrQueueNotFound, "", "the queue "+quoteTrunc(name)+" does not exist")
	}
	if lsn != 0 {
		return q.j.wait(lsn)
	}
	return q.Close()
}

// ListQueuesOptions select a page of ListQueues.
type ListQueuesOptions struct {
	// Prefix keeps only queues whose names start with it.
	Prefix string
	// Marker continues a listing where the previous page's NextMarker
	// left it; empty starts at the beginning.
	Marker string
	// MaxResults is the page size, 1 to 5000; zero means 5000.
	MaxResults int
	// IncludeMetadata fills QueueItem.Metadata.
	IncludeMetadata bool
}

// PageSize returns the most queues a page of the listing holds:
// MaxResults, or 5000 when it is zero. A MaxResults outside 1 to 5000
// gives ErrOutOfRange with the details Azure gives for its maxresults
// parameter, so that every QueueService answers it alike.
func (o ListQueuesOptions) PageSize() (int, error) {
	if o.MaxResults == 0 {
		return azureMaxListQueueResults, nil
	}
	if o.MaxResults < 1 || o.MaxResults > azureMaxListQueueResults {
		return 0, outOfRangeInt("maxresults", o.MaxResults, 1, azureMaxListQueueResults)
	}
	return o.MaxResults, nil
}

// QueueItem is one queue in a ListQueues page.
type QueueItem struct {
	Name     string
	Metadata map[string]string // nil unless IncludeMetadata was set
}

// ListQueuesPage is one page of ListQueues.
type ListQueuesPage struct {
	Queues []QueueItem
	// NextMarker continues the listing; empty when this is the last page.
	NextMarker string
}

// ListQueues returns the queues in name order, a page at a time. A
// MaxResults outside 1 to 5000 gives ErrOutOfRange; a marker that
// ListQueues did not return gives ErrInvalidMarker.
func (s *Service) ListQueues(ctx context.Context, opts ListQueuesOptions) (ListQueuesPage, error) {
	queues, next, err := s.page(ctx, opts)
	if err != nil {
		return ListQueuesPage{}, err
	}
	page := ListQueuesPage{NextMarker: next}
	if len(queues) > 0 {
		page.Queues = make([]QueueItem, len(queues))
	}
	for i, q := range queues {
		page.Queues[i].Name = q.name
		if opts.IncludeMetadata {
			q.mu.Lock()
			page.Queues[i].Metadata = cloneMetadata(q.metadata)
			q.mu.Unlock()
		}
	}
	return page, nil
}

// page returns the queues of one page of a listing (ListQueues,
// QueueStats) in name order, and the marker of the next page, if any.
func (s *Service) page(ctx context.Context, opts ListQueuesOptions) (queues []*Queue, next string, err error) {
	if err := ctx.Err(); err != nil {
		return nil, "", err
	}
	limit, err := opts.PageSize()
	if err != nil {
		return nil, "", err
	}
	start := opts.Prefix
	if opts.Marker != "" {
		m, err := decodeMarker(opts.Marker)
		if err != nil {
			return nil, "", err
		}
		start = max(start, m)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.queues.Ascend(start, func(name string, q *Queue) bool {
		if !strings.HasPrefix(name, opts.Prefix) {
			return false
		}
		if len(queues) == limit {
			next = encodeMarker(name)
			return false
		}
		queues = append(queues, q)
		return true
	})
	return queues, next, nil
}

// A marker names the first queue of the next page. It is opaque to callers:
// base64 of a version byte and the name, so that it is not mistaken for a
// name and a hand-made one is detected.
const markerVersion = '1'

func encodeMarker(name string) string {
	return base64.RawURLEncoding.EncodeToString([]byte(string(markerVersion) + name))
}

func decodeMarker(m string) (string, error) {
	b, err := base64.RawURLEncoding.DecodeString(m)
	if err != nil || len(b) < 1 || b[0] != markerVersion || ValidateQueueName(string(b[1:])) != nil {
		return "", newError(ErrInvalidMarker, "", "the marker "+quoteTrunc(m)+" was not returned by ListQueues",
			Detail{"QueryParameterName", "marker"}, Detail{"QueryParameterValue", m})
	}
	return string(b[1:]), nil
}

// Close deletes every queue, waking their waiting Receive calls. Afterwards
// CreateQueue returns ErrQueueNotFound. Close of an in-memory Service
// always returns nil. A durable Service (Open) keeps its queues on disk:
// Close writes a checkpoint, syncs the log and releases the directory,
// and reports a failure to do so.
func (s *Service) Close() error {
	if s.j != nil {
		return s.j.close()
	}
	for _, q := range s.closeQueues() {
		q.Close()
	}
	return nil
}

// closeQueues marks the Service closed, so that no queue can be created,
// and takes all its queues out of it, for the caller to close.
func (s *Service) closeQueues() []*Queue {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	var qs []*Queue
	s.queues.Scan(func(_ string, q *Queue) bool { qs = append(qs, q); return true })
	s.queues.Clear()
	return qs
}
