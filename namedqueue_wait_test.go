package azq

import (
	"context"
	"errors"
	"testing"
	"time"
)

// A Receive waiting through a NamedQueue ends with ErrQueueNotFound when
// the queue it waits on is deleted, as NamedQueue.Receive promises.
func TestNamedQueueReceiveEndsWhenTheQueueIsDeleted(t *testing.T) {
	ctx := context.Background()
	svc := NewService()
	defer svc.Close()
	q, _, err := svc.CreateQueue(ctx, "jobs", nil)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := svc.Named("jobs").Receive(ctx, 1, time.Minute)
		done <- err
	}()
	// Delete the queue only once Receive waits on it.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		q.mu.Lock()
		waiting := q.waiters > 0
		q.mu.Unlock()
		if waiting {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("Receive does not wait on the empty queue")
		}
	}
	if err := svc.DeleteQueue(ctx, "jobs"); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if !errors.Is(err, ErrQueueNotFound) {
			t.Fatalf("Receive = %v; want ErrQueueNotFound", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Receive still waits on the deleted queue")
	}
}
