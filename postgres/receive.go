package postgres

import (
	"context"
	"time"

	"github.com/azqlib/azq"
	"github.com/benbjohnson/clock"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
)

// Receive is Get that waits, as azq.Queue.Receive does: it returns as
// soon as at least one message is visible, taking up to n of them with
// the given visibility timeout, or returns ctx.Err() when ctx ends. It
// does not poll. While nothing is visible it issues no statement: it is
// woken by a notification (LISTEN/NOTIFY) when a Put or an Update of any
// process makes a message visible, or by a timer on the Service's clock
// when the earliest delayed or hidden message becomes visible, and then
// looks again. With a mock clock it returns at the mock instant at which
// a message becomes visible.
//
// It returns ErrQueueNotFound if the queue is deleted while it waits, and
// the database's error (a *DatabaseError) if a look fails; a listening
// connection that drops is re-established without failing it. If ctx
// ends while a look is on its way, the database may still complete it:
// the messages it took come back after the visibility timeout, as those
// of a Get to Azure whose answer was lost do.
func (q *Queue) Receive(ctx context.Context, n int, visibility time.Duration) (msgs []azq.Message, err error) {
	s := q.svc
	defer func() {
		// A Close while a look was on its way fails the look with the
		// closed pool's error; the caller is told what Close means.
		if err != nil && s.closed.Load() {
			msgs, err = nil, errClosed
		}
	}()
	if err := s.limits.CheckGet(n, visibility); err != nil {
		return nil, err
	}
	if err := s.check(ctx); err != nil {
		return nil, err
	}
	// A busy queue answers at once, without the set-up of a wait.
	msgs, err = q.get(ctx, nil, n, visibility)
	if err != nil || len(msgs) > 0 {
		return msgs, err
	}
	ws := s.enter(q.name)
	defer s.leave(ws)
	var pause time.Duration // for messages that another Get holds locked
	// woken is set while this call holds a wake-up it has not answered
	// with a look that found nothing: if it returns holding one, it
	// passes it on (see awake).
	woken := false
	for {
		if err := s.check(ctx); err != nil {
			s.pass(ws, woken)
			return nil, err
		}
		if err := s.register(ctx, ws); err != nil {
			s.pass(ws, woken)
			return nil, err
		}
		// Asleep from before the look: a change committed after it
		// wakes this call, or another one.
		s.mu.Lock()
		sl := ws.sleep()
		s.mu.Unlock()
		msgs, err = q.get(ctx, nil, n, visibility)
		if err != nil || len(msgs) > 0 {
			s.awake(ws, sl, true, woken)
			return msgs, err
		}
		woken = false // what woke it, if anything, is gone
		before := s.timerClock.Now()
		res, err := q.nextVisible(ctx)
		if err != nil {
			s.awake(ws, sl, true, false)
			return nil, err
		}
		var paused <-chan time.Time
		switch {
		case res.next == 0:
			// An empty queue: only a Put wakes it.
		case res.next <= res.now:
			// Visible, yet not taken: another Get holds the messages
			// locked for the moment its statement takes, after which
			// they are hidden (or, if it failed, visible again). No
			// notification follows a Get, so look again shortly, on
			// the real clock: this is about the other statement's
			// duration, not the queue's time.
			pause = min(max(2*pause, time.Millisecond), 100*time.Millisecond)
			paused = time.After(pause)
		default:
			pause = 0
			at := res.next // on the Service's clock
			if s.clock == nil {
				// The database's time: as far ahead of the local clock
				// as the message is of the database's time now. Reading
				// the local clock before the statement errs early, by
				// the statement's duration, which costs one more look.
				at = addNanos(clockNanos(before), time.Duration(res.next-res.now))
			}
			s.mu.Lock()
			s.wakeAt(ws, at)
			s.mu.Unlock()
		}
		select {
		case <-ctx.Done():
			s.awake(ws, sl, true, false)
			return nil, ctx.Err()
		case <-s.closing:
			return nil, errClosed
		case <-sl.woken:
		case <-paused:
		}
		// Woken, or done pausing: look again (and sleep again first).
		woken = s.awake(ws, sl, false, false)
	}
}

// sleeper is a Receive call asleep on its queue: a wake-up closes woken.
type sleeper struct {
	woken chan struct{}
	done  bool // woken has been closed; s.mu guards it
}

// awake takes sl out of the sleepers of ws, as its call looks again
// (returning unset) or returns (returning set), and reports whether sl
// had been woken. A call that returns holding a wake-up (sl's, or held
// is set: one from before its last look, which found something) passes
// it on to another sleeper: it cannot tell whether what woke it is what
// its look found, or a later change that it leaves for the others.
func (s *Service) awake(ws *waitSet, sl *sleeper, returning, held bool) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !sl.done {
		for i, o := range ws.sleepers {
			if o == sl {
				ws.sleepers = append(ws.sleepers[:i], ws.sleepers[i+1:]...)
				break
			}
		}
	}
	if returning && (sl.done || held) {
		ws.wakeOne()
	}
	return sl.done
}

