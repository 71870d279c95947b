// Package drivers gives the repository's own tests the driver types of
// package azqpubsub, which gocloud's conformance suite
// (gocloud.dev/pubsub/drivertest) takes and azqpubsub does not export:
// azqpubsub sets these functions when it is initialized. Package
// conformance runs the suite with them, in this module and in the test
// modules beside it that bring other back ends (gocloud/postgrestest).
package drivers

import (
	"github.com/azqlib/azq"
	"gocloud.dev/pubsub/driver"
)

var (
	// NewTopic returns the driver topic of OpenTopic(q, nil).
	NewTopic func(q azq.MessageQueue) driver.Topic
	// NewFanoutTopic returns the driver topic of a new, empty Fanout,
	// which its As(**azqpubsub.Fanout) gives.
	NewFanoutTopic func() driver.Topic
	// NewSubscription returns the driver subscription of
	// OpenSubscription(q, nil).
	NewSubscription func(q azq.MessageQueue) driver.Subscription
)
