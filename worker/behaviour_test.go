package worker

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/azqlib/azq"
)

// A source that implements Receiver is waited on, never polled: idle, the
// worker reports no poll waits however far the clock moves, and a Put is
// handled at once, without the clock moving at all.
func TestReceiverIsWaitedOnNotPolled(t *testing.T) {
	e := newEnv(t)
	rq := &recvQueue{Queue: e.q, rec: e.rec}
	w := New(rq, func(ctx context.Context, d *Delivery) error { return nil }, Options{OnEvent: e.rec.on})
	r := start(w)
	e.rec.waitFor(t, "the worker to wait in Receive", func() bool { return rq.receives.Load() >= 1 })
	e.mock.Add(10 * DefaultMaxPollInterval)
	if n := len(e.rec.of(EventPollWait)); n != 0 || rq.gets.Load() != 0 || rq.receives.Load() != 1 {
		t.Fatalf("idle: %d poll waits, %d gets, %d receives; want 0, 0, 1", n, rq.gets.Load(), rq.receives.Load())
	}

	now := e.mock.Now()
	e.put("wake")
	ev := e.rec.waitEvents(t, EventSucceeded, 1)[0]
	e.rec.waitFor(t, "the worker to wait again", func() bool { return rq.receives.Load() >= 2 })
	if err := r.stop(t); err != nil {
		t.Fatal(err)
	}
	if !ev.Time.Equal(now) || !e.mock.Now().Equal(now) {
		t.Fatalf("handled at %v, clock at %v; want both at %v", ev.Time, e.mock.Now(), now)
	}
	if n := len(e.rec.of(EventPollWait)); n != 0 || rq.gets.Load() != 0 {
		t.Fatalf("%d poll waits and %d gets for a Receiver", n, rq.gets.Load())
	}
}

// The logger gets one record per event, at the level events.go assigns:
// debug for the routine progress events, info for the outcomes (and the
// start of shutdown), warn for failures.
func TestLoggerLevels(t *testing.T) {
	var buf bytes.Buffer
	e := newEnv(t)
	logger := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	w := New(e.q, func(context.Context, *Delivery) error { return nil }, Options{Logger: logger})
	id := e.put("m").ID
	boom := errors.New("boom")
	for _, tc := range []struct {
		kind  EventKind
		level string
	}{
		{EventFetched, "DEBUG"},
		{EventPollWait, "DEBUG"},
		{EventRenewed, "DEBUG"},
		{EventSucceeded, "INFO"},
		{EventReleased, "INFO"},
		{EventStopping, "INFO"},
		{EventRenewFailed, "WARN"},
		{EventRetry, "WARN"},
		{EventPoisoned, "WARN"},
		{EventLeaseLost, "WARN"},
		{EventAbandoned, "WARN"},
	} {
		buf.Reset()
		w.emit(Event{Kind: tc.kind, MessageID: id, DequeueCount: 2, N: 3, Wait: time.Second, Err: boom})
		line := buf.String()
		want := "level=" + tc.level + ` msg="worker: ` + tc.kind.String() + `" queue=jobs message_id=` + id.String() + " dequeue_count=2"
		if strings.Count(line, "\n") != 1 || !strings.Contains(line, want) || !strings.Contains(line, "error=boom") {
			t.Errorf("%v logged %q, want a line with %q", tc.kind, line, want)
		}
		if has := strings.Contains(line, " n=3"); has != (tc.kind == EventFetched || tc.kind == EventStopping) {
			t.Errorf("%v: n attribute present %v in %q", tc.kind, has, line)
		}
		if has := strings.Contains(line, " wait=1s"); has != (tc.kind == EventPollWait || tc.kind == EventStopping) {
			t.Errorf("%v: wait attribute present %v in %q", tc.kind, has, line)
		}
	}

	// End to end at info: a failure and then a success are logged, the
	// fetches are not. One handler goroutine, so that the order of the
	// lines is the order of the work: the retry's Update makes the message
	// visible before its event is reported, and with more goroutines
	// another could fetch it, succeed and log that first (and the test
	// could stop the worker while the retry was still in flight, which
	// logs the start of shutdown), as a loaded machine showed.
	buf.Reset()
	var calls atomic.Int32
	w = New(e.q, func(context.Context, *Delivery) error {
		if calls.Add(1) == 1 {
			return boom
		}
		return nil
	}, Options{Concurrency: 1, OnEvent: e.rec.on, Logger: slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelInfo}))})
	r := start(w)
	e.rec.waitEvents(t, EventSucceeded, 1)
	if err := r.stop(t); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 2 || !strings.Contains(lines[0], `level=WARN msg="worker: retry"`) ||
		!strings.Contains(lines[0], "error=boom") || !strings.Contains(lines[1], `level=INFO msg="worker: succeeded"`) {
		t.Fatalf("log at info:\n%s", buf.String())
	}
}

