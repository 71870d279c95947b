package sdktest_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/azqlib/azq"
	"github.com/azqlib/azq/worker"
	"github.com/benbjohnson/clock"
)

// The helpers below are copies of those of package worker's own tests
// (worker/helpers_test.go) that these external tests use.

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
	events []worker.Event
	notify chan struct{}
}

func newRecorder() *recorder { return &recorder{notify: make(chan struct{}, 1)} }

func (r *recorder) on(e worker.Event) {
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
