package sdktest_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/azqlib/azq"
	"github.com/azqlib/azq/azqtest"
	"github.com/azqlib/azq/faults"
	"github.com/azqlib/azq/metrics"
	"github.com/azqlib/azq/observe"
	"github.com/azqlib/azq/worker"
)

// badDay is about 10 % of every operation failing: each of three rules
// fires on 3.45 % of the requests it is tried on, 1 - (1 - 0.0345)^3 ≈ 10 %
// in all, as an InternalError, a reset connection, or an InternalError
// after the operation took effect (the answer lost).
func badDay() []faults.Rule {
	const p = 0.0345
	return []faults.Rule{
		{Name: "server-error", When: faults.When{Probability: p}, Then: faults.Then{Error: faults.CodeInternalError}},
		{Name: "reset", When: faults.When{Probability: p}, Then: faults.Then{Network: faults.NetworkReset}},
		{Name: "answer-lost", When: faults.When{Probability: p}, Then: faults.Then{Applied: true, Error: faults.CodeInternalError}},
	}
}

// deleteLog records, for each message, the failed Deletes that left it in
// the queue (the failure was not applied): each one lets the message come
// back after its lease and be handled again.
type deleteLog struct {
	worker.Queue
	q      *azq.Queue // the queue under the faults, to see what a failure left
	mu     sync.Mutex
	stayed map[azq.MessageID]int
}

func (d *deleteLog) Delete(ctx context.Context, id azq.MessageID, r azq.PopReceipt) error {
	err := d.Queue.Delete(ctx, id, r)
	if err == nil {
		return nil
	}
	snap, serr := d.q.Inspect(ctx, -1)
	if serr != nil {
		return err
	}
	for _, m := range snap.Messages {
		if m.ID == id {
			d.mu.Lock()
			d.stayed[id]++
			d.mu.Unlock()
		}
	}
	return err
}

// On a queue where about 10 % of every operation fails (server errors,
// resets, answers lost after the operation took effect), under the mock
// clock, a producer that retries its Puts and a worker: every message is
// handled successfully at least once, none is lost, and every duplicate is
// explained: each extra copy of a content by a Put whose answer was lost
// (the producer's retry put it again), each extra handling of one copy by
// a Delete that failed without taking effect (the message came back after
// its lease).
func TestWorkerOnABadDay(t *testing.T) {
	for seed := uint64(1); seed <= 5; seed++ {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) { checkBadDay(t, seed) })
	}
}

func checkBadDay(t *testing.T, seed uint64) {
	ctx := context.Background()
	e := newEnv(t)
	defer e.svc.Close()
	inj, err := faults.New(faults.Options{Clock: e.mock, Config: faults.Config{Seed: seed, Rules: badDay()}})
	if err != nil {
		t.Fatal(err)
	}
	rec := metrics.NewRecorder()
	fq := azqtest.NewFaultyQueue(e.q, inj, azqtest.FaultyOptions{Observe: rec.Observe})

	// The producer retries each Put until it succeeds, as the SDK would.
	const n = 200
	for i := 0; i < n; i++ {
		for try := 0; ; try++ {
			if try == 20 {
				t.Fatalf("m%d: 20 Puts failed", i)
			}
			if _, err := fq.Put(ctx, "m"+strconv.Itoa(i), nil); err == nil {
				break
			}
		}
	}

	// The handler fails the first attempt of every fifth message, so that
	// releases (Update) meet the faults too.
	var mu sync.Mutex
	handled := map[azq.MessageID]int{} // successful handlings per copy
	content := map[azq.MessageID]string{}
	attempts := map[azq.MessageID]int{}
	handler := func(ctx context.Context, d *worker.Delivery) error {
		mu.Lock()
		defer mu.Unlock()
		attempts[d.Message.ID]++
		i, _ := strconv.Atoi(d.Message.Content[1:])
		if i%5 == 0 && attempts[d.Message.ID] == 1 {
			return errors.New("first attempt fails")
		}
		handled[d.Message.ID]++
		content[d.Message.ID] = d.Message.Content
		return nil
	}

	dl := &deleteLog{Queue: fq, q: e.q, stayed: map[azq.MessageID]int{}}
	var seq atomic.Int64
	var lastGet, lastWait atomic.Int64
	src := &polledCrashQueue{Queue: dl, st: &crashState{}, seq: &seq, lastGet: &lastGet}
	src.st.opsLeft.Store(-1)
	const lease = 30 * time.Second
	w := worker.New(src, handler, worker.Options{
		Clock: e.mock, QueueName: "jobs", LeaseDuration: lease, RetryDelay: 5 * time.Second,
		MaxDequeueCount: 100, Concurrency: 4, BatchSize: 8, ShutdownTimeout: -1,
		MinPollInterval: pollInterval, MaxPollInterval: pollInterval,
		OnEvent: func(ev worker.Event) {
			if ev.Kind == worker.EventPollWait {
				lastWait.Store(seq.Add(1))
			}
			e.rec.on(ev)
		},
	})
	run := start(w)
	var waitAtMove int64
	for round := 0; ; round++ {
		if round > 5000 {
			t.Fatalf("queue not drained after %d rounds: %d left", round, count(t, e.q))
		}
		// Quiet: everything fetched is settled, and the worker waits for
		// its next poll, begun since the clock last moved.
		e.rec.waitFor(t, "quiescence", func() bool {
			st := w.Stats()
			lw := lastWait.Load()
			return st.InFlight == 0 && int64(st.Received) == src.returned.Load() && lw > lastGet.Load() && lw > waitAtMove
		})
		if count(t, e.q) == 0 {
			break
		}
		waitAtMove = lastWait.Load()
		if visible(t, e.q) > 0 {
			e.mock.Add(pollInterval)
		} else {
			e.mock.Add(lease) // leases of failed settles, lost Gets, retry delays
		}
	}
	if err := run.stop(t); err != nil {
		t.Fatal(err)
	}

	// None lost: every content handled; the queue is empty.
	copies := map[string]int{}
	for id, c := range content {
		if handled[id] == 0 {
			t.Fatalf("%s recorded without a handling", c)
		}
		copies[c]++
	}
	for i := 0; i < n; i++ {
		if copies["m"+strconv.Itoa(i)] == 0 {
			t.Fatalf("m%d was lost", i)
		}
	}
	// Extra copies: one per Put whose answer was lost.
	s := rec.Snapshot()
	var lostPuts, extraCopies, extraHandlings int64
	for _, c := range copies {
		extraCopies += int64(c - 1)
	}
	lostPuts = s.MessagesPut[0].Count - s.Count("PutMessage", observe.Success)
	if extraCopies != lostPuts {
		t.Fatalf("%d extra copies, but %d Puts lost their answers", extraCopies, lostPuts)
	}
	// Extra handlings of one copy: one per failed Delete that left it.
	for id, h := range handled {
		if h-1 != dl.stayed[id] {
			t.Fatalf("%s (%s) handled %d times, with %d failed Deletes that left it", id, content[id], h, dl.stayed[id])
		}
		extraHandlings += int64(h - 1)
	}
	hits := inj.Status().Rules
	t.Logf("seed %d: %d requests; faults hit %s %d, %s %d, %s %d; %d extra copies from lost Put answers, %d extra handlings from failed Deletes",
		seed, s.Count("", ""), hits[0].Name, hits[0].Hits, hits[1].Name, hits[1].Hits, hits[2].Name, hits[2].Hits, extraCopies, extraHandlings)
	if hits[0].Hits == 0 || hits[1].Hits == 0 || hits[2].Hits == 0 {
		t.Fatalf("a kind of fault never happened: %+v", hits)
	}
}
