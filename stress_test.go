package azq

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/benbjohnson/clock"
)

// failsafe bounds how long a test waits for goroutines that should finish
// at once. It is never reached when the queue is correct: it only turns a
// hang into a failure.
const failsafe = 10 * time.Second

// awaitWaiters spins (yielding, not sleeping) until n Receive calls are
// parked on q, so that a test can act on a queue it knows is being waited on.
func awaitWaiters(t *testing.T, q *Queue, n int) {
	t.Helper()
	deadline := time.Now().Add(failsafe)
	for {
		q.mu.Lock()
		w := q.waiters
		q.mu.Unlock()
		if w == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d Receive calls waiting, want %d", w, n)
		}
		runtime.Gosched()
	}
}

// TestReceiveWokenByUpdateShorteningVisibility: a Receive sleeping until a
// message's next-visible time must notice an Update that makes the message
// visible sooner (not only with visibility 0), and return at that instant.
func TestReceiveWokenByUpdateShorteningVisibility(t *testing.T) {
	for _, vis := range []time.Duration{0, time.Second, 10 * time.Second} {
		t.Run(vis.String(), func(t *testing.T) {
			clk := clock.NewMock()
			q := New(WithClock(clk))
			ctx, cancel := context.WithTimeout(context.Background(), failsafe)
			defer cancel()
			start := clk.Now()
			m, err := q.Put(ctx, "job", &PutOptions{VisibilityTimeout: time.Hour})
			if err != nil {
				t.Fatal(err)
			}
			type result struct {
				msgs []Message
				err  error
			}
			done := make(chan result, 1)
			go func() {
				msgs, err := q.Receive(ctx, 1, time.Minute)
				done <- result{msgs, err}
			}()
			awaitWaiters(t, q, 1)
			if _, err := q.Update(ctx, m.ID, m.PopReceipt, vis, nil); err != nil {
				t.Fatal(err)
			}
			if vis > 0 {
				awaitWaiters(t, q, 1) // woken, looked, and parked again
				clk.Add(vis)
			}
			r := <-done
			if r.err != nil {
				t.Fatalf("Receive: %v (still asleep until the old next-visible time)", r.err)
			}
			if len(r.msgs) != 1 || r.msgs[0].ID != m.ID {
				t.Fatalf("Receive returned %d messages, want the updated one", len(r.msgs))
			}
			if got := r.msgs[0].NextVisibleTime.Sub(start); got != vis+time.Minute {
				t.Errorf("received at +%v, want +%v", got-time.Minute, vis)
			}
		})
	}
}

// TestReceiveWokenByEarlierPut: Receive calls sleeping until a message
// visible in an hour must take a message put later with a shorter delay at
// its own visible time, each waiter taking one message, while the rest keep
// waiting. The queue's one timer must move earlier for the new message.
func TestReceiveWokenByEarlierPut(t *testing.T) {
	const waiters = 4
	const lease = 2 * time.Hour // longer than the test: nothing comes back
	clk := clock.NewMock()
	q := New(WithClock(clk))
	ctx, cancel := context.WithTimeout(context.Background(), failsafe)
	defer cancel()
	start := clk.Now()
	if _, err := q.Put(ctx, "later", &PutOptions{VisibilityTimeout: time.Hour}); err != nil {
		t.Fatal(err)
	}
	got := make(chan Message, waiters)
	var wg sync.WaitGroup
	for range waiters {
		wg.Add(1)
		go func() {
			defer wg.Done()
			msgs, err := q.Receive(ctx, 1, lease)
			if err != nil {
				t.Error(err)
				return
			}
			got <- msgs[0]
		}()
	}
	awaitWaiters(t, q, waiters)
	for i := range waiters - 1 {
		if _, err := q.Put(ctx, fmt.Sprint("sooner", i), &PutOptions{VisibilityTimeout: time.Second}); err != nil {
			t.Fatal(err)
		}
	}
	awaitWaiters(t, q, waiters) // a delayed Put wakes nobody before its time
	clk.Add(time.Second)
	for range waiters - 1 {
		m := <-got
		if m.Content == "later" || !m.NextVisibleTime.Equal(start.Add(time.Second+lease)) {
			t.Errorf("received %q at %v, want a sooner message at +1s", m.Content, m.NextVisibleTime.Add(-lease).Sub(start))
		}
	}
	awaitWaiters(t, q, 1)
	clk.Add(time.Hour - time.Second)
	if m := <-got; m.Content != "later" || !m.NextVisibleTime.Equal(start.Add(time.Hour+lease)) {
		t.Errorf("received %q at %v, want \"later\" at +1h", m.Content, m.NextVisibleTime.Add(-lease).Sub(start))
	}
	wg.Wait()
}

