package metrics_test

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/azqlib/azq"
	"github.com/azqlib/azq/faults"
	"github.com/azqlib/azq/metrics"
	"github.com/azqlib/azq/observe"
	"github.com/azqlib/azq/server"
	"github.com/benbjohnson/clock"
)

func scrapeText(t *testing.T, r *metrics.Recorder) string {
	t.Helper()
	var buf bytes.Buffer
	if err := r.WritePrometheus(context.Background(), &buf); err != nil {
		t.Fatal(err)
	}
	parse(t, buf.Bytes())
	return buf.String()
}

// Creating, using and deleting ten thousand queue names leaves the
// metrics as they were: a queue's series go with it, whether its
// deletion was a request the Recorder observed or a call in process,
// and whether a request for it was observed after its deletion.
func TestDeletedQueuesLeaveNoSeries(t *testing.T) {
	ctx := context.Background()
	svc := azq.NewService()
	defer svc.Close()
	r := metrics.NewRecorder()
	r.WatchService("acct", svc)
	if _, _, err := svc.CreateQueue(ctx, "kept", nil); err != nil {
		t.Fatal(err)
	}
	ok := func(op, queue string) observe.Observation {
		return observe.Observation{Account: "acct", Queue: queue, Operation: op, Status: 201, Outcome: observe.Success}
	}
	r.Observe(ok("PutMessage", "kept"))
	// Every operation has been seen once, so that only per-queue series
	// could grow.
	for _, op := range []string{"CreateQueue", "PutMessage", "DeleteMessage", "DeleteQueue"} {
		r.Observe(ok(op, ""))
	}
	before := scrapeText(t, r)
	for i := range 10_000 {
		name := fmt.Sprintf("tmp%05d", i)
		if _, _, err := svc.CreateQueue(ctx, name, nil); err != nil {
			t.Fatal(err)
		}
		r.Observe(ok("PutMessage", name))
		r.Observe(ok("DeleteMessage", name))
		switch i % 3 {
		case 0: // deleted by a request
			if err := svc.DeleteQueue(ctx, name); err != nil {
				t.Fatal(err)
			}
			r.Observe(ok("DeleteQueue", name))
		case 1: // deleted in process
			if err := svc.DeleteQueue(ctx, name); err != nil {
				t.Fatal(err)
			}
		case 2: // a Put observed after the deletion
			if err := svc.DeleteQueue(ctx, name); err != nil {
				t.Fatal(err)
			}
			r.Observe(ok("DeleteQueue", name))
			r.Observe(ok("PutMessage", name))
		}
		if i%1000 == 999 {
			scrapeText(t, r) // scrapes in between find deleted queues too
		}
	}
	// The counts of operations grew; the text's size must not have. The
	// first scrape after the loop removes what it finds gone; the second
	// shows it.
	scrapeText(t, r)
	after := scrapeText(t, r)
	if len(after) > len(before)+200 || strings.Contains(after, `queue="tmp`) {
		t.Fatalf("the metrics grew from %d to %d bytes with deleted queues:\n%s", len(before), len(after), after)
	}
	if s := r.Snapshot(); len(s.MessagesPut) != 1 || s.MessagesPut[0].Queue != "kept" {
		t.Fatalf("messages put by queue: %+v", s.MessagesPut)
	}
}

