package postgres

import (
	"context"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
)

// listener is a Service's one listening connection: it LISTENs on the
// schema's channel, on which Puts and Updates (and DeleteQueue) of any
// process name the queue they changed, and wakes the Service's waiters on
// that queue. It runs in a goroutine of its own from the first Receive
// that waits until Close, and reconnects when the connection drops: the
// waiters are woken then, as notifications may have been missed, and
// register again for the new connection.
type listener struct {
	s      *Service
	cancel context.CancelFunc
	done   chan struct{} // closed when run returns

	mu      sync.Mutex    // guards the fields below
	pid     uint32        // backend of the connection while it listens; 0 while down
	gen     uint64        // counts the connections that listened
	err     error         // why the listener is down, once an attempt to connect failed
	changed chan struct{} // closed, and replaced, when the fields above change

	kick chan struct{} // cuts short the wait before the next attempt to connect
}

func startListener(s *Service) *listener {
	ctx, cancel := context.WithCancel(context.Background())
	l := &listener{s: s, cancel: cancel, done: make(chan struct{}), changed: make(chan struct{}), kick: make(chan struct{}, 1)}
	go l.run(ctx)
	return l
}

// wait returns the backend process id and the generation of the
// connection once it listens. While it is down after a failure to
// connect, wait has the listener try again at once and returns that
// attempt's error if it fails too: a database that is down is reported,
// not waited for, and one that is back is used without waiting out the
// listener's backoff.
func (l *listener) wait(ctx context.Context, closing <-chan struct{}) (uint32, uint64, error) {
	kicked := false
	for {
		l.mu.Lock()
		pid, gen, err, changed := l.pid, l.gen, l.err, l.changed
		l.mu.Unlock()
		switch {
		case pid != 0:
			return pid, gen, nil
		case err != nil && kicked:
			return 0, 0, dbError(ctx, err)
		case err != nil:
			select {
			case l.kick <- struct{}{}:
			default: // an attempt is due already
			}
			kicked = true
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return 0, 0, ctx.Err()
		case <-closing:
			return 0, 0, errClosed
		}
	}
}

// set records the state of the connection: pid while it listens, else
// why it does not.
func (l *listener) set(pid uint32, err error) {
	l.mu.Lock()
	l.pid, l.err = pid, err
	if pid != 0 {
		l.gen++
	}
	close(l.changed)
	l.changed = make(chan struct{})
	l.mu.Unlock()
}

func (l *listener) run(ctx context.Context) {
	defer close(l.done)
	var backoff time.Duration
	for {
		conn, err := l.connect(ctx)
		if ctx.Err() != nil {
			if conn != nil {
				l.hangUp(conn)
			}
			return
		}
		if err != nil {
			l.set(0, err)
			// Try again soon, then less and less often, on the real
			// clock: this is about the database, not the queue's time.
			backoff = min(max(2*backoff, 50*time.Millisecond), 5*time.Second)
			t := time.NewTimer(backoff)
			select {
			case <-ctx.Done():
				t.Stop()
				return
			case <-l.kick:
			case <-t.C:
			}
			t.Stop()
			continue
		}
		backoff = 0
		l.set(conn.PgConn().PID(), nil)
		l.s.wakeAll()
		l.listen(ctx, conn) // until the connection fails or ctx ends
		l.hangUp(conn)
		if ctx.Err() != nil {
			return
		}
		// Down, but not failed yet: the waiters, woken, wait for the
		// attempt to connect again that follows at once, and fail only
		// if it fails.
		l.set(0, nil)
		l.s.wakeAll()
	}
}

// connect opens the listening connection, LISTENs, and clears the
// waiters table of the rows of backends that are gone.
func (l *listener) connect(ctx context.Context) (*pgx.Conn, error) {
	conn, err := pgx.ConnectConfig(ctx, l.s.pool.Config().ConnConfig)
	if err != nil {
		return nil, err
	}
	if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{l.s.channel}.Sanitize()); err != nil {
		conn.Close(context.Background())
		return nil, err
	}
	if _, err := conn.Exec(ctx, l.s.sql.forgetWaiters, conn.PgConn().PID()); err != nil {
		conn.Close(context.Background())
		return nil, err
	}
	return conn, nil
}

// listen dispatches notifications until the connection fails or ctx
// ends.
func (l *listener) listen(ctx context.Context, conn *pgx.Conn) {
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			return
		}
		l.s.wake(n.Payload)
	}
}

// hangUp closes the connection, first removing the rows that registered
// it, so that Puts stop notifying for it at once.
func (l *listener) hangUp(conn *pgx.Conn) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if !conn.IsClosed() {
		conn.Exec(ctx, "DELETE FROM "+pgx.Identifier{l.s.schema}.Sanitize()+".waiters WHERE pid = pg_backend_pid()")
	}
	conn.Close(ctx)
}

// close stops the listener and waits until its goroutine has returned.
func (l *listener) close() {
	l.cancel()
	<-l.done
}
