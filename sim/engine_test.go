package sim

import (
	"bytes"
	"context"
	"errors"
	"math"
	"os"
	"path/filepath"
	"testing"
	"time"
)

func run(t *testing.T, sc *Scenario) *Report {
	t.Helper()
	r, err := Run(context.Background(), sc, Options{})
	if err != nil {
		if r != nil {
			var b bytes.Buffer
			r.WriteText(&b)
			t.Log(b.String())
		}
		t.Fatal(err)
	}
	return r
}

func d(x time.Duration) Duration { return Duration(x) }

// Fixed-interval polling of an empty queue: each listener polls at its
// start and every interval after, so duration/interval empty Gets each
// (rounded up when it does not divide), and not one event per poll.
func TestEmptyQueuePollingIsCountedExactly(t *testing.T) {
	for _, tc := range []struct {
		name             string
		count            int
		interval, runFor time.Duration
		spread           time.Duration
		wantPerListener  []int64 // by listener, or one value for all
		wantEventsAtMost int64
		sample           time.Duration
	}{
		{name: "1s for 22h", count: 200, interval: time.Second, runFor: 22 * time.Hour, wantPerListener: []int64{79200}},
		{name: "7s for 1h", count: 3, interval: 7 * time.Second, runFor: time.Hour, wantPerListener: []int64{515}}, // ceil(3600/7)
		{name: "spread", count: 4, interval: 10 * time.Second, runFor: 100 * time.Second, spread: 20 * time.Second,
			wantPerListener: []int64{10, 10, 9, 9}}, // starts at 0, 5, 10, 15 s
		{name: "1s for 7d", count: 1000, interval: time.Second, runFor: 7 * 24 * time.Hour, wantPerListener: []int64{604800}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sc := &Scenario{Duration: d(tc.runFor),
				Consumers: []Fleet{{Count: tc.count, Spread: d(tc.spread), Processing: Const(time.Second),
					Listen: Listen{Kind: "poll", Interval: d(tc.interval)}}}}
			if err := sc.Check(); err != nil {
				t.Fatal(err)
			}
			e := newEngine(sc, Options{})
			if err := e.run(context.Background()); err != nil {
				t.Fatal(err)
			}
			var want int64
			for i := range tc.count {
				w := tc.wantPerListener[0]
				if len(tc.wantPerListener) > 1 {
					w = tc.wantPerListener[i]
				}
				want += w
			}
			r := e.report()
			if got := r.Transactions.EmptyGets; got != want {
				t.Errorf("empty Gets = %d, want %d", got, want)
			}
			if r.Transactions.Count[OpGet] != want || r.Transactions.Total != want {
				t.Errorf("transactions %+v, want %d Gets only", r.Transactions.Count, want)
			}
			// One start event per listener and the samples: no event per poll.
			if maxEvents := int64(tc.count) + int64(len(r.Series)) + 10; e.events > maxEvents {
				t.Errorf("%d events for %d polls; idle polling must not be simulated poll by poll", e.events, want)
			}
		})
	}
}

// The time series counts idle polls in the interval in which they happen.
func TestIdlePollsInTheTimeSeries(t *testing.T) {
	sc := &Scenario{Duration: d(time.Hour), Sample: d(10 * time.Minute),
		Consumers: []Fleet{{Count: 5, Processing: Const(time.Second), Listen: Listen{Kind: "poll", Interval: d(time.Minute)}}}}
	r := run(t, sc)
	if len(r.Series) != 6 {
		t.Fatalf("%d samples, want 6", len(r.Series))
	}
	for i, s := range r.Series {
		// Polls at 0, 1, ..., 59 min: ten per listener in each interval
		// [10i, 10(i+1)) min.
		if s.EmptyGets != 50 || s.Ops[OpGet] != 50 {
			t.Errorf("sample %d: %d empty Gets, %d Gets; want 50", i, s.EmptyGets, s.Ops[OpGet])
		}
	}
}

// Listeners waiting in Receive cost nothing while the queue is empty.
func TestReceiveWaitsForFree(t *testing.T) {
	sc := &Scenario{Duration: d(24 * time.Hour),
		Consumers: []Fleet{{Count: 100, Processing: Const(time.Second), Listen: Listen{Kind: "receive"}}}}
	r := run(t, sc)
	if r.Transactions.Total != 0 {
		t.Errorf("transactions %+v, want none", r.Transactions.Count)
	}
}

