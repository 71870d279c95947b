package worker

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/azqlib/azq"
	"github.com/benbjohnson/clock"
)

// tb is what the helpers need of *testing.T and *rapid.T alike.
type tb interface {
	Helper()
	Fatal(args ...any)
	Fatalf(format string, args ...any)
}

// testEnv is a service on a mock clock with one queue, "jobs".
type testEnv struct {
	t    tb
	mock *clock.Mock
	svc  *azq.Service
	q    *azq.Queue
	rec  *recorder
}

func newEnv(t tb) *testEnv {
	t.Helper()
	mock := clock.NewMock()
	svc := azq.NewService(azq.WithClock(mock))
	q, _, err := svc.CreateQueue(context.Background(), "jobs", nil)
	if err != nil {
		t.Fatal(err)
	}
	return &testEnv{t: t, mock: mock, svc: svc, q: q, rec: newRecorder()}
}

func (e *testEnv) put(content string) azq.Message {
	e.t.Helper()
	m, err := e.q.Put(context.Background(), content, nil)
	if err != nil {
		e.t.Fatal(err)
	}
	return m
}

// visible returns how many messages of q are visible now.
func visible(t tb, q *azq.Queue) int {
	t.Helper()
	ms, err := q.Peek(context.Background(), 32)
	if err != nil {
		t.Fatal(err)
	}
	return len(ms)
}

func count(t tb, q *azq.Queue) int {
	t.Helper()
	n, err := q.ApproximateCount(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// recorder keeps the events of one or more workers and wakes waiters on
// each, so tests wait for the worker to reach a state instead of sleeping.
type recorder struct {
	mu     sync.Mutex
	events []Event
	notify chan struct{}
}

func newRecorder() *recorder { return &recorder{notify: make(chan struct{}, 1)} }

func (r *recorder) on(e Event) {
	r.mu.Lock()
	r.events = append(r.events, e)
	r.mu.Unlock()
	r.poke()
}

func (r *recorder) poke() {
	select {
	case r.notify <- struct{}{}:
	default:
	}
}

// of returns the recorded events of kind k.
func (r *recorder) of(k EventKind) []Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []Event
	for _, e := range r.events {
		if e.Kind == k {
			out = append(out, e)
		}
	}
	return out
}

// waitFor blocks until cond holds, re-checking after every event. The
// real-time limit only turns a hang into a failure; correct runs never
// come near it.
func (r *recorder) waitFor(t tb, what string, cond func() bool) {
	t.Helper()
	r.waitForDiag(t, func() string { return what }, cond)
}

// waitForDiag is waitFor with a description computed on failure.
func (r *recorder) waitForDiag(t tb, what func() string, cond func() bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for !cond() {
		select {
		case <-r.notify:
		case <-ctx.Done():
			t.Fatalf("timed out waiting for %s", what())
		}
	}
}

// waitEvents waits until at least n events of kind k were recorded and
// returns them.
func (r *recorder) waitEvents(t tb, k EventKind, n int) []Event {
	t.Helper()
	var got []Event
	r.waitFor(t, k.String(), func() bool { got = r.of(k); return len(got) >= n })
	return got
}

// running is a worker started in the background.
type running struct {
	w      *Worker
	cancel context.CancelFunc
	errc   chan error
}

func start(w *Worker) *running {
	ctx, cancel := context.WithCancel(context.Background())
	r := &running{w: w, cancel: cancel, errc: make(chan error, 1)}
	go func() { r.errc <- w.Run(ctx) }()
	return r
}

// stop cancels Run and waits for it to return.
func (r *running) stop(t tb) error {
	t.Helper()
	r.cancel()
	guard, cancel := context.WithTimeout(context.Background(), 20*time.Second) // a hang guard only
	defer cancel()
	select {
	case err := <-r.errc:
		return err
	case <-guard.Done():
		t.Fatal("Run did not return")
		return nil
	}
}

var errCrashed = errors.New("test: worker process crashed")

// crashState is shared by a crashing worker's queues: once crashed, every
// operation fails, as if the process had died mid-flight.
type crashState struct {
	crashed atomic.Bool
	opsLeft atomic.Int64 // crash when this reaches 0; negative never
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

// crashQueue is an *azq.Queue seen through a process that can crash. It
// counts the messages it handed out, so that a test knows whether the
// worker has accounted for all of them.
type crashQueue struct {
	*azq.Queue
	st       *crashState
	returned atomic.Int64
}

func (c *crashQueue) Get(ctx context.Context, n int, v time.Duration) ([]azq.Message, error) {
	if err := c.st.op(); err != nil {
		return nil, err
	}
	ms, err := c.Queue.Get(ctx, n, v)
	c.returned.Add(int64(len(ms)))
	return ms, err
}

func (c *crashQueue) Receive(ctx context.Context, n int, v time.Duration) ([]azq.Message, error) {
	if err := c.st.op(); err != nil {
		return nil, err
	}
	ms, err := c.Queue.Receive(ctx, n, v)
	c.returned.Add(int64(len(ms)))
	return ms, err
}

func (c *crashQueue) Update(ctx context.Context, id azq.MessageID, r azq.PopReceipt, v time.Duration, s *string) (azq.UpdateResult, error) {
	if err := c.st.op(); err != nil {
		return azq.UpdateResult{}, err
	}
	return c.Queue.Update(ctx, id, r, v, s)
}

func (c *crashQueue) Delete(ctx context.Context, id azq.MessageID, r azq.PopReceipt) error {
	if err := c.st.op(); err != nil {
		return err
	}
	return c.Queue.Delete(ctx, id, r)
}

func (c *crashQueue) Put(ctx context.Context, s string, o *azq.PutOptions) (azq.Message, error) {
	if err := c.st.op(); err != nil {
		return azq.Message{}, err
	}
	return c.Queue.Put(ctx, s, o)
}

// pollQueue hides Receive and Clock, so the worker must poll, and records
// when (on the mock clock) each Get happened.
type pollQueue struct {
	q    *azq.Queue
	mu   sync.Mutex
	gets []time.Time
}

func (p *pollQueue) Get(ctx context.Context, n int, v time.Duration) ([]azq.Message, error) {
	p.mu.Lock()
	p.gets = append(p.gets, p.q.Clock().Now())
	p.mu.Unlock()
	return p.q.Get(ctx, n, v)
}

func (p *pollQueue) getTimes() []time.Time {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]time.Time(nil), p.gets...)
}

