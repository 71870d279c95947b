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

// A queue of a Service, *Queue or NamedQueue, opens the queues of its
// Service (azq.QueueOpener): it creates one that does not exist, opens one
// that exists whatever its metadata, refuses an invalid name, and returns
// a queue that follows the name. A queue made by New opens none.
func TestOpenQueueOpensInTheService(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name   string
		opener func(svc *azq.Service, q *azq.Queue) azq.QueueOpener
	}{
		{"Queue", func(_ *azq.Service, q *azq.Queue) azq.QueueOpener { return q }},
		{"NamedQueue", func(svc *azq.Service, _ *azq.Queue) azq.QueueOpener { return svc.Named("jobs") }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			svc := azq.NewService()
			defer svc.Close()
			q, _, err := svc.CreateQueue(ctx, "jobs", nil)
			if err != nil {
				t.Fatal(err)
			}
			o := tc.opener(svc, q)
			fresh, err := o.OpenQueue(ctx, "jobs-poison")
			if err != nil {
				t.Fatal(err)
			}
			if _, err := fresh.Put(ctx, "set aside", nil); err != nil {
				t.Fatal(err)
			}
			if n, err := svc.Named("jobs-poison").ApproximateCount(ctx); err != nil || n != 1 {
				t.Fatalf("the opened queue holds %d messages in the Service, %v", n, err)
			}
			if _, _, err := svc.CreateQueue(ctx, "kept", map[string]string{"owner": "ops"}); err != nil {
				t.Fatal(err)
			}
			kept, err := o.OpenQueue(ctx, "kept")
			if err != nil {
				t.Fatalf("opening a queue that has metadata: %v", err)
			}
			if p, err := svc.Named("kept").Properties(ctx); err != nil || p.Metadata["owner"] != "ops" {
				t.Fatalf("the existing queue: %+v, %v", p, err)
			}
			// The opened queue follows its name through a new creation.
			if err := svc.DeleteQueue(ctx, "kept"); err != nil {
				t.Fatal(err)
			}
			if _, _, err := svc.CreateQueue(ctx, "kept", nil); err != nil {
				t.Fatal(err)
			}
			if _, err := kept.Put(ctx, "after", nil); err != nil {
				t.Fatalf("Put on the opened queue after it was created again: %v", err)
			}
			if _, err := o.OpenQueue(ctx, "Not_A_Name"); !errors.Is(err, azq.ErrInvalidQueueName) {
				t.Fatalf("opening an invalid name = %v", err)
			}
			// A queue deleted from its Service still opens queues there.
			if err := svc.DeleteQueue(ctx, "jobs"); err != nil {
				t.Fatal(err)
			}
			if _, err := o.OpenQueue(ctx, "after-delete"); err != nil {
				t.Fatal(err)
			}
			if _, err := svc.Queue("after-delete"); err != nil {
				t.Fatal(err)
			}
		})
	}
	t.Run("New", func(t *testing.T) {
		q := azq.New()
		defer q.Close()
		if r, err := q.OpenQueue(ctx, "jobs-poison"); !errors.Is(err, errors.ErrUnsupported) || r != nil {
			t.Fatalf("OpenQueue = %v, %v; want errors.ErrUnsupported", r, err)
		}
	})
}