// Receive returns at the instant a message becomes visible: with enough
// listeners waiting and constant work, every latency is the work.
func TestReceiveHasNoPollingDelay(t *testing.T) {
	sc := &Scenario{Duration: d(time.Hour),
		Producers: []Producer{{Arrival: Arrival{Kind: "poisson", Rate: 1}}},
		Consumers: []Fleet{{Count: 50, BatchSize: 1, Processing: Const(2 * time.Second), Listen: Listen{Kind: "receive"}}}}
	r := run(t, sc)
	if r.Latency.Max != 2 || r.Latency.P50 != 2 {
		t.Errorf("latency %+v, want exactly 2 s", r.Latency)
	}
	if r.Transactions.Count[OpGet] != r.Messages.Deliveries {
		t.Errorf("%d Gets for %d deliveries: each Receive should be one Get of one message", r.Transactions.Count[OpGet], r.Messages.Deliveries)
	}
}

// A poller finds a message at its next poll: with one listener polling
// every 10 s, latency is the wait for the next poll plus the work.
func TestPollingDelay(t *testing.T) {
	sc := &Scenario{Duration: d(time.Hour),
		Producers: []Producer{{Arrival: Arrival{Kind: "constant", Rate: 1.0 / 60}, Start: d(5 * time.Second)}},
		Consumers: []Fleet{{Count: 1, Processing: Const(time.Second), Listen: Listen{Kind: "poll", Interval: d(10 * time.Second)}}}}
	r := run(t, sc)
	// The same listener by hand: it polls every 10 s while the queue is
	// empty, finds a message at its first poll after the put (a poll at
	// the very instant of the put comes first), works 1 s, and polls
	// again at once, which shifts its phase by a second each time.
	var gets, maxLat, sumLat int64
	poll := int64(0)
	for k := int64(0); k < 60; k++ {
		put := 5 + 60*k
		for ; poll <= put; poll += 10 {
			gets++ // empty
		}
		gets++ // finds it
		lat := poll + 1 - put
		sumLat += lat
		maxLat = max(maxLat, lat)
		poll++ // done; polls again at once
	}
	for ; poll < 3600; poll += 10 {
		gets++
	}
	if r.Messages.Completed != 60 || r.Latency.Max != float64(maxLat) || r.Latency.Mean != float64(sumLat)/60 {
		t.Errorf("completed %d, latency %+v; want 60, max %d s, mean %v s", r.Messages.Completed, r.Latency, maxLat, float64(sumLat)/60)
	}
	if got := r.Transactions.Count[OpGet]; got != gets {
		t.Errorf("%d Gets, want %d", got, gets)
	}
}

// erlangC is the probability that an arrival waits in an M/M/c queue.
func erlangC(c int, a float64) float64 {
	sum, term := 0.0, 1.0
	for k := 0; k < c; k++ {
		sum += term
		term *= a / float64(k+1)
	}
	top := term * float64(c) / (float64(c) - a) // a^c/c! · c/(c-a)
	return top / (sum + top)
}

// Poisson arrivals, exponential work, c consumers that wait in Receive (no
// polling delay): an M/M/c queue, whose mean time in system is known.
func TestMMcLatency(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		c      int
		lambda float64 // per second
		mean   time.Duration
	}{
		{c: 1, lambda: 0.5, mean: time.Second},
		{c: 10, lambda: 8, mean: time.Second},
		{c: 50, lambda: 45, mean: time.Second},
	} {
		mu := 1 / tc.mean.Seconds()
		a := tc.lambda / mu
		want := erlangC(tc.c, a)/(float64(tc.c)*mu-tc.lambda) + 1/mu
		// 50,000 messages: across seeds the mean comes within 3.3 % of
		// the formula.
		runFor := time.Duration(50_000/tc.lambda) * time.Second
		sc := &Scenario{Seed: 7, Duration: d(runFor),
			Producers: []Producer{{Arrival: Arrival{Kind: "poisson", Rate: tc.lambda}, TTL: Never}},
			Consumers: []Fleet{{Count: tc.c, BatchSize: 1, Processing: Exponential(tc.mean), Listen: Listen{Kind: "receive"}}}}
		r := run(t, sc)
		if got := r.Latency.Mean; math.Abs(got-want)/want > 0.05 {
			t.Errorf("M/M/%d at load %.2f: mean latency %.4f s, want %.4f s ± 5 %%", tc.c, a/float64(tc.c), got, want)
		}
		if u := r.Fleets[0].Utilisation; math.Abs(u-a/float64(tc.c)) > 0.02 {
			t.Errorf("M/M/%d: utilisation %.3f, want %.3f", tc.c, u, a/float64(tc.c))
		}
	}
}

