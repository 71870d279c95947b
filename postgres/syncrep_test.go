package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/azqlib/azq"
	"github.com/azqlib/azq/postgres"
	"github.com/azqlib/azq/postgres/pgtest"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgconn/ctxwatch"
	"github.com/jackc/pgx/v5/pgxpool"
)

// The tests of this file hold up a synchronous standby, so that the
// primary's commits wait for it, and end the wait with the caller's
// context. They wait on the real clock, for timeouts of a fraction of a
// second, and bound the answers loosely (slowAnswer).

// What the fix is for: PostgreSQL does not roll back a commit whose wait
// for the synchronous standby a cancel request ends, in an implicit
// transaction (one statement) as in an explicit one. It warns, and the
// statement succeeds; the row is on the primary, not on the standby.
func TestCanceledSyncCommitSucceedsInPostgres(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a primary and a standby")
	}
	primary, standby := pgtest.StartReplicated(t, pgtest.ReplicatedOptions{Synchronous: true})
	bg := context.Background()
	cfg, err := pgx.ParseConfig(primary.URL())
	if err != nil {
		t.Fatal(err)
	}
	var warnings []*pgconn.Notice
	cfg.OnNotice = func(_ *pgconn.PgConn, n *pgconn.Notice) { warnings = append(warnings, n) }
	cfg.BuildContextWatcherHandler = func(c *pgconn.PgConn) ctxwatch.Handler {
		return &pgconn.CancelRequestContextWatcherHandler{Conn: c, DeadlineDelay: slowAnswer}
	}
	conn, err := pgx.ConnectConfig(bg, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(bg)
	if _, err := conn.Exec(bg, "CREATE TABLE kept (a int)"); err != nil {
		t.Fatal(err)
	}
	if err := standby.Stop(); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		run  func(ctx context.Context) error
	}{
		{"implicit", func(ctx context.Context) error {
			_, err := conn.Exec(ctx, "INSERT INTO kept VALUES (1)")
			return err
		}},
		{"explicit", func(ctx context.Context) error {
			tx, err := conn.Begin(bg)
			if err != nil {
				return err
			}
			if _, err := tx.Exec(bg, "INSERT INTO kept VALUES (2)"); err != nil {
				return err
			}
			return tx.Commit(ctx)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			warnings = nil
			ctx, cancel := context.WithTimeout(bg, 200*time.Millisecond)
			defer cancel()
			if err := tc.run(ctx); err != nil {
				t.Fatalf("the commit whose wait was canceled: %v; PostgreSQL reports success", err)
			}
			if len(warnings) != 1 || warnings[0].Code != "01000" || warnings[0].Routine != "SyncRepWaitForLSN" {
				t.Fatalf("notices: %+v, want the warning of SyncRepWaitForLSN", warnings)
			}
		})
	}
	var n int
	if err := conn.QueryRow(bg, "SELECT count(*) FROM kept").Scan(&n); err != nil || n != 2 {
		t.Fatalf("rows on the primary: %d, %v; want both", n, err)
	}
}

