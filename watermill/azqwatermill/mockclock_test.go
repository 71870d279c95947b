package azqwatermill

import (
	"context"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/azqlib/azq"
	"github.com/azqlib/azq/azqtest"
	"github.com/azqlib/azq/azure"
)

// signalingAccount is the Account of an *azure.Service whose queues say
// when a Get found them empty.
type signalingAccount struct {
	svc   *azure.Service
	empty chan struct{}
}

func (a signalingAccount) Queue(name string) (azq.MessageQueue, error) {
	q, err := a.svc.Queue(name)
	if err != nil {
		return nil, err
	}
	return signalingQueue{Queue: q, empty: a.empty}, nil
}

func (a signalingAccount) CreateQueue(ctx context.Context, name string) error {
	return ServiceAccount(a.svc).CreateQueue(ctx, name)
}

// signalingQueue is a remote queue that says when a Get found it empty;
// its Clock is the azure.Queue's.
type signalingQueue struct {
	*azure.Queue
	empty chan struct{}
}

func (q signalingQueue) Get(ctx context.Context, n int, v time.Duration) ([]azq.Message, error) {
	ms, err := q.Queue.Get(ctx, n, v)
	if err == nil && len(ms) == 0 {
		select {
		case q.empty <- struct{}{}:
		default:
		}
	}
	return ms, err
}

// A subscription on a remote queue whose clock is azq's test server's
// mock (azure.Options.Clock), in a test that never moves it, receives a
// message published after it found the queue empty: its poll waits end in
// real time too, as a worker's and the gocloud driver's do. Before they
// did, the subscription waited for ever.
func TestPolledSubscriptionOnUnmovedMockClock(t *testing.T) {
	srv := azqtest.NewInProcessServer(t)
	svc, err := srv.NewAzureService(&azure.Options{Clock: srv.Clock})
	if err != nil {
		t.Fatal(err)
	}
	a := signalingAccount{svc: svc, empty: make(chan struct{}, 1)}
	msgs := subscribe(t, a, SubscriberConfig{}, "jobs")
	within(t, a.empty, "empty Get") // the subscription waits to poll again
	publish(t, ServiceAccount(svc), "jobs", message.NewMessage("late", []byte("x")))
	select {
	case m := <-msgs:
		m.Ack()
		if m.UUID != "late" {
			t.Fatalf("received %s, want late", m.UUID)
		}
	case <-time.After(10 * time.Second): // a hang guard only
		t.Fatal("the message published after the first poll was not received: the subscription waits on the mock clock")
	}
}
