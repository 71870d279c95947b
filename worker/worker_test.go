package worker

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/azqlib/azq"
)

// A handler that runs ten times longer than the lease keeps its message:
// the worker renews at half the lease, and the message is never delivered
// again, although the worker keeps receiving the whole time.
func TestLongHandlerRenewsLeaseAndIsNotRedelivered(t *testing.T) {
	e := newEnv(t)
	const lease = 10 * time.Second
	e.put("long")
	var calls atomic.Int32
	started, finish := make(chan struct{}), make(chan struct{})
	w := New(e.q, func(ctx context.Context, d *Delivery) error {
		if calls.Add(1) == 1 {
			close(started)
		}
		<-finish
		return nil
	}, Options{LeaseDuration: lease, Concurrency: 2, OnEvent: e.rec.on})
	r := start(w)
	<-started

	for i := 1; i <= 20; i++ {
		e.mock.Add(lease / 2)
		renewed := e.rec.waitEvents(t, EventRenewed, i)
		if got, want := renewed[i-1].Time, time.Unix(0, 0).Add(time.Duration(i)*lease/2); !got.Equal(want) {
			t.Fatalf("renewal %d at %v, want %v", i, got, want)
		}
		if n := visible(t, e.q); n != 0 {
			t.Fatalf("after %v the message is visible to others", time.Duration(i)*lease/2)
		}
	}
	close(finish)
	e.rec.waitEvents(t, EventSucceeded, 1)
	if err := r.stop(t); err != nil {
		t.Fatal(err)
	}
	st := w.Stats()
	if calls.Load() != 1 || st.Received != 1 || st.Succeeded != 1 || st.LeaseRenewals != 20 || st.LeasesLost != 0 {
		t.Fatalf("calls %d, stats %+v", calls.Load(), st)
	}
	if n := count(t, e.q); n != 0 {
		t.Fatalf("%d messages left", n)
	}
}

// A worker that dies mid-handler (its process gone: nothing it does reaches
// the queue any more) leaves the message invisible until the lease lapses;
// then another worker gets it, with the progress the first one saved.
func TestCrashedWorkerMessageReappearsAfterLease(t *testing.T) {
	e := newEnv(t)
	const lease = 30 * time.Second
	e.put("step 0")
	st := &crashState{}
	st.opsLeft.Store(-1)
	cq := &crashQueue{Queue: e.q, st: st}
	saved := make(chan struct{})
	w1 := New(cq, func(ctx context.Context, d *Delivery) error {
		if err := d.Checkpoint(ctx, "step 1"); err != nil {
			t.Error(err)
		}
		close(saved)
		<-ctx.Done()
		return ctx.Err()
	}, Options{LeaseDuration: lease, ShutdownTimeout: -1, OnEvent: e.rec.on})
	r1 := start(w1)
	<-saved
	st.crashed.Store(true)
	if err := r1.stop(t); err != nil {
		t.Fatal(err)
	}
	if s := w1.Stats(); s.Released != 0 || s.Succeeded != 0 || s.Errors == 0 {
		t.Fatalf("crashed worker: %+v", s)
	}

	got := make(chan *Delivery, 1)
	w2 := New(e.q, func(ctx context.Context, d *Delivery) error {
		got <- d
		return nil
	}, Options{LeaseDuration: lease, OnEvent: e.rec.on})
	r2 := start(w2)
	e.mock.Add(lease - time.Nanosecond)
	if n := visible(t, e.q); n != 0 {
		t.Fatal("the message came back before its lease lapsed")
	}
	e.mock.Add(time.Nanosecond)
	d := <-got
	if d.Message.Content != "step 1" || d.Message.DequeueCount != 2 {
		t.Fatalf("second worker got %q, dequeue count %d", d.Message.Content, d.Message.DequeueCount)
	}
	e.rec.waitEvents(t, EventSucceeded, 1)
	if err := r2.stop(t); err != nil {
		t.Fatal(err)
	}
	if n := count(t, e.q); n != 0 {
		t.Fatalf("%d messages left", n)
	}
}