// pass passes on the wake-up a returning call holds, if held.
func (s *Service) pass(ws *waitSet, held bool) {
	if held {
		s.mu.Lock()
		ws.wakeOne()
		s.mu.Unlock()
	}
}

// nextResult is what nextVisible learned.
type nextResult struct {
	now  int64 // the time the statement ran at
	next int64 // the earliest next-visible time of an unexpired message
	// (maybe <= now, for messages that another Get held locked); 0 if
	// the queue has no message
}

// nextVisible looks up when the queue's first message becomes visible.
func (q *Queue) nextVisible(ctx context.Context) (nextResult, error) {
	var id, now, next pgtype.Int8
	if err := q.svc.retry(ctx, func(db querier) error {
		return db.QueryRow(ctx, q.svc.sql.nextVisible, q.name, q.svc.now()).Scan(&id, &now, &next)
	}); err != nil {
		return nextResult{}, dbError(ctx, err)
	}
	if !id.Valid {
		return nextResult{}, queueNotFound(q.name)
	}
	return nextResult{now: now.Int64, next: next.Int64}, nil
}

// addNanos returns t+d, saturating below neverExpires.
func addNanos(t int64, d time.Duration) int64 {
	if int64(d) > neverExpires-1-t {
		return neverExpires - 1
	}
	return t + int64(d)
}

// waitSet is the Receive calls of one Service waiting on one queue name.
// The Service's mu guards its fields but the registration's.
type waitSet struct {
	name     string
	waiters  int        // Receive calls on the queue, asleep or looking
	sleepers []*sleeper // the calls asleep, oldest first
	// One timer serves the waiters of the queue, as in the in-memory
	// queue: armed for the earliest next-visible time any of them saw.
	timer    *clock.Timer
	timerAt  int64 // Unix nanoseconds on the Service's timer clock
	timerGen uint64
	// idle unregisters the queue a while after its last waiter left.
	idle *time.Timer

	// The registration in the waiters table, which makes Puts and
	// Updates of the queue notify: regMu serializes registering and
	// unregistering and guards the fields after it.
	regMu  chanMutex
	regGen uint64 // the listener's connection it was made for; 0: none
	regPid uint32 // that connection's backend
}

// chanMutex is a mutex whose Lock can give up when a context ends: a
// registration waits for the listener to connect.
type chanMutex chan struct{}

func newChanMutex() chanMutex { return make(chanMutex, 1) }

