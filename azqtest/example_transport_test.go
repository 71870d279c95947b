package azqtest_test

import (
	"context"
	"fmt"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azqueue"
	"github.com/azqlib/azq/azqtest"
	"github.com/azqlib/azq/server"
)

// The official SDK on azq's REST handler in process: no listener, no
// port. In a test, NewInProcessServer(t) does all of this, and
// Server.NewServiceClient builds the client.
func ExampleNewTransport() {
	ctx := context.Background()
	h := server.New(server.Options{})
	defer h.Close()
	tr := azqtest.NewTransport(h)
	defer tr.Close()

	acct := server.DevelopmentAccount()
	client, err := azqueue.NewServiceClientFromConnectionString(acct.ConnectionString(azqtest.InProcessURL+"/"+acct.Name),
		&azqueue.ClientOptions{ClientOptions: azcore.ClientOptions{Transport: tr}})
	if err != nil {
		panic(err)
	}
	if _, err := client.CreateQueue(ctx, "jobs", nil); err != nil {
		panic(err)
	}
	jobs := client.NewQueueClient("jobs")
	if _, err := jobs.EnqueueMessage(ctx, "hello", nil); err != nil {
		panic(err)
	}
	got, err := jobs.DequeueMessage(ctx, nil)
	if err != nil {
		panic(err)
	}
	fmt.Println(*got.Messages[0].MessageText)
	// Output: hello
}
