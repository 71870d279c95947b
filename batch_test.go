package azq_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/azqlib/azq"
)

// singles hides every method of a queue but the contract's, so that the
// batch helpers fall back to one call an item.
type singles struct{ azq.MessageQueue }

// Without a batch, PutBatch and DeleteBatch answer per item exactly what
// Put and Delete answer, and refuse more than MaxBatchSize items.
func TestBatchHelpersFallBackToSingleCalls(t *testing.T) {
	ctx := context.Background()
	q := singles{azq.New()}
	res, err := azq.PutBatch(ctx, q, []azq.PutRequest{
		{Content: "a"},
		{Content: strings.Repeat("x", 64<<10+1)},
		{Content: "c", Options: &azq.PutOptions{VisibilityTimeout: -1}},
	})
	if err != nil || len(res) != 3 {
		t.Fatalf("PutBatch: %v, %d results", err, len(res))
	}
	if res[0].Err != nil || res[0].Message.Content != "a" {
		t.Errorf("item 0: %+v", res[0])
	}
	if !errors.Is(res[1].Err, azq.ErrMessageTooLarge) {
		t.Errorf("item 1: %v, want ErrMessageTooLarge", res[1].Err)
	}
	if !errors.Is(res[2].Err, azq.ErrOutOfRange) {
		t.Errorf("item 2: %v, want ErrOutOfRange", res[2].Err)
	}
	if n, _ := q.ApproximateCount(ctx); n != 1 {
		t.Errorf("%d messages, want 1", n)
	}
	m := res[0].Message
	errs, err := azq.DeleteBatch(ctx, q, []azq.DeleteRequest{{m.ID, m.PopReceipt}, {m.ID, m.PopReceipt}})
	if err != nil || len(errs) != 2 || errs[0] != nil || !errors.Is(errs[1], azq.ErrMessageNotFound) {
		t.Fatalf("DeleteBatch: %v, %v", errs, err)
	}
	if _, err := azq.PutBatch(ctx, q, make([]azq.PutRequest, azq.MaxBatchSize+1)); !errors.Is(err, azq.ErrOutOfRange) {
		t.Errorf("PutBatch of %d: %v, want ErrOutOfRange", azq.MaxBatchSize+1, err)
	}
	if _, err := azq.DeleteBatch(ctx, q, make([]azq.DeleteRequest, azq.MaxBatchSize+1)); !errors.Is(err, azq.ErrOutOfRange) {
		t.Errorf("DeleteBatch of %d: %v, want ErrOutOfRange", azq.MaxBatchSize+1, err)
	}
	if n, _ := q.ApproximateCount(ctx); n != 0 {
		t.Errorf("%d messages after the refused batches, want 0", n)
	}
}
