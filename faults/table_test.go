package faults

import (
	"fmt"
	"math"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/azqlib/azq/internal/longrun"
	"github.com/benbjohnson/clock"
	"pgregory.net/rapid"
)

// throttleBuckets returns how many buckets in's throttle holds, of
// accounts and of queues.
func throttleBuckets(in *Injector) (accounts, queues int) {
	in.mu.Lock()
	defer in.mu.Unlock()
	if in.throttle == nil {
		return 0, 0
	}
	return in.throttle.accounts.len(), in.throttle.queues.len()
}

// stepClock is a mock clock that moves only when told and without the
// millisecond clock.Mock's Add sleeps to let timers run, for tests that
// move it thousands of times and have no timers.
type stepClock struct {
	*clock.Mock
	now time.Time
}

func newStepClock() *stepClock {
	return &stepClock{Mock: clock.NewMock(), now: time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)}
}

func (c *stepClock) Now() time.Time                  { return c.now }
func (c *stepClock) Add(d time.Duration)             { c.now = c.now.Add(d) }
func (c *stepClock) Since(t time.Time) time.Duration { return c.now.Sub(t) }

// level is the tokens key's bucket holds at now, as a request would
// find them, without making it the one used last.
func (t *table[K]) level(key K, now time.Time, rate float64) float64 {
	if i, ok := t.index[key]; ok {
		return t.slots[i].b.level(now, rate)
	}
	return t.dropped.level(now, rate)
}

// withCapacity gives in's throttle tables of capacity buckets, so that a
// test can churn through them in a few requests.
func withCapacity(in *Injector, capacity int) {
	in.mu.Lock()
	defer in.mu.Unlock()
	in.throttle = newLimiter(in.throttle.cfg, capacity)
}

// However many names a client sends, within a second or not, the throttle
// keeps at most maxBuckets buckets of each kind.
func TestThrottleBucketsBounded(t *testing.T) {
	mock := newStepClock()
	in, err := New(Options{Clock: mock, Config: Config{Throttle: &Throttle{QueueMessagesPerSecond: 100, AccountRequestsPerSecond: 1e6}}})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < maxBuckets+2000; i++ {
		// A new account and a new queue each time, every other one in the
		// same instant as the one before.
		r := Request{Operation: "PutMessage", Account: fmt.Sprintf("a%d", i), Queue: fmt.Sprintf("q-%d", i), Messages: 1}
		if in.Decide(r).Fails() {
			t.Fatalf("request %d refused", i)
		}
		if i%2 == 0 {
			mock.Add(time.Microsecond)
		}
	}
	if a, q := throttleBuckets(in); a > maxBuckets || q > maxBuckets {
		t.Fatalf("%d account and %d queue buckets, want at most %d of each", a, q, maxBuckets)
	}
}

// The throttle's memory stays the same from 200,000 names to 1,000,000:
// a client naming new queues without end costs it nothing more. A long
// run: a million decisions take half a minute under -race.
func TestThrottleMemoryBounded(t *testing.T) {
	longrun.Skip(t)
	mock := newStepClock()
	in, err := New(Options{Clock: mock, Config: Config{Throttle: &Throttle{QueueMessagesPerSecond: 2000, AccountRequestsPerSecond: 1e9}}})
	if err != nil {
		t.Fatal(err)
	}
	heap := func() int64 {
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return int64(m.HeapAlloc)
	}
	// A million requests a second, each to a queue of its own.
	decide := func(from, to int) {
		for i := from; i < to; i++ {
			mock.Add(time.Microsecond)
			// Each queue name is a new string, as a request's is.
			if in.Decide(Request{Operation: "PutMessage", Account: "devstoreaccount1", Queue: "q-" + strconv.Itoa(i), Messages: 1}).Fails() {
				t.Fatalf("request %d refused", i)
			}
		}
	}
	decide(0, 200_000)
	before := heap()
	decide(200_000, 1_000_000)
	after := heap()
	t.Logf("heap after 200,000 names %d bytes, after 1,000,000 %d", before, after)
	if after-before > 1<<20 {
		t.Fatalf("the heap grew by %d bytes from 200,000 names to 1,000,000", after-before)
	}
}

