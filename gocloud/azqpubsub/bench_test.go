package azqpubsub

import (
	"context"
	"testing"
	"time"

	"github.com/azqlib/azq"
	"github.com/azqlib/azq/azqtest"
	"github.com/azqlib/azq/azure"
	"github.com/azqlib/azq/internal/cputime"
	"gocloud.dev/pubsub"
	"gocloud.dev/pubsub/driver"
	"gocloud.dev/pubsub/drivertest"
	"gocloud.dev/pubsub/mempubsub"
)

// The message of every benchmark: drivertest's body and metadata.
var (
	benchBody     = []byte("hello, world")
	benchMetadata = map[string]string{"label": "value"}
)

// burst is how many messages the throughput benchmarks send before they
// receive and acknowledge them.
const burst = 1000

// benchQueues are the back ends the benchmarks run on: an in-memory queue
// and package azure against azq's REST server over loopback.
var benchQueues = []struct {
	name string
	open func(b *testing.B) azq.MessageQueue
}{
	{"memory", func(b *testing.B) azq.MessageQueue {
		q := azq.New()
		b.Cleanup(func() { q.Close() })
		return q
	}},
	{"azure", func(b *testing.B) azq.MessageQueue {
		srv := azqtest.NewServer(b)
		if _, _, err := srv.Service.CreateQueue(context.Background(), "bench", nil); err != nil {
			b.Fatal(err)
		}
		aq, err := azure.NewQueueFromConnectionString(srv.ConnectionString, "bench", nil)
		if err != nil {
			b.Fatal(err)
		}
		return aq
	}},
}

// meter measures a benchmark whose op is one message: start it when the
// timed part starts, and report when it ends.
type meter struct {
	cpu0 time.Duration
}

func startMeter(b *testing.B) meter {
	b.ReportAllocs()
	b.ResetTimer()
	cpu0, _ := cputime.Process()
	return meter{cpu0}
}

// report sets the messages/s metric and, where the platform tells it, the
// CPU time per message of the whole process (cpu-ns/op: every goroutine,
// the garbage collector's too), which the other tenants of a shared
// machine do not inflate as they do the wall time.
func (m meter) report(b *testing.B) {
	b.StopTimer()
	if cpu1, ok := cputime.Process(); ok {
		b.ReportMetric(float64(cpu1-m.cpu0)/float64(b.N), "cpu-ns/op")
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msgs/s")
}

// BenchmarkThroughput sends bursts of messages and then receives and acks
// them, one op per message, through the raw contract (Put, then Get and
// Delete one at a time) and through the driver (SendBatch of 32,
// ReceiveBatch of 32, SendAcks of what came), on the same back end in the
// same run. The driver's batches are what gocloud's portable type hands
// it under load.
func BenchmarkThroughput(b *testing.B) {
	ctx := context.Background()
	for _, bq := range benchQueues {
		b.Run(bq.name+"/raw", func(b *testing.B) {
			q := bq.open(b)
			m := startMeter(b)
			for done := 0; done < b.N; {
				n := min(burst, b.N-done)
				for range n {
					if _, err := q.Put(ctx, string(benchBody), nil); err != nil {
						b.Fatal(err)
					}
				}
				for range n {
					getDelete(ctx, b, q)
				}
				done += n
			}
			m.report(b)
		})
		b.Run(bq.name+"/driver", func(b *testing.B) { benchDriverThroughput(b, bq.open(b), benchMetadata) })
		// Without metadata, the driver makes no map a message: the rest
		// of its cost.
		b.Run(bq.name+"/driver-nometadata", func(b *testing.B) { benchDriverThroughput(b, bq.open(b), nil) })
	}
}

func benchDriverThroughput(b *testing.B, q azq.MessageQueue, md map[string]string) {
	ctx := context.Background()
	dt := newTopic(q, nil, nil)
	ds := newSubscription(q, &SubscriptionOptions{})
	batch := make([]*driver.Message, 0, 32)
	acks := make([]driver.AckID, 0, 32)
	m := startMeter(b)
	for done := 0; done < b.N; {
		n := min(burst, b.N-done)
		for sent := 0; sent < n; {
			batch = batch[:0]
			for ; sent < n && len(batch) < 32; sent++ {
				batch = append(batch, &driver.Message{Body: benchBody, Metadata: md})
			}
			if err := dt.SendBatch(ctx, batch); err != nil {
				b.Fatal(err)
			}
		}
		for got := 0; got < n; {
			ms, err := ds.ReceiveBatch(ctx, 32)
			if err != nil {
				b.Fatal(err)
			}
			acks = acks[:0]
			for _, m := range ms {
				acks = append(acks, m.AckID)
			}
			if err := ds.SendAcks(ctx, acks); err != nil {
				b.Fatal(err)
			}
			got += len(ms)
		}
		done += n
	}
	m.report(b)
}

// BenchmarkCycle is one message at a time: Put, Get, Delete through the
// raw contract; SendBatch, ReceiveBatch and SendAcks of one through the
// driver; Send, Receive and Ack through gocloud's portable types, whose
// batchers hand each call to goroutines of their own.
func BenchmarkCycle(b *testing.B) {
	ctx := context.Background()
	bq := benchQueues[0] // memory
	b.Run("raw", func(b *testing.B) {
		q := bq.open(b)
		m := startMeter(b)
		for range b.N {
			if _, err := q.Put(ctx, string(benchBody), nil); err != nil {
				b.Fatal(err)
			}
			getDelete(ctx, b, q)
		}
		m.report(b)
	})
	b.Run("driver", func(b *testing.B) {
		q := bq.open(b)
		dt := newTopic(q, nil, nil)
		ds := newSubscription(q, &SubscriptionOptions{})
		m := startMeter(b)
		for range b.N {
			if err := dt.SendBatch(ctx, []*driver.Message{{Body: benchBody, Metadata: benchMetadata}}); err != nil {
				b.Fatal(err)
			}
			ms, err := ds.ReceiveBatch(ctx, 1)
			if err != nil || len(ms) != 1 {
				b.Fatal(err, len(ms))
			}
			if err := ds.SendAcks(ctx, []driver.AckID{ms[0].AckID}); err != nil {
				b.Fatal(err)
			}
		}
		m.report(b)
	})
	b.Run("portable", func(b *testing.B) {
		q := bq.open(b)
		topic := OpenTopic(q, nil)
		sub := OpenSubscription(q, nil)
		meter := startMeter(b)
		for range b.N {
			if err := topic.Send(ctx, &pubsub.Message{Body: benchBody, Metadata: benchMetadata}); err != nil {
				b.Fatal(err)
			}
			m, err := sub.Receive(ctx)
			if err != nil {
				b.Fatal(err)
			}
			m.Ack()
		}
		meter.report(b)
		shutdown(b, topic, sub)
	})
}

// BenchmarkDriverTest is gocloud's drivertest.RunBenchmarks: 10,000
// messages sent by 100 goroutines, then received and acked by 100,
// through gocloud's portable types. Its MB/s column is messages per second
// (drivertest sets a million bytes a message). It runs on an in-memory
// queue and, as the portable layer's own floor, on gocloud's in-memory
// driver, mempubsub, which has no queue.
func BenchmarkDriverTest(b *testing.B) {
	b.Run("azq", func(b *testing.B) {
		q := azq.New()
		defer q.Close()
		topic := OpenTopic(q, nil)
		sub := OpenSubscription(q, nil)
		drivertest.RunBenchmarks(b, topic, sub)
		shutdown(b, topic, sub)
	})
	b.Run("mempubsub", func(b *testing.B) {
		topic := mempubsub.NewTopic()
		sub := mempubsub.NewSubscription(topic, time.Minute)
		drivertest.RunBenchmarks(b, topic, sub)
		shutdown(b, topic, sub)
	})
}

func shutdown(b *testing.B, topic *pubsub.Topic, sub *pubsub.Subscription) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := topic.Shutdown(ctx); err != nil {
		b.Error(err)
	}
	if err := sub.Shutdown(ctx); err != nil {
		b.Error(err)
	}
}