// A panic is recovered, reported as a *PanicError, and the message is
// released with the retry delay for another attempt.
func TestPanicRecoveredAndRetried(t *testing.T) {
	e := newEnv(t)
	const retry = 30 * time.Second
	e.put("p")
	var calls atomic.Int32
	w := New(e.q, func(ctx context.Context, d *Delivery) error {
		if calls.Add(1) == 1 {
			panic("kaboom")
		}
		if d.Message.DequeueCount != 2 {
			t.Errorf("second attempt has dequeue count %d", d.Message.DequeueCount)
		}
		return nil
	}, Options{RetryDelay: retry, OnEvent: e.rec.on})
	r := start(w)
	ev := e.rec.waitEvents(t, EventRetry, 1)[0]
	var pe *PanicError
	if !errors.As(ev.Err, &pe) || pe.Value != "kaboom" || !strings.Contains(string(pe.Stack), "worker_test.go") {
		t.Fatalf("retry event error %v", ev.Err)
	}
	e.mock.Add(retry - time.Nanosecond)
	if visible(t, e.q) != 0 || calls.Load() != 1 {
		t.Fatal("retried before the retry delay")
	}
	e.mock.Add(time.Nanosecond)
	e.rec.waitEvents(t, EventSucceeded, 1)
	if err := r.stop(t); err != nil {
		t.Fatal(err)
	}
	if s := w.Stats(); s.Failed != 1 || s.Succeeded != 1 || s.Received != 2 || calls.Load() != 2 {
		t.Fatalf("calls %d, stats %+v", calls.Load(), s)
	}
}

// After exactly MaxDequeueCount failed attempts the message moves to
// "<queue>-poison", created on first use, with a record of why.
func TestPoisonAfterMaxDequeueCount(t *testing.T) {
	for _, bodyOnly := range []bool{false, true} {
		t.Run(fmt.Sprintf("bodyOnly=%v", bodyOnly), func(t *testing.T) {
			e := newEnv(t)
			orig := e.put("bad \xff input") // not UTF-8: the record must keep it exactly
			var calls atomic.Int32
			w := New(e.q, func(ctx context.Context, d *Delivery) error {
				n := calls.Add(1)
				if d.Message.DequeueCount != int64(n) {
					t.Errorf("attempt %d has dequeue count %d", n, d.Message.DequeueCount)
				}
				return fmt.Errorf("boom %d", n)
			}, Options{MaxDequeueCount: 3, Poison: ServicePoison(e.svc), PoisonBodyOnly: bodyOnly, OnEvent: e.rec.on})
			r := start(w)
			ev := e.rec.waitEvents(t, EventPoisoned, 1)[0]
			if err := r.stop(t); err != nil {
				t.Fatal(err)
			}
			if calls.Load() != 3 || ev.Err == nil || ev.Err.Error() != "boom 3" {
				t.Fatalf("%d calls, poison event %+v", calls.Load(), ev)
			}
			if got := len(e.rec.of(EventRetry)); got != 2 {
				t.Fatalf("%d retries, want 2", got)
			}
			if n := count(t, e.q); n != 0 {
				t.Fatalf("%d messages left in the source", n)
			}
			poisoned := onlyPoisoned(t, e.svc)
			if bodyOnly {
				if poisoned.Content != orig.Content {
					t.Fatalf("poison body %q", poisoned.Content)
				}
			} else {
				rec, err := ParsePoisonRecord(poisoned.Content)
				if err != nil {
					t.Fatal(err)
				}
				if rec.Content() != orig.Content || rec.MessageID != orig.ID || rec.DequeueCount != 3 ||
					rec.Reason != ReasonHandlerFailed || rec.Error != "boom 3" || rec.Queue != "jobs" ||
					!rec.InsertionTime.Equal(orig.InsertionTime) {
					t.Fatalf("poison record %+v", rec)
				}
			}
			if s := w.Stats(); s.Failed != 3 || s.Poisoned != 1 || s.Succeeded != 0 {
				t.Fatalf("stats %+v", s)
			}
		})
	}
}

// A message that arrives with a DequeueCount above MaxDequeueCount (its
// last attempt ended in a crash) is set aside without running the handler.
func TestPoisonBeforeInvocation(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	e.put("crashy")
	for i := 0; i < 2; i++ { // two attempts that died without an outcome
		ms, err := e.q.Get(ctx, 1, time.Minute)
		if err != nil || len(ms) != 1 {
			t.Fatal(err)
		}
		if _, err := e.q.Update(ctx, ms[0].ID, ms[0].PopReceipt, 0, nil); err != nil {
			t.Fatal(err)
		}
	}
	w := New(e.q, func(ctx context.Context, d *Delivery) error {
		t.Error("handler ran for a message past its attempts")
		return nil
	}, Options{MaxDequeueCount: 2, Poison: ServicePoison(e.svc), OnEvent: e.rec.on})
	r := start(w)
	e.rec.waitEvents(t, EventPoisoned, 1)
	if err := r.stop(t); err != nil {
		t.Fatal(err)
	}
	pq, _ := e.svc.Queue("jobs-poison")
	ms, _ := pq.Peek(ctx, 1)
	rec, err := ParsePoisonRecord(ms[0].Content)
	if err != nil || rec.Reason != ReasonDequeueCountExceeded || rec.DequeueCount != 3 || rec.Body != "crashy" || rec.Error != "" {
		t.Fatalf("record %+v (%v)", rec, err)
	}
}

