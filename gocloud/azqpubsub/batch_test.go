package azqpubsub

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/azqlib/azq"
	"github.com/azqlib/azq/envelope"
	"gocloud.dev/gcerrors"
	"gocloud.dev/pubsub/driver"
)

// batchQueue is an in-memory queue that puts and deletes in batches
// (azq.BatchPutter, azq.BatchDeleter) and records the size of each call.
// Its batch calls fail as a whole with fail, the first failN times.
type batchQueue struct {
	*azq.Queue
	mu      sync.Mutex // guards the fields below
	puts    []int      // the size of each PutBatch
	deletes []int      // the size of each DeleteBatch
	singles int        // Put and Delete calls
	fail    error
	failN   int
}

func newBatchQueue() *batchQueue { return &batchQueue{Queue: azq.New()} }

func (b *batchQueue) failing() error {
	if b.failN > 0 {
		b.failN--
		return b.fail
	}
	return nil
}

func (b *batchQueue) PutBatch(ctx context.Context, reqs []azq.PutRequest) ([]azq.PutResult, error) {
	b.mu.Lock()
	b.puts = append(b.puts, len(reqs))
	err := b.failing()
	b.mu.Unlock()
	if err != nil {
		return nil, err
	}
	return azq.PutBatch(ctx, b.Queue, reqs)
}

func (b *batchQueue) DeleteBatch(ctx context.Context, reqs []azq.DeleteRequest) ([]error, error) {
	b.mu.Lock()
	b.deletes = append(b.deletes, len(reqs))
	err := b.failing()
	b.mu.Unlock()
	if err != nil {
		return nil, err
	}
	return azq.DeleteBatch(ctx, b.Queue, reqs)
}

func (b *batchQueue) Put(ctx context.Context, s string, o *azq.PutOptions) (azq.Message, error) {
	b.mu.Lock()
	b.singles++
	b.mu.Unlock()
	return b.Queue.Put(ctx, s, o)
}

func (b *batchQueue) Delete(ctx context.Context, id azq.MessageID, r azq.PopReceipt) error {
	b.mu.Lock()
	b.singles++
	b.mu.Unlock()
	return b.Queue.Delete(ctx, id, r)
}

// calls returns the sizes of the PutBatch and DeleteBatch calls, and the
// number of single calls.
func (b *batchQueue) calls() (puts, deletes []int, singles int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Clone(b.puts), slices.Clone(b.deletes), b.singles
}

// messages returns n driver messages, "0" to "n-1".
func messages(n int) []*driver.Message {
	ms := make([]*driver.Message, n)
	for i := range ms {
		ms[i] = &driver.Message{Body: []byte(fmt.Sprint(i))}
	}
	return ms
}

// bodies returns the bodies of every message of q, oldest first, taking
// them for a minute, and the messages as ack IDs.
func bodies(t *testing.T, q *azq.Queue) ([]string, []driver.AckID) {
	t.Helper()
	var got []string
	var ids []driver.AckID
	for {
		ms, err := q.Get(context.Background(), 32, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if len(ms) == 0 {
			return got, ids
		}
		for i := range ms {
			env, err := envelope.Decode(ms[i].Content)
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, string(env.Body))
			ids = append(ids, &ms[i])
		}
	}
}

func wantBodies(n int) []string {
	var want []string
	for i := range n {
		want = append(want, fmt.Sprint(i))
	}
	return want
}

// SendBatch puts in batches of up to MaxBatchSize, in order, and SendAcks
// deletes in batches, passing over a message already gone.
func TestSendBatchAndAcksGoInBatches(t *testing.T) {
	ctx := context.Background()
	bq := newBatchQueue()
	if err := newTopic(bq, nil, nil).SendBatch(ctx, messages(70)); err != nil {
		t.Fatal(err)
	}
	got, ids := bodies(t, bq.Queue)
	if !slices.Equal(got, wantBodies(70)) {
		t.Fatalf("queue holds %v", got)
	}
	gone := ids[5].(*azq.Message)
	if err := bq.Queue.Delete(ctx, gone.ID, gone.PopReceipt); err != nil {
		t.Fatal(err)
	}
	if err := newSubscription(bq, &SubscriptionOptions{}).SendAcks(ctx, ids[:40]); err != nil {
		t.Fatal(err)
	}
	puts, deletes, singles := bq.calls()
	if !slices.Equal(puts, []int{32, 32, 6}) || !slices.Equal(deletes, []int{32, 8}) || singles != 0 {
		t.Fatalf("PutBatch sizes %v, DeleteBatch sizes %v, %d single calls", puts, deletes, singles)
	}
	if n, _ := bq.ApproximateCount(ctx); n != 30 {
		t.Fatalf("%d messages left, want 30", n)
	}
}

