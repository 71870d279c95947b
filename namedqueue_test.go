package azq_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/azqlib/azq"
)

// A NamedQueue answers ErrQueueNotFound until its queue exists, and
// follows the queue through a deletion and a new creation, where a *Queue
// held from before stays deleted; a receipt from the old queue is not
// current in the new one.
func TestNamedQueueFollowsTheName(t *testing.T) {
	ctx := context.Background()
	svc := azq.NewService()
	defer svc.Close()
	nq := svc.Named("jobs")
	if _, err := nq.Put(ctx, "early", nil); !errors.Is(err, azq.ErrQueueNotFound) {
		t.Fatalf("Put before the queue exists = %v; want ErrQueueNotFound", err)
	}
	old, _, err := svc.CreateQueue(ctx, "jobs", nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := nq.Put(ctx, "first", nil); err != nil {
		t.Fatal(err)
	}
	got, err := nq.Get(ctx, 1, time.Minute)
	if err != nil || len(got) != 1 || got[0].Content != "first" {
		t.Fatalf("Get = %v, %v; want the message put through the name", got, err)
	}
	if err := svc.DeleteQueue(ctx, "jobs"); err != nil {
		t.Fatal(err)
	}
	if _, _, err := svc.CreateQueue(ctx, "jobs", nil); err != nil {
		t.Fatal(err)
	}
	if err := nq.Delete(ctx, got[0].ID, got[0].PopReceipt); !errors.Is(err, azq.ErrMessageNotFound) {
		t.Fatalf("Delete with the old queue's receipt = %v; want ErrMessageNotFound", err)
	}
	if _, err := nq.Put(ctx, "second", nil); err != nil {
		t.Fatalf("Put after the queue was created again = %v", err)
	}
	if n, err := nq.ApproximateCount(ctx); err != nil || n != 1 {
		t.Fatalf("ApproximateCount = %d, %v; want 1", n, err)
	}
	if _, err := old.Put(ctx, "stale", nil); !errors.Is(err, azq.ErrQueueNotFound) {
		t.Fatalf("Put on the *Queue held from before the deletion = %v; want ErrQueueNotFound", err)
	}
	if q, err := nq.Queue(); err != nil || q == old {
		t.Fatalf("Queue() = %p, %v; want the new queue, not %p", q, err, old)
	}
}

// A consumer given a queue's name keeps working when the queue is deleted
// and created again, as a client of the REST API does.
func ExampleService_Named() {
	ctx := context.Background()
	svc := azq.NewService()
	defer svc.Close()
	jobs := svc.Named("jobs") // the queue need not exist yet

	svc.CreateQueue(ctx, "jobs", nil)
	jobs.Put(ctx, "before", nil)
	svc.DeleteQueue(ctx, "jobs")
	svc.CreateQueue(ctx, "jobs", nil)
	jobs.Put(ctx, "after", nil)

	msgs, _ := jobs.Get(ctx, 32, 30*time.Second)
	for _, m := range msgs {
		fmt.Println(m.Content)
	}
	// Output: after
}