func TestPoisonQueueName(t *testing.T) {
	long := strings.Repeat("a", 56) // 56 + len("-poison") = 63, the longest name
	for _, tc := range []struct {
		in, want string
		ok       bool
	}{
		{"jobs", "jobs-poison", true},
		{"jobs-poison", "", false}, // already a poison queue
		{long, long + "-poison", true},
		{long + "a", "", false}, // would be 64 characters
		{"", "", false},
	} {
		got, ok := PoisonQueueName(tc.in)
		if got != tc.want || ok != tc.ok {
			t.Errorf("PoisonQueueName(%q) = %q, %v; want %q, %v", tc.in, got, ok, tc.want, tc.ok)
		}
	}
}

// Without a poison queue (here: the source is itself a poison queue), a
// message out of attempts is left invisible, not released into a hot loop.
func TestNoPoisonQueueLeavesMessageInvisible(t *testing.T) {
	e := newEnv(t)
	q, _, err := e.svc.CreateQueue(context.Background(), "jobs-poison", nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := q.Put(context.Background(), "x", nil); err != nil {
		t.Fatal(err)
	}
	failWithoutPoisonQueue(t, e, q, Options{Poison: ServicePoison(e.svc)})
	if _, err := e.svc.Queue("jobs-poison-poison"); !errors.Is(err, azq.ErrQueueNotFound) {
		t.Fatal("a poison queue of a poison queue was created")
	}
}

// A renewal that fails transiently is retried sooner (halving the
// interval); once another consumer has received the message, the renewal
// finds it gone: the handler's context is cancelled with ErrLeaseLost and
// the worker neither deletes nor releases the message.
func TestLeaseLostCancelsHandler(t *testing.T) {
	e := newEnv(t)
	const lease = 10 * time.Second
	e.put("contested")
	fq := &flakyQueue{Queue: e.q}
	cause := make(chan error, 1)
	checkpoint := make(chan error, 1)
	started := make(chan struct{})
	w := New(fq, func(ctx context.Context, d *Delivery) error {
		close(started)
		<-ctx.Done()
		cause <- context.Cause(ctx)
		checkpoint <- d.Checkpoint(context.Background(), "late")
		return nil // success that must not delete
	}, Options{LeaseDuration: lease, Concurrency: 1, OnEvent: e.rec.on}) // not fetching meanwhile
	r := start(w)
	<-started
	fq.failUpdates.Store(1)
	// Renewal at 5 s fails; retries follow at +2.5 s, +1.25 s, +1.25 s (the
	// floor is lease/8).
	steps := []time.Duration{5 * time.Second, 2500 * time.Millisecond, 1250 * time.Millisecond, 1250 * time.Millisecond}
	at := time.Unix(0, 0)
	for i, s := range steps {
		e.mock.Add(s)
		at = at.Add(s)
		ev := e.rec.waitEvents(t, EventRenewFailed, i+1)[i]
		if !ev.Time.Equal(at) || errors.Is(ev.Err, ErrLeaseLost) {
			t.Fatalf("failure %d: %+v, want at %v", i, ev, at)
		}
	}
	// At 10 s the lease has lapsed: someone else takes the message.
	ms, err := e.q.Get(context.Background(), 1, time.Minute)
	if err != nil || len(ms) != 1 {
		t.Fatalf("other consumer got %d messages (%v)", len(ms), err)
	}
	fq.failUpdates.Store(0)
	e.mock.Add(1250 * time.Millisecond)
	if c := <-cause; !errors.Is(c, ErrLeaseLost) {
		t.Fatalf("handler context cause %v", c)
	}
	if err := <-checkpoint; !errors.Is(err, ErrLeaseLost) {
		t.Fatalf("checkpoint after loss: %v", err)
	}
	e.rec.waitEvents(t, EventLeaseLost, 1)
	if err := r.stop(t); err != nil {
		t.Fatal(err)
	}
	// The other consumer's receipt is still current: the worker did not
	// touch the message after losing it.
	if err := e.q.Delete(context.Background(), ms[0].ID, ms[0].PopReceipt); err != nil {
		t.Fatalf("other consumer's delete: %v", err)
	}
	if s := w.Stats(); s.LeasesLost != 1 || s.Succeeded != 0 || s.Failed != 0 || s.Errors != 4 {
		t.Fatalf("stats %+v", s)
	}
}

// A polled source is polled with Functions' randomized exponential back-off,
// on the worker's clock, with jitter from Options.Rand; a batch resets it.
func TestPollBackoffIntervals(t *testing.T) {
	e := newEnv(t)
	pq := &pollQueue{q: e.q}
	const minI, maxI = 100 * time.Millisecond, 2 * time.Second
	w := New(pq, func(ctx context.Context, d *Delivery) error { return nil }, Options{
		MinPollInterval: minI, MaxPollInterval: maxI, Clock: e.mock,
		Rand: rand.New(rand.NewPCG(7, 8)), OnEvent: e.rec.on})
	// The expected intervals, from a twin of the jitter source. Once at
	// the cap the strategy stays there without drawing.
	twin := rand.New(rand.NewPCG(7, 8))
	step := func(k int) time.Duration {
		return minI + time.Duration(float64(minI)*(0.8+0.4*twin.Float64())*float64(int(1)<<(k-1)))
	}
	var want []time.Duration
	cur := time.Duration(0)
	for k := 1; k <= 7; k++ {
		if cur != maxI {
			cur = min(step(k), maxI)
		}
		want = append(want, cur)
	}
	// 200, 300, 500, 900, 1700 ms (±20 % of the increment), then the cap.
	for i, lo := range []time.Duration{180, 260, 420, 740, 1380, 2000, 2000} {
		if want[i] < lo*time.Millisecond || want[i] > maxI {
			t.Fatalf("interval %d = %v", i+1, want[i])
		}
	}
	if want[5] != maxI || want[6] != maxI {
		t.Fatalf("intervals %v do not reach the cap", want)
	}

	r := start(w)
	for i, d := range want {
		ev := e.rec.waitEvents(t, EventPollWait, i+1)[i]
		if ev.Wait != d {
			t.Fatalf("wait %d = %v, want %v", i+1, ev.Wait, d)
		}
		e.mock.Add(d)
	}
	// The poll after the last wait finds a message: a partial batch waits
	// the minimum, and the back-off starts again from the beginning.
	e.rec.waitEvents(t, EventPollWait, len(want)+1)
	e.put("wake")
	e.mock.Add(maxI)
	e.rec.waitEvents(t, EventSucceeded, 1)
	waits := e.rec.waitEvents(t, EventPollWait, len(want)+2)
	if got := waits[len(want)+1].Wait; got != minI {
		t.Fatalf("wait after a batch = %v, want %v", got, minI)
	}
	e.mock.Add(minI)
	waits = e.rec.waitEvents(t, EventPollWait, len(want)+3)
	if got, exp := waits[len(want)+2].Wait, step(1); got != exp {
		t.Fatalf("first wait after reset = %v, want %v", got, exp)
	}
	if err := r.stop(t); err != nil {
		t.Fatal(err)
	}

	gets := pq.getTimes()
	for i := range want {
		if d := gets[i+1].Sub(gets[i]); d != want[i] {
			t.Fatalf("poll %d came %v after the previous, want %v", i+2, d, want[i])
		}
	}
}

// Graceful shutdown: fetching stops, handlers get ShutdownTimeout to
// finish, and what is still running then is cancelled and released at once,
// so nobody waits out the ten-minute lease.
func TestGracefulShutdownReleasesUnfinished(t *testing.T) {
	e := newEnv(t)
	const grace = 5 * time.Second
	for _, c := range []string{"quick", "slow1", "slow2"} {
		e.put(c)
	}
	started := make(chan string, 3)
	finishQuick := make(chan struct{})
	causes := make(chan error, 2)
	w := New(e.q, func(ctx context.Context, d *Delivery) error {
		started <- d.Message.Content
		if d.Message.Content == "quick" {
			<-finishQuick
			return nil
		}
		<-ctx.Done()
		causes <- context.Cause(ctx)
		return ctx.Err()
	}, Options{Concurrency: 4, ShutdownTimeout: grace, OnEvent: e.rec.on})
	r := start(w)
	for i := 0; i < 3; i++ {
		<-started
	}
	r.cancel()
	stopping := e.rec.waitEvents(t, EventStopping, 1)[0]
	if stopping.N != 3 || stopping.Wait != grace {
		t.Fatalf("stopping event %+v", stopping)
	}
	close(finishQuick)
	e.rec.waitEvents(t, EventSucceeded, 1)
	crossDeadline(t, e, r, grace)
	for i := 0; i < 2; i++ {
		if c := <-causes; !errors.Is(c, ErrShutdown) {
			t.Fatalf("handler cause %v", c)
		}
	}
	// Released with visibility 0: visible at this very instant.
	if n := visible(t, e.q); n != 2 {
		t.Fatalf("%d messages visible after shutdown, want 2", n)
	}
	if s := w.Stats(); s.Succeeded != 1 || s.Released != 2 || s.InFlight != 0 || s.Failed != 0 {
		t.Fatalf("stats %+v", s)
	}
}

// Concurrency is bounded, and the worker fetches again only when in-flight
// work falls to the threshold, asking only for what it can start.
func TestConcurrencyAndBatchThreshold(t *testing.T) {
	e := newEnv(t)
	for i := 0; i < 10; i++ {
		e.put(fmt.Sprint(i))
	}
	var running, peak atomic.Int32
	started := make(chan struct{}, 10)
	release := make(chan struct{})
	w := New(e.q, func(ctx context.Context, d *Delivery) error {
		n := running.Add(1)
		for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
		}
		started <- struct{}{}
		<-release
		running.Add(-1)
		return nil
	}, Options{BatchSize: 3, Concurrency: 5, NewBatchThreshold: 2, OnEvent: e.rec.on})
	r := start(w)
	// 3 (room 5), then at 3 > 2 in flight: wait.
	for i := 0; i < 3; i++ {
		<-started
	}
	release <- struct{}{} // 2 in flight: fetch min(3, 5-2) = 3
	for i := 0; i < 3; i++ {
		<-started
	}
	if got := running.Load(); got != 5 {
		t.Fatalf("%d running, want 5", got)
	}
	close(release)
	e.rec.waitEvents(t, EventSucceeded, 10)
	if err := r.stop(t); err != nil {
		t.Fatal(err)
	}
	if peak.Load() > 5 {
		t.Fatalf("peak concurrency %d > 5", peak.Load())
	}
	fetched := e.rec.of(EventFetched)
	if fetched[0].N != 3 || fetched[1].N != 3 {
		t.Fatalf("first batches %d, %d; want 3, 3", fetched[0].N, fetched[1].N)
	}
	for _, f := range fetched {
		if f.N > 3 {
			t.Fatalf("batch of %d > BatchSize", f.N)
		}
	}
}

