package postgres_test

import (
	"context"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/azqlib/azq"
	"github.com/azqlib/azq/internal/longrun"
	"github.com/benbjohnson/clock"
	"pgregory.net/rapid"
)

// modelRun drives a PostgreSQL queue and an in-memory *azq.Queue, the
// model, through the same random operations on two mock clocks that move
// together, and checks that they answer alike: the same messages in the
// same order with the same times, dequeue counts and content, the same
// errors, the same counts. Message IDs and receipts differ between the
// two, so messages are known by the order they were put in.
type modelRun struct {
	t        *rapid.T
	ctx      context.Context
	mem, pg  azq.MessageQueue
	memClock *clock.Mock
	pgClock  *clock.Mock
	ids      [][2]azq.MessageID    // by put order: in memory, on PostgreSQL
	receipts [][2]azq.PopReceipt   // the latest receipt of each, or a stale one
	stale    [][2]azq.PopReceipt   // an earlier receipt of each, if any
	byID     map[azq.MessageID]int // put order, by either ID
}

func (r *modelRun) index(m azq.Message) int {
	i, ok := r.byID[m.ID]
	if !ok {
		r.t.Fatalf("a message nobody put: %v", m.ID)
	}
	return i
}

// sameMessages checks that the two sides returned the same messages.
func (r *modelRun) sameMessages(what string, mem, pg []azq.Message) {
	r.t.Helper()
	if len(mem) != len(pg) {
		r.t.Fatalf("%s: %d messages, in memory %d", what, len(pg), len(mem))
	}
	for i := range mem {
		a, b := mem[i], pg[i]
		if r.index(a) != r.index(b) {
			r.t.Fatalf("%s: message %d is #%d, in memory #%d", what, i, r.index(b), r.index(a))
		}
		a.ID, b.ID = azq.MessageID{}, azq.MessageID{}
		a.PopReceipt, b.PopReceipt = azq.PopReceipt{}, azq.PopReceipt{}
		if !reflect.DeepEqual(a, b) {
			r.t.Fatalf("%s: message %d is %+v, in memory %+v", what, i, b, a)
		}
	}
}

func (r *modelRun) sameErr(what string, mem, pg error) {
	r.t.Helper()
	if (mem == nil) != (pg == nil) || mem != nil && fmt.Sprint(code(mem)) != fmt.Sprint(code(pg)) {
		r.t.Fatalf("%s: %v, in memory %v", what, pg, mem)
	}
}

func code(err error) azq.ErrorCode {
	if e, ok := err.(*azq.Error); ok {
		return e.Code
	}
	return "not an *azq.Error: " + azq.ErrorCode(err.Error())
}

// receipt records what Put, Get or Update returned for message i.
func (r *modelRun) receipt(i int, mem, pg azq.PopReceipt) {
	if !r.receipts[i][0].IsZero() {
		r.stale[i] = r.receipts[i]
	}
	r.receipts[i] = [2]azq.PopReceipt{mem, pg}
}

var durations = []time.Duration{0, time.Second, 2 * time.Second, 30 * time.Second, time.Hour}

func (r *modelRun) put(t *rapid.T) {
	content := rapid.StringMatching(`[a-z]{0,8}`).Draw(t, "content")
	opts := &azq.PutOptions{
		VisibilityTimeout: rapid.SampledFrom(durations).Draw(t, "visibility"),
		TimeToLive:        rapid.SampledFrom([]time.Duration{0, 3 * time.Second, time.Minute, azq.NeverExpires, -2 * time.Second}).Draw(t, "ttl"),
	}
	a, errA := r.mem.Put(r.ctx, content, opts)
	b, errB := r.pg.Put(r.ctx, content, opts)
	r.sameErr("Put", errA, errB)
	if errA != nil {
		return
	}
	i := len(r.ids)
	r.ids = append(r.ids, [2]azq.MessageID{a.ID, b.ID})
	r.receipts = append(r.receipts, [2]azq.PopReceipt{})
	r.stale = append(r.stale, [2]azq.PopReceipt{})
	r.byID[a.ID], r.byID[b.ID] = i, i
	r.receipt(i, a.PopReceipt, b.PopReceipt)
	r.sameMessages("Put", []azq.Message{a}, []azq.Message{b})
}

func (r *modelRun) get(t *rapid.T) {
	n := rapid.IntRange(1, 5).Draw(t, "n")
	vis := rapid.SampledFrom(durations[1:]).Draw(t, "visibility")
	a, errA := r.mem.Get(r.ctx, n, vis)
	b, errB := r.pg.Get(r.ctx, n, vis)
	r.sameErr("Get", errA, errB)
	r.sameMessages("Get", a, b)
	for k := range a {
		r.receipt(r.index(a[k]), a[k].PopReceipt, b[k].PopReceipt)
	}
}

