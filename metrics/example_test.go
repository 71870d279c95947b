package metrics_test

import (
	"context"
	"fmt"
	"net/http/httptest"
	"strings"

	"github.com/azqlib/azq/faults"
	"github.com/azqlib/azq/metrics"
	"github.com/azqlib/azq/observe"
	"github.com/azqlib/azq/server"
	"github.com/prometheus/client_golang/prometheus"
)

// A Recorder hears of every request a REST server answers, reads the
// queues of its back end and the hits of its fault rules when scraped,
// and gives the counts to a test.
func ExampleRecorder() {
	acct := server.DevelopmentAccount()
	inj, _ := faults.New(faults.Options{})
	rec := metrics.NewRecorder()
	h := server.New(server.Options{Accounts: []server.Account{acct}, AllowAnonymous: true, Faults: inj, Observe: rec.Observe})
	defer h.Close()
	rec.WatchService(acct.Name, h.QueueService(acct.Name))
	rec.WatchFaults(inj)

	req := httptest.NewRequest("PUT", "http://127.0.0.1/"+acct.Name+"/orders", nil)
	req.Header.Set("x-ms-version", "2021-12-02")
	h.ServeHTTP(httptest.NewRecorder(), req)

	snap := rec.Snapshot()
	fmt.Println(snap.Count("CreateQueue", observe.Success))
	var text strings.Builder
	rec.WritePrometheus(context.Background(), &text)
	fmt.Println(strings.Contains(text.String(), `azq_queue_messages{account="devstoreaccount1",queue="orders"} 0`))
	// Output:
	// 1
	// true
}

// A Recorder is a prometheus.Collector: a program that serves metrics of
// its own registers it beside them.
func ExampleRecorder_Collect() {
	rec := metrics.NewRecorder()
	reg := prometheus.NewRegistry()
	reg.MustRegister(rec)
	rec.Observe(observe.Observation{Account: "acct", Operation: "ListQueues", Status: 200, Outcome: observe.Success})
	fams, _ := reg.Gather()
	for _, f := range fams {
		if f.GetName() == "azq_requests_total" {
			fmt.Println(f.GetMetric()[0].GetCounter().GetValue())
		}
	}
	// Output: 1
}