func TestOptions(t *testing.T) {
	q := azq.New()
	h := func(context.Context, *Delivery) error { return nil }
	for _, tc := range []struct {
		name string
		o    Options
		ok   bool
	}{
		{"zero", Options{}, true},
		{"batch 32", Options{BatchSize: 32}, true},
		{"batch 33", Options{BatchSize: 33}, false},
		{"negative dequeue", Options{MaxDequeueCount: -1}, false},
		{"min > max poll", Options{MinPollInterval: time.Second, MaxPollInterval: time.Millisecond}, false},
		{"negative retry", Options{RetryDelay: -1}, false},
		// A poison queue needs a name, and q (made by azq.New) has none.
		{"poison without a name", Options{Poison: ServicePoison(azq.NewService())}, false},
		{"poison with QueueName", Options{Poison: ServicePoison(azq.NewService()), QueueName: "jobs"}, true},
		{"poison with PoisonQueueName", Options{Poison: ServicePoison(azq.NewService()), PoisonQueueName: "dead"}, true},
	} {
		err := New(q, h, tc.o).Run(canceled())
		if (err == nil) != tc.ok || (!tc.ok && !errors.Is(err, ErrInvalidOptions)) {
			t.Errorf("%s: Run = %v", tc.name, err)
		}
	}
	c, err := newConfig(q, Options{})
	if err != nil || c.BatchSize != 16 || c.MaxDequeueCount != 5 || c.LeaseDuration != 10*time.Minute ||
		c.MinPollInterval != 100*time.Millisecond || c.MaxPollInterval != time.Minute ||
		c.Concurrency != 16+c.NewBatchThreshold || c.NewBatchThreshold%8 != 0 {
		t.Fatalf("defaults %+v (%v)", c.Options, err)
	}
	c, _ = newConfig(q, Options{BatchSize: 16, Concurrency: 24})
	if c.NewBatchThreshold != 8 {
		t.Fatalf("threshold for 16/24 = %d, want 8", c.NewBatchThreshold)
	}
	w := New(q, h, Options{})
	if err := w.Run(canceled()); err != nil {
		t.Fatal(err)
	}
	if err := w.Run(canceled()); err == nil {
		t.Fatal("second Run succeeded")
	}
}

