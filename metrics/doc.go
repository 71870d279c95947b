// Package metrics counts what a queue service answers, for tests and for
// Prometheus.
//
// azq's REST server reports each request it answers as an Observation to
// server.Options.Observe, and azqtest.FaultyQueue each call; a Recorder
// counts them (requests by operation and outcome, Azure's response types:
// success, client error, throttling error, server error, network error;
// a latency histogram per operation; messages put and deleted) and, when
// scraped, reads the queues of the Services it watches (approximate count,
// age of the oldest visible message) and the hits of the fault rules.
// Snapshot gives a test the counts; WritePrometheus and Handler give
// Prometheus the text exposition format, which azqd serves at /metrics.
//
// The package writes the text format itself, with no dependency: importing
// azq must not pull a metrics stack in. Nothing is counted unless an
// Observe hook is set, so code that does not want metrics pays nothing.
package metrics