// A client that empties its queue's bucket and then names enough other
// queues to push that bucket out of the table does not come back to a
// full one: a name without a bucket starts from the emptiest bucket
// dropped, until it would have filled.
func TestThrottleEvictionKeepsRates(t *testing.T) {
	mock := newStepClock()
	in, err := New(Options{Clock: mock, Config: Config{Throttle: &Throttle{QueueMessagesPerSecond: 5, AccountRequestsPerSecond: 100}}})
	if err != nil {
		t.Fatal(err)
	}
	withCapacity(in, 4)
	victim := Request{Operation: "PutMessage", Account: "devstoreaccount1", Queue: "victim", Messages: 1}
	other := func(i, messages int) Request {
		return Request{Operation: "GetMessages", Account: "devstoreaccount1", Queue: fmt.Sprintf("other-%d", i), Messages: messages}
	}
	for i := 0; i < 5; i++ {
		if in.Decide(victim).Fails() {
			t.Fatalf("put %d refused", i)
		}
	}
	if d := in.Decide(victim); !d.Throttled {
		t.Fatal("a sixth put in the same instant passed")
	}
	// Four other queues take 3 messages each; the fourth pushes the
	// victim's empty bucket out.
	for i := 0; i < 4; i++ {
		if in.Decide(other(i, 3)).Fails() {
			t.Fatalf("other queue %d refused", i)
		}
	}
	if _, q := throttleBuckets(in); q != 4 {
		t.Fatalf("%d queue buckets, want 4", q)
	}
	if d := in.Decide(victim); !d.Throttled || d.Error.Message != ReasonBusy.Message() {
		t.Fatalf("the emptied queue, pushed out of the table, came back with tokens: %+v", d)
	}
	// A new name meets the same empty bucket.
	fresh := victim
	fresh.Queue = "fresh"
	if !in.Decide(fresh).Throttled {
		t.Fatal("a new queue passed while the emptied bucket dropped had not refilled")
	}
	// 200 ms later the emptiest bucket dropped has one token. Two new
	// queues take one each, and push out two buckets fuller than the
	// victim's (3 + 1 tokens each).
	mock.Add(200 * time.Millisecond)
	for i := 4; i < 6; i++ {
		if in.Decide(other(i, 1)).Fails() {
			t.Fatalf("other queue %d refused", i)
		}
	}
	if in.Decide(victim).Fails() {
		t.Fatal("the victim's one token 200 ms later was refused")
	}
	if !in.Decide(victim).Throttled {
		t.Fatal("a second put 200 ms later passed: the victim came back with the tokens of a bucket dropped after it")
	}
	mock.Add(time.Second)
	for i := 0; i < 5; i++ {
		if in.Decide(fresh).Fails() {
			t.Fatalf("a full second later, the new queue's put %d was refused", i)
		}
	}

	// The accounts' table does the same.
	in, _ = newThrottled(t, Throttle{AccountRequestsPerSecond: 3})
	withCapacity(in, 2)
	list := Request{Operation: "ListQueues", Account: "victim"}
	for i := 0; i < 3; i++ {
		in.Decide(list)
	}
	in.Decide(Request{Operation: "ListQueues", Account: "other1"})
	in.Decide(Request{Operation: "ListQueues", Account: "other2"})
	if d := in.Decide(list); !d.Throttled || d.Error.Message != ReasonOperations.Message() {
		t.Fatalf("the emptied account, pushed out of the table, came back with tokens: %+v", d)
	}
}

// A request of the property test below: a name, the messages it handles
// and how long after the one before it comes.
type churnStep struct {
	account, queue int
	messages       int
	after          time.Duration
}

// exactThrottle is the throttle's model: a bucket for every name ever
// seen, never dropped.
type exactThrottle struct {
	cfg      Throttle
	accounts map[string]*bucket
	queues   map[[2]string]*bucket
}

func (m *exactThrottle) admit(r Request, now time.Time) bool {
	get := func(b *bucket) *bucket {
		if b == nil {
			return &bucket{}
		}
		return b
	}
	ab, qb := get(m.accounts[r.Account]), get(m.queues[[2]string{r.Account, r.Queue}])
	arate, qrate := m.cfg.AccountRequestsPerSecond, m.cfg.QueueMessagesPerSecond
	alevel, qlevel := ab.level(now, arate), qb.level(now, qrate)
	need := float64(r.Messages)
	if arate > 0 && alevel < 1 || qlevel < math.Min(need, math.Max(qrate, 1)) {
		return false
	}
	if arate > 0 {
		*ab = bucket{alevel - 1, now}
		m.accounts[r.Account] = ab
	}
	*qb = bucket{qlevel - need, now}
	m.queues[[2]string{r.Account, r.Queue}] = qb
	return true
}

// admitted is a request the throttle let through.
type admitted struct {
	at time.Time
	n  float64
}

// withinRate reports whether the requests a bucket of rate let through
// keep to it: in any span of time, at most a full bucket and what refills
// in the span, plus what the last request took past a full bucket.
func withinRate(list []admitted, rate float64) (int, int, bool) {
	capacity := math.Max(rate, 1)
	for i := range list {
		sum := 0.0
		for j := i; j < len(list); j++ {
			sum += list[j].n
			span := list[j].at.Sub(list[i].at).Seconds()
			if sum > capacity+rate*span+math.Max(0, list[j].n-capacity)+1e-6 {
				return i, j, false
			}
		}
	}
	return 0, 0, true
}

