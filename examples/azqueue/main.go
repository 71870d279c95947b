// Command azqueue is a program that knows nothing of azq: it creates a
// queue, puts a message, gets it and deletes it with the official Azure SDK
// for Go (azqueue), on whatever queue service a connection string names.
// Start azqd first, from the repository's root (its development account
// is the default), as the README does: the built binary, so that kill %1
// stops azqd itself; with go run ./cmd/azqd & it would stop the go command
// only, and leave azqd holding port 10001.
//
//	go build -o azqd ./cmd/azqd
//	./azqd &
//	go run ./examples/azqueue
//	kill %1; wait
//
// or name another service, a storage account included:
//
//	go run ./examples/azqueue -connection-string "$AZURE_STORAGE_CONNECTION_STRING"
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log"
	"os"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/storage/azqueue"
)

// developmentConnectionString is azqd's (and Azurite's) development
// account on its default address.
const developmentConnectionString = "DefaultEndpointsProtocol=http;AccountName=devstoreaccount1;" +
	"AccountKey=Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==;" +
	"QueueEndpoint=http://127.0.0.1:10001/devstoreaccount1;"

func main() {
	conn := flag.String("connection-string", developmentConnectionString, "the queue service's `connection string`")
	flag.Parse()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := run(ctx, *conn, os.Stdout); err != nil {
		log.Fatal(err)
	}
}

// run is the whole program: create the queue "greetings", put "hello", get
// it, delete it and the queue.
func run(ctx context.Context, conn string, out io.Writer) error {
	svc, err := azqueue.NewServiceClientFromConnectionString(conn, nil)
	if err != nil {
		return err
	}
	q := svc.NewQueueClient("greetings")
	if _, err := q.Create(ctx, nil); err != nil {
		return fmt.Errorf("create the queue (is azqd running?): %w", err)
	}
	defer q.Delete(context.WithoutCancel(ctx), nil)
	if _, err := q.EnqueueMessage(ctx, "hello", nil); err != nil {
		return err
	}
	got, err := q.DequeueMessage(ctx, nil)
	if err != nil {
		return err
	}
	if len(got.Messages) != 1 {
		return fmt.Errorf("got %d messages, want 1", len(got.Messages))
	}
	m := got.Messages[0]
	fmt.Fprintln(out, "got:", *m.MessageText)
	if _, err := q.DeleteMessage(ctx, *m.MessageID, *m.PopReceipt, nil); err != nil {
		return err
	}
	fmt.Fprintln(out, "deleted")
	return nil
}
