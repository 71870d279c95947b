package sdktest_test

import (
	"context"
	"fmt"
	"net/http/httptest"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/storage/azqueue"
	"github.com/azqlib/azq/server"
	"github.com/benbjohnson/clock"
)

// A test serves the Queue REST API in-process and points the Azure SDK at
// it with the development account's connection string; a mock clock makes
// a one-hour visibility timeout pass instantly.
func Example() {
	clk := clock.NewMock()
	clk.Set(time.Now())
	srv := server.New(server.Options{Clock: clk})
	hs := httptest.NewServer(srv)
	defer hs.Close()
	defer srv.Close()

	conn := server.DevelopmentAccount().ConnectionString(hs.URL + "/devstoreaccount1")
	svc, err := azqueue.NewServiceClientFromConnectionString(conn, nil)
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	if _, err := svc.CreateQueue(ctx, "jobs", nil); err != nil {
		panic(err)
	}
	q := svc.NewQueueClient("jobs")
	hour := int32(3600)
	if _, err := q.EnqueueMessage(ctx, "later", &azqueue.EnqueueMessageOptions{VisibilityTimeout: &hour}); err != nil {
		panic(err)
	}
	got, _ := q.DequeueMessage(ctx, nil)
	fmt.Println("before the hour:", len(got.Messages))
	clk.Add(time.Hour)
	got, _ = q.DequeueMessage(ctx, nil)
	fmt.Println("after the hour:", *got.Messages[0].MessageText)
	// Output:
	// before the hour: 0
	// after the hour: later
}
