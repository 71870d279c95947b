package azqtest_test

import (
	"context"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azqueue"
	"github.com/azqlib/azq/azqtest"
	"github.com/azqlib/azq/faults"
)

// placeOrder stands for the code under test: it takes the official SDK's
// client, as the application does.
func placeOrder(ctx context.Context, orders *azqueue.QueueClient, id string) error {
	_, err := orders.EnqueueMessage(ctx, id, nil)
	return err
}

// TestPlaceOrder is the pattern docs/testing.md shows: every subtest runs
// in parallel with a server of its own, in process, reached through the
// official SDK, and has Azure's bad days in one line.
func TestPlaceOrder(t *testing.T) {
	busy := faults.Then{Error: faults.CodeServerBusy}
	for _, tc := range []struct {
		name    string
		fault   *faults.Rule // nil: none
		want    int          // messages in the queue
		wantErr bool
	}{
		{name: "accepted", want: 1},
		{name: "busy once, retried", want: 1,
			fault: &faults.Rule{When: faults.When{Operations: []string{"PutMessage"}, Times: 1}, Then: busy}},
		{name: "answer lost, retried: a duplicate", want: 2,
			fault: &faults.Rule{When: faults.When{Operations: []string{"PutMessage"}, Times: 1},
				Then: faults.Then{Applied: true, Network: faults.NetworkReset}}},
		{name: "down", wantErr: true,
			fault: &faults.Rule{When: faults.When{Operations: []string{"PutMessage"}}, Then: busy}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			srv := azqtest.NewInProcessServer(t)
			client, err := srv.NewServiceClient(&azqueue.ClientOptions{ClientOptions: azcore.ClientOptions{
				// The SDK's retry back-off is real time: keep it short.
				Retry: policy.RetryOptions{RetryDelay: time.Millisecond, MaxRetryDelay: 10 * time.Millisecond},
			}})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := client.CreateQueue(ctx, "orders", nil); err != nil {
				t.Fatal(err)
			}
			if tc.fault != nil {
				if err := srv.Faults.Add(*tc.fault); err != nil {
					t.Fatal(err)
				}
			}

			err = placeOrder(ctx, client.NewQueueClient("orders"), "42")

			if (err != nil) != tc.wantErr {
				t.Fatalf("placeOrder: %v", err)
			}
			q, err := srv.Service.Queue("orders")
			if err != nil {
				t.Fatal(err)
			}
			if n, _ := q.ApproximateCount(ctx); n != tc.want {
				t.Fatalf("%d orders in the queue, want %d", n, tc.want)
			}
		})
	}
}