// No duplicates when the lease outlasts the work and nothing crashes or
// fails, with any processing-time distribution bounded below the timeout.
func TestNoDuplicatesWhenTheLeaseCoversTheWork(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		batch int
		vt    time.Duration
		proc  Dist
	}{
		{"constant", 1, 31 * time.Second, Const(30 * time.Second)},
		{"lognormal capped", 1, 61 * time.Second, Dist{Kind: "lognormal", Median: d(10 * time.Second), Sigma: 1.5, Max: d(time.Minute)}},
		{"empirical", 1, 10 * time.Second, Dist{Kind: "empirical", Values: []Duration{d(time.Second), d(9 * time.Second)}, Weights: []float64{9, 1}}},
		{"batch of 8", 8, 81 * time.Second, Dist{Kind: "uniform", Min: d(time.Second), Max: d(10 * time.Second)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, listen := range []Listen{{Kind: "poll"}, {Kind: "backoff"}, {Kind: "receive"}} {
				sc := &Scenario{Seed: 3, Duration: d(2 * time.Hour),
					Producers: []Producer{{Arrival: Arrival{Kind: "poisson", Rate: 0.5}},
						{Arrival: Arrival{Kind: "burst", Size: 500, Every: d(30 * time.Minute)}}},
					Consumers: []Fleet{{Count: 40, BatchSize: tc.batch, VisibilityTimeout: d(tc.vt), Processing: tc.proc, Listen: listen}}}
				r := run(t, sc)
				m := r.Messages
				if m.Duplicates != 0 || m.ProcessedAgain != 0 || m.StaleDeletes != 0 {
					t.Errorf("%s: %d duplicates, %d processed again, %d stale deletes; want none", listen.Kind, m.Duplicates, m.ProcessedAgain, m.StaleDeletes)
				}
				if m.Completed < m.Put*9/10 {
					t.Errorf("%s: only %d of %d completed", listen.Kind, m.Completed, m.Put)
				}
			}
		})
	}
}

// The converse: a lease shorter than the work gives duplicates, and a
// renewed lease prevents them.
func TestShortLeasesDuplicateAndRenewalPrevents(t *testing.T) {
	sc := &Scenario{Seed: 3, Duration: d(time.Hour),
		Producers: []Producer{{Arrival: Arrival{Kind: "constant", Rate: 1}}},
		Consumers: []Fleet{{Count: 40, BatchSize: 1, VisibilityTimeout: d(5 * time.Second), Processing: Const(12 * time.Second)}}}
	r := run(t, sc)
	if r.Messages.Duplicates == 0 || r.Messages.ProcessedAgain == 0 || r.Messages.StaleDeletes == 0 {
		t.Errorf("messages %+v: want duplicates from 5 s leases over 12 s of work", r.Messages)
	}
	sc.Consumers[0].Renew = true
	r = run(t, sc)
	if r.Messages.Duplicates != 0 {
		t.Errorf("%d duplicates with renewal, want none", r.Messages.Duplicates)
	}
	// Renewed at 2.5 s, 5 s, 7.5 s and 10 s of each 12 s message.
	if got, want := r.Transactions.Count[OpUpdate], 4*r.Messages.Deliveries; got < want-160 || got > want {
		t.Errorf("%d Updates for %d deliveries, want about 4 each", got, r.Messages.Deliveries)
	}
}

// Crashes, failures and poison: every message ends completed, poisoned,
// expired or still queued.
func TestCrashesFailuresAndPoisonLoseNothing(t *testing.T) {
	t.Parallel()
	retry := d(5 * time.Second)
	sc := &Scenario{Seed: 11, Duration: d(3 * time.Hour),
		Producers: []Producer{{Arrival: Arrival{Kind: "poisson", Rate: 3}, TTL: d(time.Hour)}},
		Consumers: []Fleet{
			{Count: 20, BatchSize: 8, VisibilityTimeout: d(20 * time.Second), Processing: Exponential(2 * time.Second),
				FailureProbability: 0.2, MaxDequeueCount: 3, CrashProbability: 0.05, RestartDelay: d(time.Minute),
				Listen: Listen{Kind: "backoff", Max: d(10 * time.Second)}},
			{Count: 5, BatchSize: 2, VisibilityTimeout: d(10 * time.Second), Processing: Exponential(3 * time.Second),
				FailureProbability: 0.3, RetryDelay: &retry, Renew: true, CrashProbability: 0.02, Listen: Listen{Kind: "receive"}},
		}}
	r := run(t, sc)
	m := r.Messages
	if m.Crashes == 0 || m.Poisoned == 0 || m.Failed == 0 || m.Duplicates == 0 {
		t.Fatalf("messages %+v: the scenario should crash, fail and poison", m)
	}
	if got := m.Completed + m.Poisoned + m.Expired + m.InQueue; got != m.Put || m.Lost != 0 {
		t.Errorf("completed+poisoned+expired+queued = %d, put %d, lost %d", got, m.Put, m.Lost)
	}
}

