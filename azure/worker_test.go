package azure_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azqueue"
	"github.com/azqlib/azq"
	"github.com/azqlib/azq/azqtest"
	"github.com/azqlib/azq/azure"
	"github.com/azqlib/azq/worker"
)

// A test of code that consumes an Azure queue: azq's server in process,
// the code under test (here a worker) on azure.Queue, and the test moving
// the one clock that server, queue and worker share. The README shows it.
func TestWorkerOnTestServer(t *testing.T) {
	ctx := context.Background()
	srv := azqtest.NewServer(t)
	q, err := azure.NewQueueFromConnectionString(srv.ConnectionString, "jobs", &azure.Options{Clock: srv.Clock})
	if err != nil {
		t.Fatal(err)
	}

	// Seed the queue in process: a job due in an hour, and one that fails.
	jobs, _, err := srv.Service.CreateQueue(ctx, "jobs", nil)
	if err != nil {
		t.Fatal(err)
	}
	jobs.Put(ctx, "report", &azq.PutOptions{VisibilityTimeout: time.Hour})
	jobs.Put(ctx, "broken", nil)

	polls, poisoned, done := make(chan struct{}, 1), make(chan struct{}, 1), make(chan struct{})
	w := worker.New(q, func(ctx context.Context, d *worker.Delivery) error {
		if d.Message.Content == "broken" {
			return errors.New("cannot handle it")
		}
		close(done)
		return nil
	}, worker.Options{
		MaxDequeueCount: 1,
		MinPollInterval: time.Second, MaxPollInterval: time.Second, // polls a second on, on srv.Clock or in real time
		OnEvent: func(e worker.Event) {
			switch e.Kind {
			case worker.EventPollWait:
				signal(polls)
			case worker.EventPoisoned:
				signal(poisoned)
			}
		},
	})
	runCtx, stop := context.WithCancel(ctx)
	ran := make(chan error, 1)
	go func() { ran <- w.Run(runCtx) }()

	<-poisoned               // the broken job is set aside at once
	srv.Clock.Add(time.Hour) // the report is due
	for waiting := true; waiting; {
		select {
		case <-polls: // polled before the hour had passed: poll again
			srv.Clock.Add(time.Second)
		case <-done:
			waiting = false
		case <-time.After(20 * time.Second): // a hang guard only
			t.Fatal("the report was not handled")
		}
	}
	stop()
	if err := <-ran; err != nil {
		t.Fatal(err)
	}

	// The failed job went to "jobs-poison", next to "jobs" in the account.
	poison, err := srv.Service.Queue("jobs-poison")
	if err != nil {
		t.Fatal(err)
	}
	ms, _ := poison.Peek(ctx, 32)
	if len(ms) != 1 {
		t.Fatalf("%d poison messages", len(ms))
	}
	if rec, err := worker.ParsePoisonRecord(ms[0].Content); err != nil || rec.Body != "broken" {
		t.Fatalf("poison record %+v, %v", rec, err)
	}
	if n, _ := jobs.ApproximateCount(ctx); n != 0 {
		t.Fatalf("%d jobs left", n)
	}
}

// signal sends on c without blocking; c has room for one.
func signal(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

// A worker on azq's test server, whose mock clock the queue reports
// (azure.Options.Clock), started before any message exists, with a test
// that never moves the clock: the worker's poll waits end in real time
// too, so the message put later is handled. Before they did, the worker
// waited for ever on the mock clock after its first, empty, poll. Both
// servers: listening, through the connection string, and in process,
// through its transport.
func TestWorkerOnUnmovedMockClock(t *testing.T) {
	for _, name := range []string{"listening", "in-process"} {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			var srv *azqtest.Server
			opts := &azure.Options{}
			if name == "listening" {
				srv = azqtest.NewServer(t)
			} else {
				srv = azqtest.NewInProcessServer(t)
				opts.ClientOptions = &azqueue.ClientOptions{ClientOptions: azcore.ClientOptions{Transport: srv.Transport()}}
			}
			opts.Clock = srv.Clock
			q, err := azure.NewQueueFromConnectionString(srv.ConnectionString, "jobs", opts)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := q.Create(ctx, nil); err != nil {
				t.Fatal(err)
			}
			polled, handled := make(chan struct{}, 1), make(chan string, 1)
			w := worker.New(q, func(ctx context.Context, d *worker.Delivery) error {
				handled <- d.Message.Content
				return nil
			}, worker.Options{OnEvent: func(e worker.Event) {
				if e.Kind == worker.EventPollWait {
					signal(polled)
				}
			}})
			runCtx, stop := context.WithCancel(ctx)
			ran := make(chan error, 1)
			go func() { ran <- w.Run(runCtx) }()
			defer func() {
				stop()
				if err := <-ran; err != nil {
					t.Error(err)
				}
			}()
			<-polled // the queue was empty: the worker waits to poll again
			if _, err := q.Put(ctx, "late job", nil); err != nil {
				t.Fatal(err)
			}
			select {
			case got := <-handled:
				if got != "late job" {
					t.Fatalf("handled %q", got)
				}
			case <-time.After(10 * time.Second): // a hang guard only
				t.Fatal("the job put after the first poll was not handled: the worker waits on the mock clock")
			}
		})
	}
}
