package azq

import (
	"context"
	"runtime"
	"testing"
	"time"

	"github.com/benbjohnson/clock"
)

// failsafe bounds how long a test waits for goroutines that should finish
// at once. It is never reached when the queue is correct: it only turns a
// hang into a failure.
const failsafe = 10 * time.Second

// awaitWaiters spins (yielding, not sleeping) until n Receive calls are
// parked on q, so that a test can act on a queue it knows is being waited on.
func awaitWaiters(t *testing.T, q *Queue, n int) {
	t.Helper()
	deadline := time.Now().Add(failsafe)
	for {
		q.mu.Lock()
		w := q.waiters
		q.mu.Unlock()
		if w == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d Receive calls waiting, want %d", w, n)
		}
		runtime.Gosched()
	}
}

// TestReceiveWokenByUpdateShorteningVisibility: a Receive sleeping until a
// message's next-visible time must notice an Update that makes the message
// visible sooner (not only with visibility 0), and return at that instant.
func TestReceiveWokenByUpdateShorteningVisibility(t *testing.T) {
	for _, vis := range []time.Duration{0, time.Second, 10 * time.Second} {
		t.Run(vis.String(), func(t *testing.T) {
			clk := clock.NewMock()
			q := New(WithClock(clk))
			ctx, cancel := context.WithTimeout(context.Background(), failsafe)
			defer cancel()
			start := clk.Now()
			m, err := q.Put(ctx, "job", &PutOptions{VisibilityTimeout: time.Hour})
			if err != nil {
				t.Fatal(err)
			}
			type result struct {
				msgs []Message
				err  error
			}
			done := make(chan result, 1)
			go func() {
				msgs, err := q.Receive(ctx, 1, time.Minute)
				done <- result{msgs, err}
			}()
			awaitWaiters(t, q, 1)
			if _, err := q.Update(ctx, m.ID, m.PopReceipt, vis, nil); err != nil {
				t.Fatal(err)
			}
			if vis > 0 {
				awaitWaiters(t, q, 1) // woken, looked, and parked again
				clk.Add(vis)
			}
			r := <-done
			if r.err != nil {
				t.Fatalf("Receive: %v (still asleep until the old next-visible time)", r.err)
			}
			if len(r.msgs) != 1 || r.msgs[0].ID != m.ID {
				t.Fatalf("Receive returned %d messages, want the updated one", len(r.msgs))
			}
			if got := r.msgs[0].NextVisibleTime.Sub(start); got != vis+time.Minute {
				t.Errorf("received at +%v, want +%v", got-time.Minute, vis)
			}
		})
	}
}