// TestReceiveLeavesNoTimer: a Receive that gives up, waiting for a message
// a week away, must not leave the queue's timer armed, and Close must
// disarm it while calls still wait.
func TestReceiveLeavesNoTimer(t *testing.T) {
	clk := clock.NewMock()
	q := New(WithClock(clk))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if _, err := q.Put(ctx, "next week", &PutOptions{VisibilityTimeout: 6 * 24 * time.Hour}); err != nil {
		t.Fatal(err)
	}
	armed := func() bool {
		q.mu.Lock()
		defer q.mu.Unlock()
		return q.timer != nil
	}
	for _, end := range []string{"cancel", "close"} {
		done := make(chan error, 1)
		go func() {
			_, err := q.Receive(ctx, 1, time.Minute)
			done <- err
		}()
		awaitWaiters(t, q, 1)
		if !armed() {
			t.Fatalf("%s: no timer armed for the delayed message while Receive waits", end)
		}
		if end == "cancel" {
			cancel()
		} else {
			q.Close()
		}
		if err := <-done; err == nil {
			t.Fatalf("%s: Receive returned no error", end)
		}
		if armed() {
			t.Errorf("%s: the timer is still armed with nobody waiting", end)
		}
		ctx = context.Background()
	}
}

// stressLedger records, per message content, every delivery and deletion
// the consumers of a stress test saw.
type stressLedger struct {
	mu        sync.Mutex
	dequeues  map[string][]int64 // DequeueCount of every delivery
	deletions map[string]int
	deleted   int

	deliveries atomic.Int64 // len of all dequeues, readable without mu
}

func newStressLedger() *stressLedger {
	return &stressLedger{dequeues: map[string][]int64{}, deletions: map[string]int{}}
}

func (l *stressLedger) delivered(m Message) {
	l.mu.Lock()
	l.dequeues[m.Content] = append(l.dequeues[m.Content], m.DequeueCount)
	l.mu.Unlock()
	l.deliveries.Add(1)
}

// deletedOne records a successful Delete and returns how many there were.
func (l *stressLedger) deletedOne(content string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.deletions[content]++
	l.deleted++
	return l.deleted
}

// verify checks that every message was delivered at least once and
// deleted exactly once, and that its deliveries carry the DequeueCounts
// 1..k, each once: no Get was lost or counted twice, and no two consumers
// ever held the same delivery.
func (l *stressLedger) verify(t *testing.T, contents []string) {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	redelivered := 0
	for _, c := range contents {
		if n := l.deletions[c]; n != 1 {
			t.Errorf("%s deleted %d times, want exactly once", c, n)
		}
		counts := slices.Clone(l.dequeues[c])
		if len(counts) == 0 {
			t.Errorf("%s never delivered", c)
			continue
		}
		slices.Sort(counts)
		for i, n := range counts {
			if n != int64(i+1) {
				t.Errorf("%s delivered with DequeueCounts %v, want 1..%d", c, counts, len(counts))
				break
			}
		}
		redelivered += len(counts) - 1
	}
	if len(l.dequeues) != len(contents) {
		t.Errorf("%d distinct contents delivered, want %d", len(l.dequeues), len(contents))
	}
	t.Logf("%d messages, %d redeliveries", len(contents), redelivered)
}

type stressConfig struct {
	producers, perProducer, consumers int
	visibility                        time.Duration // a consumer's lease
	maxDelay                          time.Duration // longest Put delay
}

