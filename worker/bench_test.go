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
// Delete a message (SettleWindow < 0), on the in-memory queue, on a durable
// one (on disk, each change synced), and on a
// queue whose every Delete or DeleteBatch call costs a commit of 100 µs,
// as a back end that batches deletes does (a sync to disk, a round trip
// and a commit on PostgreSQL). Run the rounds interleaved:
//
//	go test -run '^$' -bench 'WorkerSettle' -count 6 ./worker
func BenchmarkWorkerSettle(b *testing.B) {
	// The durable queue syncs its log for each change it acknowledges,
	// sharing a sync among concurrent callers; a batch is one change.
	for _, src := range []struct {
		name string
		wrap func(*azq.Queue) Queue
	}{
		{"memory", nil},
		{"durable", nil},
		{"commit=100us", func(q *azq.Queue) Queue { return &commitQueue{Queue: q, cost: 100 * time.Microsecond} }},
	} {
		for _, m := range []struct {
			name   string
			window time.Duration
		}{{"batched", 0}, {"single", -1}} {
			b.Run(src.name+"/"+m.name, func(b *testing.B) {
				if src.name == "durable" {
					benchDurableWorker(b, Options{SettleWindow: m.window})
					return
				}
				benchWorkers(b, 1, Options{SettleWindow: m.window}, src.wrap)
			})
		}
	}
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

// benchDurableWorker runs one worker with o over b.N messages of a
// durable queue, put in batches outside the timed part.
func benchDurableWorker(b *testing.B, o Options) {
	b.StopTimer()
	svc, err := azq.Open(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	defer svc.Close()
	ctx := context.Background()
	q, _, err := svc.CreateQueue(ctx, "bench", nil)
	if err != nil {
		b.Fatal(err)
	}
	reqs := make([]azq.PutRequest, 0, azq.MaxBatchSize)
	for put := 0; put < b.N; put += len(reqs) {
		reqs = reqs[:0]
		for range min(azq.MaxBatchSize, b.N-put) {
			reqs = append(reqs, azq.PutRequest{Content: "payload"})
		}
		if _, err := azq.PutBatch(ctx, q, reqs); err != nil {
			b.Fatal(err)
		}
	}
	b.StartTimer()
	benchWorkersOn(b, 1, o, func() Queue { return q })
}

// benchWorkers runs workers workers with o over b.N messages, on the
// in-memory queue as wrap presents it (nil: as it is).
func benchWorkers(b *testing.B, workers int, o Options, wrap func(*azq.Queue) Queue) {
	benchWorkersOn(b, workers, o, func() Queue {
		q := fill(b, b.N)
		if wrap != nil {
			return wrap(q)
		}
		return q
	})
}

// benchWorkersOn runs workers workers with o over the b.N messages of the
// queue that open fills, outside the timed part.
func benchWorkersOn(b *testing.B, workers int, o Options, open func() Queue) {
	src := open()
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
