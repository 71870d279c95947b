package azqtest_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azqueue"
	"github.com/azqlib/azq/azqtest"
)

// An SDK client built from the server's connection string reaches the
// account whose queues the test sees in process, on the server's mock
// clock.
func TestNewServer(t *testing.T) {
	ctx := context.Background()
	srv := azqtest.NewServer(t)
	if !strings.HasPrefix(srv.Endpoint, srv.URL+"/devstoreaccount1") || !strings.Contains(srv.ConnectionString, "QueueEndpoint="+srv.Endpoint) {
		t.Fatalf("endpoint %s, connection string %s", srv.Endpoint, srv.ConnectionString)
	}
	if now := srv.Clock.Now(); now.Nanosecond() != 0 || time.Since(now) > time.Minute || time.Since(now) < 0 {
		t.Fatalf("the mock starts at %v", now)
	}
	// Retries off: the request after Close is to fail at once.
	svc, err := azqueue.NewServiceClientFromConnectionString(srv.ConnectionString,
		&azqueue.ClientOptions{ClientOptions: azcore.ClientOptions{Retry: policy.RetryOptions{MaxRetries: -1}}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := svc.CreateQueue(ctx, "orders", nil); err != nil {
		t.Fatal(err)
	}
	resp, err := svc.NewQueueClient("orders").EnqueueMessage(ctx, "hello", nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := *resp.Messages[0].InsertionTime; !got.Equal(srv.Clock.Now()) {
		t.Fatalf("inserted at %v, the mock says %v", got, srv.Clock.Now())
	}
	q, err := srv.Service.Queue("orders")
	if err != nil {
		t.Fatal(err)
	}
	ms, err := q.Peek(ctx, 32)
	if err != nil || len(ms) != 1 || ms[0].Content != "hello" {
		t.Fatalf("in process: %+v, %v", ms, err)
	}

	srv.Close()
	srv.Close() // idempotent; t.Cleanup calls it once more
	if _, err := svc.NewQueueClient("orders").PeekMessages(ctx, nil); err == nil {
		t.Fatal("a request after Close succeeded")
	}
}
