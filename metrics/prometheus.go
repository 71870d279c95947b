package metrics

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"slices"

	"github.com/azqlib/azq"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
)

// ContentType is the media type of the Prometheus text format that
// WritePrometheus writes, and that Handler answers with unless the
// scraper asks for another (OpenMetrics, protocol buffers).
const ContentType = "text/plain; version=0.0.4; charset=utf-8; escaping=underscores"

// The figures a scrape reads from what the Recorder watches.
var (
	queueMessagesDesc = prometheus.NewDesc("azq_queue_messages",
		"Messages in the queue, visible or not (the approximate message count).",
		[]string{"account", "queue"}, nil)
	queueAgeDesc = prometheus.NewDesc("azq_queue_oldest_visible_message_age_seconds",
		"Time since the message at the head of the queue (the visible message visible longest, which the next Get takes) was put; 0 when none is visible.",
		[]string{"account", "queue"}, nil)
	faultHitsDesc = prometheus.NewDesc("azq_fault_hits_total",
		"Times each fault rule fired.",
		[]string{"rule"}, nil)
	throttledDesc = prometheus.NewDesc("azq_throttled_requests_total",
		"Requests the throttle refused with 503 ServerBusy.",
		nil, nil)
)

// maxScrapedQueues bounds the queues a scrape reports per account, so
// that a test that makes thousands of queues still gets its metrics.
const maxScrapedQueues = 1000

// Describe sends the descriptors of every metric the Recorder reports,
// for prometheus.Registerer.Register.
func (r *Recorder) Describe(ch chan<- *prometheus.Desc) {
	for _, c := range r.c().collectors() {
		c.Describe(ch)
	}
	(&scrape{r: r}).Describe(ch)
}

// Collect sends every metric, reading the watched queues and Injectors,
// for a prometheus.Registry of the program's own. The queues are read
// without a deadline; Handler and WritePrometheus read them with the
// scrape's context instead.
func (r *Recorder) Collect(ch chan<- prometheus.Metric) {
	for _, c := range r.c().collectors() {
		c.Collect(ch)
	}
	(&scrape{r: r, ctx: context.Background()}).Collect(ch)
}

// gatherer returns what one scrape reads: the counters, and the figures
// of what the Recorder watches, read with ctx. Once gathered, the series
// of messages put and deleted of queues the scrape found gone are
// removed. It gathers through one registry, made for the scrape: each
// Gather allocates its buffers afresh, tens of kilobytes.
func (r *Recorder) gatherer(ctx context.Context) prometheus.Gatherer {
	return prometheus.GathererFunc(func() ([]*dto.MetricFamily, error) {
		s := &scrape{r: r, ctx: ctx, listed: map[string]map[string]bool{}}
		reg := prometheus.NewRegistry()
		reg.MustRegister(append(r.c().collectors(), s)...)
		fams, err := reg.Gather()
		if perr := s.prune(fams); perr != nil {
			err = errors.Join(err, perr)
		}
		return fams, err
	})
}

// WritePrometheus writes every metric in the Prometheus text exposition
// format (ContentType):
//
//	azq_requests_total{account,operation,outcome}           counter
//	azq_request_duration_seconds{operation}                 histogram
//	azq_messages_put_total{account,queue}                   counter
//	azq_messages_deleted_total{account,queue}               counter
//	azq_queue_messages{account,queue}                       gauge
//	azq_queue_oldest_visible_message_age_seconds{account,queue} gauge
//	azq_fault_hits_total{rule}                              counter
//	azq_throttled_requests_total                            counter
//
// The queue gauges are read from the watched services as the scrape
// runs, at a cost that grows with their queues, not their messages.
// Families and series come sorted, so two scrapes of the same state are
// the same text. A failure to read a service's queues leaves out what
// could not be read and is returned after the rest is written.
func (r *Recorder) WritePrometheus(ctx context.Context, w io.Writer) error {
	fams, gerr := r.gatherer(ctx).Gather()
	enc := expfmt.NewEncoder(w, expfmt.Format(ContentType))
	for _, f := range fams {
		if err := enc.Encode(f); err != nil {
			return err
		}
	}
	return gerr
}

// Handler serves the metrics to GET and HEAD requests, through
// client_golang's promhttp: the text format, or what the scraper's Accept
// header asks for. A failure to read a service's queues leaves their
// gauges out; the counters are still served.
func (r *Recorder) Handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.Method != http.MethodGet && req.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "metrics are read with GET", http.StatusMethodNotAllowed)
			return
		}
		w.Header().Set("Cache-Control", "no-store")
		promhttp.HandlerFor(r.gatherer(req.Context()), promhttp.HandlerOpts{
			ErrorHandling:     promhttp.ContinueOnError,
			EnableOpenMetrics: true,
		}).ServeHTTP(w, req)
	})
}

// scrape collects the figures of what a Recorder watches, with the
// context of one scrape.
type scrape struct {
	r   *Recorder
	ctx context.Context
	// listed holds, by account, the queues of each service whose listing
	// was complete, for prune; nil when nothing is pruned.
	listed map[string]map[string]bool
}

