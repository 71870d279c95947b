package postgres_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/azqlib/azq"
	"github.com/azqlib/azq/postgres"
	"github.com/azqlib/azq/postgres/pgtest"
	"github.com/benbjohnson/clock"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// receiveAsync runs Receive in a goroutine; the channel gets its result.
func receiveAsync(ctx context.Context, q azq.MessageQueue, n int) <-chan receiveResult {
	ch := make(chan receiveResult, 1)
	go func() {
		ms, err := q.(interface {
			Receive(context.Context, int, time.Duration) ([]azq.Message, error)
		}).Receive(ctx, n, time.Minute)
		ch <- receiveResult{ms, err}
	}()
	return ch
}

type receiveResult struct {
	msgs []azq.Message
	err  error
}

// waitUntil waits, on the real clock, until cond holds: for a goroutine
// to reach a state, never for time to pass. It fails after a minute.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("waited a minute for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// waiting waits until n Receive calls wait on the queue with, if timer,
// its timer armed.
func waiting(t *testing.T, s *postgres.Service, name string, n int, timer bool) {
	t.Helper()
	waitUntil(t, "Receive to wait", func() bool {
		w, armed := s.Waiting(name)
		return w == n && armed == timer && s.Registered(name)
	})
}

func result(t *testing.T, ch <-chan receiveResult) receiveResult {
	t.Helper()
	select {
	case r := <-ch:
		return r
	case <-time.After(time.Minute):
		t.Fatal("Receive did not return within a minute")
	}
	panic("unreachable")
}

// notYet checks that Receive has not returned.
func notYet(t *testing.T, ch <-chan receiveResult) {
	t.Helper()
	select {
	case r := <-ch:
		t.Fatalf("Receive returned early: %+v", r)
	default:
	}
}

