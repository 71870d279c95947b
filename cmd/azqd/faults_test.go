package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azqueue/queueerror"
	"github.com/azqlib/azq/server"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

type faultsJSON struct {
	Seed  uint64 `json:"seed"`
	Rules []struct {
		Name      string `json:"name"`
		Hits      int64  `json:"hits"`
		Matches   int64  `json:"matches"`
		Exhausted bool   `json:"exhausted"`
	} `json:"rules"`
	Throttle *struct {
		Queue   float64 `json:"queue_messages_per_second"`
		Account float64 `json:"account_requests_per_second"`
	} `json:"throttle"`
	Throttled int64  `json:"throttled"`
	Error     string `json:"error"`
}

func faultsCall(t *testing.T, method, u, body string, wantStatus int) faultsJSON {
	t.Helper()
	hdr := map[string]string{}
	if body != "" {
		hdr["Content-Type"] = "application/json"
	}
	status, out := send(t, method, u, "", strings.NewReader(body), hdr)
	var v faultsJSON
	if err := json.Unmarshal([]byte(out), &v); err != nil {
		t.Fatalf("%s %s: %v: %s", method, u, err, out)
	}
	if status != wantStatus {
		t.Fatalf("%s %s: %d %s, want %d", method, u, status, v.Error, wantStatus)
	}
	return v
}

