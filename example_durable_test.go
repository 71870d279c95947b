package azq_test

import (
	"bytes"
	"context"
	"fmt"
	"log"
	"os"

	"github.com/azqlib/azq"
)

// A durable Service keeps its queues in a directory: what an operation
// acknowledged is there after a restart, or a crash, with the same
// message IDs, dequeue counts and pop receipts.
func ExampleOpen() {
	dir, err := os.MkdirTemp("", "azq-example-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	ctx := context.Background()

	svc, err := azq.Open(dir) // every change synced before it returns, concurrent callers sharing syncs
	if err != nil {
		log.Fatal(err)
	}
	q, _, err := svc.CreateQueue(ctx, "orders", nil)
	if err != nil {
		log.Fatal(err)
	}
	q.Put(ctx, "order 1", nil)
	msgs, _ := q.Get(ctx, 1, azq.DefaultVisibilityTimeout)
	receipt := msgs[0].PopReceipt
	svc.Close() // checkpoints and releases the directory

	svc, err = azq.Open(dir)
	if err != nil {
		log.Fatal(err)
	}
	defer svc.Close()
	st, _ := svc.DurableState()
	fmt.Println("recovered:", st.Recovery.Queues, "queue,", st.Recovery.Messages, "message")
	q, _ = svc.Queue("orders")
	// The receipt from before the restart still deletes the message.
	fmt.Println("delete:", q.Delete(ctx, msgs[0].ID, receipt))
	// Output:
	// recovered: 1 queue, 1 message
	// delete: <nil>
}

// Backup writes a consistent copy of a Service, in memory or durable,
// while it runs; Restore loads it as a test fixture.
func ExampleService_Backup() {
	ctx := context.Background()
	svc := azq.NewService()
	q, _, _ := svc.CreateQueue(ctx, "fixture", map[string]string{"team": "billing"})
	q.Put(ctx, "invoice 7", nil)

	var fixture bytes.Buffer
	if err := svc.Backup(ctx, &fixture); err != nil {
		log.Fatal(err)
	}

	loaded, err := azq.Restore(&fixture)
	if err != nil {
		log.Fatal(err)
	}
	q, _ = loaded.Queue("fixture")
	md, _ := q.Metadata(ctx)
	msgs, _ := q.Peek(ctx, 1)
	fmt.Println(md["team"], msgs[0].Content)
	// Output: billing invoice 7
}
