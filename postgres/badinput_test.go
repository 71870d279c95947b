package postgres_test

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/azqlib/azq"
	"github.com/azqlib/azq/postgres"
	"github.com/benbjohnson/clock"
)

// sentinels are the errors a queue's answer is matched against.
var sentinels = []error{
	azq.ErrMessageNotFound, azq.ErrQueueNotFound, azq.ErrQueueAlreadyExists, azq.ErrMessageTooLarge,
	azq.ErrInvalidArgument, azq.ErrOutOfRange, azq.ErrInvalidPopReceipt, azq.ErrInvalidQueueName,
	azq.ErrInvalidMetadata, azq.ErrInvalidMarker, azq.ErrInvalidAccessPolicy,
}

// sameError checks that got is the error want is: both nil, or both
// *azq.Error with the same code, status and details, matching the same
// sentinels.
func sameError(t *testing.T, what string, got, want error) {
	t.Helper()
	if (got == nil) != (want == nil) {
		t.Fatalf("%s: got %v, in memory %v", what, got, want)
	}
	if got == nil {
		return
	}
	var g, w *azq.Error
	if !errors.As(got, &g) || !errors.As(want, &w) {
		t.Fatalf("%s: got %v (%T), in memory %v (%T); want *azq.Error", what, got, got, want, want)
	}
	if g.Code != w.Code || g.StatusCode != w.StatusCode || !reflect.DeepEqual(g.Details, w.Details) {
		t.Fatalf("%s: got %s %d %v, in memory %s %d %v", what, g.Code, g.StatusCode, g.Details, w.Code, w.StatusCode, w.Details)
	}
	for _, s := range sentinels {
		if errors.Is(got, s) != errors.Is(want, s) {
			t.Fatalf("%s: errors.Is(%v, %v) = %v, in memory %v", what, got, s, errors.Is(got, s), errors.Is(want, s))
		}
	}
}

