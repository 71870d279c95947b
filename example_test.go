package azq_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/azqlib/azq"
	"github.com/benbjohnson/clock"
)

// A producer puts a message; a consumer gets it, which hides it for the
// visibility timeout, processes it and deletes it with its pop receipt.
func ExampleQueue() {
	ctx := context.Background()
	q := azq.New()

	if _, err := q.Put(ctx, "hello", nil); err != nil {
		log.Fatal(err)
	}

	msgs, err := q.Get(ctx, 32, 30*time.Second)
	if err != nil {
		log.Fatal(err)
	}
	for _, m := range msgs {
		fmt.Printf("got %q, dequeue count %d\n", m.Content, m.DequeueCount)
		if err := q.Delete(ctx, m.ID, m.PopReceipt); err != nil {
			log.Fatal(err)
		}
	}

	n, err := q.ApproximateCount(ctx)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("messages left:", n)
	// Output:
	// got "hello", dequeue count 1
	// messages left: 0
}

// A long job renews its lease with Update before the visibility timeout
// lapses, saving its progress in the message each time. When the worker
// crashes, the message reappears once the last lease lapses, and the next
// worker resumes from the saved progress instead of starting over.
func ExampleQueue_Update() {
	ctx := context.Background()
	clk := clock.NewMock()
	q := azq.New(azq.WithClock(clk))
	start := clk.Now()

	if _, err := q.Put(ctx, "resize album 7; done 0 of 3", nil); err != nil {
		log.Fatal(err)
	}
	msgs, err := q.Get(ctx, 1, 30*time.Second)
	if err != nil {
		log.Fatal(err)
	}
	m := msgs[0]
	receipt := m.PopReceipt
	for step := 1; step <= 2; step++ {
		clk.Add(20 * time.Second) // one step of work
		progress := fmt.Sprintf("resize album 7; done %d of 3", step)
		res, err := q.Update(ctx, m.ID, receipt, 30*time.Second, &progress)
		if err != nil {
			log.Fatal(err)
		}
		receipt = res.PopReceipt // the previous receipt is dead now
		fmt.Printf("step %d saved; leased until +%v\n", step, res.NextVisibleTime.Sub(start))
	}

	others, err := q.Get(ctx, 1, 30*time.Second)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("visible to other workers while leased:", len(others))

	// The worker crashes here. Once its lease lapses, another takes over.
	clk.Add(30 * time.Second)
	msgs, err = q.Get(ctx, 1, 30*time.Second)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("resumed %q, dequeue count %d\n", msgs[0].Content, msgs[0].DequeueCount)
	// Output:
	// step 1 saved; leased until +50s
	// step 2 saved; leased until +1m10s
	// visible to other workers while leased: 0
	// resumed "resize album 7; done 2 of 3", dequeue count 2
}

// A test of a consumer that crashes: it gets a message and never deletes
// it. The mock clock moves past the visibility timeout in no time, the
// message reappears with DequeueCount 2, and the crashed consumer's receipt
// no longer deletes it: Azure answers MessageNotFound, and so does azq.
func ExampleQueue_mockClock() {
	ctx := context.Background()
	clk := clock.NewMock()
	q := azq.New(azq.WithClock(clk))

	if _, err := q.Put(ctx, "charge order 42", nil); err != nil {
		log.Fatal(err)
	}
	crashed, err := q.Get(ctx, 1, time.Minute)
	if err != nil {
		log.Fatal(err)
	}
	// ... and the consumer crashes without deleting the message.

	clk.Add(time.Minute - time.Nanosecond)
	msgs, err := q.Get(ctx, 1, time.Minute)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("visible just before the timeout:", len(msgs))

	clk.Add(time.Nanosecond)
	msgs, err = q.Get(ctx, 1, time.Minute)
	if err != nil {
		log.Fatal(err)
	}
	again := msgs[0]
	fmt.Printf("reappeared: %q, same ID %v, dequeue count %d\n",
		again.Content, again.ID == crashed[0].ID, again.DequeueCount)

	err = q.Delete(ctx, crashed[0].ID, crashed[0].PopReceipt)
	var azErr *azq.Error
	if errors.As(err, &azErr) {
		fmt.Println("old receipt:", azErr.Code, azErr.StatusCode, errors.Is(err, azq.ErrMessageNotFound))
	}

	if err := q.Delete(ctx, again.ID, again.PopReceipt); err != nil {
		log.Fatal(err)
	}
	fmt.Println("deleted with the current receipt")
	// Output:
	// visible just before the timeout: 0
	// reappeared: "charge order 42", same ID true, dequeue count 2
	// old receipt: MessageNotFound 404 true
	// deleted with the current receipt
}

// A Service holds named queues, as a storage account does.
func ExampleService() {
	ctx := context.Background()
	s := azq.NewService()

	for _, name := range []string{"orders", "invoices", "orders-poison"} {
		if _, created, err := s.CreateQueue(ctx, name, nil); err != nil || !created {
			log.Fatal(name, created, err)
		}
	}
	_, created, err := s.CreateQueue(ctx, "orders", nil)
	fmt.Println("orders again: created", created, "error", err)
	_, _, err = s.CreateQueue(ctx, "orders", map[string]string{"owner": "billing"})
	fmt.Println("orders with other metadata:", errors.Is(err, azq.ErrQueueAlreadyExists))
	_, _, err = s.CreateQueue(ctx, "Orders_2", nil)
	fmt.Println("Orders_2:", errors.Is(err, azq.ErrInvalidQueueName))

	page, err := s.ListQueues(ctx, azq.ListQueuesOptions{Prefix: "orders"})
	if err != nil {
		log.Fatal(err)
	}
	for _, item := range page.Queues {
		fmt.Println("listed:", item.Name)
	}

	if err := s.DeleteQueue(ctx, "orders-poison"); err != nil {
		log.Fatal(err)
	}
	page, err = s.ListQueues(ctx, azq.ListQueuesOptions{})
	if err != nil {
		log.Fatal(err)
	}
	for _, item := range page.Queues {
		fmt.Println("after delete:", item.Name)
	}
	_, err = s.Queue("orders-poison")
	fmt.Println("orders-poison:", errors.Is(err, azq.ErrQueueNotFound))
	// Output:
	// orders again: created false error <nil>
	// orders with other metadata: true
	// Orders_2: true
	// listed: orders
	// listed: orders-poison
	// after delete: invoices
	// after delete: orders
	// orders-poison: true
}