// A Receive on a mock clock wakes at the mock instant a delayed message
// becomes visible, by its timer, not before.
func TestReceiveWaitsForTheDelayedMessage(t *testing.T) {
	t.Parallel()
	s, mock := openMock(t)
	q := newQueue(t, s)
	m, err := q.Put(bg, "later", &azq.PutOptions{VisibilityTimeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	ch := receiveAsync(bg, q, 1)
	waiting(t, s, q.Name(), 1, true)
	mock.Add(10*time.Second - time.Nanosecond)
	notYet(t, ch)
	waiting(t, s, q.Name(), 1, true)
	mock.Add(time.Nanosecond)
	r := result(t, ch)
	if r.err != nil || len(r.msgs) != 1 || r.msgs[0].ID != m.ID || r.msgs[0].DequeueCount != 1 {
		t.Fatalf("Receive: %+v", r)
	}
}

// Puts and Updates of another Service, with its own connections, wake a
// waiting Receive; so does the deletion of the queue, with
// ErrQueueNotFound.
func TestReceiveWokenByAnotherService(t *testing.T) {
	t.Parallel()
	schema := pgtest.Shared(t).NewSchema(t)
	mock := clock.NewMock()
	svcs := [2]*postgres.Service{
		open(t, postgres.Options{Schema: schema, Clock: mock}),
		open(t, postgres.Options{Schema: schema, Clock: mock}),
	}
	waiter, producer := svcs[0], svcs[1]
	q, _, err := waiter.CreateQueue(bg, "woken", nil)
	if err != nil {
		t.Fatal(err)
	}
	p := producer.Named("woken")

	// A Put.
	ch := receiveAsync(bg, q, 32)
	waiting(t, waiter, "woken", 1, false)
	m, err := p.Put(bg, "hello", nil)
	if err != nil {
		t.Fatal(err)
	}
	r := result(t, ch)
	if r.err != nil || len(r.msgs) != 1 || r.msgs[0].ID != m.ID {
		t.Fatalf("Receive after a Put: %+v", r)
	}

	// An Update that gives a hidden message back.
	ch = receiveAsync(bg, q, 32)
	waiting(t, waiter, "woken", 1, true) // armed for the lease's end
	if _, err := p.Update(bg, m.ID, r.msgs[0].PopReceipt, 0, nil); err != nil {
		t.Fatal(err)
	}
	r = result(t, ch)
	if r.err != nil || len(r.msgs) != 1 || r.msgs[0].ID != m.ID || r.msgs[0].DequeueCount != 2 {
		t.Fatalf("Receive after an Update: %+v", r)
	}

	// The queue's deletion.
	ch = receiveAsync(bg, q, 32)
	waiting(t, waiter, "woken", 1, true)
	if err := producer.DeleteQueue(bg, "woken"); err != nil {
		t.Fatal(err)
	}
	if r := result(t, ch); !errors.Is(r.err, azq.ErrQueueNotFound) {
		t.Fatalf("Receive after the queue's deletion: %+v", r)
	}
}

// Waiters of one queue share the messages put while they wait: each gets
// its own, none twice.
func TestReceiveManyWaiters(t *testing.T) {
	t.Parallel()
	s, mock := openMock(t)
	q := newQueue(t, s)
	other := open(t, postgres.Options{Schema: s.Schema(), Clock: mock}).Named(q.Name())
	const n = 6
	var chs []<-chan receiveResult
	for i := 0; i < n; i++ {
		chs = append(chs, receiveAsync(bg, q, 1))
	}
	waiting(t, s, q.Name(), n, false)
	for i := 0; i < n; i++ {
		if _, err := other.Put(bg, "m", nil); err != nil {
			t.Fatal(err)
		}
	}
	seen := map[azq.MessageID]bool{}
	for _, ch := range chs {
		r := result(t, ch)
		if r.err != nil || len(r.msgs) != 1 || seen[r.msgs[0].ID] {
			t.Fatalf("Receive: %+v (seen %v)", r, seen)
		}
		seen[r.msgs[0].ID] = true
	}
}

// A Receive ends with its context; the others on the queue wait on.
func TestReceiveContextEnds(t *testing.T) {
	t.Parallel()
	s, _ := openMock(t)
	q := newQueue(t, s)
	ctx, cancel := context.WithCancel(bg)
	ch := receiveAsync(ctx, q, 1)
	stays := receiveAsync(bg, q, 1)
	waiting(t, s, q.Name(), 2, false)
	cancel()
	if r := result(t, ch); !errors.Is(r.err, context.Canceled) {
		t.Fatalf("Receive after cancel: %+v", r)
	}
	waiting(t, s, q.Name(), 1, false)
	// Two messages: a statement of the cancelled Receive that was on its
	// way to the server when the context ended may still run there, and
	// take one (it comes back after its visibility timeout, as a message
	// of a Get whose answer was lost does).
	for i := 0; i < 2; i++ {
		if _, err := q.Put(bg, "m", nil); err != nil {
			t.Fatal(err)
		}
	}
	if r := result(t, stays); r.err != nil || len(r.msgs) != 1 {
		t.Fatalf("the other Receive: %+v", r)
	}
	if _, err := s.Named("no-such-queue").Receive(bg, 1, time.Minute); !errors.Is(err, azq.ErrQueueNotFound) {
		t.Fatalf("Receive on no queue: %v", err)
	}
}

// On the database's clock, as in production, a Receive wakes when a
// delayed message becomes visible. A test about the real clock: it takes
// the second the message is delayed.
func TestReceiveDatabaseClock(t *testing.T) {
	t.Parallel()
	s := open(t, postgres.Options{})
	q := newQueue(t, s)
	m, err := q.Put(bg, "later", &azq.PutOptions{VisibilityTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	got, err := q.Receive(bg, 1, time.Minute)
	if err != nil || len(got) != 1 || got[0].ID != m.ID {
		t.Fatalf("Receive: %v, %v", got, err)
	}
	if d := time.Since(start); d < 900*time.Millisecond {
		t.Fatalf("Receive returned after %v, before the message was visible", d)
	}
	if got[0].InsertionTime.Add(time.Second).After(time.Now().Add(time.Minute)) {
		t.Fatalf("times far from the real clock: %+v", got[0])
	}
}

// statementCounter counts the statements a pool sends, batches' included.
type statementCounter struct{ n atomic.Int64 }

func (c *statementCounter) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	c.n.Add(1)
	return ctx
}
func (c *statementCounter) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}
func (c *statementCounter) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	return ctx
}
func (c *statementCounter) TraceBatchQuery(context.Context, *pgx.Conn, pgx.TraceBatchQueryData) {
	c.n.Add(1)
}
func (c *statementCounter) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData) {}

