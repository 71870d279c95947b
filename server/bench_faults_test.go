package server_test

import (
	"context"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/azqlib/azq/faults"
	"github.com/azqlib/azq/metrics"
	"github.com/azqlib/azq/server"
)

// BenchmarkHandlerCycleWith is BenchmarkHandlerCycle (put, get, delete,
// served in process) with the fault injection and observation options:
// none set (what every server without them pays), an Observe hook that
// counts into a metrics.Recorder, an Injector without rules (azqd with
// -fault-control), and an Injector whose one rule matches another
// operation, so that every request is matched against it and passes.
func BenchmarkHandlerCycleWith(b *testing.B) {
	idle, err := faults.New(faults.Options{})
	if err != nil {
		b.Fatal(err)
	}
	miss, err := faults.New(faults.Options{Config: faults.Config{Rules: []faults.Rule{
		{When: faults.When{Operations: []string{"ListQueues"}}, Then: faults.Then{Error: faults.CodeServerBusy}},
	}}})
	if err != nil {
		b.Fatal(err)
	}
	for _, c := range []struct {
		name string
		opts server.Options
	}{
		{"none", server.Options{}},
		{"observe", server.Options{Observe: metrics.NewRecorder().Observe}},
		{"faults-idle", server.Options{Faults: idle}},
		{"faults-miss", server.Options{Faults: miss}},
	} {
		b.Run(c.name, func(b *testing.B) { handlerCycle(b, c.opts) })
	}
}

func handlerCycle(b *testing.B, opts server.Options) {
	opts.AllowAnonymous = true
	s := server.New(opts)
	b.Cleanup(func() { s.Close() })
	if _, _, err := s.Service("devstoreaccount1").CreateQueue(context.Background(), "bench", nil); err != nil {
		b.Fatal(err)
	}
	body := "<QueueMessage><MessageText>benchmark message body</MessageText></QueueMessage>"
	serve := func(method, target, body string) *httptest.ResponseRecorder {
		req := httptest.NewRequest(method, target, strings.NewReader(body))
		req.Header.Set("x-ms-version", "2018-03-28")
		w := httptest.NewRecorder()
		s.ServeHTTP(w, req)
		return w
	}
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		if w := serve("POST", "/devstoreaccount1/bench/messages", body); w.Code != 201 {
			b.Fatal(w.Code, w.Body)
		}
		w := serve("GET", "/devstoreaccount1/bench/messages", "")
		m := idRe.FindStringSubmatch(w.Body.String())
		r := receiptRe.FindStringSubmatch(w.Body.String())
		if m == nil || r == nil {
			b.Fatal(w.Body)
		}
		if w := serve("DELETE", "/devstoreaccount1/bench/messages/"+m[1]+"?popreceipt="+urlEscape(r[1]), ""); w.Code != 204 {
			b.Fatal(w.Code, w.Body)
		}
	}
	reportCycles(b)
}
