package azure

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"

	"github.com/azqlib/azq"
)

// BatchConcurrency is how many requests a Queue's PutBatch or DeleteBatch
// has in flight at once. Azure's REST API has no batch operations, so a
// batch is one request an item, sent concurrently: a batch of 32 costs
// about four round trips rather than 32, and no more than eight of a
// caller's requests load the account at a time.
const BatchConcurrency = 8

var (
	_ azq.BatchPutter  = (*Queue)(nil)
	_ azq.BatchDeleter = (*Queue)(nil)
)

// PutBatch puts each request as Put would, BatchConcurrency requests at a
// time, and answers one azq.PutResult per request, in order; see
// azq.BatchPutter. An item the service refuses for its own input (too
// large, a visibility timeout or time-to-live out of range) fails alone.
// Any other failure (ctx ending, the queue missing, the service or the
// network failing) fails the call: the requests not yet sent are not
// sent, those in flight are answered before PutBatch returns (so none
// lands after it), and the items put before stay put, as for a failed
// Put. The service gives each message its own time, to
// the second. An empty batch sends nothing.
func (q *Queue) PutBatch(ctx context.Context, reqs []azq.PutRequest) ([]azq.PutResult, error) {
	if err := azq.CheckBatchSize(len(reqs)); err != nil {
		return nil, err
	}
	res := make([]azq.PutResult, len(reqs))
	err := concurrently(ctx, len(reqs), func(ctx context.Context, i int) error {
		r := &res[i]
		r.Message, r.Err = q.Put(ctx, reqs[i].Content, reqs[i].Options)
		return callFailure(r.Err)
	})
	if err != nil {
		return nil, err
	}
	return res, nil
}

// DeleteBatch deletes each (ID, receipt) as Delete would,
// BatchConcurrency requests at a time, and answers one error per request,
// in order: nil for a message deleted, else Delete's error, such as
// azq.ErrMessageNotFound for a stale receipt; see azq.BatchDeleter. A
// failure that is not the item's own fails the call, as for PutBatch.
// Items that name the same message are sent one after the other, in
// order, so the first with the current receipt deletes it and the later
// ones find it gone.
func (q *Queue) DeleteBatch(ctx context.Context, reqs []azq.DeleteRequest) ([]error, error) {
	if err := azq.CheckBatchSize(len(reqs)); err != nil {
		return nil, err
	}
	// The items that name one message go in order, one request after
	// the other, so that each answers what it would after the ones
	// before it, as single Deletes in order would.
	var groups [][]int
	first := make(map[azq.MessageID]int, len(reqs))
	for i, r := range reqs {
		g, ok := first[r.ID]
		if !ok {
			g = len(groups)
			first[r.ID] = g
			groups = append(groups, nil)
		}
		groups[g] = append(groups[g], i)
	}
	errs := make([]error, len(reqs))
	err := concurrently(ctx, len(groups), func(ctx context.Context, g int) error {
		for _, i := range groups[g] {
			errs[i] = q.Delete(ctx, reqs[i].ID, reqs[i].PopReceipt)
			if err := callFailure(errs[i]); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return errs, nil
}

// callFailure returns err if it fails a whole batch rather than its item:
// anything but the service's refusal of the item's own input or receipt.
func callFailure(err error) error {
	if err == nil || errors.Is(err, azq.ErrMessageNotFound) || errors.Is(err, azq.ErrMessageTooLarge) ||
		errors.Is(err, azq.ErrInvalidArgument) {
		return nil
	}
	return err
}

// concurrently runs do(ctx, i) for i from 0 to n-1, BatchConcurrency at a
// time, and returns once all have returned. The first error a do returns
// stops the ones not started and is returned; those in flight run to
// their answer rather than being cancelled, since a cancelled request may
// still reach the service and take effect after the call has returned,
// behind the caller's next one. An ended ctx cancels them and is
// returned as ctx.Err().
func concurrently(ctx context.Context, n int, do func(ctx context.Context, i int) error) error {
	if n == 0 {
		return nil
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	var (
		stop     atomic.Bool // a do failed: start no more
		next     atomic.Int64
		wg       sync.WaitGroup
		failOnce sync.Once
		failure  error       // the first failure; written once, read after wg.Wait
		skipped  atomic.Bool // an item was not sent, ctx having ended
	)
	worker := func() {
		defer wg.Done()
		for {
			i := int(next.Add(1) - 1)
			if i >= n || stop.Load() {
				return
			}
			if ctx.Err() != nil {
				skipped.Store(true)
				return
			}
			if err := do(ctx, i); err != nil {
				failOnce.Do(func() { failure = err; stop.Store(true) })
				return
			}
		}
	}
	workers := min(n, BatchConcurrency)
	wg.Add(workers)
	for range workers - 1 {
		go worker()
	}
	worker() // the caller's goroutine is one of them
	wg.Wait()
	if failure != nil {
		return failure
	}
	if skipped.Load() {
		// The parent context ended between requests: the workers
		// stopped without a failure of their own.
		return context.Cause(ctx)
	}
	return nil
}