func canceled() context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	return ctx
}

// A LeaseDuration the queue rejects is a configuration error: Run returns it
// instead of retrying forever.
func TestRunReturnsInvalidFetch(t *testing.T) {
	e := newEnv(t)
	err := New(e.q, func(context.Context, *Delivery) error { return nil },
		Options{LeaseDuration: time.Millisecond}).Run(context.Background())
	if !errors.Is(err, azq.ErrOutOfRange) {
		t.Fatalf("Run = %v", err)
	}
}

// A delivery fetched before Run's context ended but not yet started when
// the shutdown deadline passes is released without running its handler.
// Were it started, nothing would cancel it and Run would wait for it with
// no deadline. Here "c" waits behind "b" in the goroutine that fetched
// both, while the only other goroutine is still reporting "a".
func TestDeliveryStartingAfterShutdownDeadlineIsReleased(t *testing.T) {
	e := newEnv(t)
	const grace = 5 * time.Second
	a := e.put("a")
	finishA := make(chan struct{})
	lateStart := make(chan struct{}, 1)
	testOver := make(chan struct{})
	t.Cleanup(func() { close(testOver) })
	started := make(chan string, 2)
	// The goroutine that handled "a" stays in its outcome report until the
	// test lets it go: its slot is free, but the goroutine is not.
	report := make(chan struct{})
	onEvent := func(ev Event) {
		e.rec.on(ev)
		if ev.Kind == EventSucceeded && ev.MessageID == a.ID {
			<-report
		}
	}
	w := New(e.q, func(ctx context.Context, d *Delivery) error {
		switch d.Message.Content {
		case "a":
			started <- "a"
			<-finishA
			return nil
		case "b":
			started <- "b"
			<-ctx.Done()
			return ctx.Err()
		default:
			lateStart <- struct{}{}
			select {
			case <-ctx.Done():
			case <-testOver:
			}
			return nil
		}
	}, Options{BatchSize: 1, Concurrency: 2, NewBatchThreshold: 1, ShutdownTimeout: grace, OnEvent: onEvent})
	r := start(w)
	<-started
	close(finishA)
	e.rec.waitEvents(t, EventSucceeded, 1)
	// One goroutine reports "a"; the other fetches "b", and "c" while
	// there is room, then handles "b": "c" waits for a goroutine.
	e.put("b")
	e.put("c")
	e.rec.waitEvents(t, EventFetched, 3)
	<-started
	r.cancel()
	if ev := e.rec.waitEvents(t, EventStopping, 1)[0]; ev.N != 2 {
		t.Fatalf("stopping with %d in flight, want 2", ev.N)
	}
	e.mock.Add(grace)
	// "b" released: the deadline passed and the running handlers were
	// taken stock of. Only now may "c" reach a goroutine.
	e.rec.waitEvents(t, EventReleased, 1)
	close(report)
	guard, cancel := context.WithTimeout(context.Background(), 20*time.Second) // a hang guard only
	defer cancel()
	select {
	case <-lateStart:
		t.Fatal("a handler started after the shutdown deadline; Run waits for it without a deadline")
	case err := <-r.errc:
		if err != nil {
			t.Fatal(err)
		}
	case <-guard.Done():
		t.Fatal("Run did not return")
	}
	if n := visible(t, e.q); n != 2 {
		t.Fatalf("%d messages visible after shutdown, want 2 (b and c released)", n)
	}
	if s := w.Stats(); s.Released != 2 || s.Succeeded != 1 || s.InFlight != 0 {
		t.Fatalf("stats %+v", s)
	}
}