// serverStatements counts the statements the server ran on schema, from
// pg_stat_statements; ok is false where the extension is not to be had.
func serverStatements(t *testing.T, pool *pgxpool.Pool, schema string) (n int64, ok bool) {
	t.Helper()
	if _, err := pool.Exec(bg, "CREATE EXTENSION IF NOT EXISTS pg_stat_statements"); err != nil {
		return 0, false
	}
	if err := pool.QueryRow(bg, "SELECT coalesce(sum(calls), 0)::bigint FROM pg_stat_statements WHERE strpos(query, $1) > 0",
		schema).Scan(&n); err != nil {
		return 0, false
	}
	return n, true
}

// A Receive that waits issues no statement while nothing changes: it is
// woken, not polled. Counted twice: by the client, every statement the
// Service's pool and its listening connection send, and by the server,
// every statement on the test's schema. A test about the real clock: it
// watches for half a second of it.
func TestIdleReceiveIssuesNoStatements(t *testing.T) {
	t.Parallel()
	srv := pgtest.Shared(t)
	schema := srv.NewSchema(t)
	cfg, err := pgxpool.ParseConfig(srv.URL())
	if err != nil {
		t.Fatal(err)
	}
	counter := &statementCounter{}
	cfg.ConnConfig.Tracer = counter
	pool, err := pgxpool.NewWithConfig(bg, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	mock := clock.NewMock()
	s, err := postgres.New(bg, pool, &postgres.Options{Schema: schema, Clock: mock})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	q, _, err := s.CreateQueue(bg, "idle", nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := q.Put(bg, "in an hour", &azq.PutOptions{VisibilityTimeout: time.Hour}); err != nil {
		t.Fatal(err)
	}
	watcher, err := pgxpool.New(bg, srv.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer watcher.Close()

	ch := receiveAsync(bg, q, 1)
	waiting(t, s, "idle", 1, true)
	client := counter.n.Load()
	server, haveServer := serverStatements(t, watcher, schema)
	time.Sleep(500 * time.Millisecond)
	notYet(t, ch)
	if n := counter.n.Load(); n != client {
		t.Errorf("an idle Receive sent %d statements", n-client)
	}
	if n, ok := serverStatements(t, watcher, schema); haveServer && ok && n != server {
		t.Errorf("the server ran %d statements on the schema while Receive waited", n-server)
	}
	if !haveServer && srv.External() {
		t.Log("pg_stat_statements is not available on this server: counted on the client only")
	} else if !haveServer {
		t.Error("pg_stat_statements is not available on the test's own server")
	}
	// The counting counts: the message's time wakes the Receive, which
	// takes it with a statement.
	mock.Add(time.Hour)
	if r := result(t, ch); r.err != nil || len(r.msgs) != 1 {
		t.Fatalf("Receive: %+v", r)
	}
	if counter.n.Load() == client {
		t.Fatal("the counter counted nothing")
	}
	if n, ok := serverStatements(t, watcher, schema); haveServer && ok && n == server {
		t.Fatal("pg_stat_statements counted nothing")
	}
	// The pool is the caller's: Close leaves it open.
	s.Close()
	if err := pool.Ping(bg); err != nil {
		t.Fatalf("the caller's pool after Close: %v", err)
	}
}

// A listening connection that the server ends is opened again: a Receive
// waiting across it is woken by a later Put, and does not fail.
func TestReceiveSurvivesTheListenerDropping(t *testing.T) {
	t.Parallel()
	s, mock := openMock(t)
	q := newQueue(t, s)
	ch := receiveAsync(bg, q, 1)
	waiting(t, s, q.Name(), 1, false)
	old := s.ListenerPID()
	if _, err := s.Pool().Exec(bg, "SELECT pg_terminate_backend($1)", old); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "the listener to reconnect", func() bool {
		pid := s.ListenerPID()
		return pid != 0 && pid != old && s.Registered(q.Name())
	})
	notYet(t, ch)
	other := open(t, postgres.Options{Schema: s.Schema(), Clock: mock}).Named(q.Name())
	if _, err := other.Put(bg, "after", nil); err != nil {
		t.Fatal(err)
	}
	if r := result(t, ch); r.err != nil || len(r.msgs) != 1 || r.msgs[0].Content != "after" {
		t.Fatalf("Receive: %+v", r)
	}
}

// When the server stops, calls fail with a DatabaseError that says the
// database is unavailable (503 ServerBusy), and a waiting Receive returns
// it; once the server is back, the same Service works again, its
// listener included, and nothing acknowledged is lost.
func TestServerRestart(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("restarts a server")
	}
	srv := pgtest.Start(t, pgtest.Options{})
	s, err := postgres.Open(bg, srv.URL(), &postgres.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	q, _, err := s.CreateQueue(bg, "restarted", nil)
	if err != nil {
		t.Fatal(err)
	}
	kept, err := q.Put(bg, "kept", &azq.PutOptions{VisibilityTimeout: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	ch := receiveAsync(bg, q, 1)
	waiting(t, s, "restarted", 1, true)
	if err := srv.Stop(); err != nil {
		t.Fatal(err)
	}
	unavailable := func(what string, err error) {
		t.Helper()
		var de *postgres.DatabaseError
		var ae *azq.Error
		if !errors.As(err, &de) || !de.Unavailable() || !errors.As(err, &ae) || ae.StatusCode != 503 {
			t.Fatalf("%s while the server is down: %v (%T), want an unavailable DatabaseError", what, err, err)
		}
		for _, s := range sentinels {
			if errors.Is(err, s) {
				t.Fatalf("%s while the server is down: %v matches %v", what, err, s)
			}
		}
	}
	unavailable("Receive", result(t, ch).err)
	unavailable("Ping", s.Ping(bg))
	_, err = q.Put(bg, "lost", nil)
	unavailable("Put", err)
	_, err = q.Receive(bg, 1, time.Minute)
	unavailable("a new Receive", err)

	if err := srv.Restart(); err != nil {
		t.Fatal(err)
	}
	// The pool finds its connections dead and makes new ones: the first
	// call may still meet one, the next succeed.
	var m azq.Message
	for i := 0; ; i++ {
		if m, err = q.Put(bg, "after", nil); err == nil {
			break
		}
		if i == 3 {
			t.Fatalf("Put after the restart: %v", err)
		}
	}
	if err := s.Ping(bg); err != nil {
		t.Fatalf("Ping after the restart: %v", err)
	}
	got, err := q.Receive(bg, 32, time.Minute)
	if err != nil || len(got) != 1 || got[0].ID != m.ID {
		t.Fatalf("Receive after the restart: %v, %v", got, err)
	}
	ch = receiveAsync(bg, q, 1)
	waiting(t, s, "restarted", 1, true)
	if _, err := s.Named("restarted").Put(bg, "woken", nil); err != nil {
		t.Fatal(err)
	}
	if r := result(t, ch); r.err != nil || len(r.msgs) != 1 || r.msgs[0].Content != "woken" {
		t.Fatalf("Receive woken after the restart: %+v", r)
	}
	if n, err := q.ApproximateCount(bg); err != nil || n != 3 {
		t.Fatalf("count %d, %v; want 3 (%v kept)", n, err, kept.ID)
	}
}

// A wake-up wakes one waiter, which passes it on as it returns: five
// messages that become visible at one instant reach five waiters, one
// each, though the timer woke one of them.
func TestReceiveWakeUpsPassOn(t *testing.T) {
	t.Parallel()
	s, mock := openMock(t)
	q := newQueue(t, s)
	const n = 5
	for i := 0; i < n; i++ {
		if _, err := q.Put(bg, "later", &azq.PutOptions{VisibilityTimeout: time.Minute}); err != nil {
			t.Fatal(err)
		}
	}
	var chs []<-chan receiveResult
	for i := 0; i < n; i++ {
		chs = append(chs, receiveAsync(bg, q, 1))
	}
	waiting(t, s, q.Name(), n, true)
	mock.Add(time.Minute)
	seen := map[azq.MessageID]bool{}
	for _, ch := range chs {
		r := result(t, ch)
		if r.err != nil || len(r.msgs) != 1 || seen[r.msgs[0].ID] {
			t.Fatalf("Receive: %+v", r)
		}
		seen[r.msgs[0].ID] = true
	}
}