// A fan-out topic puts the batch to each queue in one call a queue.
func TestFanoutSendBatchPutsEachQueueInBatches(t *testing.T) {
	ctx := context.Background()
	a, b := newBatchQueue(), newBatchQueue()
	ms := messages(10)
	sent := 0
	for _, m := range ms {
		m.AfterSend = func(as func(any) bool) error {
			var all []azq.Message
			if !as(&all) || len(all) != 2 {
				return fmt.Errorf("AfterSend sees %d messages, want 2", len(all))
			}
			sent++
			return nil
		}
	}
	if err := newTopic(nil, NewFanout(a, b), nil).SendBatch(ctx, ms); err != nil {
		t.Fatal(err)
	}
	for i, q := range []*batchQueue{a, b} {
		got, _ := bodies(t, q.Queue)
		puts, _, singles := q.calls()
		if !slices.Equal(got, wantBodies(10)) || !slices.Equal(puts, []int{10}) || singles != 0 {
			t.Fatalf("queue %d holds %v after PutBatch sizes %v and %d Puts", i, got, puts, singles)
		}
	}
	if sent != 10 {
		t.Fatalf("%d AfterSends", sent)
	}
}

// A retry of a batch whose PutBatch failed retryably puts only what the
// failed try did not: each message once.
func TestSendBatchRetryResumesAfterFailedPutBatch(t *testing.T) {
	ctx := context.Background()
	bq := newBatchQueue()
	tp := newTopic(&secondFails{batchQueue: bq}, nil, nil)
	ms := messages(40)
	err := tp.SendBatch(ctx, ms)
	if !tp.IsRetryable(err) {
		t.Fatalf("first try: %v, want a retryable error", err)
	}
	if err := tp.SendBatch(ctx, ms); err != nil {
		t.Fatalf("retry: %v", err)
	}
	got, _ := bodies(t, bq.Queue)
	if !slices.Equal(got, wantBodies(40)) {
		t.Fatalf("queue holds %v, want each message once", got)
	}
}

// secondFails fails its second PutBatch call, as a whole, with
// errUnavailableForTest.
type secondFails struct {
	*batchQueue
	n int
}

func (s *secondFails) PutBatch(ctx context.Context, reqs []azq.PutRequest) ([]azq.PutResult, error) {
	if s.n++; s.n == 2 {
		return nil, errUnavailableForTest
	}
	return s.batchQueue.PutBatch(ctx, reqs)
}

var errUnavailableForTest = &azq.Error{Code: "ServerBusy", StatusCode: 503, Message: "test: service unavailable"}

// A message of a batch that is too large fails the batch with
// InvalidArgument, not retried.
func TestSendBatchItemErrorFailsTheBatch(t *testing.T) {
	ctx := context.Background()
	bq := newBatchQueue()
	tp := newTopic(bq, nil, nil)
	ms := messages(3)
	ms[1].Body = make([]byte, 64<<10)
	err := tp.SendBatch(ctx, ms)
	if !errors.Is(err, azq.ErrMessageTooLarge) || tp.ErrorCode(err) != gcerrors.InvalidArgument || tp.IsRetryable(err) {
		t.Fatalf("SendBatch: %v (%v)", err, tp.ErrorCode(err))
	}
}

// A retry of acks whose DeleteBatch failed retryably resumes with what it
// did not delete.
func TestSendAcksRetryAfterFailedDeleteBatch(t *testing.T) {
	ctx := context.Background()
	bq := newBatchQueue()
	if err := newTopic(bq, nil, nil).SendBatch(ctx, messages(40)); err != nil {
		t.Fatal(err)
	}
	_, ids := bodies(t, bq.Queue)
	sub := newSubscription(bq, &SubscriptionOptions{})
	bq.mu.Lock()
	bq.fail, bq.failN = errUnavailableForTest, 1
	bq.mu.Unlock()
	if err := sub.SendAcks(ctx, ids); !sub.IsRetryable(err) {
		t.Fatalf("first try: %v, want a retryable error", err)
	}
	if err := sub.SendAcks(ctx, ids); err != nil {
		t.Fatalf("retry: %v", err)
	}
	if n, _ := bq.ApproximateCount(ctx); n != 0 {
		t.Fatalf("%d messages left", n)
	}
	if _, deletes, singles := bq.calls(); !slices.Equal(deletes, []int{32, 32, 8}) || singles != 0 {
		t.Fatalf("DeleteBatch sizes %v, %d Deletes", deletes, singles)
	}
}
