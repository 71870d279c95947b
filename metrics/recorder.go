package metrics

import (
	"cmp"
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/azqlib/azq"
	"github.com/azqlib/azq/faults"
)

// Recorder counts Observations and, when scraped, reads the queues of the
// Services and the rule hits of the Injectors it watches. Its Observe is
// what server.Options.Observe and azqtest.FaultyQueue take; Snapshot gives
// the counts to a test, WritePrometheus and Handler to Prometheus.
//
// Observe costs a read-locked map lookup and a few atomic additions; the
// maps grow with the accounts, operations and queues seen, never with
// requests.
type Recorder struct {
	mu        sync.RWMutex // guards the maps and lists; the counters are atomic
	requests  map[requestKey]*atomic.Int64
	latency   map[string]*histogram // by operation
	put       map[queueKey]*atomic.Int64
	deleted   map[queueKey]*atomic.Int64
	services  []watchedService
	injectors []*faults.Injector
}

type requestKey struct {
	account, operation string
	outcome            Outcome
}

type queueKey struct{ account, queue string }

type watchedService struct {
	account string
	svc     *azq.Service
}

// NewRecorder returns an empty Recorder.
func NewRecorder() *Recorder {
	return &Recorder{
		requests: map[requestKey]*atomic.Int64{},
		latency:  map[string]*histogram{},
		put:      map[queueKey]*atomic.Int64{},
		deleted:  map[queueKey]*atomic.Int64{},
	}
}

// WatchService makes scrapes report the queues of svc, the Service of
// account: each queue's approximate message count and the age of its
// oldest visible message.
func (r *Recorder) WatchService(account string, svc *azq.Service) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.services = append(r.services, watchedService{account, svc})
}

// WatchFaults makes scrapes report the hits of in's rules and the
// requests its throttle refused.
func (r *Recorder) WatchFaults(in *faults.Injector) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.injectors = append(r.injectors, in)
}

// Observe counts one answered request: by account, operation and outcome;
// its duration, by operation; and, for a Put Message or Delete Message
// that took effect, a message put or deleted.
func (r *Recorder) Observe(o Observation) {
	if o.Operation == "" {
		o.Operation = "UnknownOperation"
	}
	counter(r, r.requests, requestKey{o.Account, o.Operation, o.Outcome}, newCounter).Add(1)
	counter(r, r.latency, o.Operation, newHistogram).observe(o.Duration)
	if o.TookEffect() && o.Queue != "" {
		switch o.Operation {
		case "PutMessage":
			counter(r, r.put, queueKey{o.Account, o.Queue}, newCounter).Add(1)
		case "DeleteMessage":
			counter(r, r.deleted, queueKey{o.Account, o.Queue}, newCounter).Add(1)
		}
	}
}

func newCounter() *atomic.Int64 { return new(atomic.Int64) }

// counter returns m[k], adding it if it is missing.
func counter[K comparable, V any](r *Recorder, m map[K]*V, k K, add func() *V) *V {
	r.mu.RLock()
	c := m[k]
	r.mu.RUnlock()
	if c != nil {
		return c
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if c = m[k]; c == nil {
		c = add()
		m[k] = c
	}
	return c
}

// latencyBuckets are the upper bounds, in seconds, of the request
// duration histogram: from half a millisecond, an in-memory operation,
// to ten seconds, an injected delay.
var latencyBuckets = []float64{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10}

// histogram counts durations into latencyBuckets (not cumulative: counts[i]
// holds those in (bucket i-1, bucket i], the last those above every bound).
type histogram struct {
	counts [15]atomic.Int64
	sum    atomic.Int64 // nanoseconds
}

func newHistogram() *histogram { return &histogram{} }

func (h *histogram) observe(d time.Duration) {
	s := d.Seconds()
	i, _ := slices.BinarySearch(latencyBuckets, s)
	h.counts[i].Add(1)
	h.sum.Add(int64(d))
}

// RequestCount is the number of requests with one account, operation and
// outcome.
type RequestCount struct {
	Account, Operation string
	Outcome            Outcome
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
func (s *Snapshot) Count(op string, out Outcome) int64 {
	var n int64
	for _, c := range s.Requests {
		if (op == "" || c.Operation == op) && (out == "" || c.Outcome == out) {
			n += c.Count
		}
	}
	return n
}

// Snapshot returns the counts so far.
func (r *Recorder) Snapshot() Snapshot {
	r.mu.RLock()
	defer r.mu.RUnlock()
	var s Snapshot
	for k, c := range r.requests {
		s.Requests = append(s.Requests, RequestCount{k.account, k.operation, k.outcome, c.Load()})
	}
	slices.SortFunc(s.Requests, func(a, b RequestCount) int {
		return cmp.Or(strings.Compare(a.Account, b.Account), strings.Compare(a.Operation, b.Operation), strings.Compare(string(a.Outcome), string(b.Outcome)))
	})
	s.MessagesPut = queueCounts(r.put)
	s.MessagesDeleted = queueCounts(r.deleted)
	return s
}

func queueCounts(m map[queueKey]*atomic.Int64) []QueueCount {
	var out []QueueCount
	for k, c := range m {
		out = append(out, QueueCount{k.account, k.queue, c.Load()})
	}
	slices.SortFunc(out, func(a, b QueueCount) int {
		return cmp.Or(strings.Compare(a.Account, b.Account), strings.Compare(a.Queue, b.Queue))
	})
	return out
}

// queueGauge is one queue's figures at a scrape.
type queueGauge struct {
	account, queue string
	messages       int
	oldestVisible  float64 // seconds; 0 when none is visible
}

// maxScrapedQueues bounds the queues a scrape reports per account, so
// that a test that makes thousands of queues still gets its metrics.
const maxScrapedQueues = 1000

// queueGauges reads every watched Service's queues.
func (r *Recorder) queueGauges(ctx context.Context) ([]queueGauge, error) {
	r.mu.RLock()
	services := slices.Clone(r.services)
	r.mu.RUnlock()
	var out []queueGauge
	for _, ws := range services {
		opts := azq.ListQueuesOptions{}
		n := 0
	pages:
		for {
			page, err := ws.svc.ListQueues(ctx, opts)
			if err != nil {
				return out, err
			}
			for _, it := range page.Queues {
				if n == maxScrapedQueues {
					break pages
				}
				q, err := ws.svc.Queue(it.Name)
				if err != nil {
					continue // deleted meanwhile
				}
				snap, err := q.Inspect(ctx, 0)
				if errors.Is(err, azq.ErrQueueNotFound) {
					continue
				}
				if err != nil {
					return out, err
				}
				g := queueGauge{account: ws.account, queue: it.Name, messages: snap.Count}
				if !snap.OldestVisible.IsZero() {
					g.oldestVisible = max(0, snap.Time.Sub(snap.OldestVisible).Seconds())
				}
				out = append(out, g)
				n++
			}
			if page.NextMarker == "" {
				break
			}
			opts.Marker = page.NextMarker
		}
	}
	return out, nil
}