// A queue made by a Service gets a poison queue by default, created in that
// Service on first use: with the options of the example, and with
// none at all, a message out of attempts ends in "jobs-poison".
func TestDefaultPoisonQueueOfServiceQueue(t *testing.T) {
	for _, tc := range []struct {
		name     string
		o        Options
		attempts int
	}{
		{"zero options", Options{}, DefaultMaxDequeueCount},
		{"issue example", Options{BatchSize: 16, Concurrency: 24, MaxDequeueCount: 5}, 5},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			orig := e.put("hopeless")
			var calls atomic.Int32
			tc.o.OnEvent = e.rec.on
			w := New(e.q, func(ctx context.Context, d *Delivery) error {
				calls.Add(1)
				return errors.New("no")
			}, tc.o)
			r := start(w)
			e.rec.waitEvents(t, EventPoisoned, 1)
			if err := r.stop(t); err != nil {
				t.Fatal(err)
			}
			if got := int(calls.Load()); got != tc.attempts {
				t.Fatalf("%d attempts, want %d", got, tc.attempts)
			}
			if n := count(t, e.q); n != 0 {
				t.Fatalf("%d messages left in the source", n)
			}
			rec, err := ParsePoisonRecord(onlyPoisoned(t, e.svc).Content)
			if err != nil || rec.Content() != orig.Content || rec.MessageID != orig.ID || rec.Queue != "jobs" {
				t.Fatalf("poison record %+v (%v)", rec, err)
			}
		})
	}
}

