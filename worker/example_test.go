package worker_test

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/azqlib/azq"
	"github.com/azqlib/azq/worker"
)

// A worker handles messages until its context ends; a successful handler
// gets its message deleted.
func Example() {
	ctx, stop := context.WithCancel(context.Background())
	svc := azq.NewService()
	q, _, _ := svc.CreateQueue(ctx, "greetings", nil)
	for _, name := range []string{"ada", "grace", "edsger"} {
		q.Put(ctx, name, nil)
	}

	left := 3
	w := worker.New(q, func(ctx context.Context, d *worker.Delivery) error {
		fmt.Println("hello,", d.Message.Content)
		return nil
	}, worker.Options{
		Concurrency: 1, // one at a time: the output keeps the queue's order
		OnEvent: func(e worker.Event) {
			if e.Kind == worker.EventSucceeded {
				if left--; left == 0 {
					stop()
				}
			}
		},
	})
	if err := w.Run(ctx); err != nil {
		fmt.Println(err)
	}
	s := w.Stats()
	fmt.Printf("received %d, succeeded %d\n", s.Received, s.Succeeded)
	// Output:
	// hello, ada
	// hello, grace
	// hello, edsger
	// received 3, succeeded 3
}

// A message whose handler keeps failing is moved to "<queue>-poison" after
// MaxDequeueCount attempts, with a record of why.
func Example_poison() {
	ctx, stop := context.WithCancel(context.Background())
	svc := azq.NewService()
	q, _, _ := svc.CreateQueue(ctx, "orders", nil)
	q.Put(ctx, "order 42", nil)

	attempts := 0
	w := worker.New(q, func(ctx context.Context, d *worker.Delivery) error {
		attempts++
		return errors.New("payment service rejected the order")
	}, worker.Options{
		MaxDequeueCount: 3,
		Poison:          worker.ServicePoison(svc),
		OnEvent: func(e worker.Event) {
			if e.Kind == worker.EventPoisoned {
				stop()
			}
		},
	})
	w.Run(ctx)

	pq, _ := svc.Queue("orders-poison")
	ms, _ := pq.Peek(context.Background(), 1)
	rec, _ := worker.ParsePoisonRecord(ms[0].Content)
	fmt.Println("attempts:", attempts)
	fmt.Println(rec.Body, "|", rec.Reason, "|", rec.DequeueCount, "|", rec.Error)
	// Output:
	// attempts: 3
	// order 42 | handler-failed | 3 | payment service rejected the order
}

// The poison queue's name follows the Functions rules.
func ExamplePoisonQueueName() {
	for _, name := range []string{"orders", "orders-poison", strings.Repeat("q", 60)} {
		p, ok := worker.PoisonQueueName(name)
		fmt.Printf("%q %v\n", p, ok)
	}
	// Output:
	// "orders-poison" true
	// "" false
	// "" false
}
