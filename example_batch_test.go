package azq_test

import (
	"context"
	"fmt"
	"log"
	"strings"
	"time"

	"github.com/azqlib/azq"
)

// A producer puts many messages in one call; each item answers what Put
// would, so one item's bad input fails that item alone.
func ExamplePutBatch() {
	ctx := context.Background()
	var q azq.MessageQueue = azq.New() // or any back end

	res, err := azq.PutBatch(ctx, q, []azq.PutRequest{
		{Content: "resize 1"},
		{Content: strings.Repeat("x", 64<<10+1)}, // too large
		{Content: "resize 2", Options: &azq.PutOptions{VisibilityTimeout: time.Minute}},
	})
	if err != nil {
		log.Fatal(err) // the whole call failed: nothing is acknowledged
	}
	for i, r := range res {
		if r.Err != nil {
			fmt.Printf("item %d: %v\n", i, r.Err)
			continue
		}
		fmt.Printf("item %d: put %q\n", i, r.Message.Content)
	}
	// Output:
	// item 0: put "resize 1"
	// item 1: azq: the message content is larger than the limit (RequestBodyTooLarge)
	// item 2: put "resize 2"
}

// A consumer settles what one Get returned in one call: on a back end
// with batches, one lock, one log record and sync, or one statement and
// commit for all of them. A receipt that went stale fails its item only.
func ExampleDeleteBatch() {
	ctx := context.Background()
	var q azq.MessageQueue = azq.New()
	for _, c := range []string{"a", "b", "c"} {
		if _, err := q.Put(ctx, c, nil); err != nil {
			log.Fatal(err)
		}
	}

	msgs, err := q.Get(ctx, 32, 30*time.Second)
	if err != nil {
		log.Fatal(err)
	}
	reqs := make([]azq.DeleteRequest, 0, len(msgs))
	for _, m := range msgs {
		// ... process m ...
		reqs = append(reqs, azq.DeleteRequest{ID: m.ID, PopReceipt: m.PopReceipt})
	}
	errs, err := azq.DeleteBatch(ctx, q, reqs)
	if err != nil {
		log.Fatal(err)
	}
	for i, err := range errs {
		if err != nil {
			fmt.Printf("%s: %v\n", msgs[i].Content, err) // its lease lapsed and another consumer got it
		}
	}
	n, _ := q.ApproximateCount(ctx)
	fmt.Println("deleted", len(reqs), "messages left:", n)
	// Output:
	// deleted 3 messages left: 0
}
