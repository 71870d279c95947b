package sdktest_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azqueue"
	"github.com/azqlib/azq"
	"github.com/azqlib/azq/server"
)

// emptyGets counts Gets that found nothing visible.
var emptyGets atomic.Int64

// benchClients is the number of concurrent clients of the parallel runs.
const benchClients = 8

// benchHTTPClient is the client transport every HTTP benchmark uses, so
// that the SDK cycle and the net/http floor pay the same connection costs.
func benchHTTPClient() *http.Client {
	return &http.Client{Transport: &http.Transport{MaxIdleConns: 64, MaxIdleConnsPerHost: 64, ForceAttemptHTTP2: false}}
}

func benchQueueClient(b *testing.B, hc *http.Client) (*azqueue.QueueClient, *server.Server) {
	s := server.New(server.Options{})
	hs := httptest.NewServer(s)
	b.Cleanup(func() { hs.Close(); s.Close() })
	acct := server.DevelopmentAccount()
	cred, err := azqueue.NewSharedKeyCredential(acct.Name, acct.Keys[0])
	if err != nil {
		b.Fatal(err)
	}
	opts := &azqueue.ClientOptions{ClientOptions: azcore.ClientOptions{Transport: hc, Retry: policy.RetryOptions{MaxRetries: -1}}}
	svc, err := azqueue.NewServiceClientWithSharedKeyCredential(hs.URL+"/devstoreaccount1/", cred, opts)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := svc.CreateQueue(context.Background(), "bench", nil); err != nil {
		b.Fatal(err)
	}
	return svc.NewQueueClient("bench"), s
}

// sdkCycle puts, gets and deletes one message through the SDK, recording
// the round trip of each request in lat when it is non-nil.
func sdkCycle(b *testing.B, q *azqueue.QueueClient, lat *[]time.Duration) {
	ctx := context.Background()
	t0 := time.Now()
	if _, err := q.EnqueueMessage(ctx, "benchmark message body", nil); err != nil {
		b.Fatal(err)
	}
	t1 := time.Now()
	// With several clients on one queue a Get can find nothing visible
	// for an instant (another client took this client's message and its
	// own is stamped a moment later); a consumer just asks again.
	var got azqueue.DequeueMessagesResponse
	for {
		var err error
		got, err = q.DequeueMessage(ctx, nil)
		if err != nil {
			b.Fatal(err)
		}
		if len(got.Messages) == 1 {
			break
		}
		emptyGets.Add(1)
	}
	t2 := time.Now()
	if _, err := q.DeleteMessage(ctx, *got.Messages[0].MessageID, *got.Messages[0].PopReceipt, nil); err != nil {
		b.Fatal(err)
	}
	if lat != nil {
		*lat = append(*lat, t1.Sub(t0), t2.Sub(t1), time.Since(t2))
	}
}

func reportP50(b *testing.B, lat []time.Duration) {
	if len(lat) == 0 {
		return
	}
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Nanoseconds())/1e3, "p50-µs/req")
}

func reportCycles(b *testing.B) {
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "cycles/s")
}

// runClients splits b.N cycles among n goroutines.
func runClients(b *testing.B, n int, cycle func()) {
	var next atomic.Int64
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for next.Add(1) <= int64(b.N) {
				cycle()
			}
		}()
	}
	wg.Wait()
}

// BenchmarkSDKCycle: Put → Get → Delete through the Azure SDK for Go with
// Shared Key signing, over loopback HTTP.
func BenchmarkSDKCycle(b *testing.B) {
	b.Run("clients=1", func(b *testing.B) {
		q, _ := benchQueueClient(b, benchHTTPClient())
		sdkCycle(b, q, nil) // warm the connection
		lat := make([]time.Duration, 0, 3*b.N)
		b.ReportAllocs()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			sdkCycle(b, q, &lat)
		}
		b.StopTimer()
		reportCycles(b)
		reportP50(b, lat)
	})
	b.Run("clients=8", func(b *testing.B) {
		q, _ := benchQueueClient(b, benchHTTPClient())
		b.ReportAllocs()
		b.ResetTimer()
		emptyGets.Store(0)
		runClients(b, benchClients, func() { sdkCycle(b, q, nil) })
		b.StopTimer()
		reportCycles(b)
		b.ReportMetric(float64(emptyGets.Load())/float64(b.N), "empty-gets/cycle")
	})
}

