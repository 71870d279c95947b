package queuetest

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/azqlib/azq"
	"github.com/azqlib/azq/worker"
	"github.com/benbjohnson/clock"
)

// WorkerFixture is a back end for one test of RunWorkerTests: a service
// whose queues read Clock. The test creates its queues in it.
type WorkerFixture struct {
	// Service is the back end's service, empty.
	Service azq.QueueService
	// Clock is the mock clock its queues keep their time with; the suite
	// moves it.
	Clock *clock.Mock
}

// WorkerOptions tune RunWorkerTests.
type WorkerOptions struct {
	// Runs is how many random runs the property makes; 0 means 10.
	Runs int
}

// RunWorkerTests checks package worker's promises on a back end of the
// service contract, through the contract alone: each test on a
// WorkerFixture of its own from newFixture. The worker's own tests check
// the same promises on the in-memory queue with its internals at hand;
// this suite lets another back end show it keeps them too.
//
// The subtests check that every message is handled once, a long handler
// renews its lease, a crashed worker's message comes back after its lease,
// a message out of attempts goes to the poison queue ("<queue>-poison",
// created in the fixture's service), a stopped worker releases what it
// had not finished, and, over random runs with crashes, that every message
// is processed or poisoned.
//
// Every test moves the fixture's mock clock, which the back end must
// read (its queues' Clock method), and the source queue must wait in
// Receive (worker.Receiver) rather than be polled, as the in-memory and
// PostgreSQL queues do.
func RunWorkerTests(t *testing.T, newFixture func(t *testing.T) WorkerFixture, opts WorkerOptions) {
	if opts.Runs == 0 {
		opts.Runs = 10
	}
	for _, c := range []struct {
		name string
		test func(t *testing.T, e *env)
	}{
		{"EveryMessageHandledOnce", everyMessageHandledOnce},
		{"LongHandlerRenewsLease", longHandlerRenewsLease},
		{"CrashedWorkerMessageReappearsAfterLease", crashedWorkerMessageReappears},
		{"PoisonAfterMaxDequeueCount", poisonAfterMaxDequeueCount},
		{"ShutdownReleasesUnfinished", shutdownReleasesUnfinished},
		{"EveryMessageProcessedOrPoisoned", func(t *testing.T, e *env) { everyMessageProcessedOrPoisoned(t, e, opts.Runs) }},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := newFixture(t)
			c.test(t, newEnv(t, f))
		})
	}
}

// env is one test's back end, its queue "jobs" and the events of its
// workers.
type env struct {
	t    *testing.T
	f    WorkerFixture
	q    azq.QueueRef
	rec  *recorder
	bg   context.Context
	jobs string
}

// source is what the suite needs of a queue: the worker's Queue, waited
// on with Receive.
type source interface {
	worker.Queue
	worker.Receiver
}

func newEnv(t *testing.T, f WorkerFixture) *env {
	t.Helper()
	e := &env{t: t, f: f, rec: newRecorder(), bg: context.Background(), jobs: "jobs"}
	e.q = e.create(e.jobs)
	if _, ok := e.q.(source); !ok {
		t.Fatalf("the back end's queue, %T, has no Receive: the suite needs a source the worker waits on", e.q)
	}
	if c, ok := e.q.(clocked); !ok || c.Clock() != clock.Clock(f.Clock) {
		t.Fatalf("the back end's queue, %T, does not read the fixture's clock", e.q)
	}
	return e
}

// create creates the queue name and returns it.
func (e *env) create(name string) azq.QueueRef {
	e.t.Helper()
	q, err := e.f.Service.Ref(name)
	if err != nil {
		e.t.Fatal(err)
	}
	if _, err := q.Create(e.bg, nil); err != nil {
		e.t.Fatal(err)
	}
	return q
}

func (e *env) put(content string) azq.Message {
	e.t.Helper()
	m, err := e.q.Put(e.bg, content, nil)
	if err != nil {
		e.t.Fatal(err)
	}
	return m
}

