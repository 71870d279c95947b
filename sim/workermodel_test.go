package sim

import (
	"testing"
	"time"
)

// The worker model runs the worker package's own code: a fleet with
// failures, poison and crashes loses nothing, and its totals add up.
func TestWorkerModelLosesNothing(t *testing.T) {
	t.Parallel()
	sc := &Scenario{Seed: 2, Duration: d(20 * time.Minute),
		Producers: []Producer{{Arrival: Arrival{Kind: "poisson", Rate: 2}}},
		Consumers: []Fleet{{Model: "worker", Count: 2, BatchSize: 4, Worker: &WorkerModel{Concurrency: 4, NewBatchThreshold: 2},
			VisibilityTimeout: d(30 * time.Second), Processing: LogNormal(time.Second, 1),
			FailureProbability: 0.2, MaxDequeueCount: 2, CrashProbability: 0.01, RestartDelay: d(30 * time.Second),
			Listen: Listen{Kind: "backoff", Max: d(5 * time.Second)}}}}
	r := run(t, sc)
	m := r.Messages
	if m.Poisoned == 0 || m.Failed == 0 || m.Crashes == 0 {
		t.Errorf("messages %+v: want failures, poison and crashes", m)
	}
	if got := m.Completed + m.Poisoned + m.Expired + m.InQueue; got != m.Put || m.Completed < m.Put*8/10 {
		t.Errorf("messages %+v do not add up", m)
	}
	// The worker renews every half lease while a handler runs; a second
	// is far below 15 s, so renewals are rare but not impossible.
	if r.Fleets[0].Model != "worker" || r.Fleets[0].MaxConsumers != 2 {
		t.Errorf("fleet %+v", r.Fleets[0])
	}
}

// An idle worker polls with Functions' back-off, up to its maximum: after
// a short ramp, one Get per maximum interval.
func TestWorkerModelBacksOff(t *testing.T) {
	sc := &Scenario{Seed: 1, Duration: d(time.Hour),
		Consumers: []Fleet{{Model: "worker", Count: 1, Processing: Const(time.Second),
			Listen: Listen{Kind: "backoff", Min: d(100 * time.Millisecond), Max: d(10 * time.Second)}}}}
	r := run(t, sc)
	// The ramp to 10 s takes about seven polls and 10 s; then 359 more.
	if got := r.Transactions.EmptyGets; got < 360 || got > 375 {
		t.Errorf("%d empty Gets in an hour, want about 366", got)
	}
}

// A worker waiting in Receive is woken at once, and costs nothing idle.
func TestWorkerModelReceives(t *testing.T) {
	sc := &Scenario{Seed: 1, Duration: d(30 * time.Minute),
		Producers: []Producer{{Arrival: Arrival{Kind: "constant", Rate: 0.1}}},
		Consumers: []Fleet{{Model: "worker", Count: 1, BatchSize: 1, Processing: Const(3 * time.Second), Listen: Listen{Kind: "receive"}}}}
	r := run(t, sc)
	if r.Latency.Max != 3 || r.Messages.Completed != 180 {
		t.Errorf("latency %+v, %d completed; want 3 s each, 180", r.Latency, r.Messages.Completed)
	}
	if r.Transactions.EmptyGets != 0 || r.Transactions.Count[OpGet] != 180 {
		t.Errorf("transactions %+v: want one Get per message", r.Transactions)
	}
}
