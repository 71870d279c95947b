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

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azqueue"
	"github.com/azqlib/azq"
	"github.com/azqlib/azq/azqtest"
	"github.com/azqlib/azq/azure"
	"github.com/azqlib/azq/worker"
	"pgregory.net/rapid"
)

// outcome is what a handler does on one attempt.
type outcome int

const (
	succeed outcome = iota
	fail
	panicking
)

// propertyBackend is a back end the property runs on: how a worker's
// source and poison queues are reached, given a test environment whose
// service holds the queues.
type propertyBackend struct {
	// polls is set when the source has no Receive: the worker polls it
	// on the mock clock, every pollInterval.
	polls bool
	// newEnv returns the environment of one run; close ends it.
	newEnv func(rt *rapid.T) (e *testEnv, open func(name string) (worker.Queue, azq.QueueOpener), close func())
}

// pollInterval is the fixed poll interval of a polled source: the
// minimum and maximum of the back-off alike, so that every idle worker
// waits exactly this long between polls.
const pollInterval = time.Second

// inProcess runs the workers on the azq queue itself, which they wait on
// with Receive.
var inProcess = propertyBackend{
	newEnv: func(rt *rapid.T) (*testEnv, func(string) (worker.Queue, azq.QueueOpener), func()) {
		e := newEnv(rt)
		open := func(name string) (worker.Queue, azq.QueueOpener) { return e.q, nil }
		return e, open, func() {}
	},
}

// overLoopback runs the workers on azure.Queue, talking to azq's REST
// server over loopback with Shared Key, on the server's mock clock; the
// test sees the same queues in process. The workers poll, as they poll
// Azure.
func overLoopback(t *testing.T) propertyBackend {
	return propertyBackend{polls: true, newEnv: func(rt *rapid.T) (*testEnv, func(string) (worker.Queue, azq.QueueOpener), func()) {
		srv := azqtest.NewServer(t)
		q, _, err := srv.Service.CreateQueue(context.Background(), "jobs", nil)
		if err != nil {
			rt.Fatal(err)
		}
		e := &testEnv{t: rt, mock: srv.Clock, svc: srv.Service, q: q, rec: newRecorder()}
		// Retries off: the SDK's back-off sleeps on the real clock.
		svc, err := azure.NewServiceFromConnectionString(srv.ConnectionString, &azure.Options{Clock: srv.Clock,
			ClientOptions: &azqueue.ClientOptions{ClientOptions: azcore.ClientOptions{Retry: policy.RetryOptions{MaxRetries: -1}}}})
		if err != nil {
			rt.Fatal(err)
		}
		open := func(name string) (worker.Queue, azq.QueueOpener) {
			aq, err := svc.Queue(name)
			if err != nil {
				rt.Fatal(err)
			}
			return aq, aq
		}
		return e, open, srv.Close
	}}
}

// With handlers failing and panicking at random and workers crashing at
// random points (after a random number of queue operations, so also between
// a handler's success and its delete), every message ends up handled
// successfully at least once or in the poison queue, and none is lost: on
// the queue in process, and through azure.Queue and azq's server.
func TestPropertyEveryMessageProcessedOrPoisoned(t *testing.T) {
	t.Run("azq", func(t *testing.T) { checkEveryMessageProcessedOrPoisoned(t, inProcess) })
	t.Run("azure-over-loopback", func(t *testing.T) { checkEveryMessageProcessedOrPoisoned(t, overLoopback(t)) })
}

