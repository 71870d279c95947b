package metrics

import (
	"cmp"
	"slices"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/azqlib/azq"
	"github.com/azqlib/azq/faults"
	"github.com/azqlib/azq/observe"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// Recorder counts Observations and, when scraped, reads the queues of the
// services and the rule hits of the Injectors it watches. Its Observe is
// what server.Options.Observe and azqtest.FaultyQueue take; Snapshot gives
// the counts to a test, WritePrometheus and Handler to Prometheus. It is
// a prometheus.Collector, so it can also be registered with a registry of
// the program's own.
//
// The counters are client_golang's: Observe finds a series by its label
// values and adds to it atomically, with no lock held across requests.
// The series grow with the accounts, operations and queues seen, never
// with requests, and a queue's series go when it is deleted.
type Recorder struct {
	// counts holds the counters, made at first use: a Recorder that
	// nothing observes or scrapes (the metrics of a test server that
	// serves a request or two) costs little more than its struct.
	countsOnce sync.Once
	counts     *counters

	// The series of requests and of latencies, by their label values,
	// as WithLabelValues returned them: a lookup in a map of a few dozen
	// entries costs Observe less than hashing the label values again.
	// They are never deleted, so a series found here is the vec's.
	seriesMu      sync.RWMutex // guards requestSeries and latencySeries
	requestSeries map[requestKey]prometheus.Counter
	latencySeries map[string]prometheus.Observer

	mu        sync.Mutex // guards services and injectors
	services  []watchedService
	injectors []*faults.Injector
}

type requestKey struct {
	account, operation string
	outcome            observe.Outcome
}

type watchedService struct {
	account string
	svc     azq.QueueService
}

// counters are a Recorder's client_golang counters and histogram.
type counters struct {
	requests *prometheus.CounterVec   // account, operation, outcome
	latency  *prometheus.HistogramVec // operation
	put      *prometheus.CounterVec   // account, queue
	deleted  *prometheus.CounterVec   // account, queue
	// observed gathers the four above, for Snapshot.
	observed *prometheus.Registry
}

// NewRecorder returns an empty Recorder.
func NewRecorder() *Recorder {
	return &Recorder{
		requestSeries: map[requestKey]prometheus.Counter{},
		latencySeries: map[string]prometheus.Observer{},
	}
}

// c returns the Recorder's counters, making them at the first call.
func (r *Recorder) c() *counters {
	r.countsOnce.Do(func() { r.counts = newCounters() })
	return r.counts
}

func newCounters() *counters {
	c := &counters{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "azq_requests_total",
			Help: "Requests answered, by account, operation and outcome (success, client_error, throttling_error, server_error, network_error).",
		}, []string{"account", "operation", "outcome"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "azq_request_duration_seconds",
			Help:    "Time from a request's arrival to its answer, by operation.",
			Buckets: latencyBuckets,
		}, []string{"operation"}),
		put: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "azq_messages_put_total",
			Help: "Messages put (Put Message requests that took effect), by queue.",
		}, []string{"account", "queue"}),
		deleted: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "azq_messages_deleted_total",
			Help: "Messages deleted (Delete Message requests that took effect), by queue.",
		}, []string{"account", "queue"}),
		observed: prometheus.NewRegistry(),
	}
	c.observed.MustRegister(c.collectors()...)
	return c
}

// collectors returns the counters as collectors, for a registry.
func (c *counters) collectors() []prometheus.Collector {
	return []prometheus.Collector{c.requests, c.latency, c.put, c.deleted}
}

// WatchService makes scrapes report the queues of svc, the back end of
// account: each queue's approximate message count and, where svc reads
// it (azq.QueueStatsReader, as *azq.Service does), the age of the message
// at the head of the queue. A back end without it, such as package
// azure's, is read through ListQueues and each queue's Properties: one
// request per queue and scrape, and no age.
func (r *Recorder) WatchService(account string, svc azq.QueueService) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.services = append(r.services, watchedService{account, svc})
}

// WatchFaults makes scrapes report the hits of in's rules and the
// requests its throttle refused, as counted since in was made: replacing
// or clearing its throttle or rules sets nothing back.
func (r *Recorder) WatchFaults(in *faults.Injector) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.injectors = append(r.injectors, in)
}

// watched returns what the Recorder watches.
func (r *Recorder) watched() ([]watchedService, []*faults.Injector) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.services), slices.Clone(r.injectors)
}