// rows returns every column of the queue's messages, for a test that
// nothing changed.
func rows(t *testing.T, s *postgres.Service) []string {
	t.Helper()
	rs, err := s.Pool().Query(context.Background(),
		"SELECT row(m.*)::text FROM "+s.Schema()+".messages m ORDER BY seq")
	if err != nil {
		t.Fatal(err)
	}
	defer rs.Close()
	var out []string
	for rs.Next() {
		var r string
		if err := rs.Scan(&r); err != nil {
			t.Fatal(err)
		}
		out = append(out, r)
	}
	if err := rs.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// Bad input gets the in-memory queue's error, code, status and details,
// and changes no row; stale, forged and foreign receipts get
// ErrMessageNotFound, as in memory, and change nothing either.
func TestBadInputAsInMemory(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, mock := openMock(t)
	memClock := clock.NewMock()
	memClock.Set(mock.Now())
	mem, _, err := azq.NewService(azq.WithClock(memClock)).CreateQueue(ctx, "bad-input", nil)
	if err != nil {
		t.Fatal(err)
	}
	pg, _, err := s.CreateQueue(ctx, "bad-input", nil)
	if err != nil {
		t.Fatal(err)
	}

	// In each queue: a message got once (its Put receipt stale), another
	// only put, and one deleted.
	type state struct {
		got, put, deleted azq.Message
		putReceipt        azq.PopReceipt
	}
	setUp := func(q azq.MessageQueue) state {
		var st state
		m, err := q.Put(ctx, "got", nil)
		if err != nil {
			t.Fatal(err)
		}
		st.putReceipt = m.PopReceipt
		g, err := q.Get(ctx, 1, time.Minute)
		if err != nil || len(g) != 1 {
			t.Fatal(g, err)
		}
		st.got = g[0]
		if st.put, err = q.Put(ctx, "put", &azq.PutOptions{VisibilityTimeout: time.Hour}); err != nil {
			t.Fatal(err)
		}
		if st.deleted, err = q.Put(ctx, "deleted", &azq.PutOptions{VisibilityTimeout: time.Hour}); err != nil {
			t.Fatal(err)
		}
		if err := q.Delete(ctx, st.deleted.ID, st.deleted.PopReceipt); err != nil {
			t.Fatal(err)
		}
		return st
	}
	ms, ps := setUp(mem), setUp(pg)

	week := 7 * 24 * time.Hour
	big := strings.Repeat("x", 64<<10+1)
	forged, err := azq.ParsePopReceipt("AQAAAAEAAAABAAAAAAAAAAE=")
	if err != nil {
		t.Fatal(err)
	}
	unknown, _ := azq.ParseMessageID("0f8fad5b-d9cb-469f-a165-70867728950e")
	cases := []struct {
		name string
		op   func(q azq.MessageQueue, st state) error
	}{
		{"Put too large", func(q azq.MessageQueue, _ state) error { _, err := q.Put(ctx, big, nil); return err }},
		{"Put visibility -1s", func(q azq.MessageQueue, _ state) error {
			_, err := q.Put(ctx, "x", &azq.PutOptions{VisibilityTimeout: -time.Second})
			return err
		}},
		{"Put visibility over a week", func(q azq.MessageQueue, _ state) error {
			_, err := q.Put(ctx, "x", &azq.PutOptions{VisibilityTimeout: week + time.Second})
			return err
		}},
		{"Put visibility = ttl", func(q azq.MessageQueue, _ state) error {
			_, err := q.Put(ctx, "x", &azq.PutOptions{VisibilityTimeout: time.Minute, TimeToLive: time.Minute})
			return err
		}},
		{"Put ttl -2s", func(q azq.MessageQueue, _ state) error {
			_, err := q.Put(ctx, "x", &azq.PutOptions{TimeToLive: -2 * time.Second})
			return err
		}},
		{"Get 0", func(q azq.MessageQueue, _ state) error { _, err := q.Get(ctx, 0, time.Minute); return err }},
		{"Get 33", func(q azq.MessageQueue, _ state) error { _, err := q.Get(ctx, 33, time.Minute); return err }},
		{"Get visibility 0", func(q azq.MessageQueue, _ state) error { _, err := q.Get(ctx, 1, 0); return err }},
		{"Get visibility over a week", func(q azq.MessageQueue, _ state) error { _, err := q.Get(ctx, 1, week+time.Second); return err }},
		{"Peek 0", func(q azq.MessageQueue, _ state) error { _, err := q.Peek(ctx, 0); return err }},
		{"Peek 33", func(q azq.MessageQueue, _ state) error { _, err := q.Peek(ctx, 33); return err }},
		{"Update visibility -1s", func(q azq.MessageQueue, st state) error {
			_, err := q.Update(ctx, st.got.ID, st.got.PopReceipt, -time.Second, nil)
			return err
		}},
		{"Update visibility over a week", func(q azq.MessageQueue, st state) error {
			_, err := q.Update(ctx, st.got.ID, st.got.PopReceipt, week+time.Second, nil)
			return err
		}},
		{"Update too large", func(q azq.MessageQueue, st state) error {
			_, err := q.Update(ctx, st.got.ID, st.got.PopReceipt, 0, &big)
			return err
		}},
		{"Update without receipt", func(q azq.MessageQueue, st state) error {
			_, err := q.Update(ctx, st.got.ID, azq.PopReceipt{}, 0, nil)
			return err
		}},
		{"Update with a stale receipt", func(q azq.MessageQueue, st state) error {
			_, err := q.Update(ctx, st.got.ID, st.putReceipt, 0, nil)
			return err
		}},
		{"Update with a forged receipt", func(q azq.MessageQueue, st state) error {
			_, err := q.Update(ctx, st.got.ID, forged, 0, nil)
			return err
		}},
		{"Update with a remote receipt", func(q azq.MessageQueue, st state) error {
			_, err := q.Update(ctx, st.got.ID, azq.RemotePopReceipt("AgAAAAEAAAApAAAAWBVjVibWzAE="), 0, nil)
			return err
		}},
		{"Update with another message's receipt", func(q azq.MessageQueue, st state) error {
			_, err := q.Update(ctx, st.got.ID, st.put.PopReceipt, 0, nil)
			return err
		}},
		{"Update of an unknown message", func(q azq.MessageQueue, st state) error {
			_, err := q.Update(ctx, unknown, st.got.PopReceipt, 0, nil)
			return err
		}},
		{"Update of a deleted message", func(q azq.MessageQueue, st state) error {
			_, err := q.Update(ctx, st.deleted.ID, st.deleted.PopReceipt, 0, nil)
			return err
		}},
		{"Delete without receipt", func(q azq.MessageQueue, st state) error {
			return q.Delete(ctx, st.got.ID, azq.PopReceipt{})
		}},
		{"Delete with a stale receipt", func(q azq.MessageQueue, st state) error {
			return q.Delete(ctx, st.got.ID, st.putReceipt)
		}},
		{"Delete with a forged receipt", func(q azq.MessageQueue, st state) error {
			return q.Delete(ctx, st.got.ID, forged)
		}},
		{"Delete with a remote receipt", func(q azq.MessageQueue, st state) error {
			return q.Delete(ctx, st.got.ID, azq.RemotePopReceipt("AgAAAAEAAAApAAAAWBVjVibWzAE="))
		}},
		{"Delete with another message's receipt", func(q azq.MessageQueue, st state) error {
			return q.Delete(ctx, st.put.ID, st.got.PopReceipt)
		}},
		{"Delete of an unknown message", func(q azq.MessageQueue, st state) error {
			return q.Delete(ctx, unknown, st.got.PopReceipt)
		}},
		{"Delete of a deleted message", func(q azq.MessageQueue, st state) error {
			return q.Delete(ctx, st.deleted.ID, st.deleted.PopReceipt)
		}},
	}
	before := rows(t, s)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			want := c.op(mem, ms)
			if want == nil {
				t.Fatal("the in-memory queue accepted it; the case is wrong")
			}
			got := c.op(pg, ps)
			sameError(t, c.name, got, want)
			if after := rows(t, s); !reflect.DeepEqual(after, before) {
				t.Fatalf("the rows changed:\n%v\nto\n%v", before, after)
			}
		})
	}
	// The receipts refused above still work.
	for _, q := range []struct {
		q  azq.MessageQueue
		st state
	}{{mem, ms}, {pg, ps}} {
		if _, err := q.q.Update(ctx, q.st.put.ID, q.st.put.PopReceipt, 0, nil); err != nil {
			t.Fatal(err)
		}
		if err := q.q.Delete(ctx, q.st.got.ID, q.st.got.PopReceipt); err != nil {
			t.Fatal(err)
		}
	}
}

