package worker

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/azqlib/azq"
)

// waitSettling waits until n deletes of w wait for their batch. No event
// marks that moment, so it polls; the real-time limit only turns a hang
// into a failure.
func waitSettling(t *testing.T, w *Worker, n int64) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for w.settling.Load() != n {
		if time.Now().After(deadline) {
			t.Fatalf("%d deletes waiting, want %d", w.settling.Load(), n)
		}
		time.Sleep(100 * time.Microsecond)
	}
}

// gatedHandler returns a handler that succeeds once every one of n
// messages has started, and a channel of the starts; so that all n
// deletes are pending together.
func gatedHandler(n int) (Handler, chan struct{}, chan struct{}) {
	started, release := make(chan struct{}, n), make(chan struct{})
	return func(ctx context.Context, d *Delivery) error {
		started <- struct{}{}
		<-release
		return nil
	}, started, release
}

// runGated runs a worker over n messages of bq whose handlers all finish
// together, and returns once all n are settled. The mock clock is the
// worker's alone and never moves, so only a full batch or an idle worker
// sends the deletes.
func runGated(t *testing.T, e *testEnv, bq *batchQueue, n int) *Worker {
	t.Helper()
	for i := 0; i < n; i++ {
		e.put(fmt.Sprint(i))
	}
	h, started, release := gatedHandler(n)
	w := New(bq, h, Options{BatchSize: n, Concurrency: n, Clock: e.mock, OnEvent: e.rec.on})
	r := start(w)
	for i := 0; i < n; i++ {
		<-started
	}
	close(release)
	e.rec.waitFor(t, "every message settled", func() bool { return w.Stats().InFlight == 0 })
	if err := r.stop(t); err != nil {
		t.Fatal(err)
	}
	return w
}

// The deletes of messages handled together go in one DeleteBatch.
func TestDeletesGoInOneBatch(t *testing.T) {
	e := newEnv(t)
	bq := &batchQueue{Queue: e.q}
	w := runGated(t, e, bq, azq.MaxBatchSize)
	batches, deletes := bq.calls()
	if len(batches) != 1 || batches[0] != azq.MaxBatchSize || deletes != 0 {
		t.Fatalf("DeleteBatch sizes %v, %d Deletes; want one batch of %d", batches, deletes, azq.MaxBatchSize)
	}
	if s := w.Stats(); s.Succeeded != azq.MaxBatchSize || count(t, e.q) != 0 {
		t.Fatalf("stats %+v, %d messages left", s, count(t, e.q))
	}
}

// Under a backlog of quick handlers, deletes go in batches, never more
// than MaxBatchSize, and never one call a message.
func TestDeletesOfBacklogBatched(t *testing.T) {
	const n = 320
	e := newEnv(t)
	for i := 0; i < n; i++ {
		e.put(fmt.Sprint(i))
	}
	bq := &batchQueue{Queue: e.q}
	w := New(bq, func(context.Context, *Delivery) error { return nil }, Options{Clock: e.mock, OnEvent: e.rec.on})
	r := start(w)
	e.rec.waitEvents(t, EventSucceeded, n)
	if err := r.stop(t); err != nil {
		t.Fatal(err)
	}
	batches, deletes := bq.calls()
	sum := 0
	for _, b := range batches {
		if b > azq.MaxBatchSize {
			t.Fatalf("a DeleteBatch of %d", b)
		}
		sum += b
	}
	if sum != n || deletes != 0 || len(batches) > n/2 {
		t.Fatalf("%d DeleteBatch calls for %d deletes (%v), %d Deletes", len(batches), sum, batches, deletes)
	}
}

// A delete waits for others at most SettleWindow on the worker's clock,
// while another message is being handled.
func TestSettleWindowOnClock(t *testing.T) {
	e := newEnv(t)
	bq := &batchQueue{Queue: e.q}
	e.put("quick")
	e.put("slow")
	release := make(chan struct{})
	const window = time.Minute
	w := New(bq, func(ctx context.Context, d *Delivery) error {
		if d.Message.Content == "slow" {
			<-release
		}
		return nil
	}, Options{BatchSize: 2, Concurrency: 2, SettleWindow: window, Clock: e.mock, OnEvent: e.rec.on})
	r := start(w)
	waitSettling(t, w, 1)
	e.mock.Add(window - time.Nanosecond)
	if batches, _ := bq.calls(); len(batches) != 0 {
		t.Fatalf("deleted before the window ended: %v", batches)
	}
	e.mock.Add(time.Nanosecond)
	e.rec.waitEvents(t, EventSucceeded, 1)
	close(release)
	e.rec.waitEvents(t, EventSucceeded, 2)
	if err := r.stop(t); err != nil {
		t.Fatal(err)
	}
	if batches, deletes := bq.calls(); len(batches) != 2 || batches[0] != 1 || batches[1] != 1 || deletes != 0 {
		t.Fatalf("DeleteBatch sizes %v, %d Deletes", batches, deletes)
	}
}