// Property: with as many names as the tables hold, the throttle decides
// as a bucket per name kept for ever does; with more, and buckets dropped
// before they are full, no name's bucket ever holds more than it would
// if it had been kept, no account and no queue gets past its rate, and
// the tables stay within their capacity.
func TestThrottleChurnProperty(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		capacity := rapid.IntRange(1, 6).Draw(t, "capacity")
		names := rapid.IntRange(1, 3*capacity).Draw(t, "names")
		cfg := Throttle{
			QueueMessagesPerSecond:   rapid.SampledFrom([]float64{0.5, 1, 4, 10}).Draw(t, "queue rate"),
			AccountRequestsPerSecond: rapid.SampledFrom([]float64{0, 3, 20, 1000}).Draw(t, "account rate"),
		}
		steps := rapid.SliceOfN(rapid.Custom(func(t *rapid.T) churnStep {
			return churnStep{
				account:  rapid.IntRange(0, names-1).Draw(t, "account"),
				queue:    rapid.IntRange(0, names-1).Draw(t, "queue"),
				messages: rapid.IntRange(1, 12).Draw(t, "messages"),
				// Mostly in the same instant, so that buckets are dropped
				// before they are full.
				after: rapid.SampledFrom([]time.Duration{0, 0, 0, 0, 50 * time.Millisecond, 300 * time.Millisecond, time.Second}).Draw(t, "after"),
			}
		}), 20, 200).Draw(t, "steps")

		mock := newStepClock()
		in, err := New(Options{Clock: mock, Config: Config{Throttle: &cfg}})
		if err != nil {
			t.Fatal(err)
		}
		withCapacity(in, capacity)
		model := &exactThrottle{cfg: cfg, accounts: map[string]*bucket{}, queues: map[[2]string]*bucket{}}
		// With the account's limit off, names share one account and the
		// queue names are what churns.
		accounts, queues := names, names
		if cfg.AccountRequestsPerSecond == 0 {
			accounts = 1
		}
		exact := accounts <= capacity && accounts*queues <= capacity
		byAccount, byQueue := map[string][]admitted{}, map[[2]string][]admitted{}
		// kept has a bucket per name that takes what the throttle let
		// through, and is never dropped.
		kept := &exactThrottle{cfg: cfg, accounts: map[string]*bucket{}, queues: map[[2]string]*bucket{}}
		for i, s := range steps {
			mock.Add(s.after)
			now := mock.Now()
			r := Request{Operation: "GetMessages", Account: fmt.Sprintf("a%d", s.account%accounts), Queue: fmt.Sprintf("q%d", s.queue), Messages: s.messages}
			passed := !in.Decide(r).Fails()
			if a, q := throttleBuckets(in); a > capacity || q > capacity {
				t.Fatalf("step %d: %d account and %d queue buckets, capacity %d", i, a, q, capacity)
			}
			if exact {
				if want := model.admit(r, now); passed != want {
					t.Fatalf("step %d: %+v passed %v, a bucket per name says %v", i, r, passed, want)
				}
			}
			if passed {
				take := func(b *bucket, rate, n float64) *bucket {
					if b == nil {
						b = &bucket{}
					}
					*b = bucket{b.level(now, rate) - n, now}
					return b
				}
				if cfg.AccountRequestsPerSecond > 0 {
					kept.accounts[r.Account] = take(kept.accounts[r.Account], cfg.AccountRequestsPerSecond, 1)
				}
				key := [2]string{r.Account, r.Queue}
				kept.queues[key] = take(kept.queues[key], cfg.QueueMessagesPerSecond, float64(r.Messages))
			}
			lim := in.throttle
			for name, b := range kept.accounts {
				if got, want := lim.accounts.level(name, now, cfg.AccountRequestsPerSecond), b.level(now, cfg.AccountRequestsPerSecond); got > want+1e-9 {
					t.Fatalf("step %d: account %s finds %v tokens, %v if its bucket had been kept", i, name, got, want)
				}
			}
			for key, b := range kept.queues {
				if got, want := lim.queues.level(key, now, cfg.QueueMessagesPerSecond), b.level(now, cfg.QueueMessagesPerSecond); got > want+1e-9 {
					t.Fatalf("step %d: queue %v finds %v tokens, %v if its bucket had been kept", i, key, got, want)
				}
			}
			if passed {
				byAccount[r.Account] = append(byAccount[r.Account], admitted{now, 1})
				key := [2]string{r.Account, r.Queue}
				byQueue[key] = append(byQueue[key], admitted{now, float64(r.Messages)})
			}
		}
		if cfg.AccountRequestsPerSecond > 0 {
			for name, list := range byAccount {
				if i, j, ok := withinRate(list, cfg.AccountRequestsPerSecond); !ok {
					t.Fatalf("account %s past its rate between %v and %v: %v", name, list[i].at, list[j].at, list)
				}
			}
		}
		for key, list := range byQueue {
			if i, j, ok := withinRate(list, cfg.QueueMessagesPerSecond); !ok {
				t.Fatalf("queue %v past its rate between %v and %v: %v", key, list[i].at, list[j].at, list)
			}
		}
	})
}
