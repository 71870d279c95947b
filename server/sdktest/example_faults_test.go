package sdktest_test

import (
	"context"
	"fmt"
	"net/http/httptest"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azqueue"
	"github.com/azqlib/azq/faults"
	"github.com/azqlib/azq/server"
)

// Testing retry code against Azure's worst answer: Put Message takes
// effect, then the client gets 500 InternalError. The Go SDK's default
// retry policy (here with a 1 ms first delay instead of 4 s) puts the
// message again, so the queue holds two copies: consumers must tolerate
// duplicates.
func Example_faults() {
	ctx := context.Background()
	inj, err := faults.New(faults.Options{Config: faults.Config{
		Rules: []faults.Rule{{
			Name: "lost-put",
			When: faults.When{Operations: []string{"PutMessage"}, Times: 1},
			Then: faults.Then{Applied: true, Error: faults.CodeInternalError},
		}},
	}})
	if err != nil {
		panic(err)
	}
	srv := server.New(server.Options{Faults: inj})
	hs := httptest.NewServer(srv)
	defer hs.Close()
	defer srv.Close()

	conn := server.DevelopmentAccount().ConnectionString(hs.URL + "/devstoreaccount1")
	q, err := azqueue.NewQueueClientFromConnectionString(conn, "orders", &azqueue.ClientOptions{
		ClientOptions: azcore.ClientOptions{Retry: policy.RetryOptions{RetryDelay: time.Millisecond}},
	})
	if err != nil {
		panic(err)
	}
	if _, err := q.Create(ctx, nil); err != nil {
		panic(err)
	}
	if _, err := q.EnqueueMessage(ctx, "order 66", nil); err != nil {
		panic(err)
	}
	peek, err := q.PeekMessages(ctx, &azqueue.PeekMessagesOptions{NumberOfMessages: ptr(int32(32))})
	if err != nil {
		panic(err)
	}
	for _, m := range peek.Messages {
		fmt.Println(*m.MessageText)
	}
	fmt.Println("lost-put hit", inj.Hits("lost-put"), "time(s)")
	// Output:
	// order 66
	// order 66
	// lost-put hit 1 time(s)
}