// A Delete Queue request answered by the REST server removes the queue's
// series.
func TestDeleteQueueRequestRemovesSeries(t *testing.T) {
	acct := server.DevelopmentAccount()
	r := metrics.NewRecorder()
	h := server.New(server.Options{Accounts: []server.Account{acct}, AllowAnonymous: true, Observe: r.Observe})
	defer h.Close()
	do := func(method, path, body string) {
		t.Helper()
		w := httptest.NewRecorder()
		req := httptest.NewRequest(method, "http://127.0.0.1/"+acct.Name+path, strings.NewReader(body))
		req.Header.Set("x-ms-version", "2021-12-02")
		h.ServeHTTP(w, req)
		if w.Code >= 300 {
			t.Fatalf("%s %s: %d %s", method, path, w.Code, w.Body)
		}
	}
	do("PUT", "/orders", "")
	do("POST", "/orders/messages", "<QueueMessage><MessageText>a</MessageText></QueueMessage>")
	if s := r.Snapshot(); len(s.MessagesPut) != 1 {
		t.Fatalf("messages put: %+v", s.MessagesPut)
	}
	do("DELETE", "/orders", "")
	if s := r.Snapshot(); len(s.MessagesPut) != 0 {
		t.Fatalf("after Delete Queue, messages put: %+v", s.MessagesPut)
	}
}

// statsOnly is a back end whose queues can only be read through
// QueueStats: a scrape that reached a queue any other way would fail.
type statsOnly struct {
	azq.QueueService
	stats azq.QueueStatsReader
}

func (s statsOnly) QueueStats(ctx context.Context, opts azq.ListQueuesOptions) (azq.QueueStatsPage, error) {
	return s.stats.QueueStats(ctx, opts)
}

func (s statsOnly) Ref(name string) (azq.QueueRef, error) {
	panic("the scrape addressed the queue " + name)
}

func (s statsOnly) ListQueues(context.Context, azq.ListQueuesOptions) (azq.ListQueuesPage, error) {
	panic("the scrape listed the queues")
}

// A scrape of a back end that reads its queues' figures uses them and
// nothing else: it does not list the queues and address each, let alone
// read their messages.
func TestScrapeReadsQueueStats(t *testing.T) {
	ctx := context.Background()
	mock := clock.NewMock()
	svc := azq.NewService(azq.WithClock(mock))
	defer svc.Close()
	q, _, err := svc.CreateQueue(ctx, "orders", nil)
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if _, err := q.Put(ctx, "m", nil); err != nil {
			t.Fatal(err)
		}
	}
	mock.Add(42 * time.Second)
	r := metrics.NewRecorder()
	r.WatchService("acct", statsOnly{svc, svc})
	fams := parse(t, []byte(scrapeText(t, r)))
	if v, ok := value(fams, "azq_queue_messages", map[string]string{"queue": "orders"}); !ok || v != 3 {
		t.Fatalf("azq_queue_messages = %v (found %v)", v, ok)
	}
	if v, ok := value(fams, "azq_queue_oldest_visible_message_age_seconds", map[string]string{"queue": "orders"}); !ok || v != 42 {
		t.Fatalf("age = %v (found %v)", v, ok)
	}
}

// contractOnly hides every method of *azq.Service but the service
// contract's, as a back end such as package azure's has.
type contractOnly struct{ azq.QueueService }

