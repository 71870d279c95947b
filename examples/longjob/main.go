// Command longjob shows a job that runs longer than its lease: the worker
// renews the lease in the background while the handler works, the handler
// checkpoints its progress in the message after every step, and when the
// first worker is stopped half-way a second worker resumes from the last
// checkpoint instead of starting over.
//
//	go run ./examples/longjob
//
// With -connection-string the same code runs on a queue of Azure Queue
// Storage through package azure: a storage account's connection string,
// or one that azqd prints for its emulated account. The queue (-queue,
// "renders" by default) is created if needed and cleared first.
//
//	go run ./examples/longjob -connection-string "$AZURE_STORAGE_CONNECTION_STRING"
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log"
	"log/slog"
	"os"
	"time"

	"github.com/azqlib/azq"
	"github.com/azqlib/azq/azure"
	"github.com/azqlib/azq/worker"
	"github.com/benbjohnson/clock"
)

// job is the message content: the work and how far it got.
type job struct {
	Frames int `json:"frames"`
	Done   int `json:"done"`
}

const (
	lease     = time.Second             // renewed every half second
	frameTime = 1200 * time.Millisecond // longer than the lease
)

// queue is what the example needs of either back end: the queue
// contract, and the clock the worker waits on.
type queue interface {
	azq.MessageQueue
	Clock() clock.Clock
}

// openQueue returns the queue name in memory, or in the storage account
// of connectionString, created if needed and emptied.
func openQueue(ctx context.Context, connectionString, name string) (queue, error) {
	if connectionString == "" {
		// A queue of a Service: the worker creates its poison queue there.
		q, _, err := azq.NewService().CreateQueue(ctx, name, nil)
		return q, err
	}
	svc, err := azure.NewServiceFromConnectionString(connectionString, nil)
	if err != nil {
		return nil, err
	}
	// The worker creates the poison queue in the same account, through
	// the queue's OpenQueue.
	q, _, err := svc.CreateQueue(ctx, name, nil)
	if err != nil {
		return nil, err
	}
	return q, q.Clear(ctx)
}

func main() {
	conn := flag.String("connection-string", "", "run on the queue service of this Azure Storage `connection string` instead of in memory")
	name := flag.String("queue", "renders", "the queue's `name`")
	flag.Parse()

	ctx := context.Background()
	q, err := openQueue(ctx, *conn, *name)
	if err != nil {
		log.Fatal(err)
	}
	body, _ := json.Marshal(job{Frames: 5})
	if _, err := q.Put(ctx, string(body), nil); err != nil {
		log.Fatal(err)
	}

	logger := slog.New(slog.NewTextHandler(os.Stdout, &slog.HandlerOptions{Level: slog.LevelDebug,
		ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
			if a.Key == slog.TimeKey {
				return slog.Attr{} // keep the output stable
			}
			return a
		}}))
	finished := make(chan struct{})

	render := func(name string, stopAfter int) worker.Handler {
		return func(ctx context.Context, d *worker.Delivery) error {
			var j job
			if err := json.Unmarshal([]byte(d.Message.Content), &j); err != nil {
				return err // malformed: retried, then moved to "<queue>-poison"
			}
			fmt.Printf("%s: got the job at frame %d/%d (attempt %d)\n", name, j.Done, j.Frames, d.Message.DequeueCount)
			clk := q.Clock()
			for j.Done < j.Frames {
				select { // one frame of work; the lease is renewed meanwhile
				case <-clk.After(frameTime):
				case <-ctx.Done():
					fmt.Printf("%s: stopped at frame %d: %v\n", name, j.Done, context.Cause(ctx))
					return context.Cause(ctx)
				}
				j.Done++
				b, _ := json.Marshal(j)
				if err := d.Checkpoint(ctx, string(b)); err != nil {
					return err // ErrLeaseLost: someone else owns the job now
				}
				fmt.Printf("%s: frame %d done, progress saved\n", name, j.Done)
				if j.Done == stopAfter {
					stopFirst()
				}
			}
			close(finished)
			return nil
		}
	}

	// The first worker is stopped after two frames, with no grace
	// period: its handler is cancelled and the message released at once,
	// carrying the progress it checkpointed.
	ctx1, cancel1 := context.WithCancel(ctx)
	stopFirst = cancel1
	// The poison queue is created next to q by default.
	w1 := worker.New(q, render("worker 1", 2), worker.Options{LeaseDuration: lease, ShutdownTimeout: -1,
		Logger: logger.With("worker", 1)})
	if err := w1.Run(ctx1); err != nil {
		log.Fatal(err)
	}
	fmt.Printf("worker 1 stopped: %+v\n", w1.Stats())

	// The second worker takes the released message at once and resumes.
	ctx2, cancel2 := context.WithCancel(ctx)
	done := make(chan error, 1)
	w2 := worker.New(q, render("worker 2", -1), worker.Options{LeaseDuration: lease,
		Logger: logger.With("worker", 2)})
	go func() { done <- w2.Run(ctx2) }()
	<-finished
	cancel2()
	if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
		log.Fatal(err)
	}
	s := w2.Stats()
	fmt.Printf("worker 2 stopped: %+v\n", s)
	// Peek, not ApproximateCount: a remote service's count may lag.
	if left, err := q.Peek(ctx, 32); err != nil || len(left) != 0 || s.Succeeded != 1 {
		log.Fatalf("job not completed: %d messages left (%v)", len(left), err)
	}
	fmt.Println("job complete; the queue is empty")
}

// stopFirst stops the first worker; set before it runs.
var stopFirst context.CancelFunc
