// Package metrics counts what a queue service answers, for tests and for
// Prometheus.
//
// azq's REST server reports each request it answers as an
// observe.Observation to server.Options.Observe, and azqtest.FaultyQueue
// each call; a Recorder counts them (requests by operation and outcome,
// Azure's response types: success, client error, throttling error, server
// error, network error; a latency histogram per operation; messages put
// and deleted) and, when
// scraped, reads the queues of the services it watches (approximate count,
// age of the message at the head) and the hits of the fault rules.
// Snapshot gives a test the counts; Handler serves them to Prometheus,
// and WritePrometheus writes them in its text format, which azqd serves
// at /metrics.
//
// The counters, the exposition and the HTTP handler are Prometheus's own
// client library, github.com/prometheus/client_golang; a Recorder is a
// prometheus.Collector, so a program can register it with a registry of
// its own. Only this package imports it: the observations are package
// observe's, which the server and azqtest report without linking this
// one, so importing azq, the server or azqtest does not pull a metrics
// stack in, and nothing is counted unless an Observe hook is set: code
// that does not want metrics pays nothing.
//
// Every counter only grows for the life of the process, except that the
// series of a deleted queue go with it. A scrape costs time in proportion
// to the queues it reads, not to their messages: a back end that
// implements azq.QueueStatsReader, as *azq.Service does, gives each
// queue's figures for a few field reads under its lock.
package metrics