// BenchmarkCoreCycle: the same cycle on azq.Queue directly.
func BenchmarkCoreCycle(b *testing.B) {
	cycle := func(q *azq.Queue) {
		ctx := context.Background()
		if _, err := q.Put(ctx, "benchmark message body", nil); err != nil {
			b.Fatal(err)
		}
		var ms []azq.Message
		for len(ms) == 0 {
			var err error
			if ms, err = q.Get(ctx, 1, azq.DefaultVisibilityTimeout); err != nil {
				b.Fatal(err)
			}
		}
		if err := q.Delete(ctx, ms[0].ID, ms[0].PopReceipt); err != nil {
			b.Fatal(err)
		}
	}
	b.Run("clients=1", func(b *testing.B) {
		q := azq.New()
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			cycle(q)
		}
		reportCycles(b)
	})
	b.Run("clients=8", func(b *testing.B) {
		q := azq.New()
		b.ReportAllocs()
		runClients(b, benchClients, func() { cycle(q) })
		reportCycles(b)
	})
}

// BenchmarkHTTPFloor: three round trips of a trivial net/http handler per
// cycle, with the same client transport: the cost of HTTP over loopback
// that no queue server can avoid.
func BenchmarkHTTPFloor(b *testing.B) {
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.WriteHeader(http.StatusNoContent)
	}))
	b.Cleanup(hs.Close)
	rt := func(hc *http.Client, lat *[]time.Duration) {
		t0 := time.Now()
		resp, err := hc.Get(hs.URL + "/devstoreaccount1/bench/messages")
		if err != nil {
			b.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if lat != nil {
			*lat = append(*lat, time.Since(t0))
		}
	}
	b.Run("clients=1", func(b *testing.B) {
		hc := benchHTTPClient()
		rt(hc, nil)
		lat := make([]time.Duration, 0, 3*b.N)
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			rt(hc, &lat)
			rt(hc, &lat)
			rt(hc, &lat)
		}
		b.StopTimer()
		reportCycles(b)
		reportP50(b, lat)
	})
	b.Run("clients=8", func(b *testing.B) {
		hc := benchHTTPClient()
		b.ResetTimer()
		runClients(b, benchClients, func() { rt(hc, nil); rt(hc, nil); rt(hc, nil) })
		b.StopTimer()
		reportCycles(b)
	})
}

// BenchmarkHandlerCycle: the same cycle as raw requests served in-process
// (no network, no SDK), anonymous: the handler's own cost per cycle. Each
// request is built as net/http's server hands one to a handler (a fresh
// Request with its header map and body, without parsing any text), and
// each response goes to a writer that keeps its status, header map and
// body without copying them, so that the harness adds little to what
// is measured.
func BenchmarkHandlerCycle(b *testing.B) { handlerCycle(b, server.Options{}) }

