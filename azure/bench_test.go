package azure_test

// The adapter's cost: one Put → Get → Delete cycle through azure.Queue
// beside the same cycle through the raw azqueue client, against the same
// azq REST handler over loopback, in the same run. Both sign with Shared
// Key, have the same HTTP transport configuration and retries off. Each
// reports, besides ns/op, the CPU time of the whole process per cycle
// (cpu-ns/op: client, SDK and handler together, user and system), which
// the two differ in only by what the adapter adds.
//
//	go test -run='^$' -bench=. -count=6 ./azure | tee bench/azure.txt
//	benchstat bench/azure.txt

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azqueue"
	"github.com/azqlib/azq"
	"github.com/azqlib/azq/azure"
	"github.com/azqlib/azq/internal/cputime"
	"github.com/azqlib/azq/server"
)

// benchPayload is the message of every cycle, as in server's benchmarks.
const benchPayload = "benchmark message body"

// benchLease is the visibility timeout of every Get; both sides send it.
const benchLease = 30 * time.Second

// benchServer serves the development account on loopback with the real
// clock and returns its connection string, with a queue "bench".
func benchServer(b *testing.B) string {
	s := server.New(server.Options{})
	hs := httptest.NewServer(s)
	b.Cleanup(func() { hs.Close(); s.Close() })
	if _, _, err := s.Service("devstoreaccount1").CreateQueue(context.Background(), "bench", nil); err != nil {
		b.Fatal(err)
	}
	return server.DevelopmentAccount().ConnectionString(hs.URL + "/devstoreaccount1")
}

// benchClientOptions are the SDK options of both sides: their own
// keep-alive transport, and no retries.
func benchClientOptions() *azqueue.ClientOptions {
	hc := &http.Client{Transport: &http.Transport{MaxIdleConns: 64, MaxIdleConnsPerHost: 64}}
	return &azqueue.ClientOptions{ClientOptions: azcore.ClientOptions{Transport: hc, Retry: policy.RetryOptions{MaxRetries: -1}}}
}

// measure runs cycle b.N times after one warm-up and reports the process
// CPU time per cycle beside the wall time.
func measure(b *testing.B, cycle func()) {
	cycle() // open the connection
	b.ReportAllocs()
	b.ResetTimer()
	cpu0, ok := cputime.Process()
	for i := 0; i < b.N; i++ {
		cycle()
	}
	b.StopTimer()
	if cpu1, _ := cputime.Process(); ok {
		b.ReportMetric(float64(cpu1-cpu0)/float64(b.N), "cpu-ns/op")
	}
}

// sdkCycle is the cycle through the raw azqueue client q.
func sdkCycle(b *testing.B, q *azqueue.QueueClient) func() {
	ctx := context.Background()
	num, vis := int32(1), int32(benchLease/time.Second)
	return func() {
		if _, err := q.EnqueueMessage(ctx, benchPayload, nil); err != nil {
			b.Fatal(err)
		}
		got, err := q.DequeueMessages(ctx, &azqueue.DequeueMessagesOptions{NumberOfMessages: &num, VisibilityTimeout: &vis})
		if err != nil || len(got.Messages) != 1 {
			b.Fatalf("%d messages, %v", len(got.Messages), err)
		}
		m := got.Messages[0]
		if _, err := q.DeleteMessage(ctx, *m.MessageID, *m.PopReceipt, nil); err != nil {
			b.Fatal(err)
		}
	}
}

// adapterCycle is the same cycle through the adapter, q.
func adapterCycle(b *testing.B, q azq.MessageQueue) func() {
	ctx := context.Background()
	return func() {
		if _, err := q.Put(ctx, benchPayload, nil); err != nil {
			b.Fatal(err)
		}
		ms, err := q.Get(ctx, 1, benchLease)
		if err != nil || len(ms) != 1 {
			b.Fatalf("%d messages, %v", len(ms), err)
		}
		if err := q.Delete(ctx, ms[0].ID, ms[0].PopReceipt); err != nil {
			b.Fatal(err)
		}
	}
}

// benchCycles returns the two cycles against one server.
func benchCycles(b *testing.B) (sdk, adapter func()) {
	conn := benchServer(b)
	raw, err := azqueue.NewQueueClientFromConnectionString(conn, "bench", benchClientOptions())
	if err != nil {
		b.Fatal(err)
	}
	q, err := azure.NewQueueFromConnectionString(conn, "bench", &azure.Options{ClientOptions: benchClientOptions()})
	if err != nil {
		b.Fatal(err)
	}
	return sdkCycle(b, raw), adapterCycle(b, q)
}

// BenchmarkCycle: Put → Get(1, 30 s) → Delete, one client, through the
// raw SDK and through the adapter: the figures benchstat compares.
func BenchmarkCycle(b *testing.B) {
	sdk, adapter := benchCycles(b)
	b.Run("side=sdk", func(b *testing.B) { measure(b, sdk) })
	b.Run("side=adapter", func(b *testing.B) { measure(b, adapter) })
}

// BenchmarkInterleaved runs the two cycles in alternating blocks of 32,
// each side first in every other block, so that both see the same machine
// from moment to moment: on a shared machine the drift between two
// separately run benchmarks is larger than the adapter's cost. An op is
// one cycle of each side. It reports each side's CPU time per cycle and
// the adapter's extra CPU in percent of the SDK's, over loopback against
// the server (loopback) and against canned answers (client).
func BenchmarkInterleaved(b *testing.B) {
	b.Run("loopback", func(b *testing.B) {
		sdk, adapter := benchCycles(b)
		interleave(b, sdk, adapter)
	})
	b.Run("client", func(b *testing.B) {
		sdk, adapter := cannedCycles(b)
		interleave(b, sdk, adapter)
	})
}