func (p *pollQueue) Update(ctx context.Context, id azq.MessageID, r azq.PopReceipt, v time.Duration, s *string) (azq.UpdateResult, error) {
	return p.q.Update(ctx, id, r, v, s)
}

func (p *pollQueue) Delete(ctx context.Context, id azq.MessageID, r azq.PopReceipt) error {
	return p.q.Delete(ctx, id, r)
}

func (p *pollQueue) Put(ctx context.Context, s string, o *azq.PutOptions) (azq.Message, error) {
	return p.q.Put(ctx, s, o)
}

// flakyQueue fails Update while failUpdates is positive, as a service
// answering 503 would.
type flakyQueue struct {
	*azq.Queue
	failUpdates atomic.Int64
}

var errUnavailable = &azq.Error{Code: "ServerBusy", StatusCode: 503, Message: "test: service unavailable"}

func (f *flakyQueue) Update(ctx context.Context, id azq.MessageID, r azq.PopReceipt, v time.Duration, s *string) (azq.UpdateResult, error) {
	if f.failUpdates.Load() > 0 {
		return azq.UpdateResult{}, errUnavailable
	}
	return f.Queue.Update(ctx, id, r, v, s)
}

// doubleFireClock is a mock clock that runs every AfterFunc callback twice,
// as clock.Mock does when Add races with a Timer or AfterFunc call (both
// runs pick the same due timer). The same race on a Timer makes the second
// send block on the full channel with the mock's lock held, hanging the
// clock; so the worker must not wait on Timer channels, and a call to
// Timer, After, Ticker or Tick fails the test.
type doubleFireClock struct {
	*clock.Mock
	t interface{ Errorf(string, ...any) }
}

func (c *doubleFireClock) AfterFunc(d time.Duration, f func()) *clock.Timer {
	return c.Mock.AfterFunc(d, func() { f(); f() })
}

func (c *doubleFireClock) Timer(d time.Duration) *clock.Timer {
	c.t.Errorf("the worker waits on a clock Timer channel, which a mock clock can fire twice")
	return c.Mock.Timer(d)
}

func (c *doubleFireClock) After(d time.Duration) <-chan time.Time {
	c.t.Errorf("the worker waits on a clock After channel, which a mock clock can fire twice")
	return c.Mock.After(d)
}