// A polled source is polled again at once after a batch that filled the
// request, and after MinPollInterval after a partial one.
//
// Functions waits its minimum interval (100 ms) after every batch that had
// messages, full or not. The worker deliberately does not after a full
// batch: a full batch means more messages are probably waiting, and the
// next fetch already waits for room (in flight at most NewBatchThreshold),
// so polling at once cannot spin; waiting would only leave free handler
// slots idle for up to MinPollInterval per batch under a backlog. A partial
// batch means the queue is probably drained, and there the worker waits like
// Functions.
func TestRepollAfterFullBatchWaitAfterPartial(t *testing.T) {
	e := newEnv(t)
	for _, c := range []string{"1", "2", "3", "4", "5"} {
		e.put(c)
	}
	pq := &pollQueue{q: e.q}
	const minI = 250 * time.Millisecond
	w := New(pq, func(context.Context, *Delivery) error { return nil },
		Options{BatchSize: 2, Concurrency: 8, MinPollInterval: minI, Clock: e.mock, OnEvent: e.rec.on})
	r := start(w)
	e.rec.waitEvents(t, EventPollWait, 1)
	e.mock.Add(minI)
	e.rec.waitEvents(t, EventPollWait, 2) // the empty poll after that
	e.rec.waitEvents(t, EventSucceeded, 5)
	if err := r.stop(t); err != nil {
		t.Fatal(err)
	}

	// Fetched 2 (full), 2 (full), 1 (partial), then the first wait.
	var seq []string
	for _, ev := range e.rec.all() {
		switch ev.Kind {
		case EventFetched:
			seq = append(seq, fmt.Sprintf("fetched %d", ev.N))
		case EventPollWait:
			seq = append(seq, "wait "+ev.Wait.String())
		}
	}
	want := []string{"fetched 2", "fetched 2", "fetched 1", "wait " + minI.String()}
	if len(seq) < len(want) || strings.Join(seq[:len(want)], ", ") != strings.Join(want, ", ") {
		t.Fatalf("fetches and waits %q, want them to start with %q", seq, want)
	}
	gets := pq.getTimes()
	if len(gets) < 4 || !gets[1].Equal(gets[0]) || !gets[2].Equal(gets[0]) || gets[3].Sub(gets[2]) != minI {
		t.Fatalf("polls at %v: want three at once, then one %v later", gets, minI)
	}
}

