package azqpubsub_test

import (
	"context"
	"fmt"
	"log"

	"github.com/azqlib/azq"
	"github.com/azqlib/azq/gocloud/azqpubsub"
	"gocloud.dev/pubsub"
)

func ExampleOpenTopic() {
	ctx := context.Background()
	svc := azq.NewService() // or azq.Open(dir), or an *azure.Queue below
	defer svc.Close()
	q, _, err := svc.CreateQueue(ctx, "orders", nil)
	if err != nil {
		log.Fatal(err)
	}

	topic := azqpubsub.OpenTopic(q, nil)
	defer topic.Shutdown(ctx)
	sub := azqpubsub.OpenSubscription(q, nil)
	defer sub.Shutdown(ctx)

	err = topic.Send(ctx, &pubsub.Message{Body: []byte("order 42"), Metadata: map[string]string{"type": "created"}})
	if err != nil {
		log.Fatal(err)
	}
	m, err := sub.Receive(ctx)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%s %v\n", m.Body, m.Metadata)
	m.Ack() // deletes the message; m.Nack() would make it visible again
	// Output: order 42 map[type:created]
}

// A URL names the queue; azq:// URLs open queues of DefaultService() on
// the default mux, azurequeue:// ones queues of the storage account in
// the environment.
func Example_uRL() {
	ctx := context.Background()
	if _, _, err := azqpubsub.DefaultService().CreateQueue(ctx, "jobs", nil); err != nil {
		log.Fatal(err)
	}
	topic, err := pubsub.OpenTopic(ctx, "azq://jobs?ttl=1h")
	if err != nil {
		log.Fatal(err)
	}
	defer topic.Shutdown(ctx)
	sub, err := pubsub.OpenSubscription(ctx, "azq://jobs?visibility=2m")
	if err != nil {
		log.Fatal(err)
	}
	defer sub.Shutdown(ctx)

	if err := topic.Send(ctx, &pubsub.Message{Body: []byte("resize image 7")}); err != nil {
		log.Fatal(err)
	}
	m, err := sub.Receive(ctx)
	if err != nil {
		log.Fatal(err)
	}
	m.Ack()
	fmt.Printf("%s\n", m.Body)
	// Output: resize image 7
}

// A fan-out topic sends each message to every queue of its set, so that
// each consumer's queue gets all of them.
func ExampleOpenFanoutTopic() {
	ctx := context.Background()
	svc := azq.NewService()
	defer svc.Close()
	billing, _, _ := svc.CreateQueue(ctx, "orders-billing", nil)
	audit, _, _ := svc.CreateQueue(ctx, "orders-audit", nil)

	topic := azqpubsub.OpenFanoutTopic(azqpubsub.NewFanout(billing, audit), nil)
	defer topic.Shutdown(ctx)
	if err := topic.Send(ctx, &pubsub.Message{Body: []byte("order 42")}); err != nil {
		log.Fatal(err)
	}
	for _, q := range []*azq.Queue{billing, audit} {
		sub := azqpubsub.OpenSubscription(q, nil)
		m, err := sub.Receive(ctx)
		if err != nil {
			log.Fatal(err)
		}
		m.Ack()
		fmt.Printf("%s: %s\n", q.Name(), m.Body)
		sub.Shutdown(ctx)
	}
	// Output:
	// orders-billing: order 42
	// orders-audit: order 42
}