// poisonQueue returns the poison queue of the queue e.jobs.
func (e *env) poisonQueue() azq.QueueRef {
	e.t.Helper()
	name, ok := worker.PoisonQueueName(e.jobs)
	if !ok {
		e.t.Fatalf("%s has no poison queue", e.jobs)
	}
	q, err := e.f.Service.Ref(name)
	if err != nil {
		e.t.Fatal(err)
	}
	return q
}

// visible returns the messages of q that are visible now.
func (e *env) visible(q azq.QueueRef) []azq.Message {
	e.t.Helper()
	ms, err := q.Peek(e.bg, 32)
	if err != nil {
		e.t.Fatal(err)
	}
	return ms
}

func (e *env) count(q azq.QueueRef) int {
	e.t.Helper()
	n, err := q.ApproximateCount(e.bg)
	if err != nil {
		e.t.Fatal(err)
	}
	return n
}

// recorder keeps the events of the workers and wakes a waiter at each, so
// that the tests wait for a state rather than for time to pass.
type recorder struct {
	mu     sync.Mutex
	events []worker.Event
	notify chan struct{}
}

func newRecorder() *recorder { return &recorder{notify: make(chan struct{}, 1)} }

func (r *recorder) on(ev worker.Event) {
	r.mu.Lock()
	r.events = append(r.events, ev)
	r.mu.Unlock()
	r.poke()
}

func (r *recorder) poke() {
	select {
	case r.notify <- struct{}{}:
	default:
	}
}

// of returns the events of kind k so far.
func (r *recorder) of(k worker.EventKind) []worker.Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []worker.Event
	for _, ev := range r.events {
		if ev.Kind == k {
			out = append(out, ev)
		}
	}
	return out
}