// A delete never waits longer than LeaseDuration/10, nor than half what
// its lease has left: here renewals fail, so the lease runs out 2 s after
// the fetch, and a handler ending at 1.8 s has its delete sent 100 ms
// later, well before the lease lapses.
func TestSettleWindowBoundedByLease(t *testing.T) {
	for _, tc := range []struct {
		name    string
		handled time.Duration // when the quick handler returns
		wait    time.Duration // how long its delete may wait
	}{
		{"tenth of the lease", 0, 200 * time.Millisecond},
		{"half the lease left", 1800 * time.Millisecond, 100 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			bq := &batchQueue{Queue: e.q}
			bq.failUpdates.Store(true)
			e.put("quick")
			e.put("slow")
			handled, release := make(chan struct{}), make(chan struct{})
			w := New(bq, func(ctx context.Context, d *Delivery) error {
				if d.Message.Content == "slow" {
					<-release
				} else if tc.handled > 0 {
					<-handled
				}
				return nil
			}, Options{BatchSize: 2, Concurrency: 2, LeaseDuration: 2 * time.Second,
				SettleWindow: time.Hour, Clock: e.mock, OnEvent: e.rec.on})
			r := start(w)
			e.rec.waitEvents(t, EventFetched, 1)
			if tc.handled > 0 {
				e.mock.Add(tc.handled)
				close(handled)
			}
			waitSettling(t, w, 1)
			e.mock.Add(tc.wait - time.Nanosecond)
			if batches, _ := bq.calls(); len(batches) != 0 {
				t.Fatalf("deleted before the window ended: %v", batches)
			}
			e.mock.Add(time.Nanosecond)
			ev := e.rec.waitEvents(t, EventSucceeded, 1)[0]
			if ev.Time.After(time.Unix(0, 0).Add(2 * time.Second)) {
				t.Fatalf("deleted at %v, after the lease lapsed", ev.Time)
			}
			close(release)
			e.rec.waitFor(t, "every message settled", func() bool { return w.Stats().InFlight == 0 })
			if err := r.stop(t); err != nil {
				t.Fatal(err)
			}
			if n := len(e.rec.of(EventLeaseLost)); n != 0 {
				t.Fatalf("%d leases lost", n)
			}
		})
	}
}

// A DeleteBatch that fails as a whole falls back to one Delete a message.
func TestFailedBatchFallsBackPerMessage(t *testing.T) {
	e := newEnv(t)
	bq := &batchQueue{Queue: e.q, failBatch: errUnavailable}
	w := runGated(t, e, bq, 4)
	batches, deletes := bq.calls()
	if len(batches) != 1 || batches[0] != 4 || deletes != 4 {
		t.Fatalf("DeleteBatch sizes %v, %d Deletes; want one batch of 4, then 4 Deletes", batches, deletes)
	}
	if s := w.Stats(); s.Succeeded != 4 || s.Errors != 0 || count(t, e.q) != 0 {
		t.Fatalf("stats %+v, %d messages left", s, count(t, e.q))
	}
}

// An item of a batch whose receipt went stale is that message's lost
// lease, as for a single Delete; the others are deleted.
func TestBatchItemStaleReceipt(t *testing.T) {
	e := newEnv(t)
	var ids []azq.MessageID
	for i := 0; i < 4; i++ {
		ids = append(ids, e.put(fmt.Sprint(i)).ID)
	}
	bq := &batchQueue{Queue: e.q, stale: map[azq.MessageID]bool{ids[2]: true}}
	h, started, release := gatedHandler(4)
	w := New(bq, h, Options{BatchSize: 4, Concurrency: 4, Clock: e.mock, OnEvent: e.rec.on})
	r := start(w)
	for range 4 {
		<-started
	}
	close(release)
	e.rec.waitFor(t, "every message settled", func() bool { return w.Stats().InFlight == 0 })
	if err := r.stop(t); err != nil {
		t.Fatal(err)
	}
	lost := e.rec.of(EventLeaseLost)
	if len(lost) != 1 || lost[0].MessageID != ids[2] || !errors.Is(lost[0].Err, azq.ErrMessageNotFound) {
		t.Fatalf("lease-lost events %+v", lost)
	}
	if s := w.Stats(); s.Succeeded != 3 || s.LeasesLost != 1 || s.Errors != 0 || count(t, e.q) != 0 {
		t.Fatalf("stats %+v, %d messages left", s, count(t, e.q))
	}
	if batches, deletes := bq.calls(); len(batches) != 1 || deletes != 0 {
		t.Fatalf("DeleteBatch sizes %v, %d Deletes", batches, deletes)
	}
}

