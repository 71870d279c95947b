package azq

import (
	"context"
	"strconv"
	"time"
)

// A queue held in memory or on disk, and the queues of a Service by name,
// are batchers.
var (
	_ BatchPutter  = (*Queue)(nil)
	_ BatchDeleter = (*Queue)(nil)
	_ BatchPutter  = NamedQueue{}
	_ BatchDeleter = NamedQueue{}
)

// PutBatch puts each request as Put would, under one lock and at one
// instant (the items share their InsertionTime, as the messages of one
// call), and answers one PutResult per request, in order; see
// BatchPutter. Each item's input is checked as Put checks it, with the
// same errors, before the queue is touched, and a failed item takes no
// place in the queue's order. Waiting Receive calls are woken once for
// the batch. In the durable mode the batch is one log record, synced
// once: a crash keeps all of its messages or none. A batch whose
// messages together exceed what one record holds (16 MiB, which only a
// Limits.MaxMessageSize over 512 KiB allows) is refused whole there with
// ErrMessageTooLarge. An empty batch changes nothing and answers no
// results.
func (q *Queue) PutBatch(ctx context.Context, reqs []PutRequest) ([]PutResult, error) {
	if err := checkBatchSize(len(reqs)); err != nil {
		return nil, err
	}
	res := make([]PutResult, len(reqs))
	if len(reqs) == 0 {
		return res, nil
	}
	// The checks come first, outside the lock, as Put's do.
	var ttls [MaxBatchSize]time.Duration
	var vis [MaxBatchSize]time.Duration
	valid, content := 0, 0
	for i := range reqs {
		var o PutOptions
		if reqs[i].Options != nil {
			o = *reqs[i].Options
		}
		ttl, err := q.limits.checkPut(reqs[i].Content, &o)
		if err != nil {
			res[i].Err = err
			continue
		}
		ttls[i], vis[i] = ttl, o.VisibilityTimeout
		valid++
		content += len(reqs[i].Content)
	}
	if q.j != nil && content > maxDurableBatchContent {
		return nil, newError(ErrMessageTooLarge, "", "the batch's messages hold "+strconv.Itoa(content)+
			" bytes together; a durable queue's batch holds at most "+strconv.Itoa(maxDurableBatchContent))
	}
	now := q.now()
	if err := q.lock(ctx, now); err != nil {
		return nil, err
	}
	if valid == 0 {
		q.mu.Unlock()
		return res, nil
	}
	soonest := neverExpires
	for i := range reqs {
		if res[i].Err != nil {
			continue
		}
		slot, n := q.insert(now, reqs[i].Content, vis[i], ttls[i], &res[i].Message)
		soonest = min(soonest, n.visible)
		if q.j != nil {
			q.j.batchPut(slot, n)
		}
	}
	q.visibleSoon(soonest, now)
	var lsn uint64
	if q.j != nil {
		lsn = q.j.putBatch()
	}
	if err := q.unlockSynced(lsn); err != nil {
		return nil, err
	}
	return res, nil
}

// DeleteBatch deletes each (ID, receipt) as Delete would, under one lock
// and at one instant, and answers one error per request, in order: nil
// for a message deleted, and otherwise exactly Delete's error (a stale
// receipt is that item's ErrMessageNotFound); see BatchDeleter. A
// message named twice is deleted by the first item, and the second finds
// it gone, as two Deletes would. In the durable mode the batch is one log
// record, synced once. An empty batch changes nothing and answers no
// errors.
func (q *Queue) DeleteBatch(ctx context.Context, reqs []DeleteRequest) ([]error, error) {
	if err := checkBatchSize(len(reqs)); err != nil {
		return nil, err
	}
	errs := make([]error, len(reqs))
	if len(reqs) == 0 {
		return errs, nil
	}
	now := q.now()
	if err := q.lock(ctx, now); err != nil {
		return nil, err
	}
	removed := false
	for i := range reqs {
		slot, n, err := q.find(&reqs[i].ID, &reqs[i].PopReceipt)
		if err != nil {
			errs[i] = err
			continue
		}
		q.remove(slot, n)
		removed = true
		if q.j != nil {
			q.j.batchDelete(slot)
		}
	}
	var lsn uint64
	if removed {
		if q.count == 0 {
			q.trimIdle() // as Delete does of the last message
		}
		if q.j != nil {
			lsn = q.j.deleteBatch()
		}
	}
	if err := q.unlockSynced(lsn); err != nil {
		return nil, err
	}
	return errs, nil
}

// PutBatch is Queue.PutBatch on the queue the name stands for now.
func (n NamedQueue) PutBatch(ctx context.Context, reqs []PutRequest) ([]PutResult, error) {
	if err := checkBatchSize(len(reqs)); err != nil {
		return nil, err
	}
	if len(reqs) == 0 {
		return make([]PutResult, 0), nil
	}
	q, err := n.Queue()
	if err != nil {
		return nil, err
	}
	return q.PutBatch(ctx, reqs)
}

// DeleteBatch is Queue.DeleteBatch on the queue the name stands for now.
// A receipt of a queue since deleted is not current in the new one: that
// item's ErrMessageNotFound.
func (n NamedQueue) DeleteBatch(ctx context.Context, reqs []DeleteRequest) ([]error, error) {
	if err := checkBatchSize(len(reqs)); err != nil {
		return nil, err
	}
	if len(reqs) == 0 {
		return make([]error, 0), nil
	}
	q, err := n.Queue()
	if err != nil {
		return nil, err
	}
	return q.DeleteBatch(ctx, reqs)
}
