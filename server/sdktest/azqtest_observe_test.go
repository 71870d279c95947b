package sdktest_test

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azqueue"
	"github.com/azqlib/azq/azqtest"
	"github.com/azqlib/azq/faults"
	"github.com/azqlib/azq/metrics"
	"github.com/azqlib/azq/observe"
)

// A test that wants the server's metrics sets a Recorder's Observe as the
// server's hook: the requests are counted from then on, the queues and
// fault hits read at a scrape, and nothing is counted once the hook is
// removed.
func TestSetObserveCountsWithARecorder(t *testing.T) {
	ctx := context.Background()
	srv := azqtest.NewInProcessServer(t)
	client, err := srv.NewServiceClient(&azqueue.ClientOptions{ClientOptions: azcore.ClientOptions{Retry: policy.RetryOptions{MaxRetries: -1}}})
	if err != nil {
		t.Fatal(err)
	}
	// Before any hook, requests go uncounted.
	if _, err := client.CreateQueue(ctx, "orders", nil); err != nil {
		t.Fatal(err)
	}

	rec := metrics.NewRecorder()
	srv.SetObserve(rec.Observe)
	rec.WatchService(srv.Account.Name, srv.Service)
	rec.WatchFaults(srv.Faults)

	if err := srv.Faults.Add(faults.Rule{
		Name: "busy", When: faults.When{Operations: []string{"PutMessage"}, Times: 1},
		Then: faults.Then{Error: "ServerBusy"},
	}); err != nil {
		t.Fatal(err)
	}
	q := client.NewQueueClient("orders")
	if _, err := q.EnqueueMessage(ctx, "refused", nil); err == nil {
		t.Fatal("the fault rule did not refuse the Put")
	}
	if _, err := q.EnqueueMessage(ctx, "kept", nil); err != nil {
		t.Fatal(err)
	}
	s := rec.Snapshot()
	if n := s.Count("CreateQueue", ""); n != 0 {
		t.Errorf("%d Create Queue counted from before the hook", n)
	}
	if s.Count("PutMessage", observe.ThrottlingError) != 1 || s.Count("PutMessage", observe.Success) != 1 ||
		len(s.MessagesPut) != 1 || s.MessagesPut[0].Count != 1 {
		t.Errorf("snapshot %+v", s)
	}
	var text strings.Builder
	if err := rec.WritePrometheus(ctx, &text); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		`azq_queue_messages{account="devstoreaccount1",queue="orders"} 1`,
		`azq_fault_hits_total{rule="busy"} 1`,
	} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("the scrape has no %s:\n%s", want, text.String())
		}
	}

	srv.SetObserve(nil)
	if _, err := q.EnqueueMessage(ctx, "unseen", nil); err != nil {
		t.Fatal(err)
	}
	if s := rec.Snapshot(); s.Count("PutMessage", "") != 2 {
		t.Errorf("%d Puts counted after the hook was removed, want the 2 from before", s.Count("PutMessage", ""))
	}
}

// The hook may be set and replaced while requests are served (go test
// -race checks it).
func TestSetObserveWhileServing(t *testing.T) {
	ctx := context.Background()
	srv := azqtest.NewInProcessServer(t)
	client, err := srv.NewServiceClient(nil)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	seen := map[string]int{}
	hook := func(o observe.Observation) {
		mu.Lock()
		defer mu.Unlock()
		seen[o.Operation]++
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for range 50 {
			srv.SetObserve(hook)
			srv.SetObserve(nil)
		}
		srv.SetObserve(hook)
	}()
	for range 20 {
		if _, err := client.GetServiceProperties(ctx, nil); err != nil {
			t.Error(err)
		}
	}
	wg.Wait()
	if _, err := client.GetServiceProperties(ctx, nil); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if n := seen["GetServiceProperties"]; n < 1 || n > 21 {
		t.Errorf("the hook saw %d of 21 requests (%v)", n, seen)
	}
}
