package azqwatermill

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"testing"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/azqlib/azq"
	"github.com/azqlib/azq/azqtest"
	"github.com/azqlib/azq/envelope"
	"github.com/azqlib/azq/faults"
)

// settledQueue reports each Delete that settled an ack: one that
// succeeded, or found the message gone because a try before took effect.
type settledQueue struct {
	azq.MessageQueue
	settled chan azq.MessageID
}

func (q settledQueue) Delete(ctx context.Context, id azq.MessageID, r azq.PopReceipt) error {
	err := q.MessageQueue.Delete(ctx, id, r)
	if err == nil || errors.Is(err, azq.ErrMessageNotFound) {
		q.settled <- id
	}
	return err
}

// queueAccount is an Account of one queue, under any name.
type queueAccount struct{ q azq.MessageQueue }

func (a queueAccount) Queue(string) (azq.MessageQueue, error)    { return a.q, nil }
func (a queueAccount) CreateQueue(context.Context, string) error { return nil }

// faulty returns an in-memory queue, the same queue behind rules, and the
// Injector that counts their hits.
func faulty(t *testing.T, rules ...faults.Rule) (*azq.Queue, *azqtest.FaultyQueue, *faults.Injector) {
	t.Helper()
	inj, err := faults.New(faults.Options{Config: faults.Config{Rules: rules}})
	if err != nil {
		t.Fatal(err)
	}
	q := azq.New()
	t.Cleanup(func() { q.Close() })
	return q, azqtest.NewFaultyQueue(q, inj, azqtest.FaultyOptions{Queue: "orders"}), inj
}

