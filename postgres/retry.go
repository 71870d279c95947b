package postgres

import (
	"context"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// querier is what an operation's statements run on: the pool, or, for a
// retry, one connection of it.
type querier interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
	SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults
	Begin(ctx context.Context) (pgx.Tx, error)
}

var (
	_ querier = (*pgxpool.Pool)(nil)
	_ querier = (*pgxpool.Conn)(nil)
)

// retry runs op, the statements of one operation, on a connection of the
// pool and, if they failed with an error that the driver reports as safe
// to retry (pgconn.SafeToRetry: nothing reached the database, as when a
// pooled connection went stale while the server restarted), runs them
// once more on a connection that answers a ping. op returns the driver's
// error; it must set its results afresh when run again.
//
// Every operation's statements pass through it, so that none reports
// success for a commit that a synchronous standby did not confirm (see
// run).
func (s *Service) retry(ctx context.Context, op func(db querier) error) error {
	conn, err := s.pool.Acquire(ctx)
	if err == nil {
		err = run(ctx, conn, op)
		conn.Release()
	}
	if err == nil || !pgconn.SafeToRetry(err) || ctx.Err() != nil {
		return err
	}
	conn, cerr := s.liveConn(ctx)
	if cerr != nil {
		return cerr
	}
	defer conn.Release()
	return run(ctx, conn, op)
}

// run runs op on conn. If a commit of op's waited for a synchronous
// standby and the wait was canceled (see ConfigurePool), it returns the
// DatabaseError of ErrNotReplicated, whatever op returned, and closes the
// connection, which the pool then drops: PostgreSQL reports such a commit
// as a success.
func run(ctx context.Context, conn *pgxpool.Conn, op func(db querier) error) error {
	err := op(conn)
	if pc := conn.Conn().PgConn(); takeUnreplicated(pc) {
		// Bounded, and not by ctx, which may have ended: the connection
		// closes whatever the server answers.
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cancelWait)
		pc.Close(cctx)
		cancel()
		return errNotReplicated()
	}
	return err
}

// liveConn acquires a connection of the pool that answers a ping. One
// that does not is closed, and the pool drops it on release; after a
// restart of the server, every idle connection may be stale, so it tries
// as many as the pool holds, then one more, which the pool makes anew.
func (s *Service) liveConn(ctx context.Context) (*pgxpool.Conn, error) {
	var err error
	for range int(s.pool.Config().MaxConns) + 1 {
		var c *pgxpool.Conn
		if c, err = s.pool.Acquire(ctx); err != nil {
			return nil, err
		}
		if err = c.Ping(ctx); err == nil {
			return c, nil
		}
		if !c.Conn().IsClosed() {
			// It answered, with an error: the database's, not the
			// connection's.
			c.Release()
			return nil, err
		}
		c.Release()
	}
	return nil, err
}