// A checkpoint renews the lease and re-arms the renewal from its own time;
// the timer's renewal that follows carries the checkpoint's receipt, and the
// final delete the timer renewal's.
func TestCheckpointThenTimerRenewalHandsOverReceipt(t *testing.T) {
	e := newEnv(t)
	const lease = 10 * time.Second
	e.put("step 0")
	rq := &receiptQueue{Queue: e.q}
	started, checkpoint, finish := make(chan struct{}), make(chan struct{}), make(chan struct{})
	cpErr := make(chan error, 1)
	fetched := make(chan azq.PopReceipt, 1)
	w := New(rq, func(ctx context.Context, d *Delivery) error {
		fetched <- d.Message.PopReceipt
		close(started)
		<-checkpoint
		cpErr <- d.Checkpoint(ctx, "step 1")
		<-finish
		if d.Content() != "step 1" {
			t.Errorf("content %q after the checkpoint", d.Content())
		}
		return nil
	}, Options{LeaseDuration: lease, OnEvent: e.rec.on})
	r := start(w)
	<-started
	e.mock.Add(2 * time.Second)
	checkpoint <- struct{}{}
	if err := <-cpErr; err != nil {
		t.Fatal(err)
	}
	// The checkpoint at 2 s moved the next renewal to 7 s, not 5 s.
	e.mock.Add(4 * time.Second)
	if n := len(e.rec.of(EventRenewed)); n != 1 {
		t.Fatalf("%d renewals by 6 s, want only the checkpoint", n)
	}
	e.mock.Add(time.Second)
	e.rec.waitFor(t, "the timer's renewal", func() bool {
		return len(e.rec.of(EventRenewed))+len(e.rec.of(EventRenewFailed)) >= 2
	})
	if failed := e.rec.of(EventRenewFailed); len(failed) != 0 {
		t.Fatalf("the timer's renewal failed: %v", failed[0].Err)
	}
	if ev := e.rec.of(EventRenewed)[1]; !ev.Time.Equal(time.Unix(7, 0)) {
		t.Fatalf("timer renewal at %v, want 7 s", ev.Time)
	}
	close(finish)
	e.rec.waitEvents(t, EventSucceeded, 1)
	if err := r.stop(t); err != nil {
		t.Fatal(err)
	}
	calls := rq.log()
	if len(calls) != 3 || calls[0].op != "update" || calls[1].op != "update" || calls[2].op != "delete" {
		t.Fatalf("calls %+v, want checkpoint, renewal, delete", calls)
	}
	cp, renewal, del := calls[0], calls[1], calls[2]
	switch {
	case cp.receipt != <-fetched:
		t.Fatalf("checkpoint %+v, want the fetched receipt", cp)
	case cp.content == nil || *cp.content != "step 1" || cp.err != nil:
		t.Fatalf("checkpoint %+v", cp)
	case renewal.content != nil || renewal.err != nil || renewal.receipt != cp.returned:
		t.Fatalf("renewal %+v, want the checkpoint's receipt %v", renewal, cp.returned)
	case del.err != nil || del.receipt != renewal.returned:
		t.Fatalf("delete %+v, want the renewal's receipt %v", del, renewal.returned)
	}
	if len(e.rec.of(EventRenewFailed)) != 0 || count(t, e.q) != 0 {
		t.Fatal("a renewal failed or the message is left")
	}
}

// Run leaves no goroutine behind: after a run with handlers, a renewal, a
// retry, a checkpoint and a shutdown that releases a running handler, the
// goroutine count settles back to where it started.
func TestRunLeavesNoGoroutines(t *testing.T) {
	for _, c := range []struct {
		name string
		src  func(*azq.Queue) Queue
	}{
		{"deleted one at a time", func(q *azq.Queue) Queue { return q }},
		// Deletes wait for their batch while "stuck" runs, on the
		// window's timers, real and mock.
		{"deleted in batches", func(q *azq.Queue) Queue { return &batchQueue{Queue: q} }},
	} {
		t.Run(c.name, func(t *testing.T) { runLeavesNoGoroutines(t, c.src) })
	}
}

func runLeavesNoGoroutines(t *testing.T, src func(*azq.Queue) Queue) {
	e := newEnv(t)
	const lease = 10 * time.Second
	for _, c := range []string{"ok", "fail once", "checkpoint", "stuck"} {
		e.put(c)
	}
	before := runtime.NumGoroutine()

	var failed atomic.Bool
	stuck := make(chan struct{})
	w := New(src(e.q), func(ctx context.Context, d *Delivery) error {
		switch d.Message.Content {
		case "fail once":
			if !failed.Swap(true) {
				return errors.New("once")
			}
		case "checkpoint":
			return d.Checkpoint(ctx, "saved")
		case "saved":
		case "stuck":
			close(stuck)
			<-ctx.Done()
			return ctx.Err()
		}
		return nil
	}, Options{LeaseDuration: lease, ShutdownTimeout: time.Second, OnEvent: e.rec.on})
	r := start(w)
	<-stuck
	e.rec.waitEvents(t, EventSucceeded, 3)
	e.mock.Add(lease / 2) // a renewal of "stuck"
	e.rec.waitEvents(t, EventRenewed, 2)
	r.cancel()
	e.rec.waitEvents(t, EventStopping, 1)
	e.mock.Add(time.Second)
	if err := r.stop(t); err != nil {
		t.Fatal(err)
	}
	if s := w.Stats(); s.Released != 1 || s.Succeeded != 3 || s.InFlight != 0 {
		t.Fatalf("stats %+v", s)
	}

	// Goroutines that were ending as Run returned (clock callbacks that
	// found nothing to do) need a moment; the real-time limit only turns a
	// leak into a failure.
	limit := time.Now().Add(10 * time.Second)
	for runtime.NumGoroutine() > before {
		if time.Now().After(limit) {
			buf := make([]byte, 1<<20)
			t.Fatalf("%d goroutines, %d before Run:\n%s", runtime.NumGoroutine(), before, buf[:runtime.Stack(buf, true)])
		}
		runtime.Gosched()
	}
}
