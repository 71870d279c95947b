package metrics_test

import (
	"context"
	"fmt"
	"io"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/azqlib/azq"
	"github.com/azqlib/azq/metrics"
	"github.com/azqlib/azq/observe"
)

// BenchmarkObserve is the cost of counting one answered request, the
// work server.Options.Observe adds to each.
func BenchmarkObserve(b *testing.B) {
	r := metrics.NewRecorder()
	o := observe.Observation{Account: "devstoreaccount1", Queue: "orders", Operation: "PutMessage", Status: 201, Outcome: observe.Success, Duration: 300 * time.Microsecond}
	b.ReportAllocs()
	for range b.N {
		r.Observe(o)
	}
}

// deepQueue is a queue of a million messages, made once: filling it
// takes longer than the benchmarks that use it.
var deepQueue = sync.OnceValues(func() (*azq.Service, *azq.Queue) {
	svc := azq.NewService()
	q, _, err := svc.CreateQueue(context.Background(), "deep", nil)
	if err != nil {
		panic(err)
	}
	for range 1_000_000 {
		if _, err := q.Put(context.Background(), "a message of some length", nil); err != nil {
			panic(err)
		}
	}
	return svc, q
})

// BenchmarkPutWhileScraping measures Put on a queue of a million
// messages with and without a goroutine scraping the metrics in a loop,
// and reports the latency percentiles of the Puts (p50-ns, p99-ns,
// p99.9-ns, max-ns) and the scrapes made, with one producer and with
// four putting at once, as a server's requests do, so that a scrape that
// holds the queue's lock holds back every producer, not one Put per
// scrape. A scrape that walked the messages
// under the lock held Put back for as long as the walk took; one that
// reads each queue's figures does not.
//
//	go test -run '^$' -bench PutWhileScraping -benchtime 400000x ./metrics
func BenchmarkPutWhileScraping(b *testing.B) {
	for _, c := range []struct {
		producers int
		scraping  bool
	}{{1, false}, {1, true}, {4, false}, {4, true}} {
		producers, scraping := c.producers, c.scraping
		b.Run(fmt.Sprintf("producers=%d/scraping=%v", producers, scraping), func(b *testing.B) {
			ctx := context.Background()
			svc, q := deepQueue()
			r := metrics.NewRecorder()
			r.WatchService("devstoreaccount1", svc)
			stop := make(chan struct{})
			var scraper sync.WaitGroup
			scrapes := 0
			if scraping {
				scraper.Add(1)
				go func() {
					defer scraper.Done()
					for {
						select {
						case <-stop:
							return
						default:
						}
						if err := r.WritePrometheus(ctx, io.Discard); err != nil {
							panic(err)
						}
						scrapes++
					}
				}()
			}
			lat := make([]time.Duration, b.N)
			runtime.GC() // not the filling's collection, during the Puts
			b.ResetTimer()
			var wg sync.WaitGroup
			for p := range producers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := p; i < b.N; i += producers {
						t0 := time.Now()
						if _, err := q.Put(ctx, "a message of some length", nil); err != nil {
							panic(err)
						}
						lat[i] = time.Since(t0)
					}
				}()
			}
			wg.Wait()
			b.StopTimer()
			close(stop)
			scraper.Wait()
			slices.Sort(lat)
			b.ReportMetric(float64(lat[len(lat)/2].Nanoseconds()), "p50-ns")
			b.ReportMetric(float64(lat[len(lat)*99/100].Nanoseconds()), "p99-ns")
			b.ReportMetric(float64(lat[len(lat)*999/1000].Nanoseconds()), "p99.9-ns")
			b.ReportMetric(float64(lat[len(lat)-1].Nanoseconds()), "max-ns")
			b.ReportMetric(float64(scrapes), "scrapes")
		})
	}
}
