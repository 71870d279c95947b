package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/storage/azqueue"
)

// A workload runs one cycle; rec (nil during the warm-up) receives the
// latency of each of its operations.
type workload interface {
	cycle(ctx context.Context, rec *recorder) error
	ops() []string
	target() string
}

// recorder keeps one client's latencies, per operation index.
type recorder struct {
	cycle []time.Duration
	ops   [][]time.Duration
	empty int64
}

func (r *recorder) op(i int, d time.Duration) {
	if r != nil {
		r.ops[i] = append(r.ops[i], d)
	}
}

// queueWorkload is Put Message, Get Messages (one, 30 s visibility) and
// Delete Message through the Go SDK.
type queueWorkload struct {
	qc      *azqueue.QueueClient
	content string
	timeout time.Duration
}

func (w *queueWorkload) ops() []string  { return []string{"put", "get", "delete"} }
func (w *queueWorkload) target() string { return w.qc.URL() }

// maxEmptyGets bounds the retries of a Get that found no visible message
// (possible when another client's Get took the message this client put
// and the queue was momentarily empty).
const maxEmptyGets = 1000

func (w *queueWorkload) cycle(ctx context.Context, rec *recorder) error {
	ctx, cancel := context.WithTimeout(ctx, w.timeout)
	defer cancel()
	t0 := time.Now()
	if _, err := w.qc.EnqueueMessage(ctx, w.content, nil); err != nil {
		return fmt.Errorf("put: %w", err)
	}
	t1 := time.Now()
	rec.op(0, t1.Sub(t0))
	vis := int32(30)
	for tries := 0; ; tries++ {
		resp, err := w.qc.DequeueMessage(ctx, &azqueue.DequeueMessageOptions{VisibilityTimeout: &vis})
		if err != nil {
			return fmt.Errorf("get: %w", err)
		}
		t2 := time.Now()
		rec.op(1, t2.Sub(t1))
		if len(resp.Messages) == 0 {
			if rec != nil {
				rec.empty++
			}
			if tries >= maxEmptyGets {
				return errors.New("get: the queue stayed empty")
			}
			t1 = t2
			continue
		}
		m := resp.Messages[0]
		if m.MessageID == nil || m.PopReceipt == nil {
			return errors.New("get: the message lacks an ID or pop receipt")
		}
		if _, err := w.qc.DeleteMessage(ctx, *m.MessageID, *m.PopReceipt, nil); err != nil {
			return fmt.Errorf("delete: %w", err)
		}
		t3 := time.Now()
		rec.op(2, t3.Sub(t2))
		if rec != nil {
			rec.cycle = append(rec.cycle, t3.Sub(t0))
		}
		return nil
	}
}

// floorWorkload is one plain GET per cycle: what net/http itself costs.
type floorWorkload struct {
	client  *http.Client
	url     string
	timeout time.Duration
}

func (w *floorWorkload) ops() []string  { return []string{"get"} }
func (w *floorWorkload) target() string { return w.url }

func (w *floorWorkload) cycle(ctx context.Context, rec *recorder) error {
	ctx, cancel := context.WithTimeout(ctx, w.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, w.url, nil)
	if err != nil {
		return err
	}
	t0 := time.Now()
	resp, err := w.client.Do(req)
	if err != nil {
		return err
	}
	_, err = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", w.url, resp.Status)
	}
	d := time.Since(t0)
	rec.op(0, d)
	if rec != nil {
		rec.cycle = append(rec.cycle, d)
	}
	return nil
}

// floorHandler is the trivial handler of the net/http floor.
func floorHandler() http.Handler {
	body := []byte("ok\n")
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		w.Write(body)
	})
}

// serveFloor serves a trivial handler on a loopback port and returns its
// URL and a function that stops it.
func serveFloor() (stop func(), url string, err error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, "", err
	}
	hs := &http.Server{Handler: floorHandler()}
	done := make(chan struct{})
	go func() {
		defer close(done)
		hs.Serve(ln)
	}()
	return func() { hs.Close(); <-done }, "http://" + ln.Addr().String() + "/", nil
}

