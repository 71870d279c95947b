package azqwatermill

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/azqlib/azq"
	"github.com/azqlib/azq/envelope"
)

// batchQueue is an in-memory queue that puts in batches (azq.BatchPutter)
// and records the size of each PutBatch. While missing is set, its
// PutBatch fails as a whole with azq.ErrQueueNotFound, as a back end
// that batches answers for a queue not created yet.
type batchQueue struct {
	*azq.Queue
	mu      sync.Mutex // guards the fields below
	puts    []int
	singles int
	missing bool
}

func (b *batchQueue) PutBatch(ctx context.Context, reqs []azq.PutRequest) ([]azq.PutResult, error) {
	b.mu.Lock()
	b.puts = append(b.puts, len(reqs))
	missing := b.missing
	b.mu.Unlock()
	if missing {
		return nil, azq.ErrQueueNotFound
	}
	return azq.PutBatch(ctx, b.Queue, reqs)
}

func (b *batchQueue) Put(ctx context.Context, s string, o *azq.PutOptions) (azq.Message, error) {
	b.mu.Lock()
	b.singles++
	b.mu.Unlock()
	return b.Queue.Put(ctx, s, o)
}

func (b *batchQueue) calls() ([]int, int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Clone(b.puts), b.singles
}

// batchAccount serves one batchQueue; CreateQueue makes it exist.
type batchAccount struct{ q *batchQueue }

func (a batchAccount) Queue(string) (azq.MessageQueue, error) { return a.q, nil }
func (a batchAccount) CreateQueue(context.Context, string) error {
	a.q.mu.Lock()
	a.q.missing = false
	a.q.mu.Unlock()
	return nil
}

// uuids returns the message IDs of the envelopes in q, oldest first.
func uuids(t *testing.T, q *azq.Queue) []string {
	t.Helper()
	var got []string
	for {
		ms, err := q.Get(context.Background(), 32, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if len(ms) == 0 {
			return got
		}
		for _, m := range ms {
			env, err := envelope.Decode(m.Content)
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, env.ID)
		}
	}
}

func numbered(n int) ([]*message.Message, []string) {
	ms := make([]*message.Message, n)
	ids := make([]string, n)
	for i := range ms {
		ids[i] = fmt.Sprint("m", i)
		ms[i] = message.NewMessage(ids[i], []byte(ids[i]))
	}
	return ms, ids
}

func publisher(t *testing.T, a Account) *Publisher {
	t.Helper()
	pub, err := NewPublisher(a, PublisherConfig{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pub.Close() })
	return pub
}

// Publish puts consecutive messages of one context in batches of up to
// MaxBatchSize, in order; a message of another context starts a batch.
func TestPublishPutsInBatches(t *testing.T) {
	type ctxKey struct{}
	other := context.WithValue(context.Background(), ctxKey{}, 1)
	for _, tc := range []struct {
		name  string
		n     int
		ctxAt map[int]context.Context // the messages with a context of their own
		want  []int
	}{
		{"one context", 70, nil, []int{32, 32, 6}},
		{"a context in between", 5, map[int]context.Context{2: other, 3: other}, []int{2, 2, 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bq := &batchQueue{Queue: azq.New()}
			ms, ids := numbered(tc.n)
			for i, ctx := range tc.ctxAt {
				ms[i].SetContext(ctx)
			}
			if err := publisher(t, batchAccount{bq}).Publish("orders", ms...); err != nil {
				t.Fatal(err)
			}
			puts, singles := bq.calls()
			if !slices.Equal(puts, tc.want) || singles != 0 {
				t.Fatalf("PutBatch sizes %v, %d Puts; want %v", puts, singles, tc.want)
			}
			if got := uuids(t, bq.Queue); !slices.Equal(got, ids) {
				t.Fatalf("queue holds %v", got)
			}
		})
	}
}

// A batch that finds the queue missing creates it and is put again, once.
func TestPublishBatchCreatesMissingQueue(t *testing.T) {
	bq := &batchQueue{Queue: azq.New(), missing: true}
	ms, ids := numbered(3)
	if err := publisher(t, batchAccount{bq}).Publish("orders", ms...); err != nil {
		t.Fatal(err)
	}
	if got := uuids(t, bq.Queue); !slices.Equal(got, ids) {
		t.Fatalf("queue holds %v", got)
	}
	if puts, _ := bq.calls(); !slices.Equal(puts, []int{3, 3}) {
		t.Fatalf("PutBatch sizes %v", puts)
	}
}

// A message of a batch that cannot be put fails Publish, naming it; the
// other messages of its batch are put.
func TestPublishBatchItemError(t *testing.T) {
	bq := &batchQueue{Queue: azq.New()}
	ms, ids := numbered(3)
	ms[1].Payload = make([]byte, 64<<10)
	err := publisher(t, batchAccount{bq}).Publish("orders", ms...)
	if !errors.Is(err, azq.ErrMessageTooLarge) || !strings.Contains(err.Error(), ids[1]) {
		t.Fatalf("Publish: %v; want message %s too large", err, ids[1])
	}
	if got := uuids(t, bq.Queue); !slices.Equal(got, []string{ids[0], ids[2]}) {
		t.Fatalf("queue holds %v", got)
	}
}