// runStress has producers put messages while consumers Receive them; a
// third of deliveries "crash" (no Delete, so the lease lapses and the
// message reappears), some renew their lease with Update first, the rest
// Delete. It returns when every message has been deleted once, and checks
// that the queue is then empty. If drive is not nil, it runs in its own
// goroutine until its stop channel closes, with the ledger to pace itself by.
func runStress(t *testing.T, q *Queue, cfg stressConfig, drive func(stop <-chan struct{}, l *stressLedger)) {
	ctx, cancel := context.WithTimeout(context.Background(), failsafe)
	defer cancel()
	total := cfg.producers * cfg.perProducer
	contents := make([]string, 0, total)
	for p := range cfg.producers {
		for i := range cfg.perProducer {
			contents = append(contents, fmt.Sprintf("p%d-m%d", p, i))
		}
	}
	ledger := newStressLedger()
	done := make(chan struct{})
	var closeDone sync.Once
	fail := make(chan error, cfg.producers+cfg.consumers)
	if drive != nil {
		stopDriver := make(chan struct{})
		driverDone := make(chan struct{})
		go func() {
			defer close(driverDone)
			drive(stopDriver, ledger)
		}()
		defer func() {
			close(stopDriver)
			<-driverDone
		}()
	}

	var wg sync.WaitGroup
	for p := range cfg.producers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(p), 1))
			for i := range cfg.perProducer {
				var opts *PutOptions
				if cfg.maxDelay > 0 && rng.IntN(4) == 0 {
					opts = &PutOptions{VisibilityTimeout: time.Duration(rng.Int64N(int64(cfg.maxDelay)))}
				}
				if _, err := q.Put(ctx, fmt.Sprintf("p%d-m%d", p, i), opts); err != nil {
					fail <- fmt.Errorf("Put: %w", err)
					return
				}
			}
		}()
	}
	for c := range cfg.consumers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(c), 2))
			// report fails the test with err, unless the test is over and
			// err says so.
			report := func(op string, err error) {
				select {
				case <-done:
					if errors.Is(err, context.Canceled) {
						return
					}
				default:
				}
				fail <- fmt.Errorf("%s: %w", op, err)
			}
			for {
				msgs, err := q.Receive(ctx, 1+rng.IntN(32), cfg.visibility)
				if err != nil {
					report("Receive", err)
					return
				}
				// Record the whole batch first: a consumer may stop half
				// way through it.
				for _, m := range msgs {
					ledger.delivered(m)
				}
				for _, m := range msgs {
					receipt := m.PopReceipt
					switch r := rng.IntN(6); {
					case r < 2:
						continue // crash: never delete
					case r < 3:
						res, err := q.Update(ctx, m.ID, receipt, cfg.visibility, nil)
						if errors.Is(err, ErrMessageNotFound) {
							continue // the lease lapsed and someone else has it
						}
						if err != nil {
							report("Update", err)
							return
						}
						receipt = res.PopReceipt
					}
					err := q.Delete(ctx, m.ID, receipt)
					if errors.Is(err, ErrMessageNotFound) {
						continue // the lease lapsed and someone else has it
					}
					if err != nil {
						report("Delete", err)
						return
					}
					if ledger.deletedOne(m.Content) == total {
						closeDone.Do(func() { close(done) })
					}
				}
			}
		}()
	}

	select {
	case <-done:
	case err := <-fail:
		t.Error(err)
	case <-ctx.Done():
		ledger.mu.Lock()
		t.Errorf("gave up: %d of %d messages deleted", ledger.deleted, total)
		ledger.mu.Unlock()
	}
	closeDone.Do(func() { close(done) })
	cancel()
	wg.Wait()
	close(fail)
	for err := range fail {
		t.Error(err)
	}
	if t.Failed() {
		return
	}
	ledger.verify(t, contents)
	if n, err := q.ApproximateCount(context.Background()); err != nil || n != 0 {
		t.Errorf("ApproximateCount = %d, %v after every message was deleted; want 0", n, err)
	}
	if msgs, err := q.Peek(context.Background(), 32); err != nil || len(msgs) != 0 {
		t.Errorf("Peek found %d messages, %v after every message was deleted", len(msgs), err)
	}
}

// TestStress runs producers and consumers, some of them crashing, on one
// queue whose mock clock a driver goroutine advances, so leases lapse and
// messages reappear without the test waiting on real time. Every message
// must be delivered at least once and deleted exactly once, and the queue
// must end empty.
//
// The driver paces the mock clock by the consumers' progress, never by real
// time: it advances whenever every consumer is parked in Receive (nothing is
// visible, so only time can help), and otherwise once per stressStep
// deliveries, so that leases also lapse while consumers are busy and Update
// and Delete meet receipts that another consumer has made stale. A driver
// that ran freely would, on a loaded machine, let every lease lapse before
// its holder could delete, and the test would measure the machine's speed.
func TestStress(t *testing.T) {
	const consumers, stressStep = 16, 64
	clk := clock.NewMock()
	q := New(WithClock(clk))
	drive := func(stop <-chan struct{}, l *stressLedger) {
		next := int64(stressStep)
		for {
			select {
			case <-stop:
				return
			default:
			}
			q.mu.Lock()
			parked := q.waiters == consumers
			q.mu.Unlock()
			if d := l.deliveries.Load(); parked || d >= next {
				next = d + stressStep
				clk.Add(200 * time.Millisecond)
			} else {
				runtime.Gosched()
			}
		}
	}
	runStress(t, q, stressConfig{
		producers: 8, perProducer: 1000, consumers: consumers,
		visibility: time.Second, maxDelay: 2 * time.Second,
	}, drive)
}

