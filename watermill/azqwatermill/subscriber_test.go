package azqwatermill

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/azqlib/azq"
	"github.com/benbjohnson/clock"
	"go.uber.org/goleak"
)

// update is one Update a recordingQueue saw.
type update struct {
	visibility time.Duration
	err        error
}

// recordingQueue is an in-memory queue that reports its Updates and
// Deletes, so that a test can wait for the subscriber's requests.
type recordingQueue struct {
	*azq.Queue
	updates chan update
	deletes chan error
}

func (q recordingQueue) Update(ctx context.Context, id azq.MessageID, r azq.PopReceipt, vis time.Duration, content *string) (azq.UpdateResult, error) {
	res, err := q.Queue.Update(ctx, id, r, vis, content)
	q.updates <- update{vis, err}
	return res, err
}

func (q recordingQueue) Delete(ctx context.Context, id azq.MessageID, r azq.PopReceipt) error {
	err := q.Queue.Delete(ctx, id, r)
	q.deletes <- err
	return err
}

// recordingAccount is an Account of one recordingQueue, under any name.
type recordingAccount struct{ q recordingQueue }

func (a recordingAccount) Queue(string) (azq.MessageQueue, error)    { return a.q, nil }
func (a recordingAccount) CreateQueue(context.Context, string) error { return nil }

func newRecording(t *testing.T, mock *clock.Mock) recordingAccount {
	t.Helper()
	q := azq.New(azq.WithClock(mock))
	t.Cleanup(func() { q.Close() })
	return recordingAccount{recordingQueue{Queue: q, updates: make(chan update, 100), deletes: make(chan error, 100)}}
}

// within returns what comes on ch, or fails the test after a generous
// real-time bound (the subscriber's goroutine does the work).
// subscribe subscribes to topic with a new Subscriber on a, closed when
// the test ends.
func subscribe(t *testing.T, a Account, cfg SubscriberConfig, topic string) <-chan *message.Message {
	t.Helper()
	sub, err := NewSubscriber(a, cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sub.Close() })
	msgs, err := sub.Subscribe(context.Background(), topic)
	if err != nil {
		t.Fatal(err)
	}
	return msgs
}

func within[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(30 * time.Second):
		t.Fatalf("no %s", what)
		panic("unreachable")
	}
}