// getDelete gets one message from q and deletes it: the raw contract's
// receive and ack, which the drivers' figures are read against.
func getDelete(ctx context.Context, b *testing.B, q azq.MessageQueue) {
	ms, err := q.Get(ctx, 1, azq.DefaultVisibilityTimeout)
	if err != nil || len(ms) != 1 {
		b.Fatal(err, len(ms))
	}
	if err := q.Delete(ctx, ms[0].ID, ms[0].PopReceipt); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkDriverBatches measures what batches save the driver on a back
// end where every call costs a commit (100 µs here, as a sync to disk or a
// round trip and a commit on PostgreSQL): SendBatch of 32, ReceiveBatch of
// 32 and SendAcks of what came, on a queue that puts and deletes a batch at
// the cost of one call (batched) and on the same queue seen without its
// batch methods (single: one call a message).
//
//	for i in 1 2 3 4 5 6; do go test -run '^$' -bench 'DriverBatches' -count 1 ./azqpubsub; done
func BenchmarkDriverBatches(b *testing.B) {
	for _, c := range []struct {
		name string
		wrap func(*commitQueue) azq.MessageQueue
	}{
		{"batched", func(q *commitQueue) azq.MessageQueue { return q }},
		{"single", func(q *commitQueue) azq.MessageQueue { return unbatched{q} }},
	} {
		b.Run(c.name, func(b *testing.B) {
			q := &commitQueue{Queue: azq.New(), cost: 100 * time.Microsecond}
			b.Cleanup(func() { q.Close() })
			benchDriverThroughput(b, c.wrap(q), nil)
		})
	}
}

// commitQueue is an in-memory queue on which every Put and Delete, and
// every PutBatch and DeleteBatch as a whole, waits cost first: the commit
// of a back end that puts or deletes a batch at the cost of one message.
type commitQueue struct {
	*azq.Queue
	cost time.Duration
}

func (c *commitQueue) Put(ctx context.Context, s string, o *azq.PutOptions) (azq.Message, error) {
	time.Sleep(c.cost)
	return c.Queue.Put(ctx, s, o)
}

func (c *commitQueue) Delete(ctx context.Context, id azq.MessageID, r azq.PopReceipt) error {
	time.Sleep(c.cost)
	return c.Queue.Delete(ctx, id, r)
}

func (c *commitQueue) PutBatch(ctx context.Context, reqs []azq.PutRequest) ([]azq.PutResult, error) {
	time.Sleep(c.cost)
	return azq.PutBatch(ctx, c.Queue, reqs)
}

func (c *commitQueue) DeleteBatch(ctx context.Context, reqs []azq.DeleteRequest) ([]error, error) {
	time.Sleep(c.cost)
	return azq.DeleteBatch(ctx, c.Queue, reqs)
}

// unbatched hides a queue's batch methods: the helpers then make one call
// a message.
type unbatched struct{ azq.MessageQueue }