// handlerCycle runs BenchmarkHandlerCycle's loop on a server made with
// opts, anonymous.
func handlerCycle(b *testing.B, opts server.Options) {
	opts.AllowAnonymous = true
	s := server.New(opts)
	b.Cleanup(func() { s.Close() })
	if _, _, err := s.Service("devstoreaccount1").CreateQueue(context.Background(), "bench", nil); err != nil {
		b.Fatal(err)
	}
	body := "<QueueMessage><MessageText>benchmark message body</MessageText></QueueMessage>"
	var w benchWriter
	serve := func(method, path, rawQuery, body string) *benchWriter {
		uri := path
		if rawQuery != "" {
			uri += "?" + rawQuery
		}
		req := &http.Request{
			Method:        method,
			URL:           &url.URL{Path: path, RawQuery: rawQuery},
			Proto:         "HTTP/1.1",
			ProtoMajor:    1,
			ProtoMinor:    1,
			Header:        http.Header{"X-Ms-Version": {"2018-03-28"}},
			Body:          http.NoBody,
			ContentLength: int64(len(body)),
			Host:          "127.0.0.1:10001",
			RemoteAddr:    "127.0.0.1:50000",
			RequestURI:    uri,
		}
		if body != "" {
			req.Header["Content-Length"] = []string{strconv.Itoa(len(body))}
			req.Body = io.NopCloser(strings.NewReader(body))
		}
		w.reset()
		s.ServeHTTP(&w, req)
		return &w
	}
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		if w := serve("POST", "/devstoreaccount1/bench/messages", "", body); w.code != 201 {
			b.Fatal(w.code, string(w.body))
		}
		w := serve("GET", "/devstoreaccount1/bench/messages", "", "")
		id, receipt := element(w.body, "MessageId"), element(w.body, "PopReceipt")
		if id == "" || receipt == "" {
			b.Fatal(string(w.body))
		}
		if w := serve("DELETE", "/devstoreaccount1/bench/messages/"+id, "popreceipt="+url.QueryEscape(receipt), ""); w.code != 204 {
			b.Fatal(w.code, string(w.body))
		}
	}
	reportCycles(b)
}

// benchWriter is the http.ResponseWriter of BenchmarkHandlerCycle: a new
// header map per response, as net/http gives each, and the body kept in a
// buffer that is reused.
type benchWriter struct {
	h    http.Header
	code int
	body []byte
}

func (w *benchWriter) reset() {
	w.h, w.code, w.body = make(http.Header), 0, w.body[:0]
}

func (w *benchWriter) Header() http.Header { return w.h }

func (w *benchWriter) WriteHeader(code int) {
	if w.code == 0 {
		w.code = code
	}
}

func (w *benchWriter) Write(p []byte) (int, error) {
	w.WriteHeader(http.StatusOK)
	w.body = append(w.body, p...)
	return len(p), nil
}

// element returns the text of the first XML element name in b.
func element(b []byte, name string) string {
	_, rest, ok := bytes.Cut(b, []byte("<"+name+">"))
	if !ok {
		return ""
	}
	text, _, _ := bytes.Cut(rest, []byte("</"+name+">"))
	return string(text)
}

// BenchmarkRawCycle: the cycle as plain HTTP requests (anonymous, no SDK)
// over loopback with the same transport: the server's share of the SDK
// cycle, to set beside BenchmarkHTTPFloor.
func BenchmarkRawCycle(b *testing.B) {
	s := server.New(server.Options{AllowAnonymous: true})
	hs := httptest.NewServer(s)
	b.Cleanup(func() { hs.Close(); s.Close() })
	if _, _, err := s.Service("devstoreaccount1").CreateQueue(context.Background(), "bench", nil); err != nil {
		b.Fatal(err)
	}
	base := hs.URL + "/devstoreaccount1/bench/messages"
	body := "<QueueMessage><MessageText>benchmark message body</MessageText></QueueMessage>"
	do := func(hc *http.Client, method, url, body string, want int, lat *[]time.Duration) string {
		t0 := time.Now()
		req, _ := http.NewRequest(method, url, strings.NewReader(body))
		req.Header.Set("x-ms-version", "2018-03-28")
		resp, err := hc.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		out, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if lat != nil {
			*lat = append(*lat, time.Since(t0))
		}
		if resp.StatusCode != want {
			b.Fatalf("%s %s: %d %s", method, url, resp.StatusCode, out)
		}
		return string(out)
	}
	cycle := func(hc *http.Client, lat *[]time.Duration) {
		do(hc, "POST", base, body, 201, lat)
		var m, r []string
		for m == nil {
			got := do(hc, "GET", base, "", 200, lat)
			m, r = idRe.FindStringSubmatch(got), receiptRe.FindStringSubmatch(got)
		}
		do(hc, "DELETE", base+"/"+m[1]+"?popreceipt="+urlEscape(r[1]), "", 204, lat)
	}
	b.Run("clients=1", func(b *testing.B) {
		hc := benchHTTPClient()
		cycle(hc, nil)
		lat := make([]time.Duration, 0, 3*b.N)
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			cycle(hc, &lat)
		}
		b.StopTimer()
		reportCycles(b)
		reportP50(b, lat)
	})
	b.Run("clients=8", func(b *testing.B) {
		hc := benchHTTPClient()
		b.ResetTimer()
		runClients(b, benchClients, func() { cycle(hc, nil) })
		b.StopTimer()
		reportCycles(b)
	})
}