// A Put whose commit waits for a synchronous standby that is down or
// frozen fails when the caller's context ends, rather than succeeding as
// PostgreSQL reports it: 500 OperationTimedOut, a DatabaseError that is
// NotReplicated, not TimedOut, nor the context's error. The message is on
// the primary (it may have been added, as the error says), the
// connection is not reused, and once the standby is back, Puts succeed.
// The statement timeout does not end the wait: only the context does, or
// the session's termination, which fails the Put as well.
func TestNotReplicatedPutFails(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a primary and a standby")
	}
	primary, standby := pgtest.StartReplicated(t, pgtest.ReplicatedOptions{Synchronous: true})
	t.Cleanup(func() { standby.Thaw() }) // if a case failed while it was frozen
	bg := context.Background()
	// How a case ends the Put's wait, once its commit waits for the
	// standby (unless the context's deadline ends it).
	const (
		byDeadline  = iota // the deadline, long enough for the commit to be reached on a loaded machine
		byCancel           // the context's cancel
		byTerminate        // pg_terminate_backend of the Put's session
	)
	for _, tc := range []struct {
		name             string
		statementTimeout time.Duration
		hold, release    func() error
		end              int
	}{
		{"deadline, standby down", 0, standby.Stop, standby.Restart, byDeadline},
		{"cancel, standby frozen", 0, standby.Freeze, standby.Thaw, byCancel},
		// Canceled after five times the statement timeout: still waiting.
		{"statement timeout, standby down", 100 * time.Millisecond, standby.Stop, standby.Restart, byCancel},
		{"terminated, standby frozen", 0, standby.Freeze, standby.Thaw, byTerminate},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := pgxpool.ParseConfig(primary.URL())
			if err != nil {
				t.Fatal(err)
			}
			cfg.MaxConns = 1 // so that the connection after the failure is its replacement
			s, err := postgres.OpenConfig(bg, cfg, &postgres.Options{Schema: "azq", StatementTimeout: tc.statementTimeout})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			ctx, cancel := context.WithTimeout(bg, time.Minute)
			defer cancel()
			q, _, err := s.CreateQueue(ctx, "replicated", nil)
			if err != nil {
				t.Fatal(err)
			}
			if err := q.Clear(ctx); err != nil {
				t.Fatal(err)
			}
			if _, err := q.Put(ctx, "confirmed", nil); err != nil {
				t.Fatalf("a Put with the standby up: %v", err)
			}
			pid := backendPID(t, s)

			if err := tc.hold(); err != nil {
				t.Fatal(err)
			}
			const deadline = 3 * time.Second
			putCtx, putCancel := context.WithTimeout(ctx, deadline)
			if tc.end != byDeadline {
				putCtx, putCancel = context.WithCancel(ctx)
			}
			defer putCancel()
			var ended <-chan error
			if tc.end == byDeadline {
				done := make(chan error, 1)
				done <- nil
				ended = done
			} else {
				ended = onSyncRepWait(ctx, primary.URL(), pid, func(conn *pgx.Conn) error {
					if tc.statementTimeout > 0 {
						time.Sleep(5 * tc.statementTimeout)
						if waiting, err := syncRepWaiting(ctx, conn, pid); err != nil || !waiting {
							return fmt.Errorf("the commit's wait after five statement timeouts: waiting %v, %v", waiting, err)
						}
					}
					if tc.end == byTerminate {
						_, err := conn.Exec(ctx, "SELECT pg_terminate_backend($1)", pid)
						return err
					}
					putCancel()
					return nil
				})
			}
			start := time.Now()
			_, err = q.Put(putCtx, "unconfirmed", nil)
			took := time.Since(start)
			if err := <-ended; err != nil {
				t.Fatal(err)
			}
			var de *postgres.DatabaseError
			var ae *azq.Error
			switch {
			case err == nil:
				t.Fatal("a Put that the standby did not confirm succeeded")
			case !errors.As(err, &de) || !de.NotReplicated() || de.TimedOut() || de.Unavailable() || !errors.Is(err, postgres.ErrNotReplicated):
				t.Fatalf("the Put: %v, want a DatabaseError of ErrNotReplicated", err)
			case errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled):
				t.Fatalf("the Put: %v, which says it took no effect", err)
			case !errors.As(err, &ae) || ae.Code != "OperationTimedOut" || ae.StatusCode != 500:
				t.Fatalf("the Put: %v, want 500 OperationTimedOut", err)
			}
			if tc.end == byDeadline && (took < deadline || took > deadline+slowAnswer) {
				t.Errorf("the Put failed after %v, want when its context ended, after %v", took, deadline)
			}
			t.Logf("the Put: %v, after %v", err, took)
			// Possibly applied: the primary has it. A Peek writes nothing,
			// and waits for no standby.
			msgs, err := q.Peek(ctx, 32)
			if err != nil {
				t.Fatal(err)
			}
			var contents []string
			for _, m := range msgs {
				contents = append(contents, m.Content)
			}
			if len(contents) != 2 || contents[1] != "unconfirmed" {
				t.Errorf("the messages on the primary: %q, want the confirmed one and the unconfirmed one", contents)
			}
			if after := backendPID(t, s); after == pid {
				t.Errorf("the connection of the failed Put (backend %d) was reused", pid)
			}

			if err := tc.release(); err != nil {
				t.Fatal(err)
			}
			if _, err := q.Put(ctx, "after", nil); err != nil {
				t.Fatalf("a Put once the standby is back: %v", err)
			}
		})
	}
}