// waitFor waits until cond holds, looking again at each event and every
// few milliseconds (the back end's own work, a notification on its way,
// produces no event); the limit only turns a hang into a failure.
func (r *recorder) waitFor(t *testing.T, what func() string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what())
		}
		select {
		case <-r.notify:
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// waitEvents waits until n events of kind k have happened and returns
// them.
func (r *recorder) waitEvents(t *testing.T, k worker.EventKind, n int) []worker.Event {
	t.Helper()
	var got []worker.Event
	r.waitFor(t, func() string { return fmt.Sprintf("%d %v events (have %d)", n, k, len(got)) },
		func() bool { got = r.of(k); return len(got) >= n })
	return got
}

// running is a worker started in the background.
type running struct {
	w      *worker.Worker
	cancel context.CancelFunc
	errc   chan error
}

func start(w *worker.Worker) *running {
	ctx, cancel := context.WithCancel(context.Background())
	r := &running{w: w, cancel: cancel, errc: make(chan error, 1)}
	go func() { r.errc <- w.Run(ctx) }()
	return r
}

// stop cancels Run and waits for it to return.
func (r *running) stop(t *testing.T) error {
	t.Helper()
	r.cancel()
	select {
	case err := <-r.errc:
		return err
	case <-time.After(30 * time.Second): // a hang guard only
		t.Fatal("Run did not return")
		return nil
	}
}

// Ten messages, a worker handling four at once: each is handled once and
// deleted.
func everyMessageHandledOnce(t *testing.T, e *env) {
	const n = 10
	for i := 0; i < n; i++ {
		e.put("m" + strconv.Itoa(i))
	}
	var mu sync.Mutex
	handled := map[string]int{}
	w := worker.New(e.q.(source), func(ctx context.Context, d *worker.Delivery) error {
		mu.Lock()
		handled[d.Message.Content]++
		mu.Unlock()
		return nil
	}, worker.Options{Concurrency: 4, BatchSize: 4, OnEvent: e.rec.on})
	r := start(w)
	e.rec.waitEvents(t, worker.EventSucceeded, n)
	if err := r.stop(t); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < n; i++ {
		if c := handled["m"+strconv.Itoa(i)]; c != 1 {
			t.Errorf("m%d handled %d times", i, c)
		}
	}
	if got := e.count(e.q); got != 0 {
		t.Fatalf("%d messages left", got)
	}
}

// A handler that runs five times longer than the lease keeps its message:
// the worker renews it at half the lease, and nobody else sees it.
func longHandlerRenewsLease(t *testing.T, e *env) {
	const lease = 10 * time.Second
	e.put("long")
	started, finish := make(chan struct{}), make(chan struct{})
	var calls atomic.Int32
	w := worker.New(e.q.(source), func(ctx context.Context, d *worker.Delivery) error {
		if calls.Add(1) == 1 {
			close(started)
		}
		<-finish
		return nil
	}, worker.Options{LeaseDuration: lease, Concurrency: 2, OnEvent: e.rec.on})
	r := start(w)
	<-started
	t0 := e.f.Clock.Now()
	for i := 1; i <= 10; i++ {
		e.f.Clock.Add(lease / 2)
		renewed := e.rec.waitEvents(t, worker.EventRenewed, i)
		if got, want := renewed[i-1].Time, t0.Add(time.Duration(i)*lease/2); !got.Equal(want) {
			t.Fatalf("renewal %d at %v, want %v", i, got, want)
		}
		if ms := e.visible(e.q); len(ms) != 0 {
			t.Fatalf("after %v the message is visible to others", time.Duration(i)*lease/2)
		}
	}
	close(finish)
	e.rec.waitEvents(t, worker.EventSucceeded, 1)
	if err := r.stop(t); err != nil {
		t.Fatal(err)
	}
	if st := w.Stats(); calls.Load() != 1 || st.Succeeded != 1 || st.LeaseRenewals != 10 || st.LeasesLost != 0 {
		t.Fatalf("calls %d, stats %+v", calls.Load(), st)
	}
	if got := e.count(e.q); got != 0 {
		t.Fatalf("%d messages left", got)
	}
}

// A worker that dies mid-handler (nothing it does reaches the queue any
// more) leaves its message invisible until the lease lapses; then another
// worker gets it, with the progress the first one saved and its dequeue
// count one more.
func crashedWorkerMessageReappears(t *testing.T, e *env) {
	const lease = 30 * time.Second
	e.put("step 0")
	crash := &crashState{}
	crash.opsLeft.Store(-1)
	saved := make(chan struct{})
	w1 := worker.New(&crashQueue{source: e.q.(source), st: crash}, func(ctx context.Context, d *worker.Delivery) error {
		if err := d.Checkpoint(ctx, "step 1"); err != nil {
			t.Error(err)
		}
		close(saved)
		<-ctx.Done()
		return ctx.Err()
	}, worker.Options{LeaseDuration: lease, ShutdownTimeout: -1, OnEvent: e.rec.on})
	r1 := start(w1)
	<-saved
	crash.crashed.Store(true)
	if err := r1.stop(t); err != nil {
		t.Fatal(err)
	}
	if st := w1.Stats(); st.Released != 0 || st.Succeeded != 0 {
		t.Fatalf("the crashed worker settled its message: %+v", st)
	}

	got := make(chan *worker.Delivery, 1)
	w2 := worker.New(e.q.(source), func(ctx context.Context, d *worker.Delivery) error {
		got <- d
		return nil
	}, worker.Options{LeaseDuration: lease, OnEvent: e.rec.on})
	r2 := start(w2)
	e.f.Clock.Add(lease - time.Nanosecond)
	if ms := e.visible(e.q); len(ms) != 0 {
		t.Fatal("the message came back before its lease lapsed")
	}
	e.f.Clock.Add(time.Nanosecond)
	var d *worker.Delivery
	for deadline := time.Now().Add(30 * time.Second); d == nil; {
		select {
		case d = <-got:
		case <-time.After(20 * time.Millisecond):
			// A Receive timer armed while Add ran its timers fires
			// on the next Add: this one moves no time.
			e.f.Clock.Add(0)
			if time.Now().After(deadline) {
				t.Fatal("no worker got the message after its lease lapsed")
			}
		}
	}
	if d.Message.Content != "step 1" || d.Message.DequeueCount != 2 {
		t.Fatalf("the second worker got %q, dequeue count %d; want step 1, 2", d.Message.Content, d.Message.DequeueCount)
	}
	e.rec.waitEvents(t, worker.EventSucceeded, 1)
	if err := r2.stop(t); err != nil {
		t.Fatal(err)
	}
	if n := e.count(e.q); n != 0 {
		t.Fatalf("%d messages left", n)
	}
}

// A message whose handler always fails is tried MaxDequeueCount times and
// then moved to the poison queue, created in the service, as a record of
// what happened.
func poisonAfterMaxDequeueCount(t *testing.T, e *env) {
	orig := e.put("bad \xff input") // not UTF-8: the record keeps it exactly
	var calls atomic.Int32
	w := worker.New(e.q.(source), func(ctx context.Context, d *worker.Delivery) error {
		n := calls.Add(1)
		if d.Message.DequeueCount != int64(n) {
			t.Errorf("attempt %d has dequeue count %d", n, d.Message.DequeueCount)
		}
		return fmt.Errorf("boom %d", n)
	}, worker.Options{MaxDequeueCount: 3, QueueName: e.jobs, Poison: worker.ServicePoison(e.f.Service), OnEvent: e.rec.on})
	r := start(w)
	e.rec.waitEvents(t, worker.EventPoisoned, 1)
	if err := r.stop(t); err != nil {
		t.Fatal(err)
	}
	if calls.Load() != 3 {
		t.Fatalf("%d attempts, want 3", calls.Load())
	}
	if n := e.count(e.q); n != 0 {
		t.Fatalf("%d messages left in the source", n)
	}
	pq := e.poisonQueue()
	ms := e.visible(pq)
	if len(ms) != 1 {
		t.Fatalf("the poison queue holds %d messages", len(ms))
	}
	rec, err := worker.ParsePoisonRecord(ms[0].Content)
	if err != nil {
		t.Fatal(err)
	}
	if rec.Content() != orig.Content || rec.MessageID != orig.ID || rec.DequeueCount != 3 ||
		rec.Reason != worker.ReasonHandlerFailed || rec.Error != "boom 3" || rec.Queue != e.jobs ||
		!rec.InsertionTime.Equal(orig.InsertionTime) {
		t.Fatalf("poison record %+v", rec)
	}
}

// Handlers still running when the worker stops, past a shutdown timeout
// of nothing, give their messages back: visible again at once, to be
// handled elsewhere.
func shutdownReleasesUnfinished(t *testing.T, e *env) {
	e.put("a")
	e.put("b")
	started := make(chan struct{}, 2)
	w := worker.New(e.q.(source), func(ctx context.Context, d *worker.Delivery) error {
		started <- struct{}{}
		<-ctx.Done()
		return ctx.Err()
	}, worker.Options{Concurrency: 2, ShutdownTimeout: -1, OnEvent: e.rec.on})
	r := start(w)
	<-started
	<-started
	if ms := e.visible(e.q); len(ms) != 0 {
		t.Fatalf("%d messages visible while their handlers run", len(ms))
	}
	if err := r.stop(t); err != nil {
		t.Fatal(err)
	}
	ms := e.visible(e.q)
	if len(ms) != 2 || ms[0].DequeueCount != 1 || ms[1].DequeueCount != 1 {
		t.Fatalf("after shutdown the visible messages are %+v, want both, each dequeued once", ms)
	}
	if st := w.Stats(); st.Released != 2 || st.InFlight != 0 {
		t.Fatalf("stats %+v", st)
	}
}

// outcome is what a handler does on one attempt.
type outcome int

const (
	succeed outcome = iota
	fail
	panicking
)

// With handlers failing and panicking at random and workers crashing at
// random points (after a random number of queue operations, so also
// between a handler's success and its delete), every message ends up
// handled successfully at least once or in the poison queue, and none is
// lost. Each run draws from a random generator seeded with its number,
// which a failure names.
//
// The loop advances the mock clock only once the workers have settled
// what they took; while messages are visible it nudges the clock, as a
// Receive timer armed while clock.Mock.Add runs its timers fires only on
// the next Add.
func everyMessageProcessedOrPoisoned(t *testing.T, e *env, runs int) {
	for run := 0; run < runs; run++ {
		name := fmt.Sprintf("jobs-%d", run)
		e.q = e.create(name)
		e.jobs = name
		if !propertyRun(t, e, rand.New(rand.NewPCG(uint64(run), 0x617a71))) {
			t.Fatalf("run %d (seed %d) failed", run, run)
		}
	}
}

func propertyRun(t *testing.T, e *env, rng *rand.Rand) bool {
	nMsgs := 1 + rng.IntN(24)
	nWorkers := 1 + rng.IntN(3)
	maxDQ := 1 + rng.IntN(4)
	plan := make([][]outcome, nMsgs)
	for i := range plan {
		plan[i] = make([]outcome, rng.IntN(maxDQ+3))
		for a := range plan[i] {
			plan[i][a] = []outcome{succeed, fail, fail, panicking}[rng.IntN(4)]
		}
	}
	// Workers started in turn crash after these many queue operations;
	// the last one of each slot never crashes, so the queue drains.
	crashes := make([]int, rng.IntN(5))
	for i := range crashes {
		crashes[i] = 1 + rng.IntN(40)
	}
	const lease = 30 * time.Second
	for i := 0; i < nMsgs; i++ {
		e.put("m" + strconv.Itoa(i))
	}
	var mu sync.Mutex
	succeeded := map[string]bool{}
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
	type slot struct {
		run *running
		cq  *crashQueue
	}
	startWorker := func() *slot {
		st := &crashState{}
		st.opsLeft.Store(-1)
		if len(crashes) > 0 {
			st.opsLeft.Store(int64(crashes[0]))
			crashes = crashes[1:]
		}
		cq := &crashQueue{source: e.q.(source), st: st}
		poison := func(ctx context.Context, name string) (worker.Queue, error) {
			pq, err := worker.ServicePoison(e.f.Service)(ctx, name)
			if err != nil {
				return nil, err
			}
			return &crashQueue{source: pq.(source), st: st}, nil
		}
		opts := worker.Options{LeaseDuration: lease, MaxDequeueCount: maxDQ, QueueName: e.jobs,
			Poison: poison, ShutdownTimeout: -1, OnEvent: e.rec.on}
		return &slot{run: start(worker.New(cq, handler, opts)), cq: cq}
	}
	slots := make([]*slot, nWorkers)
	for i := range slots {
		slots[i] = startWorker()
	}
	settled := func(s *slot) bool {
		st := s.run.w.Stats()
		return st.InFlight == 0 && int64(st.Received) == s.cq.returned.Load()
	}
	for round := 0; ; round++ {
		if round > 2000 {
			t.Errorf("queue not drained after %d rounds: %d left", round, e.count(e.q))
			return false
		}
		e.rec.waitFor(t, func() string { return "the workers to settle what they took" }, func() bool {
			for i, s := range slots {
				if s.cq.st.crashed.Load() && settled(s) {
					if err := s.run.stop(t); err != nil {
						t.Fatal(err)
					}
					slots[i] = startWorker()
					return false
				}
			}
			for _, s := range slots {
				if !settled(s) {
					return false
				}
			}
			return true
		})
		if e.count(e.q) == 0 {
			break
		}
		if len(e.visible(e.q)) > 0 {
			// A live worker has yet to take these; a Receive timer
			// stranded by the last Add fires on this one.
			e.f.Clock.Add(time.Millisecond)
			continue
		}
		// What is left is invisible: leases of crashed workers, or
		// messages left for their lease by a failed settle.
		e.f.Clock.Add(lease)
	}
	for _, s := range slots {
		if err := s.run.stop(t); err != nil {
			t.Fatal(err)
		}
	}
	poisoned := map[string]bool{}
	pq := e.poisonQueue()
	for {
		ms, err := pq.Get(e.bg, 32, time.Hour)
		if errors.Is(err, azq.ErrQueueNotFound) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if len(ms) == 0 {
			break
		}
		for _, m := range ms {
			rec, err := worker.ParsePoisonRecord(m.Content)
			if err != nil {
				t.Fatalf("poison message %q: %v", m.Content, err)
			}
			if rec.DequeueCount < int64(maxDQ) {
				t.Errorf("%s poisoned after %d attempts, max %d", rec.Content(), rec.DequeueCount, maxDQ)
				return false
			}
			poisoned[rec.Content()] = true
		}
	}
	for i := 0; i < nMsgs; i++ {
		c := "m" + strconv.Itoa(i)
		if !succeeded[c] && !poisoned[c] {
			t.Errorf("%s was lost: neither handled successfully nor poisoned (%d messages, %d workers, max dequeue count %d)", c, nMsgs, nWorkers, maxDQ)
			return false
		}
	}
	return true
}

var errCrashed = errors.New("queuetest: the worker's process crashed")

// crashState is shared by a crashing worker's queues: once crashed, every
// operation fails, as if the process had died mid-flight.
type crashState struct {
	crashed atomic.Bool
	opsLeft atomic.Int64 // crash when this reaches 0; negative: never
}

func (c *crashState) op() error {
	if c.crashed.Load() {
		return errCrashed
	}
	if c.opsLeft.Add(-1) == 0 {
		c.crashed.Store(true)
		return errCrashed
	}
	return nil
}

// crashQueue is a queue seen through a process that can crash. It counts
// the messages it handed out, so that a test knows whether the worker has
// accounted for all of them.
type crashQueue struct {
	source
	st       *crashState
	returned atomic.Int64
}

func (c *crashQueue) Get(ctx context.Context, n int, v time.Duration) ([]azq.Message, error) {
	if err := c.st.op(); err != nil {
		return nil, err
	}
	ms, err := c.source.Get(ctx, n, v)
	c.returned.Add(int64(len(ms)))
	return ms, err
}

func (c *crashQueue) Receive(ctx context.Context, n int, v time.Duration) ([]azq.Message, error) {
	if err := c.st.op(); err != nil {
		return nil, err
	}
	ms, err := c.source.Receive(ctx, n, v)
	c.returned.Add(int64(len(ms)))
	return ms, err
}

func (c *crashQueue) Update(ctx context.Context, id azq.MessageID, r azq.PopReceipt, v time.Duration, s *string) (azq.UpdateResult, error) {
	if err := c.st.op(); err != nil {
		return azq.UpdateResult{}, err
	}
	return c.source.Update(ctx, id, r, v, s)
}

func (c *crashQueue) Delete(ctx context.Context, id azq.MessageID, r azq.PopReceipt) error {
	if err := c.st.op(); err != nil {
		return err
	}
	return c.source.Delete(ctx, id, r)
}

func (c *crashQueue) Put(ctx context.Context, s string, o *azq.PutOptions) (azq.Message, error) {
	if err := c.st.op(); err != nil {
		return azq.Message{}, err
	}
	return c.source.Put(ctx, s, o)
}

// clocked is a queue that tells its clock, which the worker then reads.
type clocked interface{ Clock() clock.Clock }

// Clock is the source's, so that the worker follows the mock clock.
func (c *crashQueue) Clock() clock.Clock { return c.source.(clocked).Clock() }
