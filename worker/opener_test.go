package worker

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/azqlib/azq"
)

// openerQueue is a source without a Service that opens other queues
// through azq.QueueOpener, as a remote back end's queue does, in svc.
type openerQueue struct {
	*azq.Queue // made by azq.New: no Service
	name       string
	svc        *azq.Service
	opened     []string
	err        error
}

func (o *openerQueue) Name() string { return o.name }

func (o *openerQueue) OpenQueue(ctx context.Context, name string) (azq.MessageQueue, error) {
	o.opened = append(o.opened, name)
	if o.err != nil {
		return nil, o.err
	}
	q, _, err := o.svc.CreateQueue(ctx, name, nil)
	if err != nil {
		return nil, err
	}
	return q, nil
}

// A source that can open queues next to it gets its poison queue there by
// default, under the name PoisonQueueName gives.
func TestPoisonOpenedThroughQueueOpener(t *testing.T) {
	e := newEnv(t)
	src := &openerQueue{Queue: azq.New(azq.WithClock(e.mock)), name: "jobs", svc: e.svc}
	if _, err := src.Put(context.Background(), "hopeless", nil); err != nil {
		t.Fatal(err)
	}
	w := New(src, func(ctx context.Context, d *Delivery) error { return errors.New("no") },
		Options{MaxDequeueCount: 1, OnEvent: e.rec.on})
	r := start(w)
	ev := e.rec.waitEvents(t, EventPoisoned, 1)[0]
	if err := r.stop(t); err != nil {
		t.Fatal(err)
	}
	if len(src.opened) != 1 || src.opened[0] != "jobs-poison" {
		t.Fatalf("opened %v", src.opened)
	}
	rec, err := ParsePoisonRecord(onlyPoisoned(t, e.svc).Content)
	if err != nil || rec.Body != "hopeless" || rec.Queue != "jobs" || rec.MessageID != ev.MessageID {
		t.Fatalf("poison record %+v, %v", rec, err)
	}
	if n := count(t, src.Queue); n != 0 {
		t.Fatalf("%d messages left in the source", n)
	}
}

// When opening the poison queue fails, the message is abandoned with the
// opener's error, not lost.
func TestPoisonOpenerFails(t *testing.T) {
	e := newEnv(t)
	boom := errors.New("cannot open")
	src := &openerQueue{Queue: azq.New(azq.WithClock(e.mock)), name: "jobs", svc: e.svc, err: boom}
	if _, err := src.Put(context.Background(), "hopeless", nil); err != nil {
		t.Fatal(err)
	}
	w := New(src, func(ctx context.Context, d *Delivery) error { return errors.New("no") },
		Options{MaxDequeueCount: 1, OnEvent: e.rec.on})
	r := start(w)
	ev := e.rec.waitEvents(t, EventAbandoned, 1)[0]
	if err := r.stop(t); err != nil {
		t.Fatal(err)
	}
	if !errors.Is(ev.Err, boom) || count(t, src.Queue) != 1 {
		t.Fatalf("event %+v; %d messages", ev, count(t, src.Queue))
	}
}

// A queue of a Service opens its poison queue in that Service through the
// contract (azq.QueueOpener): a *Queue the Service made, a NamedQueue of
// it, and a type that embeds either, as the worker sees only what the
// contract shows. The poison queue is made on first use, and one that
// exists with metadata of its own is used as it is.
func TestServiceQueuePoisonedInItsService(t *testing.T) {
	type wrapped struct{ *azq.Queue }
	for _, tc := range []struct {
		name     string
		source   func(e *testEnv) Queue
		existing bool // "jobs-poison" exists before, with metadata
	}{
		{"Queue", func(e *testEnv) Queue { return e.q }, false},
		{"NamedQueue", func(e *testEnv) Queue { return e.svc.Named("jobs") }, false},
		{"embedded Queue", func(e *testEnv) Queue { return wrapped{e.q} }, false},
		{"existing poison queue", func(e *testEnv) Queue { return e.q }, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			if tc.existing {
				if _, _, err := e.svc.CreateQueue(context.Background(), "jobs-poison", map[string]string{"owner": "ops"}); err != nil {
					t.Fatal(err)
				}
			}
			orig := e.put("hopeless")
			w := New(tc.source(e), func(ctx context.Context, d *Delivery) error { return errors.New("no") },
				Options{MaxDequeueCount: 1, OnEvent: e.rec.on})
			r := start(w)
			e.rec.waitEvents(t, EventPoisoned, 1)
			if err := r.stop(t); err != nil {
				t.Fatal(err)
			}
			rec, err := ParsePoisonRecord(onlyPoisoned(t, e.svc).Content)
			if err != nil || rec.Content() != orig.Content || rec.MessageID != orig.ID || rec.Queue != "jobs" {
				t.Fatalf("poison record %+v (%v)", rec, err)
			}
			if n := count(t, e.q); n != 0 {
				t.Fatalf("%d messages left in the source", n)
			}
			if s := w.Stats(); s.Poisoned != 1 || s.Errors != 0 {
				t.Fatalf("stats %+v", s)
			}
			if tc.existing {
				if p, err := e.svc.Named("jobs-poison").Properties(context.Background()); err != nil || p.Metadata["owner"] != "ops" {
					t.Fatalf("the existing poison queue: %+v, %v", p, err)
				}
			}
		})
	}
}

