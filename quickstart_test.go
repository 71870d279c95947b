package azq_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/azqlib/azq"
	"github.com/benbjohnson/clock"
)

// TestCrashedConsumerRetries is the README's quick start for tests: a
// consumer that crashes leaves its message to come back once the lease
// lapses, its receipt dies with the next dequeue, and a week later the
// message has expired, all on a mock clock.
func TestCrashedConsumerRetries(t *testing.T) {
	ctx := context.Background()
	clk := clock.NewMock()
	q := azq.New(azq.WithClock(clk))

	if _, err := q.Put(ctx, "job", nil); err != nil {
		t.Fatal(err)
	}
	first, err := q.Get(ctx, 1, 30*time.Second) // the consumer "crashes": no Delete
	if err != nil || len(first) != 1 {
		t.Fatalf("Get = %v, %v", first, err)
	}

	clk.Add(30 * time.Second) // the lease lapses
	again, err := q.Get(ctx, 1, 30*time.Second)
	if err != nil || len(again) != 1 || again[0].DequeueCount != 2 {
		t.Fatalf("Get after the lease lapsed = %v, %v; want the message with DequeueCount 2", again, err)
	}
	err = q.Delete(ctx, first[0].ID, first[0].PopReceipt)
	if !errors.Is(err, azq.ErrMessageNotFound) {
		t.Fatalf("Delete with the crashed consumer's receipt = %v, want ErrMessageNotFound", err)
	}

	clk.Add(7 * 24 * time.Hour) // a week later, in a microsecond: the message has expired
	if n, err := q.ApproximateCount(ctx); err != nil || n != 0 {
		t.Fatalf("count after a week = %d, %v; want 0", n, err)
	}
}