// measure runs the warm-up, then the measured phase, and summarizes it.
// The first failed cycle cancels every client and is returned.
func measure(ctx context.Context, w workload, clients int, warmup, duration time.Duration, maxCycles int64) (*result, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		errOnce  sync.Once
		firstErr error
	)
	fail := func(err error) {
		errOnce.Do(func() { firstErr = err; cancel() })
	}
	phase := func(until time.Time, limit int64, recs []*recorder) {
		var claimed atomic.Int64
		var wg sync.WaitGroup
		for i := 0; i < clients; i++ {
			wg.Add(1)
			go func(rec *recorder) {
				defer wg.Done()
				for ctx.Err() == nil && time.Now().Before(until) {
					if limit > 0 && claimed.Add(1) > limit {
						return
					}
					if err := w.cycle(ctx, rec); err != nil {
						if ctx.Err() == nil {
							fail(err)
						}
						return
					}
				}
			}(recs[i])
		}
		wg.Wait()
	}

	if warmup > 0 {
		phase(time.Now().Add(warmup), 0, make([]*recorder, clients))
	}
	recs := make([]*recorder, clients)
	for i := range recs {
		recs[i] = &recorder{ops: make([][]time.Duration, len(w.ops()))}
	}
	start := time.Now()
	phase(start.Add(duration), maxCycles, recs)
	elapsed := time.Since(start)
	if firstErr != nil {
		return nil, firstErr
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return summarize(w.ops(), clients, elapsed, recs), nil
}

// result is what azqload prints.
type result struct {
	Target       string      `json:"target"`
	Clients      int         `json:"clients"`
	Seconds      float64     `json:"seconds"`
	Cycles       int         `json:"cycles"`
	CyclesPerSec float64     `json:"cycles_per_sec"`
	EmptyGets    int64       `json:"empty_gets,omitempty"`
	Cycle        percentiles `json:"cycle"`
	Ops          []opStats   `json:"ops"`
}

type opStats struct {
	Name string `json:"name"`
	percentiles
}

// percentiles are in microseconds.
type percentiles struct {
	Count int     `json:"count"`
	P50   float64 `json:"p50_us"`
	P90   float64 `json:"p90_us"`
	P99   float64 `json:"p99_us"`
}

func summarize(names []string, clients int, elapsed time.Duration, recs []*recorder) *result {
	res := &result{Clients: clients, Seconds: elapsed.Seconds()}
	var cycles []time.Duration
	ops := make([][]time.Duration, len(names))
	for _, r := range recs {
		cycles = append(cycles, r.cycle...)
		for i := range ops {
			ops[i] = append(ops[i], r.ops[i]...)
		}
		res.EmptyGets += r.empty
	}
	res.Cycles = len(cycles)
	res.CyclesPerSec = float64(len(cycles)) / elapsed.Seconds()
	res.Cycle = percentilesOf(cycles)
	for i, n := range names {
		res.Ops = append(res.Ops, opStats{Name: n, percentiles: percentilesOf(ops[i])})
	}
	return res
}

// percentilesOf uses the nearest-rank method.
func percentilesOf(ds []time.Duration) percentiles {
	p := percentiles{Count: len(ds)}
	if len(ds) == 0 {
		return p
	}
	slices.Sort(ds)
	rank := func(q float64) float64 {
		i := int(math.Ceil(q*float64(len(ds)))) - 1
		i = max(0, min(i, len(ds)-1))
		return float64(ds[i]) / float64(time.Microsecond)
	}
	p.P50, p.P90, p.P99 = rank(0.50), rank(0.90), rank(0.99)
	return p
}

func (r *result) print(w io.Writer) {
	fmt.Fprintf(w, "target      %s\n", r.Target)
	fmt.Fprintf(w, "clients     %d\n", r.Clients)
	fmt.Fprintf(w, "cycles      %d in %.3fs = %.1f cycles/s\n", r.Cycles, r.Seconds, r.CyclesPerSec)
	if r.EmptyGets > 0 {
		fmt.Fprintf(w, "empty gets  %d (retried)\n", r.EmptyGets)
	}
	line := func(name string, p percentiles) {
		fmt.Fprintf(w, "%-11s p50 %s  p90 %s  p99 %s\n", name, us(p.P50), us(p.P90), us(p.P99))
	}
	line("cycle", r.Cycle)
	for _, o := range r.Ops {
		line(o.Name, o.percentiles)
	}
}

func us(v float64) string {
	return (time.Duration(v * float64(time.Microsecond))).Round(time.Microsecond).String()
}
