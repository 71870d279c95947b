package azqpubsub

import (
	"github.com/azqlib/azq"
	"github.com/azqlib/azq/gocloud/internal/drivers"
	"gocloud.dev/pubsub/driver"
)

// The driver types, for the conformance suite of the repository's tests
// (see package drivers); users reach them through OpenTopic and
// OpenSubscription.
func init() {
	drivers.NewTopic = func(q azq.MessageQueue) driver.Topic { return newTopic(q, nil, nil) }
	drivers.NewFanoutTopic = func() driver.Topic { return newTopic(nil, NewFanout(), nil) }
	drivers.NewSubscription = func(q azq.MessageQueue) driver.Subscription {
		return newSubscription(q, &SubscriptionOptions{})
	}
}