func interleave(b *testing.B, sdk, adapter func()) {
	sides := [2]func(){sdk, adapter}
	sdk()
	adapter()
	var cpu [2]time.Duration
	b.ReportAllocs()
	b.ResetTimer()
	for done, block := 0, 0; done < b.N; block++ {
		n := min(32, b.N-done)
		for k := 0; k < 2; k++ {
			side := (k + block) % 2
			c0, ok := cputime.Process()
			for i := 0; i < n; i++ {
				sides[side]()
			}
			if c1, _ := cputime.Process(); ok {
				cpu[side] += c1 - c0
			}
		}
		done += n
	}
	b.StopTimer()
	if cpu[0] > 0 {
		b.ReportMetric(float64(cpu[0])/float64(b.N), "sdk-cpu-ns/cycle")
		b.ReportMetric(float64(cpu[1])/float64(b.N), "adapter-cpu-ns/cycle")
		b.ReportMetric(100*(float64(cpu[1])/float64(cpu[0])-1), "adapter-extra-cpu-%")
	}
}

// cannedService answers Put, Get and Delete Message in memory, with the
// bodies azq's server sends, so that a cycle costs only the client: the
// SDK's pipeline, signing and XML, and on one side the adapter.
type cannedService struct{}

const (
	cannedEnqueued = `<?xml version="1.0" encoding="utf-8"?><QueueMessagesList><QueueMessage>` +
		`<MessageId>0f8fad5b-d9cb-469f-a165-70867728950e</MessageId><InsertionTime>Tue, 24 Nov 2026 10:00:00 GMT</InsertionTime>` +
		`<ExpirationTime>Tue, 01 Dec 2026 10:00:00 GMT</ExpirationTime><PopReceipt>AQAAAAEAAAAB3q2+7wAAAAAA</PopReceipt>` +
		`<TimeNextVisible>Tue, 24 Nov 2026 10:00:00 GMT</TimeNextVisible></QueueMessage></QueueMessagesList>`
	cannedDequeued = `<?xml version="1.0" encoding="utf-8"?><QueueMessagesList><QueueMessage>` +
		`<MessageId>0f8fad5b-d9cb-469f-a165-70867728950e</MessageId><InsertionTime>Tue, 24 Nov 2026 10:00:00 GMT</InsertionTime>` +
		`<ExpirationTime>Tue, 01 Dec 2026 10:00:00 GMT</ExpirationTime><PopReceipt>AQAAAAEAAAACq83v7wAAAAAA</PopReceipt>` +
		`<TimeNextVisible>Tue, 24 Nov 2026 10:00:30 GMT</TimeNextVisible><DequeueCount>1</DequeueCount>` +
		`<MessageText>` + benchPayload + `</MessageText></QueueMessage></QueueMessagesList>`
)

func (cannedService) Do(req *http.Request) (*http.Response, error) {
	if req.Body != nil {
		io.Copy(io.Discard, req.Body)
		req.Body.Close()
	}
	status, body := http.StatusNoContent, ""
	switch req.Method {
	case http.MethodPost:
		status, body = http.StatusCreated, cannedEnqueued
	case http.MethodGet:
		status, body = http.StatusOK, cannedDequeued
	}
	h := http.Header{}
	h.Set("x-ms-request-id", "5e1f9a8c-0003-0042-7ffb-0123456789ab")
	h.Set("x-ms-version", "2024-08-04")
	h.Set("Date", "Tue, 24 Nov 2026 10:00:00 GMT")
	if body != "" {
		h.Set("Content-Type", "application/xml")
	}
	return &http.Response{StatusCode: status, Status: http.StatusText(status), Header: h,
		Body: io.NopCloser(strings.NewReader(body)), ContentLength: int64(len(body)), Request: req}, nil
}

// cannedCycles returns the two cycles against canned answers.
func cannedCycles(b *testing.B) (sdk, adapter func()) {
	conn := server.DevelopmentAccount().ConnectionString("http://127.0.0.1:1/devstoreaccount1")
	opts := func() *azqueue.ClientOptions {
		return &azqueue.ClientOptions{ClientOptions: azcore.ClientOptions{Transport: cannedService{}, Retry: policy.RetryOptions{MaxRetries: -1}}}
	}
	raw, err := azqueue.NewQueueClientFromConnectionString(conn, "bench", opts())
	if err != nil {
		b.Fatal(err)
	}
	q, err := azure.NewQueueFromConnectionString(conn, "bench", &azure.Options{ClientOptions: opts()})
	if err != nil {
		b.Fatal(err)
	}
	return sdkCycle(b, raw), adapterCycle(b, q)
}

// BenchmarkClientCycle is BenchmarkCycle without the network and the
// server: both sides get canned answers in memory, so the figures are the
// client's cost alone, the SDK's and the adapter's on top of it.
func BenchmarkClientCycle(b *testing.B) {
	sdk, adapter := cannedCycles(b)
	b.Run("side=sdk", func(b *testing.B) { measure(b, sdk) })
	b.Run("side=adapter", func(b *testing.B) { measure(b, adapter) })
}