// Observe counts one answered request: by account, operation and outcome;
// its duration, by operation; and, for a Put Message or Delete Message
// that took effect, a message put or deleted. A Delete Queue that took
// effect removes the queue's series of messages put and deleted: a
// client that creates and deletes queue names does not grow the metrics.
func (r *Recorder) Observe(o observe.Observation) {
	if o.Operation == "" {
		o.Operation = "UnknownOperation"
	}
	account, queue := labelValue(o.Account), labelValue(o.Queue)
	op := labelValue(o.Operation)
	requests, latency := r.series(requestKey{account, op, observe.Outcome(labelValue(string(o.Outcome)))})
	requests.Inc()
	latency.Observe(o.Duration.Seconds())
	if o.TookEffect() && queue != "" {
		switch o.Operation {
		case "PutMessage":
			r.c().put.WithLabelValues(account, queue).Inc()
		case "DeleteMessage":
			r.c().deleted.WithLabelValues(account, queue).Inc()
		case "DeleteQueue":
			r.forgetQueue(account, queue)
		}
	}
}

// series returns the request counter of k and the latency histogram of
// its operation, adding them if they are new.
func (r *Recorder) series(k requestKey) (prometheus.Counter, prometheus.Observer) {
	r.seriesMu.RLock()
	c, h := r.requestSeries[k], r.latencySeries[k.operation]
	r.seriesMu.RUnlock()
	if c != nil && h != nil {
		return c, h
	}
	r.seriesMu.Lock()
	defer r.seriesMu.Unlock()
	if c = r.requestSeries[k]; c == nil {
		c = r.c().requests.WithLabelValues(k.account, k.operation, string(k.outcome))
		r.requestSeries[k] = c
	}
	if h = r.latencySeries[k.operation]; h == nil {
		h = r.c().latency.WithLabelValues(k.operation)
		r.latencySeries[k.operation] = h
	}
	return c, h
}

// forgetQueue removes the per-queue series of a deleted queue. A series
// that disappears and comes back may start again from zero, which
// Prometheus's rate and increase take as a counter reset.
func (r *Recorder) forgetQueue(account, queue string) {
	c := r.c()
	c.put.DeleteLabelValues(account, queue)
	c.deleted.DeleteLabelValues(account, queue)
}

// labelValue makes s a valid label value: client_golang refuses (and its
// WithLabelValues panics on) text that is not UTF-8, which an Observe
// hook fed by other code might pass.
func labelValue(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	return strings.ToValidUTF8(s, "\uFFFD")
}

// latencyBuckets are the upper bounds, in seconds, of the request
// duration histogram: from half a millisecond, an in-memory operation,
// to ten seconds, an injected delay.
var latencyBuckets = []float64{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10}

// RequestCount is the number of requests with one account, operation and
// outcome.
type RequestCount struct {
	Account, Operation string
	Outcome            observe.Outcome
	Count              int64
}

// QueueCount is a count for one queue.
type QueueCount struct {
	Account, Queue string
	Count          int64
}

// Snapshot is what a Recorder has counted, in a stable order.
type Snapshot struct {
	Requests        []RequestCount
	MessagesPut     []QueueCount
	MessagesDeleted []QueueCount
}

// Count sums the requests of operation op (all operations if empty)
// with outcome out (all outcomes if empty), over every account.
func (s *Snapshot) Count(op string, out observe.Outcome) int64 {
	var n int64
	for _, c := range s.Requests {
		if (op == "" || c.Operation == op) && (out == "" || c.Outcome == out) {
			n += c.Count
		}
	}
	return n
}

// Snapshot returns the counts so far. It reads the counters only, not
// the watched queues.
func (r *Recorder) Snapshot() Snapshot {
	fams, _ := r.c().observed.Gather() // the counters cannot fail to gather
	var s Snapshot
	for _, f := range fams {
		for _, m := range f.GetMetric() {
			l := labels(m)
			n := int64(m.GetCounter().GetValue())
			switch f.GetName() {
			case "azq_requests_total":
				s.Requests = append(s.Requests, RequestCount{l["account"], l["operation"], observe.Outcome(l["outcome"]), n})
			case "azq_messages_put_total":
				s.MessagesPut = append(s.MessagesPut, QueueCount{l["account"], l["queue"], n})
			case "azq_messages_deleted_total":
				s.MessagesDeleted = append(s.MessagesDeleted, QueueCount{l["account"], l["queue"], n})
			}
		}
	}
	slices.SortFunc(s.Requests, func(a, b RequestCount) int {
		return cmp.Or(strings.Compare(a.Account, b.Account), strings.Compare(a.Operation, b.Operation), strings.Compare(string(a.Outcome), string(b.Outcome)))
	})
	byQueue := func(a, b QueueCount) int {
		return cmp.Or(strings.Compare(a.Account, b.Account), strings.Compare(a.Queue, b.Queue))
	}
	slices.SortFunc(s.MessagesPut, byQueue)
	slices.SortFunc(s.MessagesDeleted, byQueue)
	return s
}

// labels returns m's labels by name.
func labels(m *dto.Metric) map[string]string {
	l := make(map[string]string, len(m.GetLabel()))
	for _, p := range m.GetLabel() {
		l[p.GetName()] = p.GetValue()
	}
	return l
}