// checkEveryMessageProcessedOrPoisoned is the property on one back end.
//
// The loop advances the mock clock only once the workers have settled what
// they took. clock.Mock.Add is not atomic: a timer armed after Add has run
// its due timers but before it publishes the new time is not fired until
// the next Add, so a Receive that re-arms in that window sleeps past a
// visible message. The loop therefore nudges the clock while messages are
// visible, rather than waiting for a fetch that only the next Add triggers.
//
// A polled source is quiet only when every worker also waits for its next
// poll, having polled since the clock last moved: then moving the clock by
// the poll interval makes every worker poll again.
func checkEveryMessageProcessedOrPoisoned(t *testing.T, b propertyBackend) {
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

		e, open, closeEnv := b.newEnv(rt)
		defer closeEnv()
		const lease = 30 * time.Second
		for i := 0; i < nMsgs; i++ {
			e.put("m" + strconv.Itoa(i))
		}
		var mu sync.Mutex
		succeeded := make(map[string]bool)
		handler := func(ctx context.Context, d *worker.Delivery) error {
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

		// seq orders the polled workers' Gets and poll waits.
		var seq atomic.Int64
		type slot struct {
			run      *running
			st       *crashState
			returned *atomic.Int64
			// For a polled source: when the worker last started a Get and
			// last began to wait for its next poll (values of seq), and
			// when it had last begun to wait as the clock last moved.
			lastGet, lastWait *atomic.Int64
			waitAtMove        int64
		}
		startWorker := func() *slot {
			st := &crashState{}
			st.opsLeft.Store(-1)
			if len(crashes) > 0 {
				st.opsLeft.Store(int64(crashes[0]))
				crashes = crashes[1:]
			}
			s := &slot{st: st, lastGet: new(atomic.Int64), lastWait: new(atomic.Int64)}
			src, opener := open("jobs")
			var source worker.Queue
			var poison worker.PoisonOpener
			if b.polls {
				cq := &polledCrashQueue{Queue: src, st: st, seq: &seq, lastGet: s.lastGet}
				source, s.returned = cq, &cq.returned
				poison = func(ctx context.Context, name string) (worker.Queue, error) {
					pq, err := opener.OpenQueue(ctx, name)
					if err != nil {
						return nil, err
					}
					return &polledCrashQueue{Queue: pq, st: st, seq: new(atomic.Int64), lastGet: new(atomic.Int64)}, nil
				}
			} else {
				cq := &crashQueue{Queue: e.q, st: st}
				source, s.returned = cq, &cq.returned
				poison = func(ctx context.Context, name string) (worker.Queue, error) {
					pq, _, err := e.svc.CreateQueue(ctx, name, nil)
					if err != nil {
						return nil, err
					}
					return &crashQueue{Queue: pq, st: st}, nil
				}
			}
			opts := worker.Options{LeaseDuration: lease, MaxDequeueCount: maxDQ,
				Poison: poison, ShutdownTimeout: -1, OnEvent: e.rec.on}
			if b.polls {
				opts.QueueName, opts.Clock = "jobs", e.mock
				opts.MinPollInterval, opts.MaxPollInterval = pollInterval, pollInterval
				opts.OnEvent = func(ev worker.Event) {
					if ev.Kind == worker.EventPollWait {
						s.lastWait.Store(seq.Add(1))
					}
					e.rec.on(ev)
				}
			}
			s.run = start(worker.New(source, handler, opts))
			return s
		}
		slots := make([]*slot, nWorkers)
		for i := range slots {
			slots[i] = startWorker()
		}
		// settled: every message a worker fetched has an outcome.
		settled := func(s *slot) bool {
			st := s.run.w.Stats()
			return st.InFlight == 0 && int64(st.Received) == s.returned.Load()
		}
		// waiting: a polling worker waits for its next poll, begun since
		// the clock last moved.
		waiting := func(s *slot) bool {
			w := s.lastWait.Load()
			return w > s.lastGet.Load() && w > s.waitAtMove
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
					if s.st.crashed.Load() && settled(s) {
						if err := s.run.stop(rt); err != nil {
							rt.Fatal(err)
						}
						slots[i] = startWorker()
						e.rec.poke()
						return false
					}
				}
				for i, s := range slots {
					if !settled(s) || b.polls && !waiting(s) {
						why = fmt.Sprintf("worker %d: %+v, returned %d, crashed %v, last get %d, last wait %d, wait at move %d",
							i, s.run.w.Stats(), s.returned.Load(), s.st.crashed.Load(), s.lastGet.Load(), s.lastWait.Load(), s.waitAtMove)
						return false
					}
				}
				return true
			})
			if count(rt, e.q) == 0 {
				break
			}
			for _, s := range slots {
				s.waitAtMove = s.lastWait.Load()
			}
			if visible(rt, e.q) > 0 {
				if b.polls {
					// Every worker waits for its next poll: make them poll.
					e.mock.Add(pollInterval)
				} else {
					// A live worker has yet to take these; a Receive timer
					// stranded by the last Add fires on this one.
					e.mock.Add(time.Millisecond)
				}
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
					rec, err := worker.ParsePoisonRecord(m.Content)
					if err != nil {
						rt.Fatalf("poison message %q: %v", m.Content, err)
					}
					if rec.Reason != worker.ReasonHandlerFailed && rec.Reason != worker.ReasonDequeueCountExceeded {
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

// polledCrashQueue is crashQueue for a source the worker polls, any
// Queue: it has no Receive, and it records when each Get starts.
type polledCrashQueue struct {
	worker.Queue
	st       *crashState
	returned atomic.Int64
	seq      *atomic.Int64 // shared with the poll-wait events
	lastGet  *atomic.Int64 // seq when the last Get started
}

func (c *polledCrashQueue) Get(ctx context.Context, n int, v time.Duration) ([]azq.Message, error) {
	c.lastGet.Store(c.seq.Add(1))
	if err := c.st.op(); err != nil {
		return nil, err
	}
	ms, err := c.Queue.Get(ctx, n, v)
	c.returned.Add(int64(len(ms)))
	return ms, err
}

func (c *polledCrashQueue) Update(ctx context.Context, id azq.MessageID, r azq.PopReceipt, v time.Duration, s *string) (azq.UpdateResult, error) {
	if err := c.st.op(); err != nil {
		return azq.UpdateResult{}, err
	}
	return c.Queue.Update(ctx, id, r, v, s)
}

func (c *polledCrashQueue) Delete(ctx context.Context, id azq.MessageID, r azq.PopReceipt) error {
	if err := c.st.op(); err != nil {
		return err
	}
	return c.Queue.Delete(ctx, id, r)
}

func (c *polledCrashQueue) Put(ctx context.Context, s string, o *azq.PutOptions) (azq.Message, error) {
	if err := c.st.op(); err != nil {
		return azq.Message{}, err
	}
	return c.Queue.Put(ctx, s, o)
}
