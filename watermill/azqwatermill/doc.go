// Package azqwatermill is a Watermill Pub/Sub
// (github.com/ThreeDotsLabs/watermill) on Azure-style queues: any back end
// of azq's service contract (azq.QueueService) through ServiceAccount: the
// queues of an in-memory or durable *azq.Service, of Azure Queue Storage
// or azq's REST server through package azure's Service, or of any other
// back end of the contract.
//
// A topic is a queue of the same name (or of the name that
// PublisherConfig.QueueName and SubscriberConfig.QueueName give it). A
// message goes into the queue as an envelope (package
// github.com/azqlib/azq/envelope), which keeps its UUID, metadata and
// payload as a JSON text that any Azure SDK can read; a message that
// another producer wrote without an envelope is delivered with its text as
// the payload and the queue's message ID as its UUID.
//
// Publish of many messages puts those that share a context with one
// azq.PutBatch of up to azq.MaxBatchSize, so that a back end that batches
// (azq.BatchPutter) commits once for them; on any other, the helper puts
// them one at a time.
//
// Every subscriber of a topic shares its queue: each message goes to one
// of them. There are no consumer groups, since the queue service has no
// fan-out; a topic that must reach several independent consumers needs one
// queue a consumer, published to by the producer.
//
// Ack deletes the message; Nack makes it visible again (after
// SubscriberConfig.NackDelay), so that it is delivered again, to this or
// another subscriber. A held message's lease (its visibility timeout) is
// renewed while its handler runs, so no handler is cut short by it; if the
// process dies, the message comes back when its lease ends. Delivery is
// at least once, in no guaranteed order, as the queue service promises.
//
// Close ends the subscriptions, hands back the messages they held, and
// returns when their goroutines have returned.
//
// # Failures
//
// A subscription keeps going through the failures that may pass — 408,
// 429, 500, 502, 503 and 504 answers (ServerBusy, InternalError,
// OperationTimedOut...), connections refused, reset or cut off, timeouts —
// logging each through the Watermill logger and retrying after a back-off
// on the queue's clock (see Subscriber). Any other failure of a Get ends
// the subscription: it is logged and the channel closed. Publish does not
// retry: it returns the failure, wrapping the back end's error (an
// *azq.Error for an answer), as Watermill expects of a publisher; a
// router retries by nacking the message being handled, which is then
// delivered again, or with its Retry middleware.
package azqwatermill
