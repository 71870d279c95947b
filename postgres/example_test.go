package postgres_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"time"

	"github.com/azqlib/azq/postgres"
)

// A Service on a database, a queue of it, and a message put, received and
// deleted with its receipt. Every process that opens the same database
// and schema serves the same queue. (Not run by go test, which has no
// database of its own to give it; the tests run the same calls.)
func Example() {
	ctx := context.Background()
	url := os.Getenv("DATABASE_URL") // e.g. "postgres://app@db.internal/app"

	svc, err := postgres.Open(ctx, url, nil) // the schema "azq", made or upgraded
	if err != nil {
		log.Fatal(err)
	}
	defer svc.Close()

	q, _, err := svc.CreateQueue(ctx, "orders", nil)
	if err != nil {
		log.Fatal(err)
	}
	if _, err := q.Put(ctx, `{"order":42}`, nil); err != nil {
		log.Fatal(err)
	}
	msgs, err := q.Receive(ctx, 16, 30*time.Second) // waits until something is visible
	if err != nil {
		log.Fatal(err)
	}
	for _, m := range msgs {
		fmt.Println(m.Content, m.DequeueCount)
		if err := q.Delete(ctx, m.ID, m.PopReceipt); err != nil {
			log.Fatal(err)
		}
	}
}