// A queue made by azq.New opens no queues (its OpenQueue answers
// errors.ErrUnsupported): even when QueueName names it, it has no poison
// queue, and a message out of attempts is left invisible, abandoned
// without an error counted, as when Poison is nil.
func TestNoPoisonQueueForAQueueOfNoService(t *testing.T) {
	e := newEnv(t)
	q := azq.New(azq.WithClock(e.mock))
	if _, err := q.Put(context.Background(), "x", nil); err != nil {
		t.Fatal(err)
	}
	if _, err := q.OpenQueue(context.Background(), "jobs-poison"); !errors.Is(err, errors.ErrUnsupported) {
		t.Fatalf("OpenQueue of a queue made by New = %v, want errors.ErrUnsupported", err)
	}
	failWithoutPoisonQueue(t, e, q, Options{QueueName: "jobs"})
}

// An opener that answers errors.ErrUnsupported means no poison queue: it
// is asked once, and every message out of attempts after is abandoned as
// without one.
func TestPoisonOpenerUnsupported(t *testing.T) {
	e := newEnv(t)
	src := &openerQueue{Queue: azq.New(azq.WithClock(e.mock)), name: "jobs", svc: e.svc,
		err: fmt.Errorf("cannot: %w", errors.ErrUnsupported)}
	for _, m := range []string{"one", "two"} {
		if _, err := src.Put(context.Background(), m, nil); err != nil {
			t.Fatal(err)
		}
	}
	w := New(src, func(ctx context.Context, d *Delivery) error { return errors.New("no") },
		Options{MaxDequeueCount: 1, OnEvent: e.rec.on})
	r := start(w)
	evs := e.rec.waitEvents(t, EventAbandoned, 2)
	if err := r.stop(t); err != nil {
		t.Fatal(err)
	}
	for _, ev := range evs {
		if !errors.Is(ev.Err, errNoPoisonQueue) {
			t.Fatalf("event %+v", ev)
		}
	}
	if len(src.opened) != 1 || w.Stats().Errors != 0 || count(t, src.Queue) != 2 {
		t.Fatalf("opened %v, stats %+v, %d messages", src.opened, w.Stats(), count(t, src.Queue))
	}
}

// ServicePoison opens the poison queue through the service contract, on
// any back end: it creates it on first use, and uses one that exists
// already with metadata of its own as it is, where a second Create would
// answer QueueAlreadyExists.
func TestServicePoisonOnTheContract(t *testing.T) {
	ctx := context.Background()
	svc := azq.NewService()
	defer svc.Close()
	// Only the contract shows through the wrapper.
	open := ServicePoison(struct{ azq.QueueService }{svc})
	q, err := open(ctx, "fresh-poison")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := q.Put(ctx, "set aside", nil); err != nil {
		t.Fatal(err)
	}
	if n, err := svc.Named("fresh-poison").ApproximateCount(ctx); err != nil || n != 1 {
		t.Fatalf("the poison queue holds %d messages, %v", n, err)
	}
	if _, _, err := svc.CreateQueue(ctx, "kept-poison", map[string]string{"owner": "ops"}); err != nil {
		t.Fatal(err)
	}
	q, err = open(ctx, "kept-poison")
	if err != nil {
		t.Fatalf("opening a poison queue that has metadata: %v", err)
	}
	if _, err := q.Put(ctx, "set aside", nil); err != nil {
		t.Fatal(err)
	}
	if md, _ := svc.Named("kept-poison").Properties(ctx); md.Metadata["owner"] != "ops" || md.ApproximateMessagesCount != 1 {
		t.Fatalf("the existing poison queue: %+v", md)
	}
	if _, err := open(ctx, "Not_A_Name"); !errors.Is(err, azq.ErrInvalidQueueName) {
		t.Fatalf("opening an invalid name = %v", err)
	}
}
