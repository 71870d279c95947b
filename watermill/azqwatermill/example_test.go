package azqwatermill_test

import (
	"context"
	"fmt"
	"log"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/azqlib/azq"
	"github.com/azqlib/azq/watermill/azqwatermill"
)

func Example() {
	svc := azq.NewService() // or azq.Open(dir), or an *azure.Service for Azure
	defer svc.Close()
	account := azqwatermill.ServiceAccount(svc)

	sub, err := azqwatermill.NewSubscriber(account, azqwatermill.SubscriberConfig{}, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer sub.Close()
	messages, err := sub.Subscribe(context.Background(), "orders") // creates the queue
	if err != nil {
		log.Fatal(err)
	}

	pub, err := azqwatermill.NewPublisher(account, azqwatermill.PublisherConfig{}, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer pub.Close()
	m := message.NewMessage("7c1e6a52-order-42", []byte(`{"total":9.5}`))
	m.Metadata.Set("type", "order.created")
	if err := pub.Publish("orders", m); err != nil {
		log.Fatal(err)
	}

	got := <-messages
	fmt.Println(got.UUID, got.Metadata.Get("type"), string(got.Payload))
	got.Ack() // deletes it; Nack would make it visible again
	// Output: 7c1e6a52-order-42 order.created {"total":9.5}
}
