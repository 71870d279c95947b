// Command quickstart shows azq's main flows on one queue: put, get with a
// visibility timeout, delete with the pop receipt, a lease renewed with
// Update, and a consumer that crashes and whose message comes back, on a
// mock clock so that the program runs in milliseconds.
//
//	go run ./examples/quickstart
package main

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/azqlib/azq"
	"github.com/benbjohnson/clock"
)

func main() {
	ctx := context.Background()
	clk := clock.NewMock()
	clk.Set(time.Date(2026, 1, 1, 9, 0, 0, 0, time.UTC))
	q := azq.New(azq.WithClock(clk))
	defer q.Close()

	// A producer puts work.
	for _, job := range []string{"resize photo 1", "resize photo 2"} {
		if _, err := q.Put(ctx, job, nil); err != nil {
			log.Fatal(err)
		}
	}

	// A consumer takes a message for 30 seconds, does the work, deletes it.
	ms, err := q.Get(ctx, 1, 30*time.Second)
	if err != nil {
		log.Fatal(err)
	}
	m := ms[0]
	fmt.Printf("got %q (dequeue count %d), hidden until %s\n", m.Content, m.DequeueCount, m.NextVisibleTime.Format(time.TimeOnly))
	if err := q.Delete(ctx, m.ID, m.PopReceipt); err != nil {
		log.Fatal(err)
	}
	fmt.Println("done and deleted")

	// A long job renews its lease with Update before it lapses, and saves
	// its progress in the message so that another consumer could resume.
	ms, _ = q.Get(ctx, 1, 30*time.Second)
	m = ms[0]
	receipt := m.PopReceipt
	for step := 1; step <= 3; step++ {
		clk.Add(20 * time.Second) // work...
		progress := fmt.Sprintf("%s: step %d done", m.Content, step)
		res, err := q.Update(ctx, m.ID, receipt, 30*time.Second, &progress)
		if err != nil {
			log.Fatal(err)
		}
		receipt = res.PopReceipt // the old receipt is dead now
		fmt.Printf("renewed lease until %s, saved %q\n", res.NextVisibleTime.Format(time.TimeOnly), progress)
	}

	// Then the consumer crashes: no Delete. After the lease the message
	// is visible again, with its progress, to the next consumer.
	clk.Add(30 * time.Second)
	ms, _ = q.Get(ctx, 1, 30*time.Second)
	fmt.Printf("after the crash another consumer got %q (dequeue count %d)\n", ms[0].Content, ms[0].DequeueCount)

	// The crashed consumer's receipt no longer works: MessageNotFound, as
	// Azure answers a stale receipt.
	err = q.Delete(ctx, m.ID, receipt)
	fmt.Println("stale receipt:", errors.Is(err, azq.ErrMessageNotFound), err)

	if err := q.Delete(ctx, ms[0].ID, ms[0].PopReceipt); err != nil {
		log.Fatal(err)
	}
	n, _ := q.ApproximateCount(ctx)
	fmt.Println("messages left:", n)
}
