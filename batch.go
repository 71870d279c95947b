package azq

import (
	"context"
	"strconv"
)

// MaxBatchSize is the most items one batch call (PutBatch, DeleteBatch)
// takes: as many as one Get returns, so that a consumer settles what it
// received in one call. Azure's REST API has no batch operations; a
// batch is a capability of azq's back ends beyond Azure, honoured where
// the back end can do many changes at the cost of one (one lock in
// memory, one log record and one sync on disk, one statement and one
// commit on PostgreSQL) and emulated, one call an item, where it cannot.
const MaxBatchSize = 32

// PutRequest is one message of a PutBatch: its content and the options
// Put would take (nil for the defaults).
type PutRequest struct {
	Content string
	Options *PutOptions
}

// PutResult is the outcome of one PutRequest: the Message Put would have
// returned, or the error it would have returned (ErrMessageTooLarge,
// ErrOutOfRange, ErrInvalidArgument for the item's own bad input).
type PutResult struct {
	Message Message
	Err     error
}

// DeleteRequest is one message of a DeleteBatch: its ID and the pop
// receipt Delete would take.
type DeleteRequest struct {
	ID         MessageID
	PopReceipt PopReceipt
}

// BatchPutter is implemented by a back end that can put many messages at
// the cost of one: *Queue, and the queues of the other back ends that
// can. PutBatch puts each request as Put would, in order, and answers
// one PutResult per request, in the same order. An item's own bad input
// fails that item only, with exactly the error Put would have answered;
// the others are put. A non-nil error fails the whole call (the context,
// a deleted queue, the storage): then no item is acknowledged, and, as
// for a failed Put, an item may or may not have been put. More than
// MaxBatchSize requests give ErrOutOfRange and put nothing.
type BatchPutter interface {
	PutBatch(ctx context.Context, reqs []PutRequest) ([]PutResult, error)
}

// BatchDeleter is implemented by a back end that can delete many
// messages at the cost of one. DeleteBatch deletes each (ID, receipt) as
// Delete would and answers one error per request, in order: nil for a
// message deleted, and for the others exactly what Delete would have
// answered (a stale receipt is that item's ErrMessageNotFound, not the
// batch's failure). A non-nil error fails the whole call, as for
// PutBatch. More than MaxBatchSize requests give ErrOutOfRange and
// delete nothing.
type BatchDeleter interface {
	DeleteBatch(ctx context.Context, reqs []DeleteRequest) ([]error, error)
}

// PutBatch puts reqs on q: in one call if q is a BatchPutter, else one
// Put a request, in order, each result that Put's. Code that puts many
// messages calls it rather than asserting the interface, and so runs
// unchanged on every back end. The results are as BatchPutter documents;
// without a batch, each item fails on its own, so the error is nil but
// for more than MaxBatchSize requests.
func PutBatch(ctx context.Context, q MessageQueue, reqs []PutRequest) ([]PutResult, error) {
	if err := checkBatchSize(len(reqs)); err != nil {
		return nil, err
	}
	if b, ok := q.(BatchPutter); ok {
		return b.PutBatch(ctx, reqs)
	}
	res := make([]PutResult, len(reqs))
	for i, r := range reqs {
		res[i].Message, res[i].Err = q.Put(ctx, r.Content, r.Options)
	}
	return res, nil
}

// DeleteBatch deletes reqs from q: in one call if q is a BatchDeleter,
// else one Delete a request, in order, each error that Delete's. As
// PutBatch, it lets code settle many messages on any back end.
func DeleteBatch(ctx context.Context, q MessageQueue, reqs []DeleteRequest) ([]error, error) {
	if err := checkBatchSize(len(reqs)); err != nil {
		return nil, err
	}
	if b, ok := q.(BatchDeleter); ok {
		return b.DeleteBatch(ctx, reqs)
	}
	errs := make([]error, len(reqs))
	for i, r := range reqs {
		errs[i] = q.Delete(ctx, r.ID, r.PopReceipt)
	}
	return errs, nil
}

// CheckBatchSize refuses a batch of n items if n is more than
// MaxBatchSize, with the ErrOutOfRange that PutBatch and DeleteBatch
// answer then. A back end's own batch calls it, so that every back end
// refuses an oversized batch alike.
func CheckBatchSize(n int) error { return checkBatchSize(n) }

// checkBatchSize refuses a batch of more than MaxBatchSize items, as a
// Get of more than 32 messages is refused.
func checkBatchSize(n int) error {
	if n > MaxBatchSize {
		return newError(ErrOutOfRange, "", "a batch holds at most "+strconv.Itoa(MaxBatchSize)+" items; this one has "+strconv.Itoa(n))
	}
	return nil
}
