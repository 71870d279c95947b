package sim

import (
	"context"
	"flag"
	"fmt"
	"os"
	"testing"
	"time"

	"pgregory.net/rapid"
)

// TestMain runs fewer rapid checks than rapid's default of 100, unless
// -rapid.checks says otherwise: each check is a whole simulation, and the
// package's tests must stay quick under the race detector.
func TestMain(m *testing.M) {
	flag.Parse()
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == "rapid.checks" })
	if !set {
		flag.Set("rapid.checks", "40")
	}
	os.Exit(m.Run())
}

func drawDist(t *rapid.T, name string) Dist {
	ms := func(label string, lo, hi int) Duration {
		return Duration(time.Duration(rapid.IntRange(lo, hi).Draw(t, name+"."+label)) * time.Millisecond)
	}
	switch rapid.IntRange(0, 4).Draw(t, name+".kind") {
	case 0:
		return Dist{Kind: "constant", Value: ms("value", 0, 20000)}
	case 1:
		return Dist{Kind: "exponential", Mean: ms("mean", 1, 20000)}
	case 2:
		return Dist{Kind: "lognormal", Median: ms("median", 1, 10000), Sigma: rapid.Float64Range(0, 2).Draw(t, name+".sigma")}
	case 3:
		return Dist{Kind: "uniform", Min: ms("min", 0, 1000), Max: ms("max", 1001, 30000)}
	default:
		return Dist{Kind: "empirical", Values: []Duration{ms("v0", 0, 5000), ms("v1", 0, 60000)},
			Weights: []float64{rapid.Float64Range(0.1, 10).Draw(t, name+".w0"), rapid.Float64Range(0.1, 10).Draw(t, name+".w1")}}
	}
}

func drawScenario(t *rapid.T) *Scenario {
	sec := func(label string, lo, hi int) Duration {
		return Duration(time.Duration(rapid.IntRange(lo, hi).Draw(t, label)) * time.Second)
	}
	sc := &Scenario{Seed: rapid.Uint64().Draw(t, "seed"), Duration: sec("duration", 60, 1800)}
	for i := range rapid.IntRange(1, 3).Draw(t, "producers") {
		p := Producer{}
		switch rapid.IntRange(0, 3).Draw(t, fmt.Sprintf("p%d.kind", i)) {
		case 0:
			p.Arrival = Arrival{Kind: "constant", Rate: rapid.Float64Range(0.01, 2).Draw(t, "rate")}
		case 1:
			p.Arrival = Arrival{Kind: "poisson", Rate: rapid.Float64Range(0.01, 2).Draw(t, "rate")}
		case 2:
			p.Arrival = Arrival{Kind: "burst", Size: rapid.IntRange(1, 200).Draw(t, "size"), Every: sec("every", 0, 3600)}
		default:
			p.Arrival = Arrival{Kind: "daily", Windows: []Window{{From: "00:00", To: "00:20", Rate: rapid.Float64Range(0, 5).Draw(t, "rate")},
				{From: "01:00", To: "02:00", Rate: 1}}}
		}
		p.Start = min(sec("start", 0, 600), sc.Duration-1)
		if rapid.Bool().Draw(t, "ttl") {
			p.TTL = sec("ttlSeconds", 30, 7200)
		}
		if rapid.Bool().Draw(t, "delayed") {
			p.Delay = Dist{Kind: "uniform", Max: Duration(min(time.Duration(sec("delayMax", 1, 600)), max(p.TTL.D()-time.Second, time.Second)))}
			if p.TTL != 0 && p.Delay.Max >= p.TTL {
				p.Delay = Dist{}
			}
		}
		sc.Producers = append(sc.Producers, p)
	}
	for i := range rapid.IntRange(1, 3).Draw(t, "fleets") {
		f := Fleet{
			Count:              rapid.IntRange(1, 10).Draw(t, "count"),
			Spread:             sec("spread", 0, 60),
			BatchSize:          rapid.IntRange(1, 32).Draw(t, "batch"),
			VisibilityTimeout:  sec("vt", 1, 120),
			Processing:         drawDist(t, fmt.Sprintf("f%d.processing", i)),
			FailureProbability: rapid.SampledFrom([]float64{0, 0.05, 0.5}).Draw(t, "failure"),
			CrashProbability:   rapid.SampledFrom([]float64{0, 0.01, 0.3}).Draw(t, "crash"),
			RestartDelay:       sec("restart", 0, 120),
			Renew:              rapid.Bool().Draw(t, "renew"),
			MaxDequeueCount:    rapid.IntRange(0, 5).Draw(t, "maxDequeueCount"),
		}
		if rapid.Bool().Draw(t, "retry") {
			r := sec("retryDelay", 0, 60)
			f.RetryDelay = &r
		}
		switch rapid.IntRange(0, 2).Draw(t, "listen") {
		case 0:
			f.Listen = Listen{Kind: "poll", Interval: Duration(time.Duration(rapid.IntRange(1, 30000).Draw(t, "intervalMs")) * time.Millisecond)}
		case 1:
			f.Listen = Listen{Kind: "backoff", Min: Duration(100 * time.Millisecond), Max: sec("max", 1, 60)}
		default:
			f.Listen = Listen{Kind: "receive"}
		}
		if rapid.IntRange(0, 3).Draw(t, "autoscale") == 0 {
			f.Autoscale = &Autoscale{Interval: sec("scaleEvery", 10, 300), PerConsumer: rapid.IntRange(1, 50).Draw(t, "per"),
				Min: 0, Max: f.Count + rapid.IntRange(0, 10).Draw(t, "extra"), StartDelay: sec("startDelay", 0, 60)}
		}
		sc.Consumers = append(sc.Consumers, f)
	}
	return sc
}

// Across random scenarios, nothing is ever lost: every message put is
// completed, poisoned, expired, or still in the queue at the end, and the
// queue never delivers a message after it was deleted, with a dequeue
// count that disagrees with the deliveries seen. Run fails with ErrLost
// otherwise.
func TestNothingIsLost(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(t *rapid.T) {
		sc := drawScenario(t)
		r, err := Run(context.Background(), sc, Options{})
		if err != nil {
			if r != nil {
				t.Fatalf("%v: %q", err, r.Violations)
			}
			t.Fatal(err)
		}
		m := r.Messages
		if got := m.Completed + m.Poisoned + m.Expired + m.InQueue; got != m.Put || m.Lost != 0 {
			t.Fatalf("completed %d + poisoned %d + expired %d + queued %d = %d, put %d", m.Completed, m.Poisoned, m.Expired, m.InQueue, got, m.Put)
		}
		if m.Duplicates > m.Deliveries || m.Completed > m.Put {
			t.Fatalf("messages %+v", m)
		}
		var sum int64
		for _, c := range r.Transactions.Count {
			sum += c
		}
		if sum != r.Transactions.Total || r.Transactions.EmptyGets > r.Transactions.Count[OpGet] {
			t.Fatalf("transactions %+v", r.Transactions)
		}
	})
}
