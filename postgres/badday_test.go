package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/azqlib/azq"
	"github.com/azqlib/azq/postgres"
	"github.com/azqlib/azq/postgres/pgtest"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// The tests of this file are of a database on a bad day: locked, frozen,
// a standby. They wait on the real clock, for timeouts of a fraction of
// a second, and bound the answers loosely, so that a busy machine does
// not fail them.

// slowAnswer is the longest an operation may take to give up, on a
// loaded machine, beyond the timeout it was given.
const slowAnswer = 10 * time.Second

// lockTable holds an ACCESS EXCLUSIVE lock on the table of s's schema in
// a session of its own, as a migration or an operator's LOCK TABLE does,
// until the returned function rolls it back.
func lockTable(t *testing.T, s *postgres.Service, table string) (release func()) {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, pgtest.Shared(t).URL())
	if err != nil {
		t.Fatal(err)
	}
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, "LOCK TABLE "+pgx.Identifier{s.Schema(), table}.Sanitize()+" IN ACCESS EXCLUSIVE MODE"); err != nil {
		t.Fatal(err)
	}
	done := false
	release = func() {
		if !done {
			done = true
			tx.Rollback(ctx)
			conn.Close(ctx)
		}
	}
	t.Cleanup(release)
	return release
}

// settled waits until no session but the caller's runs a statement on
// s's schema: a statement that the database did not cancel, which waited
// on a lock, has run to its end by then.
func settled(t *testing.T, s *postgres.Service) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for {
		var n int
		err := s.Pool().QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
			WHERE pid <> pg_backend_pid() AND state <> 'idle' AND position($1 in query) > 0`, s.Schema()).Scan(&n)
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// count returns the number of messages in q, failing t on error.
func count(t *testing.T, q *postgres.Queue) int {
	t.Helper()
	n, err := q.ApproximateCount(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// A Put whose context ends while it waits on a lock gives up at once, and
// is not applied: the database cancels its statement, which would
// otherwise insert the message once the lock is released, after the
// caller was told that the Put failed.
func TestTimedOutPutIsNotApplied(t *testing.T) {
	srv := pgtest.Shared(t)
	// One connection, so that the Put before has the statements prepared
	// on the connection of the Put that waits.
	s, err := postgres.Open(context.Background(), srv.URL()+"&pool_max_conns=1", &postgres.Options{Schema: srv.NewSchema(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	q := newQueue(t, s)
	// A Put before, so that the connection has the statement prepared
	// and the next one sends it at once, to wait on the lock.
	if _, err := q.Put(context.Background(), "before", nil); err != nil {
		t.Fatal(err)
	}
	release := lockTable(t, s, "queues")
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err = q.Put(ctx, "late", nil)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Put on a locked table: %v, want the context's deadline", err)
	}
	if took := time.Since(start); took > slowAnswer {
		t.Errorf("Put gave up after %v", took)
	}
	release()
	settled(t, s)
	if n := count(t, q); n != 1 {
		t.Errorf("%d messages after a Put and one that failed, want 1", n)
	}
}

// The lock timeout ends an operation that waits on a lock whatever its
// context: 500 OperationTimedOut, with a message that says only that, and
// nothing applied.
func TestLockTimeout(t *testing.T) {
	s := open(t, postgres.Options{LockTimeout: 200 * time.Millisecond})
	q := newQueue(t, s)
	release := lockTable(t, s, "queues")
	ctx := context.Background()
	for _, op := range []struct {
		name string
		do   func() error
	}{
		{"Put", func() error { _, err := q.Put(ctx, "late", nil); return err }},
		{"Get", func() error { _, err := q.Get(ctx, 1, time.Minute); return err }},
		{"Peek", func() error { _, err := q.Peek(ctx, 1); return err }},
		{"ListQueues", func() error { _, err := s.ListQueues(ctx, azq.ListQueuesOptions{}); return err }},
	} {
		start := time.Now()
		err := op.do()
		took := time.Since(start)
		var de *postgres.DatabaseError
		var ae *azq.Error
		if !errors.As(err, &de) || !de.TimedOut() || !errors.As(err, &ae) || ae.Code != "OperationTimedOut" || ae.StatusCode != 500 {
			t.Errorf("%s on a locked table: %v, want 500 OperationTimedOut", op.name, err)
			continue
		}
		if ae.Message != "the database did not complete the operation in time" {
			t.Errorf("%s: message %q", op.name, ae.Message)
		}
		if took > slowAnswer {
			t.Errorf("%s gave up after %v", op.name, took)
		}
	}
	release()
	settled(t, s)
	if n := count(t, q); n != 0 {
		t.Errorf("%d messages after a Put that timed out, want 0", n)
	}
}

// The statement and lock timeouts are the Options', else the URL's, else
// the defaults; negative is none.
func TestTimeoutSettings(t *testing.T) {
	srv := pgtest.Shared(t)
	withParams := srv.URL() + "&statement_timeout=1234&lock_timeout=567"
	for _, c := range []struct {
		name          string
		url           string
		opts          postgres.Options
		stmt, lockVal string
	}{
		{"defaults", srv.URL(), postgres.Options{}, "30s", "10s"},
		{"URL", withParams, postgres.Options{}, "1234ms", "567ms"},
		{"options", withParams, postgres.Options{StatementTimeout: 2 * time.Second, LockTimeout: 1500 * time.Millisecond}, "2s", "1500ms"},
		{"none", srv.URL(), postgres.Options{StatementTimeout: -1, LockTimeout: -1}, "0", "0"},
	} {
		t.Run(c.name, func(t *testing.T) {
			c.opts.Schema = srv.NewSchema(t)
			s, err := postgres.Open(context.Background(), c.url, &c.opts)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			var stmt, lockVal string
			if err := s.Pool().QueryRow(context.Background(), "SELECT current_setting('statement_timeout'), current_setting('lock_timeout')").Scan(&stmt, &lockVal); err != nil {
				t.Fatal(err)
			}
			if stmt != c.stmt || lockVal != c.lockVal {
				t.Errorf("statement_timeout %s, lock_timeout %s; want %s, %s", stmt, lockVal, c.stmt, c.lockVal)
			}
		})
	}
}

// A server that stops answering (its processes stopped, connections
// open) holds no operation past its context, nor the ping; once it
// resumes, the operations work again.
func TestFrozenServer(t *testing.T) {
	srv := pgtest.Start(t, pgtest.Options{})
	s, err := postgres.Open(context.Background(), srv.URL(), &postgres.Options{Schema: "azq"})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	q, _, err := s.CreateQueue(context.Background(), "frozen", nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Freeze(); err != nil {
		t.Fatal(err)
	}
	thawed := false
	defer func() {
		if !thawed {
			srv.Thaw()
		}
	}()
	for _, op := range []struct {
		name string
		do   func(ctx context.Context) error
	}{
		{"Put", func(ctx context.Context) error { _, err := q.Put(ctx, "m", nil); return err }},
		{"Get", func(ctx context.Context) error { _, err := q.Get(ctx, 1, time.Minute); return err }},
		{"Peek", func(ctx context.Context) error { _, err := q.Peek(ctx, 1); return err }},
		{"ListQueues", func(ctx context.Context) error { _, err := s.ListQueues(ctx, azq.ListQueuesOptions{}); return err }},
		{"Ping", s.Ping},
	} {
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		start := time.Now()
		err := op.do(ctx)
		took := time.Since(start)
		cancel()
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("%s on a frozen server: %v, want the context's deadline", op.name, err)
		}
		if took > slowAnswer {
			t.Errorf("%s on a frozen server gave up after %v", op.name, took)
		}
	}
	if err := srv.Thaw(); err != nil {
		t.Fatal(err)
	}
	thawed = true
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := q.Put(ctx, "after", nil); err != nil {
		t.Fatalf("Put after the server resumed: %v", err)
	}
	if err := s.Ping(ctx); err != nil {
		t.Fatalf("Ping after the server resumed: %v", err)
	}
}

// A URL of two hosts, without target_session_attrs=read-write, reaches
// the standby when the primary is down: its writes are refused, which is
// 503 ServerBusy (the SDKs retry it) rather than a 500, with a message
// that says only that, and the ping says the database is unavailable.
func TestStandbyIsUnavailable(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a primary and a standby")
	}
	primary, standby := pgtest.StartReplicated(t, pgtest.ReplicatedOptions{})
	// Both servers' sockets, in order: the primary's while it is up.
	cfg, err := pgxpool.ParseConfig(fmt.Sprintf("host=%s,%s port=%d,%d user=postgres dbname=postgres sslmode=disable",
		primary.Host(), standby.Host(), primary.Port(), standby.Port()))
	if err != nil {
		t.Fatal(err)
	}
	s, err := postgres.OpenConfig(context.Background(), cfg, &postgres.Options{Schema: "azq"})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	q, _, err := s.CreateQueue(ctx, "replicated", nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Ping(ctx); err != nil {
		t.Fatalf("Ping on the primary: %v", err)
	}
	// Wait until the standby has the queue.
	for {
		conn, err := pgx.Connect(ctx, standby.URL())
		if err != nil {
			t.Fatal(err)
		}
		var n int
		err = conn.QueryRow(ctx, "SELECT count(*) FROM azq.queues WHERE name = 'replicated'").Scan(&n)
		conn.Close(ctx)
		if err == nil && n == 1 {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("the standby never had the queue: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := primary.Stop(); err != nil {
		t.Fatal(err)
	}
	// The pool's connections to the primary fail first (503 as well);
	// then a new one reaches the standby.
	var refused error
	for i := 0; i < 50 && refused == nil; i++ {
		_, err := q.Put(ctx, "to a standby", nil)
		var pe *pgconn.PgError
		if errors.As(err, &pe) {
			refused = err
		} else if err == nil {
			t.Fatal("a Put succeeded on the standby")
		}
	}
	if refused == nil {
		t.Fatal("no Put reached the standby")
	}
	var de *postgres.DatabaseError
	var ae *azq.Error
	if !errors.As(refused, &de) || !de.Unavailable() || !errors.As(refused, &ae) || ae.Code != "ServerBusy" || ae.StatusCode != 503 {
		t.Errorf("a Put on the standby: %v, want 503 ServerBusy", refused)
	} else if strings.Contains(ae.Message, "SQLSTATE") || strings.Contains(ae.Message, "/") {
		t.Errorf("the Put's message says more than that the database is unavailable: %q", ae.Message)
	}
	err = s.Ping(ctx)
	if !errors.As(err, &de) || !de.Unavailable() {
		t.Errorf("Ping on the standby: %v, want an unavailable DatabaseError", err)
	}
}
