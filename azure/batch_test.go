package azure_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azqueue"
	"github.com/azqlib/azq"
	"github.com/azqlib/azq/azqtest"
	"github.com/azqlib/azq/azure"
)

// gate is a transport that holds the first BatchConcurrency requests until
// all of them have arrived, so that a batch that sends fewer at once
// never gets past them, and records how many were in flight at most.
type gate struct {
	next policy.Transporter

	mu       sync.Mutex // guards the fields below
	arrived  int
	inFlight int
	most     int
	release  chan struct{} // closed when BatchConcurrency requests arrived
}

func newGate(next policy.Transporter) *gate { return &gate{next: next, release: make(chan struct{})} }

func (g *gate) Do(req *http.Request) (*http.Response, error) {
	g.mu.Lock()
	g.arrived++
	g.inFlight++
	g.most = max(g.most, g.inFlight)
	held := g.arrived <= azure.BatchConcurrency
	if g.arrived == azure.BatchConcurrency {
		close(g.release)
	}
	g.mu.Unlock()
	defer func() {
		g.mu.Lock()
		g.inFlight--
		g.mu.Unlock()
	}()
	if held {
		select {
		case <-g.release:
		case <-req.Context().Done():
			return nil, req.Context().Err()
		}
	}
	return g.next.Do(req)
}

// A batch of MaxBatchSize sends BatchConcurrency requests at once, never
// more, and answers each item's result in its place.
func TestBatchSendsBoundedConcurrentRequests(t *testing.T) {
	srv := azqtest.NewServer(t)
	// A real-time bound on the test only: a batch that sends its requests
	// one at a time waits at the gate until it.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	batchQueue := func(g *gate) *azure.Queue {
		svc, err := srv.NewAzureService(&azure.Options{Clock: srv.Clock, ClientOptions: &azqueue.ClientOptions{
			ClientOptions: azcore.ClientOptions{Transport: g, Retry: policy.RetryOptions{MaxRetries: -1}}}})
		if err != nil {
			t.Fatal(err)
		}
		q, err := svc.Queue("batch")
		if err != nil {
			t.Fatal(err)
		}
		return q
	}
	if _, _, err := srv.Service.CreateQueue(ctx, "batch", nil); err != nil {
		t.Fatal(err)
	}

	reqs := make([]azq.PutRequest, azq.MaxBatchSize)
	for i := range reqs {
		reqs[i].Content = fmt.Sprint("m", i)
	}
	reqs[5].Options = &azq.PutOptions{VisibilityTimeout: -time.Second}
	g := newGate(srv.Transport())
	res, err := batchQueue(g).PutBatch(ctx, reqs)
	if err != nil {
		t.Fatal(err)
	}
	if g.most != azure.BatchConcurrency || g.arrived != len(reqs) {
		t.Errorf("PutBatch: %d requests, at most %d at once; want %d, %d at once", g.arrived, g.most, len(reqs), azure.BatchConcurrency)
	}
	var dels []azq.DeleteRequest
	for i, r := range res {
		if i == 5 {
			if !errors.Is(r.Err, azq.ErrOutOfRange) {
				t.Errorf("item 5: %v, want ErrOutOfRange", r.Err)
			}
			continue
		}
		if r.Err != nil || r.Message.Content != reqs[i].Content {
			t.Fatalf("item %d: %+v, want content %q", i, r, reqs[i].Content)
		}
		dels = append(dels, azq.DeleteRequest{ID: r.Message.ID, PopReceipt: r.Message.PopReceipt})
	}
	if n, _ := srv.Service.Named("batch").ApproximateCount(ctx); n != len(reqs)-1 {
		t.Fatalf("%d messages, want %d", n, len(reqs)-1)
	}

	g = newGate(srv.Transport())
	errs, err := batchQueue(g).DeleteBatch(ctx, dels)
	if err != nil {
		t.Fatal(err)
	}
	for i, err := range errs {
		if err != nil {
			t.Errorf("DeleteBatch item %d: %v", i, err)
		}
	}
	if g.most != azure.BatchConcurrency || g.arrived != len(dels) {
		t.Errorf("DeleteBatch: %d requests, at most %d at once; want %d, %d at once", g.arrived, g.most, len(dels), azure.BatchConcurrency)
	}
	if n, _ := srv.Service.Named("batch").ApproximateCount(ctx); n != 0 {
		t.Fatalf("%d messages after DeleteBatch, want 0", n)
	}
}

// A failure that is not an item's own fails the batch: the queue's
// absence stops the requests not yet sent.
func TestBatchOfAMissingQueueFailsTheCall(t *testing.T) {
	srv := azqtest.NewServer(t)
	g := newGate(srv.Transport())
	svc, err := srv.NewAzureService(&azure.Options{Clock: srv.Clock, ClientOptions: &azqueue.ClientOptions{
		ClientOptions: azcore.ClientOptions{Transport: g, Retry: policy.RetryOptions{MaxRetries: -1}}}})
	if err != nil {
		t.Fatal(err)
	}
	q, err := svc.Queue("missing")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute) // bounds a hang only
	defer cancel()
	res, err := q.PutBatch(ctx, make([]azq.PutRequest, azq.MaxBatchSize))
	if !errors.Is(err, azq.ErrQueueNotFound) || res != nil {
		t.Fatalf("PutBatch on a missing queue: %v, %v; want ErrQueueNotFound", res, err)
	}
	// Each of the first requests failed, and none was sent after them.
	if g.arrived != azure.BatchConcurrency {
		t.Errorf("%d requests sent, want %d", g.arrived, azure.BatchConcurrency)
	}
	if _, err := q.PutBatch(ctx, make([]azq.PutRequest, azq.MaxBatchSize+1)); !errors.Is(err, azq.ErrOutOfRange) {
		t.Fatalf("PutBatch of %d: %v, want ErrOutOfRange", azq.MaxBatchSize+1, err)
	}
}