func (c *doubleFireClock) Ticker(d time.Duration) *clock.Ticker {
	c.t.Errorf("the worker uses a clock Ticker")
	return c.Mock.Ticker(d)
}

func (c *doubleFireClock) Tick(d time.Duration) <-chan time.Time {
	c.t.Errorf("the worker uses a clock Tick")
	return c.Mock.Tick(d)
}

// goneQueue answers Update and Delete with err once it is set, as a service
// does for a queue that was deleted or disabled under the worker.
type goneQueue struct {
	*azq.Queue
	mu  sync.Mutex
	err error
}

func (g *goneQueue) set(err error) {
	g.mu.Lock()
	g.err = err
	g.mu.Unlock()
}

func (g *goneQueue) failure() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.err
}

func (g *goneQueue) Update(ctx context.Context, id azq.MessageID, r azq.PopReceipt, v time.Duration, s *string) (azq.UpdateResult, error) {
	if err := g.failure(); err != nil {
		return azq.UpdateResult{}, err
	}
	return g.Queue.Update(ctx, id, r, v, s)
}

func (g *goneQueue) Delete(ctx context.Context, id azq.MessageID, r azq.PopReceipt) error {
	if err := g.failure(); err != nil {
		return err
	}
	return g.Queue.Delete(ctx, id, r)
}

// recvQueue is an *azq.Queue that counts the worker's Get and Receive
// calls, poking rec at each Receive, so a test can wait for the worker to
// be waiting.
type recvQueue struct {
	*azq.Queue
	rec      *recorder
	gets     atomic.Int64
	receives atomic.Int64
}

func (r *recvQueue) Get(ctx context.Context, n int, v time.Duration) ([]azq.Message, error) {
	r.gets.Add(1)
	return r.Queue.Get(ctx, n, v)
}

func (r *recvQueue) Receive(ctx context.Context, n int, v time.Duration) ([]azq.Message, error) {
	r.receives.Add(1)
	r.rec.poke()
	return r.Queue.Receive(ctx, n, v)
}

// receiptCall is one Update or Delete as receiptQueue saw it.
type receiptCall struct {
	op       string // "update" or "delete"
	receipt  azq.PopReceipt
	content  *string
	returned azq.PopReceipt // Update's new receipt
	err      error
}

// receiptQueue is an *azq.Queue that records the receipts its Update and
// Delete calls carry and return.
type receiptQueue struct {
	*azq.Queue
	mu    sync.Mutex
	calls []receiptCall
}

func (r *receiptQueue) Update(ctx context.Context, id azq.MessageID, rc azq.PopReceipt, v time.Duration, s *string) (azq.UpdateResult, error) {
	res, err := r.Queue.Update(ctx, id, rc, v, s)
	r.mu.Lock()
	r.calls = append(r.calls, receiptCall{op: "update", receipt: rc, content: s, returned: res.PopReceipt, err: err})
	r.mu.Unlock()
	return res, err
}

func (r *receiptQueue) Delete(ctx context.Context, id azq.MessageID, rc azq.PopReceipt) error {
	err := r.Queue.Delete(ctx, id, rc)
	r.mu.Lock()
	r.calls = append(r.calls, receiptCall{op: "delete", receipt: rc, err: err})
	r.mu.Unlock()
	return err
}

func (r *receiptQueue) log() []receiptCall {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]receiptCall(nil), r.calls...)
}

// all returns every recorded event, in order.
func (r *recorder) all() []Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Event(nil), r.events...)
}

// onlyPoisoned returns the one message in the poison queue "jobs-poison" of
// svc, and fails the test unless there is exactly one.
func onlyPoisoned(t *testing.T, svc *azq.Service) azq.Message {
	t.Helper()
	pq, err := svc.Queue("jobs-poison")
	if err != nil {
		t.Fatal(err)
	}
	ms, err := pq.Peek(context.Background(), 32)
	if err != nil || len(ms) != 1 {
		t.Fatalf("poison queue holds %d messages (%v)", len(ms), err)
	}
	return ms[0]
}

// crossDeadline moves the mock clock to just before the shutdown deadline,
// checks that nothing has been released yet, moves it past the deadline,
// and waits for Run to return.
func crossDeadline(t *testing.T, e *testEnv, r *running, grace time.Duration) {
	t.Helper()
	e.mock.Add(grace - time.Nanosecond)
	if len(e.rec.of(EventReleased)) != 0 {
		t.Fatal("released before the deadline")
	}
	e.mock.Add(time.Nanosecond)
	if err := r.stop(t); err != nil {
		t.Fatal(err)
	}
}

