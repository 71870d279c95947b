package azqwatermill

import (
	"context"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/ThreeDotsLabs/watermill/pubsub/gochannel"
	"github.com/azqlib/azq"
	"github.com/azqlib/azq/azqtest"
	"github.com/azqlib/azq/azure"
	"github.com/azqlib/azq/internal/cputime"
)

var (
	benchBody  = []byte("hello, world")
	benchTopic = "bench"
)

// burst is how many messages the throughput benchmarks publish before
// they receive and acknowledge them.
const burst = 1000

// benchAccounts are the back ends the benchmarks run on: an in-memory
// Service and package azure against azq's REST server over loopback.
var benchAccounts = []struct {
	name string
	open func(b *testing.B) Account
}{
	{"memory", func(b *testing.B) Account {
		svc := azq.NewService()
		b.Cleanup(func() { svc.Close() })
		return ServiceAccount(svc)
	}},
	{"azure", func(b *testing.B) Account {
		srv := azqtest.NewServer(b)
		svc, err := azure.NewServiceFromConnectionString(srv.ConnectionString, nil)
		if err != nil {
			b.Fatal(err)
		}
		return ServiceAccount(svc)
	}},
}

// meter measures a benchmark whose op is one message.
type meter struct {
	cpu  time.Duration // CPU time of the timed parts so far
	cpu0 time.Duration // at the start of the current timed part
}

func startMeter(b *testing.B) *meter {
	b.ReportAllocs()
	b.ResetTimer()
	m := new(meter)
	m.cpu0, _ = cputime.Process()
	return m
}

// pause and resume leave out what the application, not the Pub/Sub, does:
// making its messages.
func (m *meter) pause(b *testing.B) {
	b.StopTimer()
	cpu1, _ := cputime.Process()
	m.cpu += cpu1 - m.cpu0
}

func (m *meter) resume(b *testing.B) {
	m.cpu0, _ = cputime.Process()
	b.StartTimer()
}

// report sets the messages/s metric and, where the platform tells it, the
// CPU time per message of the whole process (cpu-ns/op: the subscriber's
// goroutine and the garbage collector too), which the other tenants of a
// shared machine do not inflate as they do the wall time.
func (m *meter) report(b *testing.B) {
	m.pause(b)
	if _, ok := cputime.Process(); ok {
		b.ReportMetric(float64(m.cpu)/float64(b.N), "cpu-ns/op")
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msgs/s")
}

// newMessages returns n messages as an application makes them, each with
// its UUID.
func newMessages(n int) []*message.Message {
	ms := make([]*message.Message, n)
	for i := range ms {
		ms[i] = message.NewMessage(watermill.NewUUID(), benchBody)
	}
	return ms
}

// openQueue creates the benchmark's queue and returns it.
func openQueue(b *testing.B, a Account) azq.MessageQueue {
	if err := a.CreateQueue(context.Background(), benchTopic); err != nil {
		b.Fatal(err)
	}
	q, err := a.Queue(benchTopic)
	if err != nil {
		b.Fatal(err)
	}
	return q
}

// rawBurst puts n messages, then gets and deletes them one at a time.
func rawBurst(b *testing.B, q azq.MessageQueue, n int) {
	ctx := context.Background()
	for range n {
		if _, err := q.Put(ctx, string(benchBody), nil); err != nil {
			b.Fatal(err)
		}
	}
	for range n {
		ms, err := q.Get(ctx, 1, azq.DefaultVisibilityTimeout)
		if err != nil || len(ms) != 1 {
			b.Fatal(err, len(ms))
		}
		if err := q.Delete(ctx, ms[0].ID, ms[0].PopReceipt); err != nil {
			b.Fatal(err)
		}
	}
}

// pubSub returns a publisher and a subscription on the benchmark's topic.
func pubSub(b *testing.B, a Account) (*Publisher, *Subscriber, <-chan *message.Message) {
	pub, err := NewPublisher(a, PublisherConfig{}, nil)
	if err != nil {
		b.Fatal(err)
	}
	sub, err := NewSubscriber(a, SubscriberConfig{}, nil)
	if err != nil {
		b.Fatal(err)
	}
	msgs, err := sub.Subscribe(context.Background(), benchTopic)
	if err != nil {
		b.Fatal(err)
	}
	return pub, sub, msgs
}

// BenchmarkThroughput publishes bursts of messages and then receives and
// acks them, one op per message, through the raw contract (Put, then Get
// and Delete one at a time) and through Watermill (Publish of one message
// at a time; receive from the subscription's channel and Ack), on the
// same back end in the same run.
func BenchmarkThroughput(b *testing.B) {
	for _, ba := range benchAccounts {
		b.Run(ba.name+"/raw", func(b *testing.B) {
			q := openQueue(b, ba.open(b))
			m := startMeter(b)
			for done := 0; done < b.N; done += burst {
				rawBurst(b, q, min(burst, b.N-done))
			}
			m.report(b)
		})
		b.Run(ba.name+"/watermill", func(b *testing.B) {
			a := ba.open(b)
			openQueue(b, a)
			pub, sub, msgs := pubSub(b, a)
			defer sub.Close()
			m := startMeter(b)
			for done := 0; done < b.N; {
				n := min(burst, b.N-done)
				m.pause(b)
				ms := newMessages(n)
				m.resume(b)
				for _, wm := range ms {
					if err := pub.Publish(benchTopic, wm); err != nil {
						b.Fatal(err)
					}
				}
				for range n {
					(<-msgs).Ack()
				}
				done += n
			}
			m.report(b)
		})
	}
}

// BenchmarkCycle is one message at a time in memory: Put, Get, Delete
// through the raw contract; Publish, receive and Ack through Watermill,
// the receipt a hand-off from the subscription's goroutine; and, as the
// floor of Watermill's channel-and-ack design, the same through
// Watermill's own in-memory GoChannel Pub/Sub, which has no queue at all.
func BenchmarkCycle(b *testing.B) {
	ba := benchAccounts[0] // memory
	b.Run("raw", func(b *testing.B) {
		q := openQueue(b, ba.open(b))
		m := startMeter(b)
		for range b.N {
			rawBurst(b, q, 1)
		}
		m.report(b)
	})
	b.Run("gochannel", func(b *testing.B) {
		gc := gochannel.NewGoChannel(gochannel.Config{}, watermill.NopLogger{})
		defer gc.Close()
		msgs, err := gc.Subscribe(context.Background(), benchTopic)
		if err != nil {
			b.Fatal(err)
		}
		ms := newMessages(b.N)
		m := startMeter(b)
		for _, wm := range ms {
			if err := gc.Publish(benchTopic, wm); err != nil {
				b.Fatal(err)
			}
			(<-msgs).Ack()
		}
		m.report(b)
	})
	b.Run("watermill", func(b *testing.B) {
		a := ba.open(b)
		openQueue(b, a)
		pub, sub, msgs := pubSub(b, a)
		defer sub.Close()
		ms := newMessages(b.N)
		m := startMeter(b)
		for _, wm := range ms {
			if err := pub.Publish(benchTopic, wm); err != nil {
				b.Fatal(err)
			}
			(<-msgs).Ack()
		}
		m.report(b)
	})
}
