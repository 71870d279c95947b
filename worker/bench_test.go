package worker

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/azqlib/azq"
	"github.com/azqlib/azq/internal/cputime"
)

// fill puts n messages into a fresh queue on the real clock, outside the
// timed part of a benchmark.
func fill(b *testing.B, n int) *azq.Queue {
	b.Helper()
	b.StopTimer()
	defer b.StartTimer()
	q := azq.New()
	ctx := context.Background()
	for i := 0; i < n; i++ {
		if _, err := q.Put(ctx, "payload", nil); err != nil {
			b.Fatal(err)
		}
	}
	return q
}

// BenchmarkRawGetDelete is the floor the worker is measured against: the
// core's own Get (batches of 16) and Delete, in one goroutine, no handler.
func BenchmarkRawGetDelete(b *testing.B) {
	q := fill(b, b.N)
	ctx := context.Background()
	b.ReportAllocs()
	for done := 0; done < b.N; {
		ms, err := q.Get(ctx, 16, 10*time.Minute)
		if err != nil || len(ms) == 0 {
			b.Fatalf("get: %d messages, %v", len(ms), err)
		}
		for _, m := range ms {
			if err := q.Delete(ctx, m.ID, m.PopReceipt); err != nil {
				b.Fatal(err)
			}
		}
		done += len(ms)
	}
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msgs/s")
}

// BenchmarkWorker is end-to-end throughput with a no-op handler: fetch,
// lease timer, handler goroutine, delete, accounting, for one and several
// workers on the same queue, with the default options.
func BenchmarkWorker(b *testing.B) {
	for _, n := range []int{1, 4} {
		b.Run("workers="+string(rune('0'+n)), func(b *testing.B) { benchWorkers(b, n, Options{}, nil) })
	}
}

// BenchmarkWorkerSettle compares the batched settle (the default) with one
// Delete a message (SettleWindow < 0), on the in-memory queue (seen as one
// that deletes in batches, see batching), and on a
// queue whose every Delete or DeleteBatch call costs a commit of 100 µs,
// as a back end that batches deletes does (a sync to disk, a round trip
// and a commit on PostgreSQL). Run the rounds interleaved:
//
//	go test -run '^$' -bench 'WorkerSettle' -count 6 ./worker
func BenchmarkWorkerSettle(b *testing.B) {
	for _, src := range []struct {
		name string
		wrap func(*azq.Queue) Queue
	}{
		{"memory", func(q *azq.Queue) Queue { return batching{q} }},
		{"commit=100us", func(q *azq.Queue) Queue { return &commitQueue{Queue: q, cost: 100 * time.Microsecond} }},
	} {
		for _, m := range []struct {
			name   string
			window time.Duration
		}{{"batched", 0}, {"single", -1}} {
			b.Run(src.name+"/"+m.name, func(b *testing.B) {
				benchWorkers(b, 1, Options{SettleWindow: m.window}, src.wrap)
			})
		}
	}
}

// batching is an *azq.Queue that deletes in batches through
// azq.DeleteBatch: with the queue's own DeleteBatch where it has one,
// else one Delete an item under the same calls.
type batching struct{ *azq.Queue }

func (b batching) DeleteBatch(ctx context.Context, reqs []azq.DeleteRequest) ([]error, error) {
	return azq.DeleteBatch(ctx, b.Queue, reqs)
}

// commitQueue is an *azq.Queue on which every Delete, and every
// DeleteBatch as a whole, waits cost first: the commit of a back end that
// deletes a batch at the cost of one message.
type commitQueue struct {
	*azq.Queue
	cost time.Duration
}

func (c *commitQueue) Delete(ctx context.Context, id azq.MessageID, r azq.PopReceipt) error {
	time.Sleep(c.cost)
	return c.Queue.Delete(ctx, id, r)
}

func (c *commitQueue) DeleteBatch(ctx context.Context, reqs []azq.DeleteRequest) ([]error, error) {
	time.Sleep(c.cost)
	errs := make([]error, len(reqs))
	for i, r := range reqs {
		errs[i] = c.Queue.Delete(ctx, r.ID, r.PopReceipt)
	}
	return errs, nil
}

// benchWorkers runs workers workers with o over b.N messages, on the
// in-memory queue as wrap presents it (nil: as it is).
func benchWorkers(b *testing.B, workers int, o Options, wrap func(*azq.Queue) Queue) {
	q := fill(b, b.N)
	var src Queue = q
	if wrap != nil {
		src = wrap(q)
	}
	b.ReportAllocs()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var handled atomic.Int64
	h := func(context.Context, *Delivery) error {
		if handled.Add(1) == int64(b.N) {
			cancel() // graceful: the last deletes finish before Run returns
		}
		return nil
	}
	ws := make([]*Worker, workers)
	var wg sync.WaitGroup
	// The process's CPU time a message too: the other tenants of a
	// shared machine inflate it less than the wall time.
	cpu0, _ := cputime.Process()
	for i := range ws {
		ws[i] = New(src, h, o)
		wg.Add(1)
		go func(w *Worker) {
			defer wg.Done()
			if err := w.Run(ctx); err != nil {
				b.Error(err)
			}
		}(ws[i])
	}
	wg.Wait()
	b.StopTimer()
	if cpu1, ok := cputime.Process(); ok {
		b.ReportMetric(float64(cpu1-cpu0)/float64(b.N), "cpu-ns/op")
	}
	var ok uint64
	for _, w := range ws {
		ok += w.Stats().Succeeded
	}
	if ok != uint64(b.N) {
		b.Fatalf("%d of %d messages succeeded", ok, b.N)
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msgs/s")
}