// A back end without QueueStats is read through its queues' properties:
// the counts, and no age, which it cannot tell.
func TestScrapeOfAnyBackEnd(t *testing.T) {
	ctx := context.Background()
	svc := azq.NewService()
	defer svc.Close()
	q, _, err := svc.CreateQueue(ctx, "orders", nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := q.Put(ctx, "m", nil); err != nil {
		t.Fatal(err)
	}
	r := metrics.NewRecorder()
	r.WatchService("acct", contractOnly{svc})
	fams := parse(t, []byte(scrapeText(t, r)))
	if v, ok := value(fams, "azq_queue_messages", map[string]string{"queue": "orders"}); !ok || v != 1 {
		t.Fatalf("azq_queue_messages = %v (found %v)", v, ok)
	}
	if _, ok := value(fams, "azq_queue_oldest_visible_message_age_seconds", nil); ok {
		t.Fatal("an age reported for a back end that cannot tell it")
	}
}

// Handler serves through promhttp: the text format by default, and
// OpenMetrics to a scraper that asks for it.
func TestHandlerNegotiates(t *testing.T) {
	r := metrics.NewRecorder()
	r.Observe(observe.Observation{Account: "a", Operation: "ListQueues", Status: 200, Outcome: observe.Success})
	w := httptest.NewRecorder()
	req := httptest.NewRequest("GET", "/metrics", nil)
	req.Header.Set("Accept", "application/openmetrics-text;version=1.0.0")
	r.Handler().ServeHTTP(w, req)
	if w.Code != http.StatusOK || !strings.HasPrefix(w.Header().Get("Content-Type"), "application/openmetrics-text") {
		t.Fatalf("%d %q", w.Code, w.Header().Get("Content-Type"))
	}
	if !strings.Contains(w.Body.String(), `azq_requests_total{account="a",operation="ListQueues",outcome="success"} 1`) {
		t.Fatalf("body:\n%s", w.Body)
	}
}

// counters returns every counter series of a scrape (and each
// histogram's count), by family and labels.
func counters(t *testing.T, r *metrics.Recorder) map[string]float64 {
	t.Helper()
	out := map[string]float64{}
	for name, f := range parse(t, []byte(scrapeText(t, r))) {
		for _, m := range f.GetMetric() {
			key := name
			for _, l := range m.GetLabel() {
				key += " " + l.GetName() + "=" + l.GetValue()
			}
			switch {
			case m.Counter != nil:
				out[key] = m.GetCounter().GetValue()
			case m.Histogram != nil:
				out[key] = float64(m.GetHistogram().GetSampleCount())
			}
		}
	}
	return out
}

// No counter of a scrape is lower than it was at the scrape before, as
// requests come and go, the throttle is replaced and cleared and the
// rules removed: counters are monotonic for the life of the process.
func TestCountersNeverDecrease(t *testing.T) {
	mock := clock.NewMock()
	inj, err := faults.New(faults.Options{Clock: mock, Config: faults.Config{
		Rules:    []faults.Rule{{Name: "busy", When: faults.When{Operations: []string{"PeekMessages"}}, Then: faults.Then{Error: faults.CodeServerBusy}}},
		Throttle: &faults.Throttle{AccountRequestsPerSecond: 3},
	}})
	if err != nil {
		t.Fatal(err)
	}
	acct := server.DevelopmentAccount()
	r := metrics.NewRecorder()
	h := server.New(server.Options{Accounts: []server.Account{acct}, Clock: mock, AllowAnonymous: true, Faults: inj, Observe: r.Observe})
	defer h.Close()
	r.WatchService(acct.Name, h.QueueService(acct.Name))
	r.WatchFaults(inj)
	send := func(method, path, body string) {
		req := httptest.NewRequest(method, "http://127.0.0.1/"+acct.Name+path, strings.NewReader(body))
		req.Header.Set("x-ms-version", "2021-12-02")
		h.ServeHTTP(httptest.NewRecorder(), req)
	}
	traffic := func() {
		send("PUT", "/orders", "")
		for range 3 {
			send("POST", "/orders/messages", "<QueueMessage><MessageText>a</MessageText></QueueMessage>")
			send("GET", "/orders/messages?peekonly=true", "")
		}
		mock.Add(time.Second)
	}
	last := counters(t, r)
	for step, change := range []func(){
		func() {},
		func() { inj.SetThrottle(&faults.Throttle{AccountRequestsPerSecond: 100}) },
		func() { inj.SetThrottle(nil) },
		func() { inj.Clear() },
		func() { inj.SetThrottle(&faults.Throttle{AccountRequestsPerSecond: 1}) },
	} {
		change()
		traffic()
		now := counters(t, r)
		for k, v := range last {
			if now[k] < v {
				t.Fatalf("step %d: %s went from %v to %v", step, k, v, now[k])
			}
		}
		last = now
	}
	if last["azq_throttled_requests_total"] == 0 || last["azq_fault_hits_total rule=busy"] == 0 {
		t.Fatalf("the test throttled nothing or met no rule: %v", last)
	}
}
