package worker

import (
	"context"
	"errors"
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

// A queue of a Service keeps ServicePoison even if it could also open
// queues: the Service is where Functions would create the poison queue.
func TestServiceTakesPrecedenceOverOpener(t *testing.T) {
	e := newEnv(t)
	type both struct {
		*azq.Queue // made by the Service: has Service()
		*openerQueue
	}
	other := azq.NewService(azq.WithClock(e.mock))
	src := both{Queue: e.q, openerQueue: &openerQueue{name: "jobs", svc: other}}
	e.put("hopeless")
	// Name is ambiguous in both, so the name comes from the options.
	w := New(src, func(ctx context.Context, d *Delivery) error { return errors.New("no") },
		Options{MaxDequeueCount: 1, QueueName: "jobs", OnEvent: e.rec.on})
	r := start(w)
	e.rec.waitEvents(t, EventPoisoned, 1)
	if err := r.stop(t); err != nil {
		t.Fatal(err)
	}
	onlyPoisoned(t, e.svc)
	if len(src.opened) != 0 {
		t.Fatalf("the opener was used: %v", src.opened)
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