func (m chanMutex) lock(ctx context.Context) error {
	select {
	case m <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (m chanMutex) unlock() { <-m }

// sleep adds a sleeper to ws. s.mu must be held.
func (ws *waitSet) sleep() *sleeper {
	sl := &sleeper{woken: make(chan struct{})}
	ws.sleepers = append(ws.sleepers, sl)
	return sl
}

// wakeOne wakes the oldest sleeper of ws, which then looks at the queue
// again: a notification or a timer means that a message may be visible,
// and waking every sleeper for it would send as many Gets to the
// database, all but one of them for nothing. A woken call that returns
// passes the wake-up on (see awake); if nobody sleeps, every call is
// about to look. s.mu must be held.
func (ws *waitSet) wakeOne() {
	if len(ws.sleepers) == 0 {
		return
	}
	sl := ws.sleepers[0]
	ws.sleepers = ws.sleepers[1:]
	sl.done = true
	close(sl.woken)
}

// wakeWaiters wakes every sleeper of ws: after the listener reconnected,
// and at Close. s.mu must be held.
func (ws *waitSet) wakeWaiters() {
	for _, sl := range ws.sleepers {
		sl.done = true
		close(sl.woken)
	}
	ws.sleepers = nil
}

// stopTimer disarms the timer, if armed. s.mu must be held.
func (ws *waitSet) stopTimer() {
	if ws.timer != nil {
		ws.timer.Stop()
		ws.timer = nil
		ws.timerGen++
	}
}

// stop disarms both timers, at Close. s.mu must be held.
func (ws *waitSet) stop() {
	ws.stopTimer()
	if ws.idle != nil {
		ws.idle.Stop()
		ws.idle = nil
	}
	ws.wakeWaiters()
}

// wakeAt makes sure that the waiters of ws are woken by the time at (Unix
// nanoseconds on the Service's timer clock), as azq.Queue's wakeAt does.
// s.mu must be held.
func (s *Service) wakeAt(ws *waitSet, at int64) {
	if ws.timer != nil && ws.timerAt <= at {
		return
	}
	ws.stopTimer()
	for {
		now := clockNanos(s.timerClock.Now())
		if at <= now {
			ws.wakeOne()
			return
		}
		ws.timerGen++
		gen := ws.timerGen
		// A callback rather than a Timer's channel, and a generation, for
		// the reasons azq.Queue's wakeAt gives: a mock clock that another
		// goroutine moves may fire a timer twice.
		t := s.timerClock.AfterFunc(time.Duration(at-now), func() {
			s.mu.Lock()
			if ws.timerGen == gen {
				ws.timer = nil
				ws.wakeOne()
			}
			s.mu.Unlock()
		})
		// A mock clock may have moved between reading now and arming the
		// timer, which would then fire late by that much: arm it again.
		if s.mock != nil && clockNanos(s.timerClock.Now()) != now {
			t.Stop()
			continue
		}
		ws.timer, ws.timerAt = t, at
		return
	}
}

// notify wakes the Services waiting on the queue name, after a Put or
// Update of it committed (see sqlNotify). The change is made whatever
// becomes of the notification; if it fails, which takes a database
// failing between the two statements, or the process dying between them,
// the waiters learn of the change at the next notification of the queue,
// or when the listener reconnects.
func (s *Service) notify(ctx context.Context, name string) {
	ctx, cancel := cleanupContext(ctx)
	defer cancel()
	s.retry(ctx, func(db querier) error {
		_, err := db.Exec(ctx, s.sql.notify, s.channel, name)
		return err
	})
}

// wake wakes a waiter of the queue name, for a notification.
func (s *Service) wake(name string) {
	s.mu.Lock()
	if ws := s.waits[name]; ws != nil {
		ws.wakeOne()
	}
	s.mu.Unlock()
}

// wakeAll wakes every waiter of the Service: notifications may have been
// missed while the listening connection was down.
func (s *Service) wakeAll() {
	s.mu.Lock()
	for _, ws := range s.waits {
		ws.wakeWaiters()
	}
	s.mu.Unlock()
}

// enter adds a waiter on the queue name.
func (s *Service) enter(name string) *waitSet {
	s.mu.Lock()
	defer s.mu.Unlock()
	ws := s.waits[name]
	if ws == nil {
		ws = &waitSet{name: name, regMu: newChanMutex()}
		s.waits[name] = ws
	}
	ws.waiters++
	if ws.idle != nil {
		ws.idle.Stop()
		ws.idle = nil
	}
	return ws
}

// unregisterAfter is how long a queue stays registered after its last
// waiter left: a consumer that calls Receive in a loop leaves and comes
// back at once, and the registration would otherwise come and go with
// every message. While it stays, the queue's Puts notify, as they would
// for a waiter.
const unregisterAfter = 2 * time.Second

// leave removes a waiter. The last one to leave disarms the timer and
// arms the one that will unregister the queue (on the real clock: it is
// about the database's work, not the queue's time).
func (s *Service) leave(ws *waitSet) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ws.waiters--
	if ws.waiters > 0 {
		return
	}
	ws.stopTimer()
	if s.closed.Load() {
		return
	}
	ws.idle = time.AfterFunc(unregisterAfter, func() { s.unregister(ws) })
}

// unregister removes the registration of ws, if nobody waits on it, and
// forgets ws.
func (s *Service) unregister(ws *waitSet) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if ws.regMu.lock(ctx) != nil {
		return
	}
	defer ws.regMu.unlock()
	s.mu.Lock()
	idle := ws.waiters == 0 && !s.closed.Load()
	s.mu.Unlock()
	if !idle {
		return
	}
	if ws.regGen != 0 {
		// A failure leaves a row that makes Puts notify needlessly until
		// the listener of some Service next connects and clears it.
		s.retry(ctx, func(db querier) error {
			_, err := db.Exec(ctx, s.sql.unregisterWaiter, ws.name, ws.regPid)
			return err
		})
		ws.regGen, ws.regPid = 0, 0
	}
	s.mu.Lock()
	if ws.waiters == 0 && s.waits[ws.name] == ws {
		delete(s.waits, ws.name)
	}
	s.mu.Unlock()
}

// register makes sure the queue of ws is registered for the listener's
// current connection, so that Puts and Updates of it notify. It returns
// once a Put or Update that did not see the registration has committed,
// so the caller's next look at the queue sees what such a Put added (see
// lockQueue).
func (s *Service) register(ctx context.Context, ws *waitSet) error {
	lis := s.listener()
	if err := ws.regMu.lock(ctx); err != nil {
		return err
	}
	defer ws.regMu.unlock()
	pid, gen, err := lis.wait(ctx, s.closing)
	if err != nil {
		return err
	}
	if ws.regGen == gen {
		return nil
	}
	if err := s.retry(ctx, func(db querier) error {
		b := &pgx.Batch{}
		b.Queue(s.sql.registerWaiter, ws.name, pid)
		b.Queue(s.sql.lockQueueExclusive, s.keys.queueClass, s.keys.queue(ws.name))
		return db.SendBatch(ctx, b).Close()
	}); err != nil {
		return dbError(ctx, err)
	}
	ws.regGen, ws.regPid = gen, pid
	return nil
}

// listener returns the Service's listener, starting it on first use.
func (s *Service) listener() *listener {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.lis == nil {
		s.lis = startListener(s)
	}
	return s.lis
}