func (s *scrape) Describe(ch chan<- *prometheus.Desc) {
	ch <- queueMessagesDesc
	ch <- queueAgeDesc
	ch <- faultHitsDesc
	ch <- throttledDesc
}

func (s *scrape) Collect(ch chan<- prometheus.Metric) {
	services, injectors := s.r.watched()
	for _, ws := range services {
		if err := s.collectQueues(ws, ch); err != nil {
			ch <- prometheus.NewInvalidMetric(queueMessagesDesc, fmt.Errorf("reading the queues of account %s: %w", ws.account, err))
		}
	}
	// Totals, unlike Status, keep what was counted when the rules or the
	// throttle are removed or replaced: the counters never go back.
	hits := map[string]int64{}
	var throttled int64
	for _, in := range injectors {
		tot := in.Totals()
		throttled += tot.Throttled
		for rule, n := range tot.Hits {
			hits[rule] += n
		}
	}
	for _, rule := range slices.Sorted(maps.Keys(hits)) {
		ch <- prometheus.MustNewConstMetric(faultHitsDesc, prometheus.CounterValue, float64(hits[rule]), labelValue(rule))
	}
	ch <- prometheus.MustNewConstMetric(throttledDesc, prometheus.CounterValue, float64(throttled))
}

// collectQueues sends the gauges of the first maxScrapedQueues queues of
// ws, and drops the per-queue counters of its queues that are gone.
func (s *scrape) collectQueues(ws watchedService, ch chan<- prometheus.Metric) error {
	opts := azq.ListQueuesOptions{MaxResults: maxScrapedQueues}
	seen := map[string]bool{}
	var complete bool
	if sr, ok := ws.svc.(azq.QueueStatsReader); ok {
		page, err := sr.QueueStats(s.ctx, opts)
		if err != nil {
			return err
		}
		now := ws.svc.Clock().Now()
		for _, st := range page.Queues {
			var age float64
			if !st.HeadInserted.IsZero() {
				age = max(0, now.Sub(st.HeadInserted).Seconds())
			}
			ch <- prometheus.MustNewConstMetric(queueMessagesDesc, prometheus.GaugeValue, float64(st.Count), ws.account, st.Name)
			ch <- prometheus.MustNewConstMetric(queueAgeDesc, prometheus.GaugeValue, age, ws.account, st.Name)
			seen[st.Name] = true
		}
		complete = page.NextMarker == ""
	} else {
		// A back end that cannot read its figures in one go is asked for
		// each queue's properties, which hold its approximate count.
		page, err := ws.svc.ListQueues(s.ctx, opts)
		if err != nil {
			return err
		}
		for _, it := range page.Queues {
			p, err := properties(s.ctx, ws.svc, it.Name)
			if errors.Is(err, azq.ErrQueueNotFound) {
				continue // deleted meanwhile
			}
			if err != nil {
				return err
			}
			ch <- prometheus.MustNewConstMetric(queueMessagesDesc, prometheus.GaugeValue, float64(p.ApproximateMessagesCount), ws.account, it.Name)
			seen[it.Name] = true
		}
		complete = page.NextMarker == ""
	}
	if complete && s.listed != nil {
		s.listed[ws.account] = seen
	}
	return nil
}

func properties(ctx context.Context, svc azq.QueueService, name string) (azq.Properties, error) {
	ref, err := svc.Ref(name)
	if err != nil {
		return azq.Properties{}, err
	}
	return ref.Properties(ctx)
}

// prune removes the series of messages put and deleted, among fams, of
// the queues of watched services that no longer exist: those deleted
// other than through a request the Recorder observed (in process, say),
// and those a request observed late brought back after the queue's
// deletion. Only a service whose listing was complete is pruned, and a
// queue missing from it is asked for again, in case it was created
// since, before its series go.
func (s *scrape) prune(fams []*dto.MetricFamily) error {
	if len(s.listed) == 0 {
		return nil
	}
	services, _ := s.r.watched()
	svcs := map[string]azq.QueueService{}
	for _, ws := range services {
		svcs[ws.account] = ws.svc
	}
	type queueKey struct{ account, queue string }
	gone := map[queueKey]bool{}
	for _, f := range fams {
		if n := f.GetName(); n != "azq_messages_put_total" && n != "azq_messages_deleted_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			l := labels(m)
			if listed, ok := s.listed[l["account"]]; ok && !listed[l["queue"]] {
				gone[queueKey{l["account"], l["queue"]}] = true
			}
		}
	}
	checked := 0
	for k := range gone {
		if checked == maxScrapedQueues {
			break // the next scrape goes on
		}
		checked++
		_, err := properties(s.ctx, svcs[k.account], k.queue)
		switch {
		case errors.Is(err, azq.ErrQueueNotFound), errors.Is(err, azq.ErrInvalidQueueName):
			s.r.forgetQueue(k.account, k.queue)
		case err != nil:
			return err
		}
	}
	return nil
}
