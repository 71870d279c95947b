package sim

import (
	"context"
	"runtime"
	"testing"
	"time"

	"github.com/azqlib/azq"
)

// The simulator's cost is measured against the core queue's own in the same
// run: BenchmarkCoreCycle is the root package's BenchmarkCycle/queued=0
// (Put, Get(1) and Delete of one message on the real clock), and
// BenchmarkLifecycle is one simulated message's whole life (its arrival
// event, Put, a listener's Get, its processing event, Delete, and the
// books), so the ratio of the two is what simulating costs over the queue
// operations themselves.
//
//	go test -run='^$' -bench=. -count=6 ./sim | tee sim.txt
//	benchstat sim.txt

var payload16 = "0123456789abcdef"

// BenchmarkCoreCycle is the core's Put → Get(1) → Delete on an empty queue.
func BenchmarkCoreCycle(b *testing.B) {
	ctx := context.Background()
	q := azq.New()
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		if _, err := q.Put(ctx, payload16, nil); err != nil {
			b.Fatal(err)
		}
		ms, err := q.Get(ctx, 1, azq.DefaultVisibilityTimeout)
		if err != nil || len(ms) != 1 {
			b.Fatal(err, len(ms))
		}
		if err := q.Delete(ctx, ms[0].ID, ms[0].PopReceipt); err != nil {
			b.Fatal(err)
		}
	}
}

// lifecycleScenario is a busy but stable system: Poisson arrivals at 1,000
// per second into 100 listeners that each take exponential time with a
// mean of 50 ms per message (utilisation 0.5), polling every second when
// idle, for n messages.
func lifecycleScenario(n int64, batch int) *Scenario {
	return &Scenario{
		Name:     "lifecycle",
		Seed:     1,
		Duration: Duration(time.Duration(n)*time.Millisecond + time.Hour),
		Producers: []Producer{{
			Arrival: Arrival{Kind: "poisson", Rate: 1000},
			Count:   n,
		}},
		Consumers: []Fleet{{
			Count:      100,
			BatchSize:  batch,
			Processing: Exponential(50 * time.Millisecond),
			Listen:     Listen{Kind: "poll", Interval: Duration(time.Second)},
		}},
	}
}

// BenchmarkLifecycle is one simulated message's life, all scheduling
// included; ns/op is per message.
func BenchmarkLifecycle(b *testing.B) {
	for _, batch := range []int{1, 32} {
		b.Run("batch="+itoa(batch), func(b *testing.B) {
			sc := lifecycleScenario(int64(b.N), batch)
			b.ReportAllocs()
			r, err := Run(context.Background(), sc, Options{})
			if err != nil {
				b.Fatal(err)
			}
			if r.Messages.Completed != int64(b.N) {
				b.Fatalf("%d of %d messages completed", r.Messages.Completed, b.N)
			}
		})
	}
}

// BenchmarkIdle is the idle-heavy case of the queue design guidance: 1,000
// listeners polling once a second, a daily profile with two busy hours,
// for a day. It reports simulated seconds per wall-clock second.
func BenchmarkIdle(b *testing.B) {
	for _, listen := range []Listen{
		{Kind: "poll", Interval: Duration(time.Second)},
		{Kind: "backoff", Min: Duration(100 * time.Millisecond), Max: Duration(time.Minute)},
		{Kind: "receive"},
	} {
		b.Run(listen.Kind, func(b *testing.B) {
			sc := &Scenario{
				Seed:     1,
				Duration: Duration(24 * time.Hour),
				Producers: []Producer{{Arrival: Arrival{Kind: "daily",
					Windows: []Window{{From: "09:00", To: "10:00", Rate: 5}, {From: "14:00", To: "15:00", Rate: 5}}}}},
				Consumers: []Fleet{{Count: 1000, BatchSize: 32, Processing: Const(time.Second), Listen: listen}},
			}
			start := time.Now()
			for i := 0; i < b.N; i++ {
				if _, err := Run(context.Background(), sc, Options{}); err != nil {
					b.Fatal(err)
				}
			}
			wall := time.Since(start).Seconds() / float64(b.N)
			b.ReportMetric(float64(sc.Duration.D()/time.Second)/wall, "sim-s/s")
		})
	}
}

// BenchmarkMemory reports the heap that 1e6 queued messages cost: the
// core queue alone, and the whole simulation holding the same backlog
// (queue, per-message states and contents, books), in bytes per message.
func BenchmarkMemory(b *testing.B) {
	const n = 1_000_000
	b.Run("core", func(b *testing.B) {
		ctx := context.Background()
		for i := 0; i < b.N; i++ {
			before := heap()
			q := azq.New()
			for j := 0; j < n; j++ {
				// A fresh string per message, as a real producer's would be.
				content := string(append([]byte(nil), payload16...))
				if _, err := q.Put(ctx, content, nil); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(heap()-before)/n, "bytes/msg")
			runtime.KeepAlive(q)
		}
	})
	b.Run("sim", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			sc := &Scenario{
				Seed:      1,
				Duration:  Duration(time.Minute),
				Producers: []Producer{{Arrival: Arrival{Kind: "burst", Size: n}}},
				// The consumers start after the end: the backlog stays.
				Consumers: []Fleet{{Count: 1, Start: Duration(time.Hour), Processing: Const(time.Second)}},
			}
			if err := sc.Check(); err != nil {
				b.Fatal(err)
			}
			before := heap()
			e := newEngine(sc, Options{})
			if err := e.run(context.Background()); err != nil {
				b.Fatal(err)
			}
			if e.m.msgs.InQueue != n {
				b.Fatalf("%d messages queued, want %d", e.m.msgs.InQueue, n)
			}
			b.ReportMetric(float64(heap()-before)/n, "bytes/msg")
			runtime.KeepAlive(e)
		}
	})
}

func heap() uint64 {
	var m runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

func itoa(n int) string {
	if n < 10 {
		return string(rune('0' + n))
	}
	return itoa(n/10) + string(rune('0'+n%10))
}
