package azqtest_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/azqlib/azq"
	"github.com/azqlib/azq/azqtest"
	"github.com/azqlib/azq/faults"
)

// deleteWithRetry is the code under test: it retries a Delete that failed
// for a reason that may pass, and takes MessageNotFound on a retry as
// done, since the attempt before may have taken effect.
func deleteWithRetry(ctx context.Context, q azq.MessageQueue, m azq.Message) (attempts int, err error) {
	for attempts = 1; attempts <= 4; attempts++ {
		err = q.Delete(ctx, m.ID, m.PopReceipt)
		switch {
		case err == nil:
			return attempts, nil
		case errors.Is(err, azq.ErrMessageNotFound) && attempts > 1:
			return attempts, nil
		case errors.Is(err, azq.ErrMessageNotFound):
			return attempts, err
		}
	}
	return attempts - 1, err
}

// Testing a consumer's retry code on the in-memory queue: the first Delete
// takes effect, then the connection is reset; the retry finds the message
// gone, which the code under test must take as done.
func ExampleFaultyQueue() {
	ctx := context.Background()
	inj, err := faults.New(faults.Options{Config: faults.Config{
		Rules: []faults.Rule{{
			Name: "lost-delete",
			When: faults.When{Operations: []string{"DeleteMessage"}, Times: 1},
			Then: faults.Then{Applied: true, Network: faults.NetworkReset},
		}},
	}})
	if err != nil {
		panic(err)
	}
	q := azqtest.NewFaultyQueue(azq.New(), inj, azqtest.FaultyOptions{Queue: "jobs"})

	if _, err := q.Put(ctx, "work", nil); err != nil {
		panic(err)
	}
	got, err := q.Get(ctx, 1, time.Minute)
	if err != nil {
		panic(err)
	}
	attempts, err := deleteWithRetry(ctx, q, got[0])
	n, _ := q.ApproximateCount(ctx)
	fmt.Println("attempts:", attempts, "error:", err, "left:", n)
	// Output:
	// attempts: 2 error: <nil> left: 0
}