// Shutdown sends the deletes still waiting for their window before Run
// returns, and releases what was still being handled.
func TestShutdownSendsPendingDeletes(t *testing.T) {
	e := newEnv(t)
	bq := &batchQueue{Queue: e.q}
	e.put("quick")
	e.put("slow")
	w := New(bq, func(ctx context.Context, d *Delivery) error {
		if d.Message.Content == "slow" {
			<-ctx.Done()
			return ctx.Err()
		}
		return nil
	}, Options{BatchSize: 2, Concurrency: 2, SettleWindow: time.Hour, ShutdownTimeout: -1,
		Clock: e.mock, OnEvent: e.rec.on})
	r := start(w)
	waitSettling(t, w, 1)
	if err := r.stop(t); err != nil {
		t.Fatal(err)
	}
	if s := w.Stats(); s.Succeeded != 1 || s.Released != 1 || s.InFlight != 0 {
		t.Fatalf("stats %+v", s)
	}
	ms, err := e.q.Peek(context.Background(), 32)
	if err != nil || len(ms) != 1 || ms[0].Content != "slow" || count(t, e.q) != 1 {
		t.Fatalf("left %+v (%v), want the slow message alone, visible", ms, err)
	}
}

// A negative SettleWindow deletes each message on its own, at once.
func TestSettleWindowOff(t *testing.T) {
	e := newEnv(t)
	bq := &batchQueue{Queue: e.q}
	for i := 0; i < 4; i++ {
		e.put(fmt.Sprint(i))
	}
	h, started, release := gatedHandler(4)
	w := New(bq, h, Options{BatchSize: 4, Concurrency: 4, SettleWindow: -1, Clock: e.mock, OnEvent: e.rec.on})
	r := start(w)
	for range 4 {
		<-started
	}
	close(release)
	e.rec.waitEvents(t, EventSucceeded, 4)
	if err := r.stop(t); err != nil {
		t.Fatal(err)
	}
	if batches, deletes := bq.calls(); len(batches) != 0 || deletes != 4 {
		t.Fatalf("DeleteBatch sizes %v, %d Deletes; want 4 Deletes", batches, deletes)
	}
}

// plainQueue is a queue that cannot delete in batches (no DeleteBatch,
// whatever the queue behind it has) and counts its Deletes.
type plainQueue struct {
	azq.MessageQueue
	deletes atomic.Int64
}

func (p *plainQueue) Delete(ctx context.Context, id azq.MessageID, r azq.PopReceipt) error {
	p.deletes.Add(1)
	return p.MessageQueue.Delete(ctx, id, r)
}

// A source that cannot delete in batches has each message deleted at
// once, with no window: a batch would gain it nothing.
func TestNoWindowWithoutBatchDeleter(t *testing.T) {
	e := newEnv(t)
	pq := &plainQueue{MessageQueue: e.q}
	e.put("quick")
	e.put("slow")
	release := make(chan struct{})
	w := New(pq, func(ctx context.Context, d *Delivery) error {
		if d.Message.Content == "slow" {
			<-release
		}
		return nil
	}, Options{BatchSize: 2, Concurrency: 2, SettleWindow: time.Hour, Clock: e.mock, OnEvent: e.rec.on})
	r := start(w)
	// The mock clock never moves: only a delete at once lets this end.
	e.rec.waitEvents(t, EventSucceeded, 1)
	close(release)
	e.rec.waitEvents(t, EventSucceeded, 2)
	if err := r.stop(t); err != nil {
		t.Fatal(err)
	}
	if n := pq.deletes.Load(); n != 2 {
		t.Fatalf("%d Deletes, want 2", n)
	}
}

// A delete whose lease ends sooner than the batch's window allows brings
// the window forward: here the window armed for 5 ms is cut to 3 ms by a
// delete whose lease has 6 ms left.
func TestShortLeaseBringsWindowForward(t *testing.T) {
	e := newEnv(t)
	bq := &batchQueue{Queue: e.q}
	w := New(bq, func(context.Context, *Delivery) error { return nil },
		Options{SettleWindow: 5 * time.Millisecond, Clock: e.mock, OnEvent: e.rec.on})
	w.base = context.Background()
	// Others in flight, so that neither delete finds the worker idle.
	w.stats.inFlight.Store(10)
	now := e.mock.Now()
	var ds []*Delivery
	for i, lease := range []time.Duration{10 * time.Minute, 6 * time.Millisecond} {
		m := e.put(fmt.Sprint(i))
		d := w.newDeliveries([]azq.Message{m}, now.Add(lease))[0]
		ds = append(ds, d)
		w.deletes.add(d, m.PopReceipt, d.leaseEnd)
	}
	e.mock.Add(3*time.Millisecond - time.Nanosecond)
	if batches, _ := bq.calls(); len(batches) != 0 {
		t.Fatalf("deleted before the window ended: %v", batches)
	}
	e.mock.Add(time.Nanosecond)
	e.rec.waitEvents(t, EventSucceeded, 2)
	if batches, deletes := bq.calls(); len(batches) != 1 || batches[0] != 2 || deletes != 0 {
		t.Fatalf("DeleteBatch sizes %v, %d Deletes", batches, deletes)
	}
	w.wg.Wait() // the window's timer has given its count back
}
