package azqtest_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azqueue"
	"github.com/azqlib/azq/azqtest"
	"github.com/azqlib/azq/internal/cputime"
)

// cleanupTB is a testing.TB whose Cleanup functions run when the
// benchmark says, so that a benchmark that makes a server per op can
// close each before the next instead of keeping them all until it ends.
type cleanupTB struct {
	testing.TB
	cleanups []func()
}

func (c *cleanupTB) Cleanup(f func()) { c.cleanups = append(c.cleanups, f) }

func (c *cleanupTB) runCleanups() {
	for i := len(c.cleanups) - 1; i >= 0; i-- {
		c.cleanups[i]()
	}
	c.cleanups = c.cleanups[:0]
}

// BenchmarkServer is the cost of one test's server: made, one queue
// created in process, closed. The in-process server is what a parallel
// test makes for each subtest; the listening one is for comparison.
func BenchmarkServer(b *testing.B) {
	ctx := context.Background()
	for _, bc := range []struct {
		name string
		make func(testing.TB) *azqtest.Server
	}{
		{"in-process", azqtest.NewInProcessServer},
		{"listening", azqtest.NewServer},
	} {
		b.Run(bc.name, func(b *testing.B) {
			tb := &cleanupTB{TB: b}
			b.ReportAllocs()
			cpu0, _ := cputime.Process()
			for i := 0; i < b.N; i++ {
				srv := bc.make(tb)
				if _, _, err := srv.Service.CreateQueue(ctx, "jobs", nil); err != nil {
					b.Fatal(err)
				}
				tb.runCleanups()
			}
			b.StopTimer()
			// Most of the wall time is the millisecond Mock.Set sleeps;
			// the CPU time is what a server costs the machine.
			if cpu1, ok := cputime.Process(); ok {
				b.ReportMetric(float64(cpu1-cpu0)/float64(b.N)/1e3, "cpu-µs/op")
			}
		})
	}
}

// cycleClients are the two SDK queue clients of the cycle benchmarks, on
// one server: one through the server's in-process Transport, one over
// loopback TCP with a client of its own (keep-alive, HTTP/1.1, as the
// SDK's default transport talks to an http endpoint). Both have the
// SDK's default pipeline, retry policy included.
func cycleClients(b *testing.B) (inProcess, tcp *azqueue.QueueClient) {
	srv := azqtest.NewServer(b)
	if _, _, err := srv.Service.CreateQueue(context.Background(), "bench", nil); err != nil {
		b.Fatal(err)
	}
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 8}}
	b.Cleanup(hc.CloseIdleConnections)
	for _, c := range []struct {
		q *(*azqueue.QueueClient)
		t policy.Transporter
	}{{&inProcess, srv.Transport()}, {&tcp, hc}} {
		svc, err := azqueue.NewServiceClientFromConnectionString(srv.ConnectionString,
			&azqueue.ClientOptions{ClientOptions: azcore.ClientOptions{Transport: c.t}})
		if err != nil {
			b.Fatal(err)
		}
		*c.q = svc.NewQueueClient("bench")
	}
	return inProcess, tcp
}

// cycle puts, gets and deletes one message through the SDK.
func cycle(b *testing.B, q *azqueue.QueueClient) {
	ctx := context.Background()
	if _, err := q.EnqueueMessage(ctx, "benchmark message body", nil); err != nil {
		b.Fatal(err)
	}
	got, err := q.DequeueMessage(ctx, nil)
	if err != nil || len(got.Messages) != 1 {
		b.Fatalf("get: %d messages, %v", len(got.Messages), err)
	}
	if _, err := q.DeleteMessage(ctx, *got.Messages[0].MessageID, *got.Messages[0].PopReceipt, nil); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkSDKCycle is the Azure SDK's Put → Get → Delete through the
// in-process transport and over loopback TCP, against the same server in
// the same run, one op a cycle. cpu-µs/cycle is the CPU time of the
// whole process (client, server, kernel, garbage collector): both sides
// run in it, and the other tenants of a shared machine do not inflate it
// as they do wall time.
func BenchmarkSDKCycle(b *testing.B) {
	for _, name := range []string{"in-process", "tcp"} {
		b.Run("transport="+name, func(b *testing.B) {
			inProcess, tcp := cycleClients(b)
			q := inProcess
			if name == "tcp" {
				q = tcp
			}
			cycle(b, q) // warm the connection
			b.ReportAllocs()
			b.ResetTimer()
			cpu0, _ := cputime.Process()
			for i := 0; i < b.N; i++ {
				cycle(b, q)
			}
			b.StopTimer()
			if cpu1, ok := cputime.Process(); ok {
				b.ReportMetric(float64(cpu1-cpu0)/float64(b.N)/1e3, "cpu-µs/cycle")
			}
		})
	}
}

// BenchmarkSDKCycleRatio alternates blocks of cycles in process and over
// TCP within one run, and reports the CPU time per cycle of each and
// their ratio (in process over TCP; the target is 0.5 or less), so that
// the ratio is taken under one load. An op is one cycle each way.
func BenchmarkSDKCycleRatio(b *testing.B) {
	const block = 50
	inProcess, tcp := cycleClients(b)
	cycle(b, inProcess)
	cycle(b, tcp)
	var cpu [2]time.Duration
	b.ResetTimer()
	for done := 0; done < b.N; done += block {
		n := min(block, b.N-done)
		for i, q := range []*azqueue.QueueClient{inProcess, tcp} {
			cpu0, _ := cputime.Process()
			for range n {
				cycle(b, q)
			}
			cpu1, _ := cputime.Process()
			cpu[i] += cpu1 - cpu0
		}
	}
	b.StopTimer()
	if _, ok := cputime.Process(); !ok || cpu[1] == 0 {
		return
	}
	b.ReportMetric(float64(cpu[0])/float64(b.N)/1e3, "in-process-cpu-µs/cycle")
	b.ReportMetric(float64(cpu[1])/float64(b.N)/1e3, "tcp-cpu-µs/cycle")
	b.ReportMetric(float64(cpu[0])/float64(cpu[1]), "cpu-ratio")
}
