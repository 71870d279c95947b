package azq

import (
	"context"
	"time"
)

// QueueStats are the figures of one queue that a monitor reads: how many
// messages it holds and how long its head has waited, as they were when
// read.
type QueueStats struct {
	// Name is the queue's name.
	Name string
	// Count is the number of messages in the queue, visible or not, as
	// ApproximateCount gives it, except that messages that expired since
	// the queue's last operation may still be counted until the next one
	// removes them: never fewer than there are.
	Count int
	// HeadInserted is when the message at the head of the queue was put:
	// the visible message that has been visible longest, the one the next
	// Get takes. It is the oldest visible message, unless an older one
	// came back into view (its lease lapsed, or Update hid it for a
	// while): that one queues from when it became visible again. Zero
	// when no message is visible.
	HeadInserted time.Time
}

// QueueStatsPage is one page of QueueStatsReader.QueueStats.
type QueueStatsPage struct {
	Queues []QueueStats
	// NextMarker continues the listing; empty when this is the last page.
	NextMarker string
}

// QueueStatsReader is implemented by a QueueService that reads the figures
// of its queues without touching their messages, at a cost that does not
// grow with them: a monitor (package metrics) scrapes it as often as it
// likes without slowing the queues down. *Service keeps the figures as
// its operations go, and reads each queue's under its lock for a few
// field reads. A back end that cannot (package azure: Azure's Get Queue
// Metadata has the approximate count but no age) does not implement it;
// a monitor reads its counts through QueueRef.Properties instead.
type QueueStatsReader interface {
	// QueueStats returns the figures of a page of the service's queues,
	// paged as ListQueues pages them: in name order, from opts.Marker,
	// those whose names start with opts.Prefix, at most opts.MaxResults
	// (1 to 5000; zero means 5000). IncludeMetadata is ignored. A queue
	// deleted while the page is read is left out.
	QueueStats(ctx context.Context, opts ListQueuesOptions) (QueueStatsPage, error)
}

var _ QueueStatsReader = (*Service)(nil)

// QueueStats returns the figures of a page of the Service's queues (see
// QueueStatsReader). It locks each queue only to read its count and the
// front of its visibility index, and leaves expired messages for the
// queue's next operation to remove: the cost is that of ListQueues,
// whatever the queues hold.
func (s *Service) QueueStats(ctx context.Context, opts ListQueuesOptions) (QueueStatsPage, error) {
	queues, next, err := s.page(ctx, opts)
	if err != nil {
		return QueueStatsPage{}, err
	}
	page := QueueStatsPage{Queues: make([]QueueStats, 0, len(queues)), NextMarker: next}
	for _, q := range queues {
		if st, ok := q.stats(); ok {
			page.Queues = append(page.Queues, st)
		}
	}
	return page, nil
}

// stats reads the queue's figures; ok is false once it is closed. It
// holds the lock for a few field reads and the front of the visibility
// index: the least of three ring fronts (dropping dead entries there,
// work the next Get would do) and the btree's minimum, O(log n) in the
// tree.
func (q *Queue) stats() (st QueueStats, ok bool) {
	now := q.now()
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed {
		return QueueStats{}, false
	}
	st = QueueStats{Name: q.name, Count: q.count}
	if slot, at, _, found := q.vis.front(); found && at <= now {
		st.HeadInserted = fromNanos(q.store.at(slot).inserted)
	}
	return st, true
}