func publish(t *testing.T, a Account, topic string, msgs ...*message.Message) {
	t.Helper()
	pub, err := NewPublisher(a, PublisherConfig{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer pub.Close()
	if err := pub.Publish(topic, msgs...); err != nil {
		t.Fatal(err)
	}
}

// While a handler holds a message past half its lease, the subscriber
// renews the lease, so that no other consumer gets the message; the Ack
// then deletes it with the renewed receipt.
func TestLeaseIsRenewedWhileTheHandlerRuns(t *testing.T) {
	mock := clock.NewMock()
	a := newRecording(t, mock)
	publish(t, a, "jobs", message.NewMessage("m1", []byte("slow work")))
	msgs := subscribe(t, a, SubscriberConfig{VisibilityTimeout: 10 * time.Second}, "jobs")
	m := within(t, msgs, "message")
	for range 3 { // 15 s held: three renewals, past the 10 s lease
		mock.Add(5 * time.Second)
		if u := within(t, a.q.updates, "renewal"); u.err != nil || u.visibility != 10*time.Second {
			t.Fatalf("renewal: visibility %v, error %v", u.visibility, u.err)
		}
		if got, err := a.q.Get(context.Background(), 1, time.Second); err != nil || len(got) != 0 {
			t.Fatalf("another consumer got %d messages (error %v) while the lease was renewed", len(got), err)
		}
	}
	m.Ack()
	if err := within(t, a.q.deletes, "delete"); err != nil {
		t.Fatalf("Ack's Delete with the renewed receipt: %v", err)
	}
}

// Nack makes the message visible again after NackDelay, and it is
// delivered again.
func TestNackMakesTheMessageVisibleAfterNackDelay(t *testing.T) {
	mock := clock.NewMock()
	a := newRecording(t, mock)
	publish(t, a, "jobs", message.NewMessage("m1", []byte("x")))
	msgs := subscribe(t, a, SubscriberConfig{NackDelay: time.Minute}, "jobs")
	within(t, msgs, "message").Nack()
	if u := within(t, a.q.updates, "nack"); u.err != nil || u.visibility != time.Minute {
		t.Fatalf("nack: visibility %v, error %v; want a minute", u.visibility, u.err)
	}
	mock.Add(time.Minute)
	again := within(t, msgs, "redelivery")
	if again.UUID != "m1" {
		t.Fatalf("redelivered %s, want m1", again.UUID)
	}
	again.Ack()
	within(t, a.q.deletes, "delete")
}

// Close ends every subscription, closes their channels, hands the
// messages they held (delivered or fetched) back to the queue at once,
// and leaves no goroutine, on every back end.
func TestCloseHandsHeldMessagesBackAndLeavesNoGoroutine(t *testing.T) {
	for name, newAccount := range backends {
		t.Run(name, func(t *testing.T) {
			a := newAccount(t) // and its server, if it has one
			defer goleak.VerifyNone(t, append(httpGoroutines, goleak.IgnoreCurrent())...)
			var sent []*message.Message
			for _, p := range []string{"a", "b", "c"} {
				sent = append(sent, message.NewMessage(watermill.NewUUID(), []byte(p)))
			}
			publish(t, a, "held", sent...)
			sub, err := NewSubscriber(a, SubscriberConfig{VisibilityTimeout: time.Hour}, nil)
			if err != nil {
				t.Fatal(err)
			}
			held, err := sub.Subscribe(context.Background(), "held")
			if err != nil {
				t.Fatal(err)
			}
			idle, err := sub.Subscribe(context.Background(), "idle")
			if err != nil {
				t.Fatal(err)
			}
			within(t, held, "message") // held, neither acked nor nacked
			if err := sub.Close(); err != nil {
				t.Fatal(err)
			}
			for _, ch := range []<-chan *message.Message{held, idle} {
				select {
				case _, open := <-ch:
					if open {
						t.Fatal("a message came after Close")
					}
				default:
					t.Fatal("a channel is still open when Close returns")
				}
			}
			if err := sub.Close(); err != nil {
				t.Fatalf("second Close: %v", err)
			}
			if _, err := sub.Subscribe(context.Background(), "held"); !errors.Is(err, ErrClosed) {
				t.Fatalf("Subscribe after Close: %v, want ErrClosed", err)
			}
			// All three are visible again, with the hour-long leases cut.
			q, _ := a.Queue("held")
			got, err := q.Get(context.Background(), 32, time.Minute)
			if err != nil || len(got) != 3 {
				t.Fatalf("after Close, Get found %d messages (error %v), want the 3 handed back", len(got), err)
			}
		})
	}
}

// A message that another producer put without an envelope is delivered
// with its text as the payload and the queue's message ID as its UUID.
func TestPlainMessageIsDeliveredWithItsText(t *testing.T) {
	svc := azq.NewService()
	defer svc.Close()
	q, _, err := svc.CreateQueue(context.Background(), "plain", nil)
	if err != nil {
		t.Fatal(err)
	}
	put, err := q.Put(context.Background(), "hello from a shell script", nil)
	if err != nil {
		t.Fatal(err)
	}
	msgs := subscribe(t, ServiceAccount(svc), SubscriberConfig{}, "plain")
	m := within(t, msgs, "message")
	m.Ack()
	if string(m.Payload) != "hello from a shell script" || m.UUID != put.ID.String() || len(m.Metadata) != 0 {
		t.Fatalf("delivered %q, UUID %s, metadata %v", m.Payload, m.UUID, m.Metadata)
	}
}

// What the publisher puts is an envelope with the UUID, the metadata and
// the payload: the format the gocloud driver shares.
func TestPublishedMessageIsAnEnvelopeText(t *testing.T) {
	svc := azq.NewService()
	defer svc.Close()
	m := message.NewMessage("4f1c", []byte("hi"))
	m.Metadata.Set("k", "v")
	publish(t, ServiceAccount(svc), "jobs", m)
	q, err := svc.Queue("jobs")
	if err != nil {
		t.Fatal(err)
	}
	got, err := q.Peek(context.Background(), 1)
	if err != nil || len(got) != 1 {
		t.Fatal(got, err)
	}
	if want := `{"azqenvelope":1,"id":"4f1c","metadata":{"k":"v"},"body":"hi"}`; got[0].Content != want {
		t.Fatalf("the queue holds %s, want %s", got[0].Content, want)
	}
}

// By default a publish creates a missing queue; with DoNotCreateQueues it
// fails with azq.ErrQueueNotFound. QueueName maps topics to queue names.
func TestPublisherQueues(t *testing.T) {
	svc := azq.NewService()
	defer svc.Close()
	a := ServiceAccount(svc)
	strict, err := NewPublisher(a, PublisherConfig{DoNotCreateQueues: true}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := strict.Publish("missing", message.NewMessage("1", nil)); !errors.Is(err, azq.ErrQueueNotFound) {
		t.Fatalf("Publish to a missing queue: %v, want ErrQueueNotFound", err)
	}
	mapped, err := NewPublisher(a, PublisherConfig{QueueName: func(topic string) string { return "events-" + topic }}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := mapped.Publish("orders", message.NewMessage("1", nil)); err != nil {
		t.Fatal(err)
	}
	q, err := svc.Queue("events-orders")
	if err != nil {
		t.Fatalf("the mapped queue was not created: %v", err)
	}
	if n, _ := q.ApproximateCount(context.Background()); n != 1 {
		t.Fatalf("%d messages in events-orders, want 1", n)
	}
	if err := mapped.Publish("Not_A_Queue_Name", message.NewMessage("1", nil)); !errors.Is(err, azq.ErrInvalidQueueName) {
		t.Fatalf("Publish to an invalid name: %v, want ErrInvalidQueueName", err)
	}
	mapped.Close()
	if err := mapped.Publish("orders", message.NewMessage("2", nil)); !errors.Is(err, ErrClosed) {
		t.Fatalf("Publish after Close: %v, want ErrClosed", err)
	}
}

func TestSubscriberConfigIsChecked(t *testing.T) {
	a := ServiceAccount(azq.NewService())
	for _, cfg := range []SubscriberConfig{
		{BatchSize: 33},
		{BatchSize: -1},
		{VisibilityTimeout: time.Millisecond},
		{NackDelay: -time.Second},
	} {
		if _, err := NewSubscriber(a, cfg, nil); err == nil {
			t.Errorf("NewSubscriber(%+v) succeeded", cfg)
		}
	}
}
