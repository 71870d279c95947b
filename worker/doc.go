// Package worker runs a handler over the messages of a queue with the
// behaviour of the Azure Functions queue trigger: it fetches messages in
// batches, keeps each message's lease alive while its handler runs, lets the
// handler save progress in the message, deletes a message only after its
// handler succeeds, gives a failed message back for another attempt, and sets
// a message aside in a poison queue once it has failed MaxDequeueCount times.
//
//	w := worker.New(q, func(ctx context.Context, d *worker.Delivery) error {
//		return process(ctx, d.Message.Content)
//	}, worker.Options{BatchSize: 16, Concurrency: 24, MaxDequeueCount: 5})
//	err := w.Run(ctx)
//
// # Source queue
//
// The worker talks to its queue through the small Queue interface, which
// *azq.Queue satisfies, so the same worker can run against a remote queue.
// A source that also implements Receiver (azq's Receive, which blocks until
// a message is visible) is waited on and never polled. Any other source is
// polled with the randomized exponential back-off of Functions: after an
// empty poll the worker waits
//
//	MinPollInterval + MinPollInterval·2^(k-1)·U[0.8, 1.2)
//
// for the k-th empty poll in a row, at most MaxPollInterval; after a batch
// that filled the request it polls again at once, after a partial batch it
// waits MinPollInterval. Fetch errors back off the same way in both modes.
//
// # Leases, checkpoints and outcomes
//
// Every message is fetched with a visibility timeout of LeaseDuration and
// renewed through Update Message every LeaseDuration/2 while its handler
// runs; each renewal's new pop receipt replaces the old one. Delivery.Checkpoint
// saves new content the same way, so a worker that crashes leaves the
// progress for the next one. A renewal or checkpoint that finds the message
// gone (MessageNotFound, or PopReceiptMismatch from a remote service) means
// another consumer owns it now, and one that finds the queue gone
// (QueueNotFound, or QueueBeingDeleted or QueueDisabled from a remote
// service) means the message went with it: either way the lease is lost, the
// handler's context is cancelled with ErrLeaseLost, renewing stops, and the
// worker neither deletes nor retries the message. A delete or release that
// finds the message or its queue gone is reported as EventLeaseLost, not as
// an error.
//
// When the handler returns nil the message is deleted. When it returns an
// error or panics, the message is released for another attempt after
// RetryDelay, or, if this was attempt MaxDequeueCount or later, copied to the
// poison queue and deleted. A message that arrives with a DequeueCount above
// MaxDequeueCount (its last attempt crashed) goes to the poison queue
// without running the handler. The poison queue is opened through
// Options.Poison under the name PoisonQueueName gives ("<queue>-poison").
// For a source that implements azq.QueueOpener, Poison defaults to
// OpenerPoison of it, which creates the poison queue next to the source on
// first use: for a queue made by an *azq.Service, as q above, in that
// Service; for a remote source (an *azure.Queue) in its storage account.
// ServicePoison creates it in any back end of azq's service contract,
// azq.QueueService, instead. A queue made by azq.New opens no queues (its
// OpenQueue answers errors.ErrUnsupported), so it has no poison queue
// unless Poison is set, and a message out of attempts is then left
// invisible until its lease lapses. By default the poison message is a JSON
// PoisonRecord holding the body and why it was set aside.
//
// # Deletes in batches
//
// On a source that deletes many messages at the cost of one (an
// azq.MessageQueue that is an azq.BatchDeleter), the delete of a message
// whose handler succeeded waits, for at most SettleWindow (5 ms by
// default), for the deletes of other handled messages, and they go together
// in one azq.DeleteBatch: one call, and one lock, log sync or commit, for up
// to azq.MaxBatchSize messages.
// A batch goes at once when it is full, when no other message is being
// handled (nothing would join it before the next fetch), or when Run stops;
// and no delete waits longer than LeaseDuration/10 or half of what its
// lease has left, so that no lease lapses while its delete waits. A message
// whose delete waits holds no handler: the worker fetches as if it were
// gone. A batch that fails as a whole falls back to one Delete a message,
// each settled on its own answer as without batches; a message the failed
// batch did delete is then reported as EventLeaseLost. An item's own error
// is settled as a single Delete's: a stale receipt is EventLeaseLost.
// What it costs: a handled message stays invisible a few milliseconds
// longer before it is gone, and a worker that crashes inside the window
// leaves its message to be handled again after the lease, as one that
// crashes before its delete does: delivery is at least once either way.
// A negative SettleWindow deletes each message at once, on its own, as
// does any other source, where a batch would be one Delete after another
// and waiting would gain nothing.
//
// # Concurrency and shutdown
//
// At most Concurrency handlers run at once. The worker fetches when the
// number of messages in flight falls to NewBatchThreshold, and then asks only
// for as many messages as it can start at once, so no fetched message burns
// its lease waiting for a free slot. When Run's context ends the worker stops
// fetching, sends the deletes waiting for their batch, gives handlers ShutdownTimeout to finish, then cancels their
// contexts with ErrShutdown and releases their messages (visibility 0) so that
// another worker can take them at once instead of waiting out the lease.
// Run returns after every goroutine it started has ended; handlers must
// therefore honour their context.
//
// The worker runs Concurrency goroutines, which both fetch and handle. The
// goroutine that fetches a batch handles its messages one after another
// while that keeps up, which is fastest for quick handlers; the others are
// woken to take the waiting messages as soon as the fetcher goes on
// fetching, or once 50 µs pass with messages waiting and none taken, which
// happens when every running handler is slow. Every message of a batch
// thus starts within about 50 µs even when handlers block.
//
// # Time
//
// All waiting — polling back-off, renewal timers, the settle window, the
// shutdown deadline — uses the queue's clock (Options.Clock, else the source's Clock method,
// else the real clock), and the back-off jitter comes from Options.Rand, so
// that a test with a *clock.Mock controls every timing decision. The
// exceptions run on the real clock too, so that a mock clock nobody
// advances cannot stall the worker: the 50 µs above, a matter of CPU
// scheduling rather than of queue semantics; and, when the clock is the
// source's and not the real one, the poll waits and the settle window,
// which end after their interval on the mock clock or in real time,
// whichever comes first. A
// test of a worker on azq's test server, whose mock clock an azure.Queue
// reports (azure.Options.Clock), thus sees the worker poll whether or not
// it moves the clock. A mock clock given as Options.Clock is the worker's
// alone: the worker then polls only when the test moves it by the wait
// EventPollWait reports.
package worker
