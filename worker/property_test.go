package worker

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/azqlib/azq"
	"pgregory.net/rapid"
)

// outcome is what a handler does on one attempt.
type outcome int

const (
	succeed outcome = iota
	fail
	panicking
)

// With handlers failing and panicking at random and workers crashing at
// random points (after a random number of queue operations, so also between
// a handler's success and its delete), every message ends up handled
// successfully at least once or in the poison queue, and none is lost.
//
// The loop advances the mock clock only once the workers have settled what
// they took. clock.Mock.Add is not atomic: a timer armed after Add has run
// its due timers but before it publishes the new time is not fired until
// the next Add, so a Receive that re-arms in that window sleeps past a
// visible message. The loop therefore nudges the clock while messages are
// visible, rather than waiting for a fetch that only the next Add triggers.
func TestPropertyEveryMessageProcessedOrPoisoned(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		nMsgs := rapid.IntRange(1, 24).Draw(rt, "messages")
		nWorkers := rapid.IntRange(1, 3).Draw(rt, "workers")
		maxDQ := rapid.IntRange(1, 4).Draw(rt, "maxDequeueCount")
		// What the handler does on each attempt of each message; attempts
		// past the plan succeed.
		plan := make([][]outcome, nMsgs)
		for i := range plan {
			plan[i] = rapid.SliceOfN(rapid.SampledFrom([]outcome{succeed, fail, fail, panicking}), 0, maxDQ+2).
				Draw(rt, fmt.Sprintf("attempts of m%d", i))
		}
		// Workers started in turn crash after these many queue operations;
		// the last one of each slot never crashes, so the queue drains.
		crashes := rapid.SliceOfN(rapid.IntRange(1, 40), 0, 4).Draw(rt, "crash after ops")

		e := newEnv(rt)
		const lease = 30 * time.Second
		for i := 0; i < nMsgs; i++ {
			e.put("m" + strconv.Itoa(i))
		}
		var mu sync.Mutex
		succeeded := make(map[string]bool)
		handler := func(ctx context.Context, d *Delivery) error {
			i, _ := strconv.Atoi(d.Message.Content[1:])
			a := int(d.Message.DequeueCount) - 1
			o := succeed
			if a < len(plan[i]) {
				o = plan[i][a]
			}
			switch o {
			case fail:
				return errors.New("planned failure")
			case panicking:
				panic("planned panic")
			}
			mu.Lock()
			succeeded[d.Message.Content] = true
			mu.Unlock()
			return nil
		}

		type slot struct {
			run *running
			cq  *crashQueue
		}
		startWorker := func() slot {
			st := &crashState{}
			st.opsLeft.Store(-1)
			if len(crashes) > 0 {
				st.opsLeft.Store(int64(crashes[0]))
				crashes = crashes[1:]
			}
			cq := &crashQueue{Queue: e.q, st: st}
			poison := func(ctx context.Context, name string) (Queue, error) {
				pq, _, err := e.svc.CreateQueue(ctx, name, nil)
				if err != nil {
					return nil, err
				}
				return &crashQueue{Queue: pq, st: st}, nil
			}
			w := New(cq, handler, Options{LeaseDuration: lease, MaxDequeueCount: maxDQ,
				Poison: poison, ShutdownTimeout: -1, OnEvent: e.rec.on})
			return slot{run: start(w), cq: cq}
		}
		slots := make([]slot, nWorkers)
		for i := range slots {
			slots[i] = startWorker()
		}
		// settled: every message a worker fetched has an outcome.
		settled := func(s slot) bool {
			st := s.run.w.Stats()
			return st.InFlight == 0 && int64(st.Received) == s.cq.returned.Load()
		}
		for round := 0; ; round++ {
			if round > 2000 {
				rt.Fatalf("queue not drained after %d rounds: %d left", round, count(rt, e.q))
			}
			// Replace crashed workers, then wait until the live ones have
			// settled everything they took.
			var why string
			e.rec.waitForDiag(rt, func() string { return "quiescence: " + why }, func() bool {
				for i, s := range slots {
					if s.cq.st.crashed.Load() && settled(s) {
						if err := s.run.stop(rt); err != nil {
							rt.Fatal(err)
						}
						slots[i] = startWorker()
						e.rec.poke()
						return false
					}
				}
				for i, s := range slots {
					if !settled(s) {
						why = fmt.Sprintf("worker %d: %+v, returned %d, crashed %v", i, s.run.w.Stats(), s.cq.returned.Load(), s.cq.st.crashed.Load())
						return false
					}
				}
				return true
			})
			if count(rt, e.q) == 0 {
				break
			}
			if visible(rt, e.q) > 0 {
				// A live worker has yet to take these; a Receive timer
				// stranded by the last Add fires on this one.
				e.mock.Add(time.Millisecond)
				continue
			}
			// What is left is invisible: leases of crashed workers, or
			// messages left for their lease by a failed settle.
			e.mock.Add(lease)
		}
		for _, s := range slots {
			if err := s.run.stop(rt); err != nil {
				rt.Fatal(err)
			}
		}

		poisoned := make(map[string]bool)
		if pq, err := e.svc.Queue("jobs-poison"); err == nil {
			for {
				ms, err := pq.Get(context.Background(), 32, time.Hour)
				if err != nil {
					rt.Fatal(err)
				}
				if len(ms) == 0 {
					break
				}
				for _, m := range ms {
					rec, err := ParsePoisonRecord(m.Content)
					if err != nil {
						rt.Fatalf("poison message %q: %v", m.Content, err)
					}
					if rec.Reason != ReasonHandlerFailed && rec.Reason != ReasonDequeueCountExceeded {
						rt.Fatalf("poison reason %q", rec.Reason)
					}
					if rec.DequeueCount < int64(maxDQ) {
						rt.Fatalf("%s poisoned after %d attempts, max %d", rec.Body, rec.DequeueCount, maxDQ)
					}
					poisoned[rec.Body] = true
				}
			}
		} else if !errors.Is(err, azq.ErrQueueNotFound) {
			rt.Fatal(err)
		}
		for i := 0; i < nMsgs; i++ {
			c := "m" + strconv.Itoa(i)
			if !succeeded[c] && !poisoned[c] {
				rt.Fatalf("%s was lost: neither handled successfully nor poisoned", c)
			}
		}
	})
}