// Names, metadata, access policies and list options that Azure refuses
// get the in-memory Service's errors, and create or change nothing.
func TestBadServiceInputAsInMemory(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, _ := openMock(t)
	mem := azq.NewService()
	for _, svc := range []azq.QueueService{mem, s} {
		r, err := svc.Ref("existing")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := r.Create(ctx, map[string]string{"a": "1"}); err != nil {
			t.Fatal(err)
		}
	}
	long := strings.Repeat("v", 8<<10)
	cases := []struct {
		name string
		op   func(svc azq.QueueService) error
	}{
		{"name too short", func(svc azq.QueueService) error { _, err := svc.Ref("ab"); return err }},
		{"name too long", func(svc azq.QueueService) error { _, err := svc.Ref(strings.Repeat("a", 64)); return err }},
		{"name with capitals", func(svc azq.QueueService) error { _, err := svc.Ref("Abc"); return err }},
		{"name with two hyphens", func(svc azq.QueueService) error { _, err := svc.Ref("a--b"); return err }},
		{"name ending in a hyphen", func(svc azq.QueueService) error { _, err := svc.Ref("abc-"); return err }},
		{"create with a bad metadata name", func(svc azq.QueueService) error {
			r, _ := svc.Ref("new-queue")
			_, err := r.Create(ctx, map[string]string{"1a": "x"})
			return err
		}},
		{"create with an empty metadata name", func(svc azq.QueueService) error {
			r, _ := svc.Ref("new-queue")
			_, err := r.Create(ctx, map[string]string{"": "x"})
			return err
		}},
		{"create with too much metadata", func(svc azq.QueueService) error {
			r, _ := svc.Ref("new-queue")
			_, err := r.Create(ctx, map[string]string{"a": long})
			return err
		}},
		{"create with names differing in case", func(svc azq.QueueService) error {
			r, _ := svc.Ref("new-queue")
			_, err := r.Create(ctx, map[string]string{"ab": "1", "AB": "2"})
			// Which of the two names the detail gives follows the map's
			// order, in memory as here.
			var ae *azq.Error
			if errors.As(err, &ae) {
				ae.Details = nil
			}
			return err
		}},
		{"create of an existing queue with other metadata", func(svc azq.QueueService) error {
			r, _ := svc.Ref("existing")
			_, err := r.Create(ctx, map[string]string{"a": "2"})
			return err
		}},
		{"set bad metadata", func(svc azq.QueueService) error {
			r, _ := svc.Ref("existing")
			return r.SetMetadata(ctx, map[string]string{"a-b": "x"})
		}},
		{"six access policies", func(svc azq.QueueService) error {
			r, _ := svc.Ref("existing")
			return r.SetAccessPolicies(ctx, []azq.AccessPolicy{{ID: "1"}, {ID: "2"}, {ID: "3"}, {ID: "4"}, {ID: "5"}, {ID: "6"}})
		}},
		{"an access policy with a bad permission", func(svc azq.QueueService) error {
			r, _ := svc.Ref("existing")
			return r.SetAccessPolicies(ctx, []azq.AccessPolicy{{ID: "1", Permission: "rwd"}})
		}},
		{"list 0 per page", func(svc azq.QueueService) error {
			_, err := svc.ListQueues(ctx, azq.ListQueuesOptions{MaxResults: -1})
			return err
		}},
		{"list 5001 per page", func(svc azq.QueueService) error {
			_, err := svc.ListQueues(ctx, azq.ListQueuesOptions{MaxResults: 5001})
			return err
		}},
		{"list from a made-up marker", func(svc azq.QueueService) error {
			_, err := svc.ListQueues(ctx, azq.ListQueuesOptions{Marker: "not-a-marker"})
			return err
		}},
		{"delete a queue that does not exist", func(svc azq.QueueService) error { return svc.DeleteQueue(ctx, "no-such-queue") }},
		{"operate on a queue that does not exist", func(svc azq.QueueService) error {
			r, _ := svc.Ref("no-such-queue")
			_, err := r.Properties(ctx)
			return err
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			want := c.op(mem)
			if want == nil {
				t.Fatal("the in-memory Service accepted it; the case is wrong")
			}
			sameError(t, c.name, c.op(s), want)
			page, err := s.ListQueues(ctx, azq.ListQueuesOptions{IncludeMetadata: true})
			if err != nil {
				t.Fatal(err)
			}
			if want := []azq.QueueItem{{Name: "existing", Metadata: map[string]string{"a": "1"}}}; !reflect.DeepEqual(page.Queues, want) {
				t.Fatalf("queues %+v, want %+v", page.Queues, want)
			}
			r, _ := s.Ref("existing")
			ps, err := r.AccessPolicies(ctx)
			if err != nil || ps != nil {
				t.Fatalf("access policies %+v, %v", ps, err)
			}
		})
	}
}
