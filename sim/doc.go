// Package sim simulates producers and consumers of an Azure-style queue, to
// measure visibility scheduling before it runs in production: how long the
// visibility timeout should be for a processing-time distribution, how many
// duplicate deliveries crashes cause, what idle listeners cost in storage
// transactions when they poll, back off, or wait to be woken, and how many
// consumers keep the queue depth bounded under a burst.
//
// It is a discrete-event simulation over a real *azq.Queue, not a model of
// one: every Put, Get, Update and Delete is the queue's own, so delivery
// order, visibility, pop receipts, dequeue counts and expiry are Azure's
// semantics as azq implements them. The queue reads a simulated clock that
// jumps from one event to the next and never sleeps, so a simulated week
// takes seconds or minutes.
//
// # Scenarios
//
// A Scenario says how long to run, who puts messages (Producer: constant,
// Poisson, burst or daily arrivals, with a time-to-live and an initial
// visibility delay) and who consumes them (Fleet: count, batch size,
// visibility timeout, processing-time distribution, failure and crash
// probabilities, lease renewal, how idle consumers wait, and autoscaling by
// queue depth). Scenarios are Go values or JSON files (Load, Parse); the
// repository's examples/sim holds complete files. Run simulates one;
// RunSweep runs one for each value of a parameter.
//
// # Consumers
//
// A listener is the classic consumer loop as a state machine: get a batch,
// process its messages one after another, delete each that succeeded, get
// again at once, and wait when the queue was empty: polling at a fixed
// interval, with Functions' randomized exponential back-off, or in azq's
// Receive, which returns the instant a message is visible. Processing
// times, failures and crashes are drawn from a stream keyed by the seed,
// the message and its dequeue count, so two runs that differ in one
// parameter do the same work.
//
// The worker model runs this module's worker package itself (see package
// worker), so that its real algorithm is what gets measured. Its goroutines
// run while simulated time stands still, and time moves on once they have
// all settled; that costs real microseconds per step, and the Go
// scheduler's order among its goroutines means its runs are reproducible in
// their totals but not always message for message.
//
// # Scale
//
// The simulation keeps one queue of events ordered by simulated time, and a
// listener has at most one event in it, so a fleet of thousands costs a
// heap of thousands. An idle listener that polls at a fixed interval (or
// has backed off to its maximum) leaves the event queue altogether: its
// empty Gets are counted from its phase when it is next woken, and it is
// woken only when a message may have become visible, the earliest poller
// first. A fleet polling an empty queue for 22 hours costs nothing per
// poll.
//
// # Measurements
//
// Every delivery is recorded and checked: a message delivered after its
// deletion, or with a dequeue count that disagrees with the deliveries
// seen, is a violation. The Report counts duplicates, messages processed
// again, failures, poison, expiry, crashes and lost messages (which must be
// zero: a run that loses a message returns ErrLost), end-to-end latency
// percentiles, throughput, utilisation, and billable storage transactions
// by operation with their cost. Its time series holds queue depth, messages
// in flight, consumers and per-interval counts. WriteText prints the
// summary, WriteFiles writes it with CSV and JSON time series and plots.
//
// The same seed gives the same report, byte for byte.
package sim