// A queue made by azq.New belongs to no Service, so by default it has no
// poison queue: a message out of attempts is left invisible until its lease
// lapses, reported as abandoned.
func TestNoDefaultPoisonQueueWithoutService(t *testing.T) {
	e := newEnv(t)
	q := azq.New(azq.WithClock(e.mock))
	if _, err := q.Put(context.Background(), "x", nil); err != nil {
		t.Fatal(err)
	}
	failWithoutPoisonQueue(t, e, q, Options{})
}

// Every wait of the worker (poll back-off, shutdown deadline, renewals,
// the settle window) is a clock callback, harmless if it runs twice,
// rather than a Timer channel, whose second firing by a mock clock blocks
// with the mock's lock held.
func TestWaitsSurviveDoubleFiringClock(t *testing.T) {
	t.Run("poll back-off", func(t *testing.T) {
		e := newEnv(t)
		clk := &doubleFireClock{Mock: e.mock, t: t}
		pq := &pollQueue{q: e.q}
		w := New(pq, func(ctx context.Context, d *Delivery) error { return nil },
			Options{Clock: clk, Rand: rand.New(rand.NewPCG(1, 2)), OnEvent: e.rec.on})
		r := start(w)
		const waits = 4
		for i := 0; i < waits; i++ {
			ev := e.rec.waitEvents(t, EventPollWait, i+1)[i]
			e.mock.Add(ev.Wait)
		}
		e.rec.waitEvents(t, EventPollWait, waits+1)
		if err := r.stop(t); err != nil {
			t.Fatal(err)
		}
		gets, pw := pq.getTimes(), e.rec.of(EventPollWait)
		if len(gets) != waits+1 {
			t.Fatalf("%d polls after %d waits, want %d", len(gets), waits, waits+1)
		}
		for i := 1; i < len(gets); i++ {
			if d := gets[i].Sub(gets[i-1]); d != pw[i-1].Wait {
				t.Fatalf("poll %d came %v after the previous, want %v", i+1, d, pw[i-1].Wait)
			}
		}
	})
	t.Run("shutdown deadline", func(t *testing.T) {
		e := newEnv(t)
		const grace = 5 * time.Second
		clk := &doubleFireClock{Mock: e.mock, t: t}
		e.put("slow")
		started := make(chan struct{})
		w := New(e.q, func(ctx context.Context, d *Delivery) error {
			close(started)
			<-ctx.Done()
			return ctx.Err()
		}, Options{Clock: clk, ShutdownTimeout: grace, OnEvent: e.rec.on})
		r := start(w)
		<-started
		r.cancel()
		e.rec.waitEvents(t, EventStopping, 1)
		crossDeadline(t, e, r, grace)
		if s := w.Stats(); s.Released != 1 || s.InFlight != 0 {
			t.Fatalf("stats %+v", s)
		}
	})
	t.Run("settle window", func(t *testing.T) {
		e := newEnv(t)
		const window = time.Second
		clk := &doubleFireClock{Mock: e.mock, t: t}
		bq := &batchQueue{Queue: e.q}
		e.put("quick")
		e.put("slow")
		release := make(chan struct{})
		w := New(bq, func(ctx context.Context, d *Delivery) error {
			if d.Message.Content == "slow" {
				<-release
			}
			return nil
		}, Options{BatchSize: 2, Concurrency: 2, SettleWindow: window, Clock: clk, OnEvent: e.rec.on})
		r := start(w)
		waitSettling(t, w, 1)
		e.mock.Add(window)
		e.rec.waitEvents(t, EventSucceeded, 1)
		close(release)
		e.rec.waitEvents(t, EventSucceeded, 2)
		if err := r.stop(t); err != nil {
			t.Fatal(err)
		}
		if batches, _ := bq.calls(); len(batches) != 2 {
			t.Fatalf("DeleteBatch sizes %v, want one batch for each message", batches)
		}
	})
}

