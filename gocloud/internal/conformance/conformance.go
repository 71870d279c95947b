// Package conformance runs gocloud's conformance suite for pubsub drivers
// (gocloud.dev/pubsub/drivertest) on azqpubsub over a back end of azq's
// queue contract: azqpubsub's own tests run it on the in-memory, durable
// and remote back ends, and the test module gocloud/postgrestest on
// PostgreSQL, whose driver the gocloud module does not require.
package conformance

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/azqlib/azq"
	"github.com/azqlib/azq/gocloud/azqpubsub"
	"github.com/azqlib/azq/gocloud/internal/drivers"
	"gocloud.dev/pubsub"
	"gocloud.dev/pubsub/driver"
	"gocloud.dev/pubsub/drivertest"
)

// Backend is one back end of the queue contract as the harness uses it.
type Backend struct {
	// Create makes a new queue.
	Create func(ctx context.Context, name string) (azq.MessageQueue, error)
	// Remove deletes a queue Create made.
	Remove func(ctx context.Context, name string) error
	// Missing returns a handle to a queue that does not exist.
	Missing func() azq.MessageQueue
	// Close releases the back end.
	Close func()
}

// Kind is what the As tests expect of a kind of back end.
type Kind struct {
	// Name names it in the tests' names.
	Name string
	// Remote is set for package azure's queues, whose errors carry the
	// SDK's *azcore.ResponseError.
	Remote bool
	// QueueCheck, if set, checks what Subscription.As exposes beyond
	// *azq.MessageQueue: the back end's own queue type.
	QueueCheck func(as func(any) bool) error
}

// ServiceBackend is the Backend of a service's queues.
func ServiceBackend(svc azq.QueueService) *Backend {
	return &Backend{
		Create: func(ctx context.Context, name string) (azq.MessageQueue, error) {
			q, err := svc.Ref(name)
			if err != nil {
				return nil, err
			}
			if _, err := q.Create(ctx, nil); err != nil {
				return nil, err
			}
			return q, nil
		},
		Remove: func(ctx context.Context, name string) error { return svc.DeleteQueue(ctx, name) },
		Missing: func() azq.MessageQueue {
			q, _ := svc.Ref("missing")
			return q
		},
		Close: func() { svc.Close() },
	}
}

// Run runs the conformance tests on the back ends of kind that
// newBackend makes, one for each harness the suite asks for.
func Run(t *testing.T, kind Kind, newBackend func(t testing.TB) *Backend) {
	newHarness := func(ctx context.Context, t *testing.T) (drivertest.Harness, error) {
		return &harness{b: newBackend(t)}, nil
	}
	drivertest.RunConformanceTests(t, newHarness, []drivertest.AsTest{asTest{kind}})
}

// harness runs gocloud's conformance tests on a back end. A topic is a
// fan-out topic; each subscription is a queue of its own, added to the
// topic's Fanout, so that every subscription sees every message.
type harness struct {
	b     *Backend
	names atomic.Int64
}

func (h *harness) CreateTopic(ctx context.Context, testName string) (driver.Topic, func(), error) {
	return drivers.NewFanoutTopic(), func() {}, nil
}

func (h *harness) MakeNonexistentTopic(ctx context.Context) (driver.Topic, error) {
	return drivers.NewTopic(h.b.Missing()), nil
}

func (h *harness) CreateSubscription(ctx context.Context, dt driver.Topic, testName string) (driver.Subscription, func(), error) {
	name := fmt.Sprintf("sub-%d", h.names.Add(1))
	q, err := h.b.Create(ctx, name)
	if err != nil {
		return nil, nil, err
	}
	var f *azqpubsub.Fanout
	if !dt.As(&f) {
		return nil, nil, errors.New("the harness's topic is not a fan-out topic")
	}
	f.Add(q)
	cleanup := func() {
		f.Remove(q)
		h.b.Remove(context.Background(), name)
	}
	return drivers.NewSubscription(q), cleanup, nil
}

func (h *harness) MakeNonexistentSubscription(ctx context.Context) (driver.Subscription, func(), error) {
	return drivers.NewSubscription(h.b.Missing()), func() {}, nil
}

func (h *harness) Close() { h.b.Close() }

// MaxBatchSizes: SendBatch, SendAcks and SendNacks take any number.
func (h *harness) MaxBatchSizes() (int, int) { return 0, 0 }

// SupportsMultipleSubscriptions: through the fan-out topic.
func (h *harness) SupportsMultipleSubscriptions() bool { return true }

// asTest checks what As exposes on a back end.
type asTest struct {
	kind Kind
}

// ttl is the time to live that BeforeSend sets through **azq.PutOptions
// and MessageCheck finds on the message.
const ttl = 90 * time.Minute

func (a asTest) Name() string { return a.kind.Name }

func (a asTest) TopicCheck(t *pubsub.Topic) error {
	var f *azqpubsub.Fanout
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
	if a.kind.QueueCheck != nil {
		return a.kind.QueueCheck(s.As)
	}
	return nil
}

func (a asTest) errorCheck(as func(error, any) bool, err error) error {
	var ae *azq.Error
	if !as(err, &ae) || ae.Code != azq.CodeQueueNotFound {
		return fmt.Errorf("ErrorAs(**azq.Error) of %v: want the code QueueNotFound", err)
	}
	var re *azcore.ResponseError
	if got := as(err, &re); got != a.kind.Remote {
		return fmt.Errorf("ErrorAs(**azcore.ResponseError) = %v on %s", got, a.kind.Name)
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
