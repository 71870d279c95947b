package azq_test

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/azqlib/azq"
	"github.com/benbjohnson/clock"
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

// A queue's batch answers per item exactly the error the single call
// answers, message and details included, and a Receive waiting on the
// queue returns with the batch's messages.
func TestQueueBatchErrorsAreTheSingleCalls(t *testing.T) {
	ctx := context.Background()
	mock := clock.NewMock()
	q, twin := azq.New(azq.WithClock(mock)), azq.New(azq.WithClock(mock))
	reqs := []azq.PutRequest{
		{Content: strings.Repeat("x", 64<<10+1)},
		{Content: "a", Options: &azq.PutOptions{VisibilityTimeout: -time.Second}},
		{Content: "b", Options: &azq.PutOptions{VisibilityTimeout: time.Minute, TimeToLive: time.Minute}},
		{Content: "c", Options: &azq.PutOptions{TimeToLive: -2 * time.Second}},
		{Content: "d"},
	}
	received := make(chan []azq.Message, 1)
	go func() {
		ms, err := q.Receive(ctx, 32, time.Minute)
		if err != nil {
			t.Error(err)
		}
		received <- ms
	}()
	res, err := q.PutBatch(ctx, reqs)
	if err != nil {
		t.Fatal(err)
	}
	var single azq.Message
	for i, r := range reqs {
		m, want := twin.Put(ctx, r.Content, r.Options)
		if want == nil {
			single = m
		}
		if !reflect.DeepEqual(res[i].Err, want) {
			t.Errorf("item %d: %#v, want %#v", i, res[i].Err, want)
		}
	}
	if ms := <-received; len(ms) != 1 || ms[0].Content != "d" {
		t.Fatalf("Receive returned %+v, want the batch's message", ms)
	}
	if _, err := twin.Get(ctx, 1, time.Minute); err != nil {
		t.Fatal(err)
	}
	errs, err := q.DeleteBatch(ctx, []azq.DeleteRequest{{ID: res[4].Message.ID, PopReceipt: res[4].Message.PopReceipt}, {ID: res[4].Message.ID}})
	if err != nil {
		t.Fatal(err)
	}
	want := []error{
		twin.Delete(ctx, single.ID, single.PopReceipt),
		twin.Delete(ctx, single.ID, azq.PopReceipt{}),
	}
	// Put's receipts died with the Gets; the messages differ only in
	// their IDs.
	if errs[0] == nil || want[0] == nil || strings.ReplaceAll(errs[0].Error(), res[4].Message.ID.String(), "") != strings.ReplaceAll(want[0].Error(), single.ID.String(), "") {
		t.Errorf("stale receipt: %v, want %v", errs[0], want[0])
	}
	if !reflect.DeepEqual(errs[1], want[1]) {
		t.Errorf("no receipt: %#v, want %#v", errs[1], want[1])
	}
}

// The items of a batch share one instant, and a closed queue fails the
// whole batch.
func TestQueueBatchOneInstantAndAClosedQueue(t *testing.T) {
	ctx := context.Background()
	q := azq.New()
	reqs := make([]azq.PutRequest, azq.MaxBatchSize)
	res, err := q.PutBatch(ctx, reqs)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range res {
		if r.Err != nil || !r.Message.InsertionTime.Equal(res[0].Message.InsertionTime) {
			t.Fatalf("item %d: %v at %v, item 0 at %v", i, r.Err, r.Message.InsertionTime, res[0].Message.InsertionTime)
		}
	}
	q.Close()
	if res, err := q.PutBatch(ctx, reqs); !errors.Is(err, azq.ErrQueueNotFound) || res != nil {
		t.Errorf("PutBatch on a closed queue: %v, %v", res, err)
	}
	dels := []azq.DeleteRequest{{ID: res[0].Message.ID, PopReceipt: res[0].Message.PopReceipt}}
	if errs, err := q.DeleteBatch(ctx, dels); !errors.Is(err, azq.ErrQueueNotFound) || errs != nil {
		t.Errorf("DeleteBatch on a closed queue: %v, %v", errs, err)
	}
}