// TestIntegrationStressRealClock is TestStress on the real clock, with
// leases of a millisecond (custom limits) so that crashed messages come
// back within the test.
func TestIntegrationStressRealClock(t *testing.T) {
	if testing.Short() {
		t.Skip("waits on the real clock")
	}
	q := New(WithLimits(Limits{MinGetVisibilityTimeout: time.Millisecond}))
	runStress(t, q, stressConfig{
		producers: 4, perProducer: 250, consumers: 8,
		visibility: time.Millisecond, maxDelay: 5 * time.Millisecond,
	}, nil)
}

// TestStressReceiveWokenByPut parks many Receive calls on an empty queue,
// then puts exactly one message per waiter from several producers: Put must
// wake them (the mock clock never moves), and every waiter must get one
// distinct message. A second round puts delayed messages, which the waiters
// must take when the mock clock reaches their next-visible time.
func TestStressReceiveWokenByPut(t *testing.T) {
	const waiters, producers = 32, 4
	for _, delay := range []time.Duration{0, 5 * time.Second} {
		t.Run(delay.String(), func(t *testing.T) {
			clk := clock.NewMock()
			q := New(WithClock(clk))
			ctx, cancel := context.WithTimeout(context.Background(), failsafe)
			defer cancel()

			got := make(chan Message, waiters)
			errs := make(chan error, waiters)
			var wg sync.WaitGroup
			for range waiters {
				wg.Add(1)
				go func() {
					defer wg.Done()
					msgs, err := q.Receive(ctx, 1, time.Hour)
					if err != nil {
						errs <- err
						return
					}
					if len(msgs) != 1 {
						errs <- fmt.Errorf("Receive(1) returned %d messages", len(msgs))
						return
					}
					got <- msgs[0]
				}()
			}
			awaitWaiters(t, q, waiters)

			start := clk.Now()
			var pw sync.WaitGroup
			for p := range producers {
				pw.Add(1)
				go func() {
					defer pw.Done()
					for i := range waiters / producers {
						if _, err := q.Put(ctx, fmt.Sprintf("p%d-m%d", p, i), &PutOptions{VisibilityTimeout: delay}); err != nil {
							errs <- err
						}
					}
				}()
			}
			pw.Wait()
			if delay > 0 {
				clk.Add(delay)
			}
			wg.Wait()
			close(got)
			close(errs)
			for err := range errs {
				t.Fatal(err)
			}
			seen := map[string]bool{}
			for m := range got {
				if seen[m.Content] {
					t.Errorf("%s received twice", m.Content)
				}
				seen[m.Content] = true
				if m.DequeueCount != 1 {
					t.Errorf("%s: DequeueCount %d, want 1", m.Content, m.DequeueCount)
				}
				if want := start.Add(delay + time.Hour); !m.NextVisibleTime.Equal(want) {
					t.Errorf("%s received at %v, want %v", m.Content, m.NextVisibleTime.Add(-time.Hour), start.Add(delay))
				}
			}
			if len(seen) != waiters {
				t.Errorf("%d distinct messages received, want %d", len(seen), waiters)
			}
			if n, _ := q.ApproximateCount(ctx); n != waiters {
				t.Errorf("ApproximateCount = %d, want %d (all received, none deleted)", n, waiters)
			}
		})
	}
}

// TestReceiveMockClockAdvancedConcurrently: Receive calls arm and re-arm
// their timers on a mock clock while another goroutine advances it, as the
// test of a consumer does, and while Puts of delayed messages keep waking
// them. The mock clock must never hang (a timer fired twice by concurrent
// callers of the mock once blocked on its full channel with the mock's lock
// held), and every message must be received.
func TestReceiveMockClockAdvancedConcurrently(t *testing.T) {
	const receivers, puts = 16, 400
	clk := clock.NewMock()
	q := New(WithClock(clk))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var received atomic.Int64
	var wg sync.WaitGroup
	for range receivers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				msgs, err := q.Receive(ctx, 1, time.Hour)
				if err != nil {
					return
				}
				received.Add(int64(len(msgs)))
			}
		}()
	}
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		var driver sync.WaitGroup
		driver.Add(1)
		go func() { // the producer
			defer driver.Done()
			for i := range puts {
				if _, err := q.Put(ctx, fmt.Sprint(i), &PutOptions{VisibilityTimeout: time.Duration(1+i%3) * time.Millisecond}); err != nil {
					t.Error(err)
					return
				}
				runtime.Gosched()
			}
		}()
		for received.Load() < puts {
			clk.Add(time.Millisecond)
		}
		driver.Wait()
		cancel()
		wg.Wait()
	}()
	select {
	case <-finished:
	case <-time.After(failsafe):
		t.Fatalf("hung after %d of %d receives: the mock clock or a Receive is stuck", received.Load(), puts)
	}
}
