// Package azqpubsub is a gocloud.dev/pubsub driver for Azure-style
// queues: any back end of azq's queue contract (azq.MessageQueue), so the
// same portable code runs on an in-memory or durable *azq.Service, on
// Azure Queue Storage through package azure, and on azq's REST server.
// Use OpenTopic and OpenSubscription, or URLs.
//
// # URLs
//
// The package registers two schemes with pubsub.DefaultURLMux:
//
//   - azq://orders opens the queue "orders" of an in-process *azq.Service:
//     DefaultService() for the default mux, or the Service of a URLOpener
//     registered on a mux of your own, which may be any back end of azq's
//     service contract (azq.QueueService).
//   - azurequeue://orders opens the queue "orders" of the storage account
//     that the environment names (AZURE_STORAGE_CONNECTION_STRING, or
//     AZURE_STORAGE_ACCOUNT and AZURE_STORAGE_KEY), through package azure;
//     see AzureURLOpener.
//
// A topic URL may name several queues, azq://billing,audit: a fan-out
// topic (see Fanout). Query parameters: ttl on a topic (a message's time to
// live: a Go duration, or never), visibility on a subscription (the ack
// deadline, a Go duration). Opening makes no request; a missing queue is
// reported by Send or Receive, with code gcerrors.NotFound.
//
// # Messages
//
// A message goes into the queue as an envelope
// (github.com/azqlib/azq/envelope): a JSON text with its body and
// metadata, which any Azure SDK can read. A message that another producer
// wrote without an envelope is received with its text as the body and no
// metadata.
//
// The batches gocloud hands the driver go to the back end as batches: a
// batch of sends with one azq.PutBatch a queue, and a batch of acks with
// azq.DeleteBatch, up to azq.MaxBatchSize messages a call, so that a back
// end that batches (azq.BatchPutter, azq.BatchDeleter) commits once for
// them; on any other, the helpers make one call a message.
//
// # Acknowledgement
//
// Receive takes messages with a Get, hiding them for the subscription's
// visibility timeout (SubscriptionOptions.VisibilityTimeout, 30 seconds by
// default): that is the ack deadline, and a message neither acked nor
// nacked by then is delivered again, to this or another subscriber of the
// queue. The deadline is not extended while a message is held, as gocloud
// expects of no driver; choose a visibility timeout longer than the
// handling takes. Ack deletes the message with its pop receipt; Nack
// makes it visible again at once (Update with a visibility timeout of 0).
// An ack that comes after the deadline, when the message has been taken
// again, is passed over without an error (the service answers it as it
// answers a double ack), and the message is delivered again.
//
// # Fan-out
//
// The queue service has no topics: one queue's messages are shared among
// its receivers, each message going to one of them. A topic that must
// reach several independent consumers sends each message to one queue per
// consumer, as an SNS topic does to its SQS queues: OpenFanoutTopic with a
// Fanout, or a URL naming several queues. The set lives with the producer.
//
// # As
//
// azqpubsub exposes the following types for As:
//   - Topic: *azq.MessageQueue, **azq.Queue or **azure.Queue for a
//     one-queue topic; **Fanout for a fan-out topic.
//   - Subscription: *azq.MessageQueue, and **azq.Queue or **azure.Queue.
//   - Message: *azq.Message (ID, dequeue count, times, pop receipt).
//   - Message.BeforeSend: **azq.PutOptions, to set a message's time to
//     live or initial visibility delay.
//   - Message.AfterSend: *azq.Message (the first queue's) and
//     *[]azq.Message (one a queue).
//   - Error: **azq.Error, and from package azure **azcore.ResponseError and
//     **azure.ResponseTooLargeError.
//
// # Errors
//
// Errors map to gcerrors codes by azq's sentinels and the HTTP status of
// the service's answer: a missing queue is NotFound, a bad argument or an
// oversized message InvalidArgument, 403 PermissionDenied, 409 (a queue
// being deleted or disabled) FailedPrecondition, 503 and 429
// ResourceExhausted, 500 and 502 Internal, 408, 504 and timeouts
// DeadlineExceeded.
//
// The failures that may pass are retryable (IsRetryable): 408, 429, 500
// (InternalError, OperationTimedOut), 502, 503 (ServerBusy) and 504
// answers, connections refused, reset or cut off, and timeouts. gocloud's
// portable type retries them, with its own back-off on the real clock
// (a random pause of up to a second, doubling up to 30 seconds), until
// the call succeeds or the topic or subscription is shut down, so that one
// does not end a subscription. A retried batch resumes where its try
// failed: no message is put, deleted or nacked again that the try got
// through. Any other error is returned at once: a subscription ends with
// it. Package azure's SDK pipeline retries each request a few times
// before; the in-process back ends fail only under fault injection
// (package azqtest's FaultyQueue).
package azqpubsub
