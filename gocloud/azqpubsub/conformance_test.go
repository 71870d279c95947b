package azqpubsub

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/azqlib/azq"
	"github.com/azqlib/azq/azqtest"
	"github.com/azqlib/azq/azure"
	"gocloud.dev/pubsub"
	"gocloud.dev/pubsub/driver"
	"gocloud.dev/pubsub/drivertest"
)

// backend is one back end of the queue contract as the harness uses it.
type backend struct {
	// create makes a new queue.
	create func(ctx context.Context, name string) (azq.MessageQueue, error)
	// remove deletes a queue create made.
	remove func(ctx context.Context, name string) error
	// missing returns a handle to a queue that does not exist.
	missing func() azq.MessageQueue
	// close releases the back end.
	close func()
}

// The three back ends: an in-memory Service, a durable one in a temporary
// directory, and package azure talking to azq's REST server over loopback.
var backends = map[string]func(t testing.TB) *backend{
	"memory": func(t testing.TB) *backend {
		return serviceBackend(azq.NewService())
	},
	"durable": func(t testing.TB) *backend {
		svc, err := azq.Open(t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		return serviceBackend(svc)
	},
	"azure": func(t testing.TB) *backend {
		srv := azqtest.NewServer(t)
		svc, err := azure.NewServiceFromConnectionString(srv.ConnectionString, nil)
		if err != nil {
			t.Fatal(err)
		}
		return &backend{
			create: func(ctx context.Context, name string) (azq.MessageQueue, error) {
				q, _, err := svc.CreateQueue(ctx, name, nil)
				return q, err
			},
			remove: func(ctx context.Context, name string) error { return svc.DeleteQueue(ctx, name) },
			missing: func() azq.MessageQueue {
				q, err := svc.Queue("missing")
				if err != nil {
					t.Fatal(err)
				}
				return q
			},
			close: srv.Close,
		}
	},
}

func serviceBackend(svc *azq.Service) *backend {
	return &backend{
		create: func(ctx context.Context, name string) (azq.MessageQueue, error) {
			q, _, err := svc.CreateQueue(ctx, name, nil)
			return q, err
		},
		remove:  func(ctx context.Context, name string) error { return svc.DeleteQueue(ctx, name) },
		missing: func() azq.MessageQueue { return svc.Named("missing") },
		close:   func() { svc.Close() },
	}
}

// harness runs gocloud's conformance tests on a back end. A topic is a
// fan-out topic; each subscription is a queue of its own, added to the
// topic's Fanout, so that every subscription sees every message.
type harness struct {
	b     *backend
	names atomic.Int64
}

func (h *harness) CreateTopic(ctx context.Context, testName string) (driver.Topic, func(), error) {
	return newTopic(nil, NewFanout(), nil), func() {}, nil
}

func (h *harness) MakeNonexistentTopic(ctx context.Context) (driver.Topic, error) {
	return newTopic(h.b.missing(), nil, nil), nil
}

func (h *harness) CreateSubscription(ctx context.Context, dt driver.Topic, testName string) (driver.Subscription, func(), error) {
	name := fmt.Sprintf("sub-%d", h.names.Add(1))
	q, err := h.b.create(ctx, name)
	if err != nil {
		return nil, nil, err
	}
	f := dt.(*topic).fanout
	f.Add(q)
	cleanup := func() {
		f.Remove(q)
		h.b.remove(context.Background(), name)
	}
	return newSubscription(q, &SubscriptionOptions{}), cleanup, nil
}

func (h *harness) MakeNonexistentSubscription(ctx context.Context) (driver.Subscription, func(), error) {
	return newSubscription(h.b.missing(), &SubscriptionOptions{}), func() {}, nil
}

func (h *harness) Close() { h.b.close() }

// MaxBatchSizes: SendBatch, SendAcks and SendNacks take any number.
func (h *harness) MaxBatchSizes() (int, int) { return 0, 0 }

// SupportsMultipleSubscriptions: through the fan-out topic.
func (h *harness) SupportsMultipleSubscriptions() bool { return true }

func TestConformance(t *testing.T) {
	for name, newBackend := range backends {
		t.Run(name, func(t *testing.T) {
			newHarness := func(ctx context.Context, t *testing.T) (drivertest.Harness, error) {
				return &harness{b: newBackend(t)}, nil
			}
			drivertest.RunConformanceTests(t, newHarness, []drivertest.AsTest{asTest{backend: name}})
		})
	}
}

// asTest checks what As exposes on every back end.
type asTest struct {
	backend string
}

// ttl is the time to live that BeforeSend sets through **azq.PutOptions
// and MessageCheck finds on the message.
const ttl = 90 * time.Minute

func (a asTest) Name() string { return a.backend }

func (a asTest) TopicCheck(t *pubsub.Topic) error {
	var f *Fanout
	if !t.As(&f) || f == nil {
		return errors.New("Topic.As(**Fanout) failed on a fan-out topic")
	}
	var q azq.MessageQueue
	if t.As(&q) {
		return errors.New("Topic.As(*azq.MessageQueue) succeeded on a fan-out topic")
	}
	return nil
}

func (a asTest) SubscriptionCheck(s *pubsub.Subscription) error {
	var q azq.MessageQueue
	if !s.As(&q) || q == nil {
		return errors.New("Subscription.As(*azq.MessageQueue) failed")
	}
	if a.backend == "azure" {
		var aq *azure.Queue
		if !s.As(&aq) || aq == nil {
			return errors.New("Subscription.As(**azure.Queue) failed")
		}
	} else {
		var mq *azq.Queue
		if !s.As(&mq) || mq == nil {
			return errors.New("Subscription.As(**azq.Queue) failed")
		}
	}
	return nil
}

func (a asTest) errorCheck(as func(error, any) bool, err error) error {
	var ae *azq.Error
	if !as(err, &ae) || ae.Code != azq.CodeQueueNotFound {
		return fmt.Errorf("ErrorAs(**azq.Error) of %v: want the code QueueNotFound", err)
	}
	var re *azcore.ResponseError
	if got := as(err, &re); got != (a.backend == "azure") {
		return fmt.Errorf("ErrorAs(**azcore.ResponseError) = %v on %s", got, a.backend)
	}
	var s string
	if as(err, &s) {
		return errors.New("ErrorAs(*string) succeeded")
	}
	return nil
}

func (a asTest) TopicErrorCheck(t *pubsub.Topic, err error) error {
	return a.errorCheck(t.ErrorAs, err)
}

func (a asTest) SubscriptionErrorCheck(s *pubsub.Subscription, err error) error {
	return a.errorCheck(s.ErrorAs, err)
}

func (a asTest) MessageCheck(m *pubsub.Message) error {
	var am azq.Message
	if !m.As(&am) {
		return errors.New("Message.As(*azq.Message) failed")
	}
	if am.ID.String() != m.LoggableID || am.DequeueCount != 1 {
		return fmt.Errorf("Message.As: ID %v, dequeue count %d; want the LoggableID %s and 1", am.ID, am.DequeueCount, m.LoggableID)
	}
	if got := am.ExpirationTime.Sub(am.InsertionTime); got != ttl {
		return fmt.Errorf("the message lives %v, want the %v that BeforeSend set", got, ttl)
	}
	return nil
}

func (a asTest) BeforeSend(as func(any) bool) error {
	var po *azq.PutOptions
	if !as(&po) || po == nil {
		return errors.New("BeforeSend: As(**azq.PutOptions) failed")
	}
	po.TimeToLive = ttl
	return nil
}

func (a asTest) AfterSend(as func(any) bool) error {
	var m azq.Message
	if !as(&m) || m.ID == (azq.MessageID{}) {
		return errors.New("AfterSend: As(*azq.Message) failed")
	}
	var all []azq.Message
	if !as(&all) || len(all) != 1 || all[0].ID != m.ID {
		return fmt.Errorf("AfterSend: As(*[]azq.Message) gave %d messages, want the one", len(all))
	}
	return nil
}