// A subscription keeps going through transient faults — Gets answered
// ServerBusy or cut off, Deletes answered InternalError or reset after
// they took effect, Updates answered 429 — retrying each after a
// back-off and logging it: every message is delivered, acked and deleted
// once (nacked ones twice delivered), and the subscription never ends.
// The back-off runs on the real clock, since a FaultyQueue has none of
// its own: a few waits of 50 ms.
func TestSubscriptionKeepsGoingThroughTransientFaults(t *testing.T) {
	q, fq, inj := faulty(t,
		faults.Rule{Name: "get-busy", When: faults.When{Operations: []string{"GetMessages"}, Every: 3},
			Then: faults.Then{Error: faults.CodeServerBusy}},
		faults.Rule{Name: "get-cut", When: faults.When{Operations: []string{"GetMessages"}, Every: 4},
			Then: faults.Then{Network: faults.NetworkClose}},
		faults.Rule{Name: "delete-internal", When: faults.When{Operations: []string{"DeleteMessage"}, Every: 10},
			Then: faults.Then{Error: faults.CodeInternalError}},
		faults.Rule{Name: "delete-reset", When: faults.When{Operations: []string{"DeleteMessage"}, Every: 7},
			Then: faults.Then{Network: faults.NetworkReset, Applied: true}},
		faults.Rule{Name: "nack-throttled", When: faults.When{Operations: []string{"UpdateMessage"}, Every: 3},
			Then: faults.Then{Error: "TooManyRequests", Status: http.StatusTooManyRequests}},
	)
	ctx := context.Background()
	const n = 30
	for i := range n {
		text, err := envelope.Encode(&envelope.Envelope{ID: strconv.Itoa(i), Body: []byte("m")})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := q.Put(ctx, text, nil); err != nil {
			t.Fatal(err)
		}
	}
	settled := settledQueue{fq, make(chan azq.MessageID, 2*n)}
	logger := watermill.NewCaptureLogger()
	// One message a Get, so that there are at least as many Gets as
	// deliveries and each Get rule fires however the Gets and the acks
	// interleave: with whole batches, a busy machine could take the
	// thirty messages in three Gets, before get-cut's fourth.
	sub, err := NewSubscriber(queueAccount{settled}, SubscriberConfig{BatchSize: 1}, logger)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	msgs, err := sub.Subscribe(ctx, "orders")
	if err != nil {
		t.Fatal(err)
	}
	deliveries := make(map[string]int)
	for acked := 0; acked < n; {
		m, ok := <-msgs
		if !ok {
			t.Fatalf("the subscription ended after %d acks", acked)
		}
		deliveries[m.UUID]++
		if i, _ := strconv.Atoi(m.UUID); i%5 == 0 && deliveries[m.UUID] == 1 {
			m.Nack()
			continue
		}
		m.Ack()
		acked++
	}
	for range n {
		within(t, settled.settled, "settled ack")
	}
	sub.Close()
	if left, err := q.ApproximateCount(ctx); err != nil || left != 0 {
		t.Fatalf("%d messages left (%v)", left, err)
	}
	for id, times := range deliveries {
		if i, _ := strconv.Atoi(id); times != 1+btoi(i%5 == 0) {
			t.Errorf("message %s delivered %d times", id, times)
		}
	}
	hits := make(map[string]int)
	for _, r := range inj.Status().Rules {
		if r.Hits == 0 {
			t.Errorf("rule %s never fired", r.Name)
		}
		hits[r.Name] = int(r.Hits)
	}
	// Each failed Delete and Update is logged, before it is retried. Of
	// the Gets, one may have failed as Close ended the subscription,
	// which has nothing to log then.
	var gets, held int
	for _, m := range logger.Captured()[watermill.ErrorLogLevel] {
		if _, ok := m.Fields["message_id"]; ok {
			held++
		} else {
			gets++
		}
	}
	if want := hits["delete-internal"] + hits["delete-reset"] + hits["nack-throttled"]; held != want {
		t.Errorf("%d failed Deletes and Updates logged, want the %d faults", held, want)
	}
	if want := hits["get-busy"] + hits["get-cut"]; gets < want-1 || gets > want {
		t.Errorf("%d failed Gets logged, want the %d faults", gets, want)
	}
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// A failure that will not pass ends the subscription: its Get is not
// made again, the failure is logged as an error, and the channel closed.
func TestSubscriptionEndsOnAPermanentError(t *testing.T) {
	_, fq, inj := faulty(t, faults.Rule{Name: "auth", When: faults.When{Operations: []string{"GetMessages"}},
		Then: faults.Then{Error: "AuthenticationFailed", Status: http.StatusForbidden}})
	logger := watermill.NewCaptureLogger()
	sub, err := NewSubscriber(queueAccount{fq}, SubscriberConfig{}, logger)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	msgs, err := sub.Subscribe(context.Background(), "orders")
	if err != nil {
		t.Fatal(err)
	}
	closed := make(chan bool)
	go func() {
		_, ok := <-msgs
		closed <- !ok
	}()
	if !within(t, closed, "end of the subscription") {
		t.Fatal("a message came")
	}
	if hits := inj.Hits("auth"); hits != 1 {
		t.Fatalf("the failing Get was made %d times, want once", hits)
	}
	var ae *azq.Error
	errs := logger.Captured()[watermill.ErrorLogLevel]
	if len(errs) != 1 || !errors.As(errs[0].Err, &ae) || ae.Code != "AuthenticationFailed" {
		t.Fatalf("logged %+v; want the AuthenticationFailed error", errs)
	}
}

// Publish does not retry: it returns a transient failure, wrapping the
// back end's error, for the caller (a router's nack and redelivery, or
// its Retry middleware) to retry, as Watermill expects of a publisher.
func TestPublishReturnsTransientFailures(t *testing.T) {
	q, fq, inj := faulty(t, faults.Rule{Name: "busy", When: faults.When{Operations: []string{"PutMessage"}, Times: 1},
		Then: faults.Then{Error: faults.CodeServerBusy}})
	pub, err := NewPublisher(queueAccount{fq}, PublisherConfig{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer pub.Close()
	err = pub.Publish("orders", message.NewMessage("1", []byte("x")))
	var ae *azq.Error
	if !errors.As(err, &ae) || ae.Code != faults.CodeServerBusy || inj.Hits("busy") != 1 {
		t.Fatalf("Publish: %v; want the ServerBusy answer, once", err)
	}
	if n, _ := q.ApproximateCount(context.Background()); n != 0 {
		t.Fatalf("%d messages after a failed publish", n)
	}
	if err := pub.Publish("orders", message.NewMessage("1", []byte("x"))); err != nil {
		t.Fatalf("the caller's retry: %v", err)
	}
	if n, _ := q.ApproximateCount(context.Background()); n != 1 {
		t.Fatalf("%d messages after the retry, want 1", n)
	}
}