// A consumer that crashes on every message never completes one; the
// messages go to the poison queue once over the maximum dequeue count.
func TestAlwaysCrashingGoesToPoison(t *testing.T) {
	sc := &Scenario{Seed: 1, Duration: d(2 * time.Hour),
		Producers: []Producer{{Arrival: Arrival{Kind: "burst", Size: 50}}},
		Consumers: []Fleet{{Count: 5, BatchSize: 4, VisibilityTimeout: d(10 * time.Second), Processing: Const(time.Second),
			CrashProbability: 1, RestartDelay: d(time.Second), MaxDequeueCount: 2, Listen: Listen{Kind: "poll"}}}}
	r := run(t, sc)
	if r.Messages.Poisoned != 50 || r.Messages.Completed != 0 {
		t.Errorf("messages %+v, want all 50 poisoned", r.Messages)
	}
}

// Messages expire at their time-to-live, and are counted.
func TestExpiry(t *testing.T) {
	sc := &Scenario{Seed: 1, Duration: d(3 * time.Hour),
		Producers: []Producer{{Arrival: Arrival{Kind: "constant", Rate: 1.0 / 60}, TTL: d(time.Hour)}},
		// Nobody consumes.
		Consumers: []Fleet{{Count: 1, Start: d(1000 * time.Hour), Processing: Const(time.Second)}}}
	r := run(t, sc)
	// Put at 0, 1, ..., 179 min; those put at 120 min or earlier expired
	// by 180 min (expiry at put + 60 min <= 180 min).
	if r.Messages.Put != 180 || r.Messages.Expired != 121 || r.Messages.InQueue != 59 {
		t.Errorf("messages %+v, want 180 put, 121 expired, 59 queued", r.Messages)
	}
}

// A delayed message is not delivered before its delay.
func TestInitialDelay(t *testing.T) {
	sc := &Scenario{Seed: 1, Duration: d(3 * time.Hour),
		Producers: []Producer{{Arrival: Arrival{Kind: "poisson", Rate: 0.1}, Stop: d(time.Hour), Delay: Const(time.Hour)}},
		Consumers: []Fleet{{Count: 3, BatchSize: 1, Processing: Const(time.Second), Listen: Listen{Kind: "receive"}}}}
	r := run(t, sc)
	if r.Latency.P50 != 3601 || r.Latency.Max != 3601 || r.Messages.Completed != r.Messages.Put {
		t.Errorf("latency %+v, messages %+v: want every message done 1 h + 1 s after its put", r.Latency, r.Messages)
	}
}

// Autoscaling follows the depth up to its maximum and back down.
func TestAutoscale(t *testing.T) {
	sc := &Scenario{Seed: 1, Duration: d(4 * time.Hour),
		Producers: []Producer{{Arrival: Arrival{Kind: "burst", Size: 20000}, Start: d(time.Hour)}},
		Consumers: []Fleet{{Count: 1, BatchSize: 16, Processing: Const(500 * time.Millisecond), Listen: Listen{Kind: "poll"},
			Autoscale: &Autoscale{PerConsumer: 500, Min: 1, Max: 30, StartDelay: d(2 * time.Minute)}}}}
	r := run(t, sc)
	if r.Fleets[0].MaxConsumers != 30 {
		t.Errorf("at most %d consumers, want 30", r.Fleets[0].MaxConsumers)
	}
	last := r.Series[len(r.Series)-1]
	if last.Consumers != 1 || r.Messages.Completed != 20000 {
		t.Errorf("at the end %d consumers, %d completed; want 1 and 20000", last.Consumers, r.Messages.Completed)
	}
	// One a minute, from the first minute to the last before the end.
	if r.Transactions.Count[OpMetadata] != 4*60-1 {
		t.Errorf("%d depth reads, want one a minute", r.Transactions.Count[OpMetadata])
	}
}

