package metrics

import (
	"bufio"
	"context"
	"io"
	"maps"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
)

// ContentType is the media type of the Prometheus text format that
// WritePrometheus writes.
const ContentType = "text/plain; version=0.0.4; charset=utf-8"

// WritePrometheus writes every metric in the Prometheus text exposition
// format (version 0.0.4):
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
// The queue gauges are read from the watched Services as the scrape runs.
// Series are sorted, so two scrapes of the same state are the same text.
func (r *Recorder) WritePrometheus(ctx context.Context, w io.Writer) error {
	gauges, gerr := r.queueGauges(ctx)
	bw := bufio.NewWriter(w)
	p := &promWriter{w: bw}

	snap := r.Snapshot()
	p.family("azq_requests_total", "counter", "Requests answered, by account, operation and outcome (success, client_error, throttling_error, server_error, network_error).")
	for _, c := range snap.Requests {
		p.sample("azq_requests_total", []string{"account", c.Account, "operation", c.Operation, "outcome", string(c.Outcome)}, float64(c.Count))
	}

	r.mu.RLock()
	hists := maps.Clone(r.latency)
	injectors := slices.Clone(r.injectors)
	r.mu.RUnlock()
	p.family("azq_request_duration_seconds", "histogram", "Time from a request's arrival to its answer, by operation.")
	for _, op := range slices.Sorted(maps.Keys(hists)) {
		h := hists[op]
		var cum int64
		for i, le := range latencyBuckets {
			cum += h.counts[i].Load()
			p.sample("azq_request_duration_seconds_bucket", []string{"operation", op, "le", formatFloat(le)}, float64(cum))
		}
		cum += h.counts[len(latencyBuckets)].Load()
		p.sample("azq_request_duration_seconds_bucket", []string{"operation", op, "le", "+Inf"}, float64(cum))
		p.sample("azq_request_duration_seconds_sum", []string{"operation", op}, float64(h.sum.Load())/1e9)
		p.sample("azq_request_duration_seconds_count", []string{"operation", op}, float64(cum))
	}

	p.family("azq_messages_put_total", "counter", "Messages put (Put Message requests that took effect), by queue.")
	for _, c := range snap.MessagesPut {
		p.sample("azq_messages_put_total", []string{"account", c.Account, "queue", c.Queue}, float64(c.Count))
	}
	p.family("azq_messages_deleted_total", "counter", "Messages deleted (Delete Message requests that took effect), by queue.")
	for _, c := range snap.MessagesDeleted {
		p.sample("azq_messages_deleted_total", []string{"account", c.Account, "queue", c.Queue}, float64(c.Count))
	}

	p.family("azq_queue_messages", "gauge", "Messages in the queue, visible or not (the approximate message count).")
	for _, g := range gauges {
		p.sample("azq_queue_messages", []string{"account", g.account, "queue", g.queue}, float64(g.messages))
	}
	p.family("azq_queue_oldest_visible_message_age_seconds", "gauge", "Time since the oldest visible message was put; 0 when none is visible.")
	for _, g := range gauges {
		p.sample("azq_queue_oldest_visible_message_age_seconds", []string{"account", g.account, "queue", g.queue}, g.oldestVisible)
	}

	p.family("azq_fault_hits_total", "counter", "Times each fault rule fired.")
	var throttled int64
	type hit struct {
		rule string
		n    int64
	}
	var hits []hit
	for _, in := range injectors {
		// Totals, unlike Status, keep what was counted when the rules or
		// the throttle are removed or replaced: counters never go back.
		tot := in.Totals()
		throttled += tot.Throttled
		for name, n := range tot.Hits {
			hits = append(hits, hit{name, n})
		}
	}
	slices.SortStableFunc(hits, func(a, b hit) int {
		if c := strings.Compare(a.rule, b.rule); c != 0 {
			return c
		}
		return int(a.n - b.n)
	})
	for _, h := range hits {
		p.sample("azq_fault_hits_total", []string{"rule", h.rule}, float64(h.n))
	}
	p.family("azq_throttled_requests_total", "counter", "Requests the throttle refused with 503 ServerBusy.")
	p.sample("azq_throttled_requests_total", nil, float64(throttled))

	if err := bw.Flush(); err != nil {
		return err
	}
	return gerr
}

// Handler serves WritePrometheus to GET and HEAD requests.
func (r *Recorder) Handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.Method != http.MethodGet && req.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "metrics are read with GET", http.StatusMethodNotAllowed)
			return
		}
		w.Header().Set("Content-Type", ContentType)
		w.Header().Set("Cache-Control", "no-store")
		if req.Method == http.MethodHead {
			return
		}
		// A failure to read the queues leaves their gauges out; the
		// counters are still worth having.
		_ = r.WritePrometheus(req.Context(), w)
	})
}

// promWriter writes the text format.
type promWriter struct{ w *bufio.Writer }

func (p *promWriter) family(name, typ, help string) {
	p.w.WriteString("# HELP ")
	p.w.WriteString(name)
	p.w.WriteByte(' ')
	p.w.WriteString(escapeHelp(help))
	p.w.WriteString("\n# TYPE ")
	p.w.WriteString(name)
	p.w.WriteByte(' ')
	p.w.WriteString(typ)
	p.w.WriteByte('\n')
}

// sample writes name{labels} value; labels alternate names and values.
func (p *promWriter) sample(name string, labels []string, v float64) {
	p.w.WriteString(name)
	if len(labels) > 0 {
		p.w.WriteByte('{')
		for i := 0; i < len(labels); i += 2 {
			if i > 0 {
				p.w.WriteByte(',')
			}
			p.w.WriteString(labels[i])
			p.w.WriteString(`="`)
			p.w.WriteString(escapeLabel(labels[i+1]))
			p.w.WriteByte('"')
		}
		p.w.WriteByte('}')
	}
	p.w.WriteByte(' ')
	p.w.WriteString(formatFloat(v))
	p.w.WriteByte('\n')
}

var (
	labelEscaper = strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`)
	helpEscaper  = strings.NewReplacer(`\`, `\\`, "\n", `\n`)
)

func escapeLabel(s string) string { return labelEscaper.Replace(s) }
func escapeHelp(s string) string  { return helpEscaper.Replace(s) }

func formatFloat(v float64) string {
	switch {
	case math.IsInf(v, 1):
		return "+Inf"
	case math.IsInf(v, -1):
		return "-Inf"
	case math.IsNaN(v):
		return "NaN"
	}
	return strconv.FormatFloat(v, 'g', -1, 64)
}
