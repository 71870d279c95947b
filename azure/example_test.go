package azure_test

import (
	"context"
	"fmt"
	"log"
	"net/http/httptest"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azqueue"
	"github.com/azqlib/azq"
	"github.com/azqlib/azq/azqtest"
	"github.com/azqlib/azq/azure"
	"github.com/azqlib/azq/server"
	"github.com/azqlib/azq/worker"
)

// greet is code written once against the queue contract: it puts three
// names and runs a worker over them until all three are handled.
func greet(ctx context.Context, where string, q azq.MessageQueue) error {
	for _, name := range []string{"ada", "grace", "edsger"} {
		if _, err := q.Put(ctx, name, nil); err != nil {
			return err
		}
	}
	ctx, stop := context.WithCancel(ctx)
	left := 3
	w := worker.New(q, func(ctx context.Context, d *worker.Delivery) error {
		fmt.Printf("%s: hello, %s\n", where, d.Message.Content)
		return nil
	}, worker.Options{
		Concurrency: 1, // one at a time, so that the output keeps the queue's order
		OnEvent: func(e worker.Event) {
			if e.Kind == worker.EventSucceeded {
				if left--; left == 0 {
					stop()
				}
			}
		},
	})
	return w.Run(ctx)
}

// The same code runs on a queue in memory and, unchanged, on a queue of
// Azure Queue Storage. Here the storage account is azq's REST server in
// process; a real account's connection string works the same way.
func Example() {
	ctx := context.Background()

	if err := greet(ctx, "in memory", azq.New()); err != nil {
		log.Fatal(err)
	}

	srv := httptest.NewServer(server.New(server.Options{}))
	defer srv.Close()
	conn := server.DevelopmentAccount().ConnectionString(srv.URL + "/devstoreaccount1")

	svc, err := azure.NewServiceFromConnectionString(conn, nil)
	if err != nil {
		log.Fatal(err)
	}
	q, _, err := svc.CreateQueue(ctx, "greetings", nil)
	if err != nil {
		log.Fatal(err)
	}
	if err := greet(ctx, "in Azure", q); err != nil {
		log.Fatal(err)
	}
	// Output:
	// in memory: hello, ada
	// in memory: hello, grace
	// in memory: hello, edsger
	// in Azure: hello, ada
	// in Azure: hello, grace
	// in Azure: hello, edsger
}

// Producers and consumers of a queue must agree on the message text
// encoding. The Azure Functions queue trigger expects base64 by default;
// a Go producer that feeds it sets EncodingBase64.
func ExampleOptions_encoding() {
	ctx := context.Background()
	srv := httptest.NewServer(server.New(server.Options{}))
	defer srv.Close()
	conn := server.DevelopmentAccount().ConnectionString(srv.URL + "/devstoreaccount1")

	svc, err := azure.NewServiceFromConnectionString(conn, &azure.Options{Encoding: azure.EncodingBase64})
	if err != nil {
		log.Fatal(err)
	}
	q, _, err := svc.CreateQueue(ctx, "orders", nil)
	if err != nil {
		log.Fatal(err)
	}
	if _, err := q.Put(ctx, `{"order":42}`, nil); err != nil {
		log.Fatal(err)
	}

	// What the service stores, and what a consumer without the encoding
	// (the Go SDK's default) reads:
	plain, err := azure.NewQueueFromConnectionString(conn, "orders", nil)
	if err != nil {
		log.Fatal(err)
	}
	raw, err := plain.Peek(ctx, 1)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("stored:", raw[0].Content)

	// What a consumer with the same encoding reads:
	ms, err := q.Peek(ctx, 1)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("decoded:", ms[0].Content)
	// Output:
	// stored: eyJvcmRlciI6NDJ9
	// decoded: {"order":42}
}

// Options.ClientOptions takes any SDK transport: here azqtest's, which
// hands each request to azq's REST handler in process, with no listener
// and no port. In a test, azqtest.NewInProcessServer(t) makes the handler
// and Server.NewAzureService this Service.
func ExampleNewServiceFromConnectionString_inProcess() {
	ctx := context.Background()
	h := server.New(server.Options{})
	defer h.Close()
	tr := azqtest.NewTransport(h)
	defer tr.Close()
	conn := server.DevelopmentAccount().ConnectionString(azqtest.InProcessURL + "/devstoreaccount1")

	svc, err := azure.NewServiceFromConnectionString(conn, &azure.Options{
		ClientOptions: &azqueue.ClientOptions{ClientOptions: azcore.ClientOptions{Transport: tr}},
	})
	if err != nil {
		log.Fatal(err)
	}
	q, _, err := svc.CreateQueue(ctx, "greetings", nil)
	if err != nil {
		log.Fatal(err)
	}
	if err := greet(ctx, "in process", q); err != nil {
		log.Fatal(err)
	}
	// Output:
	// in process: hello, ada
	// in process: hello, grace
	// in process: hello, edsger
}
