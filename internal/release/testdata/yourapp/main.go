// Command yourapp is a program of a module outside the repository that
// imports azq's root module, both drivers' modules and the PostgreSQL
// back end's, as a team's service would: the module tests (module_test.go) build and run it after
// the README's commands, with the modules from the clone or from a module
// proxy.
package main

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"gocloud.dev/pubsub"

	"github.com/azqlib/azq"
	"github.com/azqlib/azq/gocloud/azqpubsub"
	"github.com/azqlib/azq/postgres"
	"github.com/azqlib/azq/watermill/azqwatermill"
)

// The PostgreSQL back end keeps the service contract; the program has no
// database to open, so it names the back end and its schema only.
var _ azq.QueueService = (*postgres.Service)(nil)

func main() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	svc := azq.NewService()

	q, _, err := svc.CreateQueue(ctx, "orders", nil)
	if err != nil {
		log.Fatal(err)
	}
	topic := azqpubsub.OpenTopic(q, nil)
	defer topic.Shutdown(ctx)
	sub := azqpubsub.OpenSubscription(q, nil)
	defer sub.Shutdown(ctx)
	if err := topic.Send(ctx, &pubsub.Message{Body: []byte("order 42")}); err != nil {
		log.Fatal(err)
	}
	m, err := sub.Receive(ctx)
	if err != nil {
		log.Fatal(err)
	}
	m.Ack()
	fmt.Printf("gocloud: %s\n", m.Body)

	account := azqwatermill.ServiceAccount(svc)
	wsub, err := azqwatermill.NewSubscriber(account, azqwatermill.SubscriberConfig{}, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer wsub.Close()
	messages, err := wsub.Subscribe(ctx, "invoices")
	if err != nil {
		log.Fatal(err)
	}
	pub, err := azqwatermill.NewPublisher(account, azqwatermill.PublisherConfig{}, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer pub.Close()
	if err := pub.Publish("invoices", message.NewMessage("invoice-7", []byte("invoice 7"))); err != nil {
		log.Fatal(err)
	}
	got := <-messages
	got.Ack()
	fmt.Printf("watermill: %s\n", got.Payload)
	fmt.Printf("postgres: schema version %d\n", postgres.SchemaVersion)
	fmt.Printf("azq %s\n", azq.Version)
}