// onSyncRepWait calls then, on a connection of its own to url, once the
// backend pid waits for a synchronous standby, and sends what then
// returned.
func onSyncRepWait(ctx context.Context, url string, pid int, then func(conn *pgx.Conn) error) <-chan error {
	ended := make(chan error, 1)
	go func() {
		ended <- func() error {
			conn, err := pgx.Connect(ctx, url)
			if err != nil {
				return err
			}
			defer conn.Close(ctx)
			if err := waitSyncRep(ctx, conn, pid); err != nil {
				return err
			}
			return then(conn)
		}()
	}()
	return ended
}

// waitSyncRep waits until the backend pid waits for a synchronous
// standby to confirm its commit, which pg_stat_activity shows.
func waitSyncRep(ctx context.Context, conn *pgx.Conn, pid int) error {
	for {
		if waiting, err := syncRepWaiting(ctx, conn, pid); err != nil || waiting {
			return err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("backend %d never waited for the standby: %w", pid, ctx.Err())
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// syncRepWaiting reports whether the backend pid waits for a synchronous
// standby to confirm its commit.
func syncRepWaiting(ctx context.Context, conn *pgx.Conn, pid int) (bool, error) {
	var waiting bool
	err := conn.QueryRow(ctx, "SELECT count(*) > 0 FROM pg_stat_activity WHERE pid = $1 AND wait_event = 'SyncRep'", pid).Scan(&waiting)
	return waiting, err
}

// backendPID returns the backend process of the connection that s's
// pool holds, its only one.
func backendPID(t *testing.T, s *postgres.Service) int {
	t.Helper()
	var pid int
	if err := s.Pool().QueryRow(context.Background(), "SELECT pg_backend_pid()").Scan(&pid); err != nil {
		t.Fatal(err)
	}
	return pid
}

// A statement of the caller's on the Service's pool, outside its
// operations, that meets a canceled wait for the synchronous standby
// leaves its connection to the pool, which drops it rather than hand it
// out again.
func TestNotReplicatedPoolDropsConnection(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a primary and a standby")
	}
	primary, standby := pgtest.StartReplicated(t, pgtest.ReplicatedOptions{Synchronous: true})
	bg := context.Background()
	cfg, err := pgxpool.ParseConfig(primary.URL())
	if err != nil {
		t.Fatal(err)
	}
	cfg.MaxConns = 1
	s, err := postgres.OpenConfig(bg, cfg, &postgres.Options{Schema: "azq"})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx, cancel := context.WithTimeout(bg, time.Minute)
	defer cancel()
	if _, err := s.Pool().Exec(ctx, "CREATE TABLE outside (a int)"); err != nil {
		t.Fatal(err)
	}
	pid := backendPID(t, s)
	if err := standby.Stop(); err != nil {
		t.Fatal(err)
	}
	execCtx, execCancel := context.WithCancel(ctx)
	defer execCancel()
	ended := onSyncRepWait(ctx, primary.URL(), pid, func(*pgx.Conn) error {
		execCancel()
		return nil
	})
	// As PostgreSQL reports it: the pool's caller sees success.
	if _, err := s.Pool().Exec(execCtx, "INSERT INTO outside VALUES (1)"); err != nil {
		t.Fatalf("the insert: %v, want PostgreSQL's success", err)
	}
	if err := <-ended; err != nil {
		t.Fatal(err)
	}
	if after := backendPID(t, s); after == pid {
		t.Errorf("the connection (backend %d) that met the warning was handed out again", pid)
	}
	if err := standby.Restart(); err != nil {
		t.Fatal(err)
	}
}