// -faults loads a rules file at start-up; /_azq/faults lists, adds and
// removes rules and reads their hits while azqd runs.
func TestFaultsFileAndEndpoint(t *testing.T) {
	file := filepath.Join(t.TempDir(), "faults.json")
	if err := os.WriteFile(file, []byte(`{"seed": 3, "rules": [
		{"name": "busy-create", "when": {"operations": ["CreateQueue"], "times": 1}, "then": {"error": "ServerBusy"}}
	]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	d := start(t, "-faults", file)
	if !strings.Contains(strings.Join(d.printed, "\n"), "azqd: fault injection on with 1 rule(s) from "+file+"; see and change them at "+d.base+"/_azq/faults") {
		t.Fatalf("printed %q", d.printed)
	}
	ctx := testContext(t)
	qc := queueClient(t, d.conns["devstoreaccount1"], "orders") // no retries
	_, err := qc.Create(ctx, nil)
	if !queueerror.HasCode(err, queueerror.ServerBusy) {
		t.Fatalf("first create: %v", err)
	}
	if _, err := qc.Create(ctx, nil); err != nil {
		t.Fatal(err)
	}
	st := faultsCall(t, "GET", d.base+"/_azq/faults", "", 200)
	if st.Seed != 3 || len(st.Rules) != 1 || st.Rules[0].Hits != 1 || !st.Rules[0].Exhausted {
		t.Fatalf("status %+v", st)
	}

	// Add a rule and a throttle.
	st = faultsCall(t, "POST", d.base+"/_azq/faults", `{"rules": [{"name": "lost-put", "when": {"operations": ["PutMessage"], "times": 1},
		"then": {"applied": true, "error": "InternalError"}}], "throttle": {"account_requests_per_second": 1000}}`, 200)
	if len(st.Rules) != 2 || st.Rules[1].Name != "lost-put" || st.Throttle == nil || st.Throttle.Account != 1000 {
		t.Fatalf("after POST %+v", st)
	}
	_, err = qc.EnqueueMessage(ctx, "x", nil)
	var re *azcore.ResponseError
	if !errors.As(err, &re) || re.StatusCode != 500 || messagesIn(t, d, "orders") != 1 {
		t.Fatalf("lost put: %v, %d messages", err, messagesIn(t, d, "orders"))
	}
	if st := faultsCall(t, "GET", d.base+"/_azq/faults", "", 200); st.Rules[1].Hits != 1 {
		t.Fatalf("hits %+v", st.Rules)
	}

	// Refusals name the field, the name in use, the content type.
	for _, tc := range []struct {
		body, ctype string
		status      int
		want        string
	}{
		{`{"rules": [{"when": {"probability": 2}, "then": {"error": "ServerBusy"}}]}`, "application/json", 400, "rules[0].when.probability: 2: want a number in (0, 1]"},
		{`{"rules": [{"name": "lost-put", "then": {"delay": "1ms"}}]}`, "application/json", 409, `is the name of a rule already added`},
		{`{"seed": 9}`, "application/json", 400, "seed: the seed is set at start-up"},
		{`{"rules": []}`, "text/plain", 415, "Content-Type: application/json"},
	} {
		status, out := send(t, "POST", d.base+"/_azq/faults", "", strings.NewReader(tc.body), map[string]string{"Content-Type": tc.ctype})
		if status != tc.status || !strings.Contains(out, tc.want) {
			t.Errorf("POST %s: %d %s, want %d …%s…", tc.body, status, out, tc.status, tc.want)
		}
	}
	if status, _ := send(t, "PUT", d.base+"/_azq/faults", "", nil, nil); status != http.StatusMethodNotAllowed {
		t.Fatalf("PUT: %d", status)
	}

	// Remove one rule, then everything.
	if st := faultsCall(t, "DELETE", d.base+"/_azq/faults?rule=busy-create", "", 200); len(st.Rules) != 1 {
		t.Fatalf("after DELETE ?rule %+v", st)
	}
	faultsCall(t, "DELETE", d.base+"/_azq/faults?rule=nosuch", "", 404)
	if st := faultsCall(t, "DELETE", d.base+"/_azq/faults", "", 200); len(st.Rules) != 0 || st.Throttle != nil {
		t.Fatalf("after DELETE %+v", st)
	}
}

// Without -faults or -fault-control there is no endpoint and no injector.
func TestFaultsOffByDefault(t *testing.T) {
	d := start(t)
	if status, body := send(t, "GET", d.base+"/_azq/faults", "", nil, nil); status != 404 || !strings.Contains(body, "-fault-control") {
		t.Fatalf("%d %s", status, body)
	}
}

// A bad rules file stops azqd at start-up with the file and the field.
func TestFaultsFileErrors(t *testing.T) {
	file := filepath.Join(t.TempDir(), "faults.json")
	if err := os.WriteFile(file, []byte(`{"rules": [{"when": {"operations": ["PutMessages"]}, "then": {"error": "ServerBusy"}}]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	err := run(testContext(t), []string{"-addr", "127.0.0.1:0", "-faults", file}, &bytes.Buffer{}, &stderr)
	if err == nil || !strings.Contains(err.Error(), file+`: rules[0].when.operations[0]: "PutMessages" is not an operation; did you mean PutMessage?`) {
		t.Fatalf("err = %v", err)
	}
	err = run(testContext(t), []string{"-addr", "127.0.0.1:0", "-faults", filepath.Join(t.TempDir(), "none.json")}, &bytes.Buffer{}, &stderr)
	if !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("missing file: %v", err)
	}
	// What is not a rules file stops azqd at once, unread: /dev/zero
	// never ends, and azqd used to read it until memory ran out.
	dir := t.TempDir()
	notFiles := map[string]string{dir: dir + ": a directory, not a file"}
	if _, err := os.Stat("/dev/zero"); err == nil {
		notFiles["/dev/zero"] = "/dev/zero: a device, not a regular file"
	}
	for file, want := range notFiles {
		err = run(testContext(t), []string{"-addr", "127.0.0.1:0", "-faults", file}, &bytes.Buffer{}, &stderr)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("-faults %s: err = %v, want …%s…", file, err, want)
		}
	}
}

// /metrics is the Prometheus text format, which Prometheus's own parser
// reads, and its counters are the requests sent.
func TestMetricsScrape(t *testing.T) {
	file := filepath.Join(t.TempDir(), "faults.json")
	if err := os.WriteFile(file, []byte(`{"rules": [{"name": "busy-put", "when": {"operations": ["PutMessage"], "times": 1}, "then": {"error": "ServerBusy"}}]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	d := start(t, "-faults", file)
	ctx := testContext(t)
	qc := queueClient(t, d.conns["devstoreaccount1"], "orders") // no retries
	if _, err := qc.Create(ctx, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := qc.EnqueueMessage(ctx, "refused", nil); !queueerror.HasCode(err, queueerror.ServerBusy) {
		t.Fatalf("first put: %v", err)
	}
	for i := 0; i < 3; i++ {
		if _, err := qc.EnqueueMessage(ctx, "m", nil); err != nil {
			t.Fatal(err)
		}
	}
	got, err := qc.DequeueMessage(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := qc.DeleteMessage(ctx, *got.Messages[0].MessageID, *got.Messages[0].PopReceipt, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := qc.DeleteMessage(ctx, *got.Messages[0].MessageID, *got.Messages[0].PopReceipt, nil); !queueerror.HasCode(err, queueerror.MessageNotFound) {
		t.Fatalf("second delete: %v", err)
	}

	resp, err := http.Get(d.base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/plain; version=0.0.4") {
		t.Fatalf("Content-Type %q", ct)
	}
	p := expfmt.NewTextParser(model.LegacyValidation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("Prometheus's parser: %v", err)
	}
	find := func(name string, labels map[string]string) float64 {
		t.Helper()
	next:
		for _, m := range fams[name].GetMetric() {
			for _, l := range m.Label {
				if v, ok := labels[l.GetName()]; ok && v != l.GetValue() {
					continue next
				}
			}
			switch {
			case m.Counter != nil:
				return m.Counter.GetValue()
			case m.Gauge != nil:
				return m.Gauge.GetValue()
			case m.Histogram != nil:
				return float64(m.Histogram.GetSampleCount())
			}
		}
		t.Fatalf("no %s%v in the scrape", name, labels)
		return 0
	}
	acct := "devstoreaccount1"
	for _, tc := range []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"azq_requests_total", map[string]string{"account": acct, "operation": "CreateQueue", "outcome": "success"}, 1},
		{"azq_requests_total", map[string]string{"account": acct, "operation": "PutMessage", "outcome": "throttling_error"}, 1},
		{"azq_requests_total", map[string]string{"account": acct, "operation": "PutMessage", "outcome": "success"}, 3},
		{"azq_requests_total", map[string]string{"account": acct, "operation": "GetMessages", "outcome": "success"}, 1},
		{"azq_requests_total", map[string]string{"account": acct, "operation": "DeleteMessage", "outcome": "success"}, 1},
		{"azq_requests_total", map[string]string{"account": acct, "operation": "DeleteMessage", "outcome": "client_error"}, 1},
		{"azq_request_duration_seconds", map[string]string{"operation": "PutMessage"}, 4},
		{"azq_messages_put_total", map[string]string{"queue": "orders"}, 3},
		{"azq_messages_deleted_total", map[string]string{"queue": "orders"}, 1},
		{"azq_queue_messages", map[string]string{"queue": "orders"}, 2},
		{"azq_fault_hits_total", map[string]string{"rule": "busy-put"}, 1},
	} {
		if got := find(tc.name, tc.labels); got != tc.want {
			t.Errorf("%s%v = %v, want %v", tc.name, tc.labels, got, tc.want)
		}
	}
	var total float64
	for _, m := range fams["azq_requests_total"].GetMetric() {
		total += m.Counter.GetValue()
	}
	if total != 8 {
		t.Errorf("%v requests counted, 8 sent", total)
	}
	if fams["azq_queue_oldest_visible_message_age_seconds"].GetType() != dto.MetricType_GAUGE {
		t.Errorf("oldest visible age: %v", fams["azq_queue_oldest_visible_message_age_seconds"])
	}
}

// -metrics=false serves none; an account named "metrics" keeps /metrics
// for its requests and the metrics move to /_azq/metrics.
func TestMetricsPaths(t *testing.T) {
	off := start(t, "-metrics=false")
	if status, _ := send(t, "GET", off.base+"/_azq/metrics", "", nil, nil); status == 200 {
		t.Fatal("/_azq/metrics served with -metrics=false")
	}
	d := start(t, "-account", "metrics:"+server.DevelopmentAccount().Keys[0], "-allow-anonymous")
	if status, body := send(t, "GET", d.base+"/metrics?comp=list", "", nil, nil); status != 200 || !strings.Contains(body, "<EnumerationResults") {
		t.Fatalf("the account's List Queues: %d %s", status, body)
	}
	if status, body := send(t, "GET", d.base+"/_azq/metrics", "", nil, nil); status != 200 || !strings.Contains(body, "azq_requests_total") {
		t.Fatalf("/_azq/metrics: %d %s", status, body)
	}
}
