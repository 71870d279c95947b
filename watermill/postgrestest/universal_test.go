package postgrestest

import (
	"context"
	"os"
	"testing"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/ThreeDotsLabs/watermill/pubsub/tests"
	"github.com/azqlib/azq/postgres"
	"github.com/azqlib/azq/postgres/pgtest"
	"github.com/azqlib/azq/watermill/azqwatermill"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

// features are an Azure queue's, as azqwatermill's own universal test
// states them: messages outlive their publisher and subscriber, delivery
// is at least once, in no guaranteed order, and there are no consumer
// groups.
var features = tests.Features{
	ConsumerGroups:      false,
	ExactlyOnceDelivery: false,
	GuaranteedOrder:     false,
	Persistent:          true,
}

// Watermill's universal Pub/Sub suite on PostgreSQL: one Service on a
// schema of the test's own, with the database's clock, as in production,
// the subscribers waiting in Receive.
func TestUniversal(t *testing.T) {
	srv := pgtest.Shared(t)
	svc, err := postgres.Open(context.Background(), srv.URL(), &postgres.Options{Schema: srv.NewSchema(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { svc.Close() })
	account := azqwatermill.ServiceAccount(svc)
	logger := watermill.NewStdLogger(false, false)
	tests.TestPubSub(t, features, func(t *testing.T) (message.Publisher, message.Subscriber) {
		pub, err := azqwatermill.NewPublisher(account, azqwatermill.PublisherConfig{}, logger)
		if err != nil {
			t.Fatal(err)
		}
		sub, err := azqwatermill.NewSubscriber(account, azqwatermill.SubscriberConfig{}, logger)
		if err != nil {
			t.Fatal(err)
		}
		return pub, sub
	}, nil)
}