// A message that vanishes from the queue behind the simulation's back is
// reported lost, and fails the run.
func TestLossIsDetected(t *testing.T) {
	sc := &Scenario{Seed: 1, Duration: d(time.Hour), Sample: d(time.Minute),
		Producers: []Producer{{Arrival: Arrival{Kind: "burst", Size: 10}}},
		Consumers: []Fleet{{Count: 1, Start: d(1000 * time.Hour), Processing: Const(time.Second)}}}
	if err := sc.Check(); err != nil {
		t.Fatal(err)
	}
	var e *engine
	e = newEngine(sc, Options{Progress: func(Progress) {
		if ms, _ := e.q.Get(context.Background(), 1, time.Minute); len(ms) == 1 {
			e.q.Delete(context.Background(), ms[0].ID, ms[0].PopReceipt)
		}
	}})
	if err := e.run(context.Background()); err != nil {
		t.Fatal(err)
	}
	r := e.report()
	if r.Messages.Lost != 10 || len(r.Violations) == 0 {
		t.Errorf("lost %d, violations %q; want 10 lost", r.Messages.Lost, r.Violations)
	}
}

func mixedScenario() *Scenario {
	retry := d(10 * time.Second)
	return &Scenario{Name: "mixed", Seed: 5, Duration: d(2 * time.Hour), Sample: d(5 * time.Minute),
		Producers: []Producer{
			{Arrival: Arrival{Kind: "poisson", Rate: 2}, TTL: d(30 * time.Minute), Delay: Dist{Kind: "uniform", Max: d(time.Minute)}},
			{Arrival: Arrival{Kind: "daily", Windows: []Window{{From: "00:30", To: "01:00", Rate: 10}}}},
		},
		Consumers: []Fleet{
			{Name: "pollers", Count: 10, BatchSize: 4, VisibilityTimeout: d(15 * time.Second),
				Processing: LogNormal(3*time.Second, 1), FailureProbability: 0.05, MaxDequeueCount: 4,
				CrashProbability: 0.01, RestartDelay: d(30 * time.Second), Listen: Listen{Kind: "poll", Interval: d(2 * time.Second)}},
			{Name: "backoff", Count: 5, Processing: Exponential(time.Second), RetryDelay: &retry, FailureProbability: 0.1,
				Renew: true, Listen: Listen{Kind: "backoff", Max: d(20 * time.Second)},
				Autoscale: &Autoscale{PerConsumer: 50, Min: 1, Max: 20}},
			{Name: "receivers", Count: 3, BatchSize: 2, Processing: Const(2 * time.Second), Listen: Listen{Kind: "receive"}},
		}}
}

// The same seed gives the same report, byte for byte, in every output; a
// different seed a different one.
func TestSameSeedSameReport(t *testing.T) {
	t.Parallel()
	outputs := func(seed uint64) map[string][]byte {
		dir := t.TempDir()
		r, err := Run(context.Background(), mixedScenario(), Options{Seed: seed, SetSeed: true})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := r.WriteFiles(dir, "svg"); err != nil {
			t.Fatal(err)
		}
		out := map[string][]byte{}
		entries, _ := os.ReadDir(dir)
		for _, e := range entries {
			b, err := os.ReadFile(filepath.Join(dir, e.Name()))
			if err != nil {
				t.Fatal(err)
			}
			out[e.Name()] = b
		}
		return out
	}
	a, b, c := outputs(1), outputs(1), outputs(2)
	if len(a) < 9 {
		t.Fatalf("only %d files written", len(a))
	}
	for name, want := range a {
		if !bytes.Equal(b[name], want) {
			t.Errorf("%s differs between two runs with the same seed", name)
		}
	}
	if bytes.Equal(a["report.txt"], c["report.txt"]) {
		t.Error("seeds 1 and 2 gave the same report")
	}
}

// Processing times depend on the message and the attempt, not on who
// processes it or when: a change of fleet size leaves the work the same.
func TestCommonRandomNumbers(t *testing.T) {
	sc := &Scenario{Seed: 9, Duration: d(time.Hour),
		Producers: []Producer{{Arrival: Arrival{Kind: "burst", Size: 1000}}},
		Consumers: []Fleet{{Count: 10, BatchSize: 1, VisibilityTimeout: d(time.Hour), Processing: Exponential(time.Second), Listen: Listen{Kind: "receive"}}}}
	busy := func(n int) float64 {
		sc.Consumers[0].Count = n
		r := run(t, sc)
		return r.Fleets[0].Utilisation * r.Fleets[0].ConsumerHours
	}
	if a, b := busy(10), busy(37); math.Abs(a-b) > 1e-9 {
		t.Errorf("busy hours %v with 10 consumers, %v with 37: the same work should take the same time", a, b)
	}
}

func TestCancel(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	sc := lifecycleScenario(100000, 1)
	if _, err := Run(ctx, sc, Options{}); !errors.Is(err, context.Canceled) {
		t.Errorf("Run with a cancelled context: %v", err)
	}
}
