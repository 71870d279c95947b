package metrics_test

import (
	"bytes"
	"context"
	"math"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/azqlib/azq"
	"github.com/azqlib/azq/faults"
	"github.com/azqlib/azq/metrics"
	"github.com/azqlib/azq/observe"
	"github.com/benbjohnson/clock"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// parse reads the text format with Prometheus's own parser.
func parse(t *testing.T, text []byte) map[string]*dto.MetricFamily {
	t.Helper()
	p := expfmt.NewTextParser(model.LegacyValidation)
	fams, err := p.TextToMetricFamilies(bytes.NewReader(text))
	if err != nil {
		t.Fatalf("the Prometheus parser refuses the exposition: %v\n%s", err, text)
	}
	return fams
}

// value returns the value of the series of family name whose labels
// include want, and whether there is one.
func value(fams map[string]*dto.MetricFamily, name string, want map[string]string) (float64, bool) {
	f := fams[name]
	if f == nil {
		return 0, false
	}
next:
	for _, m := range f.Metric {
		got := map[string]string{}
		for _, l := range m.Label {
			got[l.GetName()] = l.GetValue()
		}
		for k, v := range want {
			if got[k] != v {
				continue next
			}
		}
		switch {
		case m.Counter != nil:
			return m.Counter.GetValue(), true
		case m.Gauge != nil:
			return m.Gauge.GetValue(), true
		case m.Histogram != nil:
			return float64(m.Histogram.GetSampleCount()), true
		case m.Untyped != nil:
			return m.Untyped.GetValue(), true
		}
	}
	return 0, false
}

func TestPrometheusExposition(t *testing.T) {
	ctx := context.Background()
	mock := clock.NewMock()
	mock.Set(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
	svc := azq.NewService(azq.WithClock(mock))
	defer svc.Close()
	q, _, err := svc.CreateQueue(ctx, "orders", nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := q.Put(ctx, "a", nil); err != nil {
		t.Fatal(err)
	}
	mock.Add(90 * time.Second)
	if _, err := q.Put(ctx, "b", nil); err != nil {
		t.Fatal(err)
	}
	if _, err := q.Put(ctx, "hidden", &azq.PutOptions{VisibilityTimeout: time.Hour}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := svc.CreateQueue(ctx, "empty", nil); err != nil {
		t.Fatal(err)
	}
	inj, err := faults.New(faults.Options{Clock: mock, Config: faults.Config{
		Rules:    []faults.Rule{{Name: "slow", Then: faults.Then{Delay: time.Millisecond}}},
		Throttle: &faults.Throttle{AccountRequestsPerSecond: 1},
	}})
	if err != nil {
		t.Fatal(err)
	}
	inj.Decide(faults.Request{Operation: "PutMessage", Account: "acct", Queue: "orders", Messages: 1})
	inj.Decide(faults.Request{Operation: "PutMessage", Account: "acct", Queue: "orders", Messages: 1})

	r := metrics.NewRecorder()
	r.WatchService("acct", svc)
	r.WatchFaults(inj)
	obs := []observe.Observation{
		{Account: "acct", Queue: "orders", Operation: "PutMessage", Status: 201, Outcome: observe.Success, Duration: 300 * time.Microsecond},
		{Account: "acct", Queue: "orders", Operation: "PutMessage", Status: 201, Outcome: observe.Success, Duration: 2 * time.Millisecond},
		{Account: "acct", Queue: "orders", Operation: "PutMessage", Status: 500, ErrorCode: "InternalError", Outcome: observe.ServerError, Applied: true, Duration: 20 * time.Second},
		{Account: "acct", Queue: "orders", Operation: "PutMessage", Status: 503, ErrorCode: "ServerBusy", Outcome: observe.ThrottlingError},
		{Account: "acct", Queue: "orders", Operation: "DeleteMessage", Status: 204, Outcome: observe.Success},
		{Account: "acct", Queue: "orders", Operation: "DeleteMessage", Outcome: observe.NetworkError},
		{Account: "acct", Queue: `we"ird\` + "\n", Operation: "GetMessages", Status: 400, Outcome: observe.ClientError},
		{Status: 404, Outcome: observe.ClientError},
	}
	for _, o := range obs {
		r.Observe(o)
	}
	var buf bytes.Buffer
	if err := r.WritePrometheus(ctx, &buf); err != nil {
		t.Fatal(err)
	}
	fams := parse(t, buf.Bytes())
	for _, tc := range []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"azq_requests_total", map[string]string{"operation": "PutMessage", "outcome": "success"}, 2},
		{"azq_requests_total", map[string]string{"operation": "PutMessage", "outcome": "server_error"}, 1},
		{"azq_requests_total", map[string]string{"operation": "PutMessage", "outcome": "throttling_error"}, 1},
		{"azq_requests_total", map[string]string{"operation": "DeleteMessage", "outcome": "network_error"}, 1},
		{"azq_requests_total", map[string]string{"operation": "GetMessages", "outcome": "client_error"}, 1},
		{"azq_requests_total", map[string]string{"operation": "UnknownOperation", "account": ""}, 1},
		{"azq_request_duration_seconds", map[string]string{"operation": "PutMessage"}, 4},
		{"azq_messages_put_total", map[string]string{"account": "acct", "queue": "orders"}, 3}, // two answered, one applied
		{"azq_messages_deleted_total", map[string]string{"queue": "orders"}, 1},
		{"azq_queue_messages", map[string]string{"queue": "orders"}, 3},
		{"azq_queue_messages", map[string]string{"queue": "empty"}, 0},
		{"azq_queue_oldest_visible_message_age_seconds", map[string]string{"queue": "orders"}, 90},
		{"azq_queue_oldest_visible_message_age_seconds", map[string]string{"queue": "empty"}, 0},
		{"azq_fault_hits_total", map[string]string{"rule": "slow"}, 1},
		{"azq_throttled_requests_total", nil, 1},
	} {
		got, ok := value(fams, tc.name, tc.labels)
		if !ok || got != tc.want {
			t.Errorf("%s%v = %v (found %v), want %v", tc.name, tc.labels, got, ok, tc.want)
		}
	}
	// The histogram's buckets are cumulative and end in +Inf.
	h := fams["azq_request_duration_seconds"].Metric
	for _, m := range h {
		if m.Label[0].GetValue() != "PutMessage" {
			continue
		}
		b := m.Histogram.Bucket
		if b[0].GetUpperBound() != 0.0005 || b[0].GetCumulativeCount() != 2 || b[len(b)-2].GetCumulativeCount() != 3 || !math.IsInf(b[len(b)-1].GetUpperBound(), 1) || b[len(b)-1].GetCumulativeCount() != 4 ||
			m.Histogram.GetSampleSum() < 20 {
			t.Fatalf("histogram %v", m.Histogram)
		}
	}
	// A label value with a quote, a backslash and a newline survives.
	if _, ok := value(fams, "azq_requests_total", map[string]string{"operation": "GetMessages"}); !ok {
		t.Fatal("escaped series lost")
	}
	// Sorted series: the same state gives the same text.
	var again bytes.Buffer
	r.WritePrometheus(ctx, &again)
	if again.String() != buf.String() {
		t.Fatal("two scrapes of one state differ")
	}
}

func TestHandler(t *testing.T) {
	r := metrics.NewRecorder()
	r.Observe(observe.Observation{Account: "a", Operation: "ListQueues", Status: 200, Outcome: observe.Success})
	w := httptest.NewRecorder()
	r.Handler().ServeHTTP(w, httptest.NewRequest("GET", "/metrics", nil))
	if w.Code != 200 || w.Header().Get("Content-Type") != metrics.ContentType {
		t.Fatalf("%d %v", w.Code, w.Header())
	}
	parse(t, w.Body.Bytes())
	w = httptest.NewRecorder()
	r.Handler().ServeHTTP(w, httptest.NewRequest("POST", "/metrics", strings.NewReader("")))
	if w.Code != http.StatusMethodNotAllowed {
		t.Fatalf("POST: %d", w.Code)
	}
}

func TestSnapshotCounts(t *testing.T) {
	r := metrics.NewRecorder()
	for i := 0; i < 3; i++ {
		r.Observe(observe.Observation{Account: "a", Queue: "q", Operation: "PutMessage", Status: 201, Outcome: observe.Success})
	}
	r.Observe(observe.Observation{Account: "b", Queue: "q", Operation: "PutMessage", Status: 503, Outcome: observe.ThrottlingError})
	s := r.Snapshot()
	if s.Count("PutMessage", "") != 4 || s.Count("", observe.Success) != 3 || s.Count("PutMessage", observe.ThrottlingError) != 1 {
		t.Fatalf("%+v", s)
	}
	if len(s.MessagesPut) != 1 || s.MessagesPut[0] != (metrics.QueueCount{Account: "a", Queue: "q", Count: 3}) {
		t.Fatalf("put %+v", s.MessagesPut)
	}
}

// A Snapshot lists its counts in a stable order: by account, then
// operation, then outcome; queues by account, then queue.
func TestSnapshotOrder(t *testing.T) {
	r := metrics.NewRecorder()
	for _, o := range []observe.Observation{
		{Account: "b", Queue: "q", Operation: "PutMessage", Outcome: observe.Success},
		{Account: "a", Queue: "z", Operation: "PutMessage", Outcome: observe.Success},
		{Account: "a", Queue: "q", Operation: "PutMessage", Outcome: observe.ServerError},
		{Account: "a", Queue: "q", Operation: "DeleteMessage", Outcome: observe.Success},
		{Account: "a", Queue: "q", Operation: "PutMessage", Outcome: observe.ClientError},
		{Account: "ab", Queue: "q", Operation: "ClearMessages", Outcome: observe.Success},
	} {
		r.Observe(o)
	}
	s := r.Snapshot()
	var got []string
	for _, c := range s.Requests {
		got = append(got, c.Account+" "+c.Operation+" "+string(c.Outcome))
	}
	want := []string{
		"a DeleteMessage success",
		"a PutMessage client_error",
		"a PutMessage server_error",
		"a PutMessage success",
		"ab ClearMessages success",
		"b PutMessage success",
	}
	if !slices.Equal(got, want) {
		t.Errorf("requests in the order\n%q\nwant\n%q", got, want)
	}
	got = nil
	for _, c := range s.MessagesPut {
		got = append(got, c.Account+"/"+c.Queue)
	}
	if want := []string{"a/z", "b/q"}; !slices.Equal(got, want) {
		t.Errorf("queues in the order %q, want %q", got, want)
	}
}

// The faults' counters never go back: replacing the throttle, clearing
// it, and removing a rule keep what a scrape showed.
func TestFaultCountersNeverGoBack(t *testing.T) {
	inj, err := faults.New(faults.Options{Clock: clock.NewMock(), Config: faults.Config{
		Rules:    []faults.Rule{{Name: "slow", Then: faults.Then{Delay: time.Millisecond}}},
		Throttle: &faults.Throttle{AccountRequestsPerSecond: 1},
	}})
	if err != nil {
		t.Fatal(err)
	}
	r := metrics.NewRecorder()
	r.WatchFaults(inj)
	scrape := func() (throttled, hits float64) {
		t.Helper()
		var buf bytes.Buffer
		if err := r.WritePrometheus(context.Background(), &buf); err != nil {
			t.Fatal(err)
		}
		fams := parse(t, buf.Bytes())
		throttled, _ = value(fams, "azq_throttled_requests_total", nil)
		hits, _ = value(fams, "azq_fault_hits_total", map[string]string{"rule": "slow"})
		return throttled, hits
	}
	req := faults.Request{Operation: "ListQueues", Account: "acct"}
	for i := 0; i < 3; i++ {
		inj.Decide(req) // one passes and meets the rule, two are throttled
	}
	if th, h := scrape(); th != 2 || h != 1 {
		t.Fatalf("throttled %v, hits %v; want 2 and 1", th, h)
	}
	inj.SetThrottle(&faults.Throttle{AccountRequestsPerSecond: 5})
	inj.Remove("slow")
	if th, h := scrape(); th != 2 || h != 1 {
		t.Fatalf("after the throttle was replaced and the rule removed: throttled %v, hits %v; want 2 and 1", th, h)
	}
	inj.Add(faults.Rule{Name: "slow", Then: faults.Then{Delay: time.Millisecond}})
	inj.Decide(req)
	inj.SetThrottle(nil)
	inj.Clear()
	if th, h := scrape(); th != 2 || h != 2 {
		t.Fatalf("after the throttle and the rules were cleared: throttled %v, hits %v; want 2 and 2", th, h)
	}
}