// failWithoutPoisonQueue runs a worker with opts over q, whose one message
// fails its only attempt while the worker has no poison queue for it, and
// checks that the message is abandoned: left in q, invisible, with the
// event saying there is no poison queue.
func failWithoutPoisonQueue(t *testing.T, e *testEnv, q *azq.Queue, opts Options) {
	t.Helper()
	opts.MaxDequeueCount, opts.OnEvent = 1, e.rec.on
	w := New(q, func(ctx context.Context, d *Delivery) error { return errors.New("no") }, opts)
	r := start(w)
	ev := e.rec.waitEvents(t, EventAbandoned, 1)[0]
	if err := r.stop(t); err != nil {
		t.Fatal(err)
	}
	if !errors.Is(ev.Err, errNoPoisonQueue) || count(t, q) != 1 || visible(t, q) != 0 {
		t.Fatalf("event %+v; %d messages, %d visible", ev, count(t, q), visible(t, q))
	}
}

// deleteEach answers a DeleteBatch with one call of del an item, so that a
// test double that overrides Delete sees every delete the worker makes,
// whether or not the queue it wraps deletes in batches.
func deleteEach(ctx context.Context, del func(context.Context, azq.MessageID, azq.PopReceipt) error, reqs []azq.DeleteRequest) ([]error, error) {
	errs := make([]error, len(reqs))
	for i, r := range reqs {
		errs[i] = del(ctx, r.ID, r.PopReceipt)
	}
	return errs, nil
}

func (c *crashQueue) DeleteBatch(ctx context.Context, reqs []azq.DeleteRequest) ([]error, error) {
	return deleteEach(ctx, c.Delete, reqs)
}

func (g *goneQueue) DeleteBatch(ctx context.Context, reqs []azq.DeleteRequest) ([]error, error) {
	return deleteEach(ctx, g.Delete, reqs)
}

func (r *receiptQueue) DeleteBatch(ctx context.Context, reqs []azq.DeleteRequest) ([]error, error) {
	return deleteEach(ctx, r.Delete, reqs)
}

// batchQueue is an *azq.Queue that deletes in batches (azq.BatchDeleter)
// and counts its DeleteBatch and Delete calls. A batch fails as a whole
// with failBatch while it is set; before a batch, each message in stale
// is deleted under it, as another consumer would after the lease lapsed,
// so that the batch answers that item's stale receipt.
type batchQueue struct {
	*azq.Queue
	mu        sync.Mutex
	batches   []int // the size of each DeleteBatch call
	deletes   int   // Delete calls
	failBatch error
	stale     map[azq.MessageID]bool
	// failUpdates makes Update fail as a busy service would, so that no
	// renewal extends a lease.
	failUpdates atomic.Bool
}

func (b *batchQueue) Update(ctx context.Context, id azq.MessageID, r azq.PopReceipt, v time.Duration, s *string) (azq.UpdateResult, error) {
	if b.failUpdates.Load() {
		return azq.UpdateResult{}, errUnavailable
	}
	return b.Queue.Update(ctx, id, r, v, s)
}

func (b *batchQueue) DeleteBatch(ctx context.Context, reqs []azq.DeleteRequest) ([]error, error) {
	b.mu.Lock()
	b.batches = append(b.batches, len(reqs))
	fail := b.failBatch
	for _, r := range reqs {
		if b.stale[r.ID] {
			// Gone under the worker: the item's own error follows.
			if err := b.Queue.Delete(ctx, r.ID, r.PopReceipt); err != nil {
				b.mu.Unlock()
				return nil, err
			}
		}
	}
	b.mu.Unlock()
	if fail != nil {
		return nil, fail
	}
	return azq.DeleteBatch(ctx, b.Queue, reqs)
}

func (b *batchQueue) Delete(ctx context.Context, id azq.MessageID, r azq.PopReceipt) error {
	b.mu.Lock()
	b.deletes++
	b.mu.Unlock()
	return b.Queue.Delete(ctx, id, r)
}

// calls returns the sizes of the DeleteBatch calls so far and the number
// of Delete calls.
func (b *batchQueue) calls() ([]int, int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]int(nil), b.batches...), b.deletes
}