// Receive waits for a message instead of polling. Here the message is put
// with a ten-minute delay, and Receive returns when the mock clock reaches
// that instant: exactly then, whether it was already waiting or not.
func ExampleQueue_Receive() {
	ctx := context.Background()
	clk := clock.NewMock()
	q := azq.New(azq.WithClock(clk))
	start := clk.Now()

	if _, err := q.Put(ctx, "send reminder", &azq.PutOptions{VisibilityTimeout: 10 * time.Minute}); err != nil {
		log.Fatal(err)
	}

	received := make(chan azq.Message)
	go func() {
		msgs, err := q.Receive(ctx, 1, time.Minute)
		if err != nil {
			log.Fatal(err)
		}
		received <- msgs[0]
	}()

	clk.Add(10 * time.Minute)
	m := <-received
	// The message is hidden for the visibility timeout from the instant
	// Receive took it.
	fmt.Printf("received %q at +%v\n", m.Content, m.NextVisibleTime.Add(-time.Minute).Sub(start))
	// Output:
	// received "send reminder" at +10m0s
}

// A consumer loop that keeps one buffer for the messages it takes:
// AppendGet fills it anew on each pass, so taking messages allocates
// nothing once the buffer has room for a batch.
func ExampleQueue_AppendGet() {
	ctx := context.Background()
	q := azq.New()
	for _, job := range []string{"a", "b", "c", "d", "e"} {
		if _, err := q.Put(ctx, job, nil); err != nil {
			log.Fatal(err)
		}
	}

	batch := make([]azq.Message, 0, 2)
	for {
		var err error
		batch, err = q.AppendGet(ctx, batch[:0], 2, 30*time.Second)
		if err != nil {
			log.Fatal(err)
		}
		if len(batch) == 0 {
			break
		}
		for i, m := range batch {
			if i > 0 {
				fmt.Print(" ")
			}
			fmt.Print(m.Content)
			if err := q.Delete(ctx, m.ID, m.PopReceipt); err != nil {
				log.Fatal(err)
			}
		}
		fmt.Println()
	}
	// Output:
	// a b
	// c d
	// e
}

// A client of a remote queue service keeps the receipts that service issues
// as they are, and turns the service's error responses into *azq.Error
// values by their Azure code: errors.Is then works as it does for the
// in-memory queue.
func ExampleRemotePopReceipt() {
	r := azq.RemotePopReceipt("AgAAAAMAAAAAAAAAxVkNR+xc2gE=") // as Azure issued it
	fmt.Println(r.IsRemote(), r.String())

	// What a client builds from a 404 with x-ms-error-code: MessageNotFound.
	var err error = &azq.Error{Code: azq.CodeMessageNotFound, StatusCode: 404, Message: "The specified message does not exist."}
	fmt.Println(errors.Is(err, azq.ErrMessageNotFound))

	// Azurite answers a stale receipt with 400 PopReceiptMismatch; it means
	// the same, and matches the same sentinel.
	err = &azq.Error{Code: azq.CodePopReceiptMismatch, StatusCode: 400}
	fmt.Println(errors.Is(err, azq.ErrMessageNotFound), errors.Is(err, azq.ErrInvalidArgument))
	// Output:
	// true AgAAAAMAAAAAAAAAxVkNR+xc2gE=
	// true
	// true false
}

// process stands for a consumer's work.
func process(content string) error {
	fmt.Println("processing", content)
	return nil
}

// The consumer loop by hand: Receive waits for messages, each is processed
// and then deleted with its pop receipt. A message whose processing fails is
// not deleted, so it comes back once its visibility timeout lapses.
func Example_consumer() {
	ctx := context.Background()
	q := azq.New() // real clock, Azure's limits

	if _, err := q.Put(ctx, `{"order":42}`, nil); err != nil { // visible at once, lives 7 days
		log.Fatal(err)
	}

	msgs, err := q.Receive(ctx, 16, 30*time.Second) // waits until something is visible
	if err != nil {
		log.Fatal(err)
	}
	for _, m := range msgs {
		if err := process(m.Content); err != nil {
			continue // not deleted: it comes back after 30 s, DequeueCount+1
		}
		err := q.Delete(ctx, m.ID, m.PopReceipt)
		if errors.Is(err, azq.ErrMessageNotFound) {
			// Our lease lapsed and someone else dequeued it: processing
			// must be idempotent.
			continue
		}
		if err != nil {
			log.Fatal(err)
		}
	}
	// Output:
	// processing {"order":42}
}

// A QueueService of your own reads the page size of a listing as azq's
// back ends do: zero is Azure's 5000, and a size out of range is the
// error Azure gives.
func ExampleListQueuesOptions_PageSize() {
	n, err := azq.ListQueuesOptions{}.PageSize()
	fmt.Println(n, err)
	_, err = azq.ListQueuesOptions{MaxResults: 5001}.PageSize()
	fmt.Println(errors.Is(err, azq.ErrOutOfRange))
	// Output:
	// 5000 <nil>
	// true
}