func (r *modelRun) peek(t *rapid.T) {
	n := rapid.IntRange(1, 32).Draw(t, "n")
	a, errA := r.mem.Peek(r.ctx, n)
	b, errB := r.pg.Peek(r.ctx, n)
	r.sameErr("Peek", errA, errB)
	r.sameMessages("Peek", a, b)
}

// pick draws a message put so far and which of its receipts to use.
func (r *modelRun) pick(t *rapid.T) (int, [2]azq.PopReceipt, bool) {
	if len(r.ids) == 0 {
		return 0, [2]azq.PopReceipt{}, false
	}
	i := rapid.IntRange(0, len(r.ids)-1).Draw(t, "message")
	rc := r.receipts[i]
	if rapid.Bool().Draw(t, "stale") && !r.stale[i][0].IsZero() {
		rc = r.stale[i]
	}
	return i, rc, true
}

func (r *modelRun) update(t *rapid.T) {
	i, rc, ok := r.pick(t)
	if !ok {
		t.Skip("nothing put yet")
	}
	vis := rapid.SampledFrom(durations).Draw(t, "visibility")
	var content *string
	if rapid.Bool().Draw(t, "new content") {
		c := rapid.StringMatching(`[A-Z]{0,4}`).Draw(t, "content")
		content = &c
	}
	a, errA := r.mem.Update(r.ctx, r.ids[i][0], rc[0], vis, content)
	b, errB := r.pg.Update(r.ctx, r.ids[i][1], rc[1], vis, content)
	r.sameErr("Update", errA, errB)
	if errA != nil {
		return
	}
	if !a.NextVisibleTime.Equal(b.NextVisibleTime) {
		r.t.Fatalf("Update: next visible %v, in memory %v", b.NextVisibleTime, a.NextVisibleTime)
	}
	r.receipt(i, a.PopReceipt, b.PopReceipt)
}

func (r *modelRun) delete(t *rapid.T) {
	i, rc, ok := r.pick(t)
	if !ok {
		t.Skip("nothing put yet")
	}
	r.sameErr("Delete", r.mem.Delete(r.ctx, r.ids[i][0], rc[0]), r.pg.Delete(r.ctx, r.ids[i][1], rc[1]))
}

func (r *modelRun) clear(t *rapid.T) {
	r.sameErr("Clear", r.mem.Clear(r.ctx), r.pg.Clear(r.ctx))
}

func (r *modelRun) advance(t *rapid.T) {
	d := rapid.SampledFrom([]time.Duration{time.Nanosecond, time.Second, 2 * time.Second, time.Minute, time.Hour}).Draw(t, "advance")
	r.memClock.Add(d)
	r.pgClock.Add(d)
}

// check runs after every operation: the counts agree.
func (r *modelRun) check(t *rapid.T) {
	a, errA := r.mem.ApproximateCount(r.ctx)
	b, errB := r.pg.ApproximateCount(r.ctx)
	r.sameErr("ApproximateCount", errA, errB)
	if a != b {
		t.Fatalf("ApproximateCount %d, in memory %d", b, a)
	}
}

func runModel(t *testing.T) {
	ctx := context.Background()
	s, pgClock := openMock(t)
	rapid.Check(t, func(t *rapid.T) {
		memClock := clock.NewMock()
		memClock.Set(pgClock.Now())
		mem := azq.New(azq.WithClock(memClock))
		pg, _, err := s.CreateQueue(ctx, fmt.Sprintf("model-%d", queueNumber.Add(1)), nil)
		if err != nil {
			t.Fatal(err)
		}
		defer s.DeleteQueue(ctx, pg.Name())
		r := &modelRun{t: t, ctx: ctx, mem: mem, pg: pg, memClock: memClock, pgClock: pgClock, byID: map[azq.MessageID]int{}}
		t.Repeat(map[string]func(*rapid.T){
			"put":     r.put,
			"get":     r.get,
			"peek":    r.peek,
			"update":  r.update,
			"delete":  r.delete,
			"clear":   r.clear,
			"advance": r.advance,
			"":        r.check,
		})
	})
}

// TestModel checks the PostgreSQL queue against the in-memory one, a
// short run by default.
func TestModel(t *testing.T) {
	t.Parallel()
	runModel(t)
}

// TestModelLong is TestModel with many more runs: a long run.
func TestModelLong(t *testing.T) {
	longrun.Skip(t)
	t.Parallel()
	for i := 0; i < 20; i++ {
		runModel(t)
	}
}