// BenchmarkRoundTripRatio interleaves one-client requests to this server
// with round trips to a trivial net/http handler over the same transport,
// so that both p50s are measured under the same machine load, and reports
// their ratio. "raw" sends plain HTTP requests (anonymous), "sdk" goes
// through the Azure SDK for Go with Shared Key signing.
func BenchmarkRoundTripRatio(b *testing.B) {
	floor := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.WriteHeader(http.StatusNoContent)
	}))
	b.Cleanup(floor.Close)
	floorRT := func(hc *http.Client) time.Duration {
		t0 := time.Now()
		resp, err := hc.Get(floor.URL + "/devstoreaccount1/bench/messages")
		if err != nil {
			b.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return time.Since(t0)
	}
	report := func(b *testing.B, srv, flo []time.Duration) {
		slices.Sort(srv)
		slices.Sort(flo)
		s, f := srv[len(srv)/2], flo[len(flo)/2]
		b.ReportMetric(float64(s.Nanoseconds())/1e3, "p50-µs/req")
		b.ReportMetric(float64(f.Nanoseconds())/1e3, "floor-p50-µs/req")
		b.ReportMetric(float64(s)/float64(f), "p50-ratio")
	}
	b.Run("raw", func(b *testing.B) {
		s := server.New(server.Options{AllowAnonymous: true})
		hs := httptest.NewServer(s)
		b.Cleanup(func() { hs.Close(); s.Close() })
		if _, _, err := s.Service("devstoreaccount1").CreateQueue(context.Background(), "bench", nil); err != nil {
			b.Fatal(err)
		}
		hc := benchHTTPClient()
		base := hs.URL + "/devstoreaccount1/bench/messages"
		body := "<QueueMessage><MessageText>benchmark message body</MessageText></QueueMessage>"
		do := func(method, url, body string) (string, time.Duration) {
			t0 := time.Now()
			req, _ := http.NewRequest(method, url, strings.NewReader(body))
			req.Header.Set("x-ms-version", "2018-03-28")
			resp, err := hc.Do(req)
			if err != nil {
				b.Fatal(err)
			}
			out, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode >= 300 {
				b.Fatalf("%s %s: %d %s", method, url, resp.StatusCode, out)
			}
			return string(out), time.Since(t0)
		}
		floorRT(hc)
		srv := make([]time.Duration, 0, 3*b.N)
		flo := make([]time.Duration, 0, 3*b.N)
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			_, d := do("POST", base, body)
			srv = append(srv, d)
			flo = append(flo, floorRT(hc))
			got, d := do("GET", base, "")
			srv = append(srv, d)
			flo = append(flo, floorRT(hc))
			m, r := idRe.FindStringSubmatch(got), receiptRe.FindStringSubmatch(got)
			if m == nil {
				b.Fatalf("nothing dequeued: %s", got)
			}
			_, d = do("DELETE", base+"/"+m[1]+"?popreceipt="+urlEscape(r[1]), "")
			srv = append(srv, d)
			flo = append(flo, floorRT(hc))
		}
		b.StopTimer()
		report(b, srv, flo)
	})
	b.Run("sdk", func(b *testing.B) {
		hc := benchHTTPClient()
		q, _ := benchQueueClient(b, hc)
		sdkCycle(b, q, nil)
		floorRT(hc)
		srv := make([]time.Duration, 0, 3*b.N)
		flo := make([]time.Duration, 0, 3*b.N)
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			sdkCycle(b, q, &srv)
			flo = append(flo, floorRT(hc), floorRT(hc), floorRT(hc))
		}
		b.StopTimer()
		report(b, srv, flo)
	})
}