// A queue that is gone (deleted, being deleted or disabled) takes the
// message with it, as Functions treats it: a renewal that finds it so
// stops renewing for good and cancels the handler with ErrLeaseLost, and a
// delete that finds it so is no error. The codes come as azq returns them
// and as a remote service's client would report them.
func TestQueueGoneMeansLeaseLost(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error // nil: really delete the queue
	}{
		{"deleted queue", nil},
		{"QueueNotFound", azq.ErrQueueNotFound},
		{"remote QueueNotFound", &azq.Error{Code: azq.CodeQueueNotFound, StatusCode: 404, Message: "remote"}},
		{"QueueBeingDeleted", &azq.Error{Code: "QueueBeingDeleted", StatusCode: 409, Message: "remote"}},
		{"QueueDisabled", &azq.Error{Code: "QueueDisabled", StatusCode: 409, Message: "remote"}},
	} {
		gone := func(e *testEnv, g *goneQueue) {
			if tc.err != nil {
				g.set(tc.err)
				return
			}
			if err := e.svc.DeleteQueue(context.Background(), "jobs"); err != nil {
				t.Fatal(err)
			}
		}
		t.Run(tc.name+"/renewal", func(t *testing.T) {
			e := newEnv(t)
			const lease = 10 * time.Second
			e.put("m")
			g := &goneQueue{Queue: e.q}
			started, cause := make(chan struct{}), make(chan error, 1)
			w := New(g, func(ctx context.Context, d *Delivery) error {
				close(started)
				<-ctx.Done()
				cause <- context.Cause(ctx)
				return nil // must not delete
			}, Options{LeaseDuration: lease, OnEvent: e.rec.on})
			r := start(w)
			<-started
			gone(e, g)
			e.mock.Add(lease / 2)
			if ev := e.rec.waitEvents(t, EventRenewFailed, 1)[0]; !errors.Is(ev.Err, ErrLeaseLost) {
				t.Fatalf("renewal failed with %v, want the lease lost", ev.Err)
			}
			if c := <-cause; !errors.Is(c, ErrLeaseLost) {
				t.Fatalf("handler context cause %v", c)
			}
			e.rec.waitEvents(t, EventLeaseLost, 1)
			// Up to just before the lease lapses (the message comes back
			// then): no renewal is retried.
			e.mock.Add(lease/2 - time.Nanosecond)
			if err := r.stop(t); err != nil {
				t.Fatal(err)
			}
			if n := len(e.rec.of(EventRenewFailed)); n != 1 {
				t.Fatalf("%d failed renewals, want 1: renewing went on", n)
			}
			if s := w.Stats(); s.LeasesLost != 1 || s.Succeeded != 0 || s.LeaseRenewals != 0 {
				t.Fatalf("stats %+v", s)
			}
		})
		t.Run(tc.name+"/delete", func(t *testing.T) {
			e := newEnv(t)
			e.put("m")
			g := &goneQueue{Queue: e.q}
			finish := make(chan struct{})
			w := New(g, func(ctx context.Context, d *Delivery) error {
				<-finish
				return nil
			}, Options{OnEvent: e.rec.on})
			r := start(w)
			e.rec.waitEvents(t, EventFetched, 1)
			gone(e, g)
			close(finish)
			e.rec.waitFor(t, "an outcome", func() bool {
				return len(e.rec.of(EventLeaseLost))+len(e.rec.of(EventAbandoned)) > 0
			})
			if err := r.stop(t); err != nil {
				t.Fatal(err)
			}
			lost := e.rec.of(EventLeaseLost)
			if len(lost) != 1 || lost[0].Err == nil || len(e.rec.of(EventAbandoned)) != 0 {
				t.Fatalf("delete outcome: lease lost %+v, abandoned %+v", lost, e.rec.of(EventAbandoned))
			}
			// A real deletion also fails the fetches meanwhile; those are
			// errors, the delete is not.
			if s := w.Stats(); s.LeasesLost != 1 || s.Succeeded != 0 || (tc.err != nil && s.Errors != 0) {
				t.Fatalf("stats %+v", s)
			}
		})
	}
}
