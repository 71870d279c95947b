package worker

import (
	"context"
	"fmt"
	"testing"
	"time"
)

// TestSlowHandlersAllStart checks that every fetched message reaches a
// handler goroutine while the others are blocked in slow handlers, up to
// Concurrency at once: the goroutine that fetched a batch handles only one
// message of it, and the rest must be handed to idle goroutines, whether
// the fetcher goes on fetching or is itself stuck in a handler.
func TestSlowHandlersAllStart(t *testing.T) {
	for _, o := range []Options{
		{BatchSize: 32, Concurrency: 32},
		{BatchSize: 16, Concurrency: 32},
		{BatchSize: 1, Concurrency: 8},
		{BatchSize: 5, Concurrency: 5, NewBatchThreshold: 1},
		{BatchSize: 4, Concurrency: 12, NewBatchThreshold: 8},
	} {
		t.Run(fmt.Sprintf("batch=%d,concurrency=%d", o.BatchSize, o.Concurrency), func(t *testing.T) {
			e := newEnv(t)
			for i := 0; i < o.Concurrency; i++ {
				e.put(fmt.Sprint(i))
			}
			started := make(chan struct{}, o.Concurrency)
			release := make(chan struct{})
			o.OnEvent = e.rec.on
			w := New(e.q, func(ctx context.Context, d *Delivery) error {
				started <- struct{}{}
				<-release
				return nil
			}, o)
			r := start(w)
			guard := time.After(10 * time.Second) // a hang guard only
			for i := 0; i < o.Concurrency; i++ {
				select {
				case <-started:
				case <-guard:
					t.Fatalf("%d of %d handlers started", i, o.Concurrency)
				}
			}
			close(release)
			e.rec.waitEvents(t, EventSucceeded, o.Concurrency)
			if err := r.stop(t); err != nil {
				t.Fatal(err)
			}
		})
	}
}
