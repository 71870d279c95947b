package azq

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/benbjohnson/clock"
)

// statsOf returns the figures QueueStats gives for the queue name.
func statsOf(t *testing.T, s *Service, name string) QueueStats {
	t.Helper()
	page, err := s.QueueStats(context.Background(), ListQueuesOptions{Prefix: name, MaxResults: 1})
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Queues) != 1 || page.Queues[0].Name != name {
		t.Fatalf("QueueStats(%q) = %+v", name, page)
	}
	return page.Queues[0]
}

// QueueStats reports the count and the head's insertion time as the
// queue's operations change them.
func TestQueueStats(t *testing.T) {
	ctx := context.Background()
	mock := clock.NewMock()
	t0 := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	mock.Set(t0)
	s := NewService(WithClock(mock))
	defer s.Close()
	q, _, err := s.CreateQueue(ctx, "orders", nil)
	if err != nil {
		t.Fatal(err)
	}
	check := func(step string, count int, head time.Time) {
		t.Helper()
		st := statsOf(t, s, "orders")
		if st.Count != count || !st.HeadInserted.Equal(head) {
			t.Fatalf("%s: count %d, head %v; want %d, %v", step, st.Count, st.HeadInserted, count, head)
		}
	}
	check("empty", 0, time.Time{})
	if _, err := q.Put(ctx, "delayed", &PutOptions{VisibilityTimeout: time.Hour}); err != nil {
		t.Fatal(err)
	}
	check("only a delayed message", 1, time.Time{})
	mock.Add(10 * time.Second)
	a, err := q.Put(ctx, "a", nil)
	if err != nil {
		t.Fatal(err)
	}
	mock.Add(10 * time.Second)
	if _, err := q.Put(ctx, "b", nil); err != nil {
		t.Fatal(err)
	}
	check("two visible", 3, t0.Add(10*time.Second))
	got, err := q.Get(ctx, 1, 30*time.Second)
	if err != nil || len(got) != 1 || got[0].ID != a.ID {
		t.Fatalf("Get: %v %v", got, err)
	}
	check("a leased", 3, t0.Add(20*time.Second))
	// a's lease lapses at 50 s; b, visible since 20 s, stays the head.
	mock.Add(40 * time.Second)
	check("a back in view after b", 3, t0.Add(20*time.Second))
	got, err = q.Get(ctx, 1, 30*time.Second)
	if err != nil || len(got) != 1 || got[0].Content != "b" {
		t.Fatalf("Get: %v %v", got, err)
	}
	check("b leased, a the head", 3, t0.Add(10*time.Second))
	if err := q.Delete(ctx, got[0].ID, got[0].PopReceipt); err != nil {
		t.Fatal(err)
	}
	check("b deleted", 2, t0.Add(10*time.Second))
	// The delayed message, put first, becomes visible at 1 h: a, visible
	// since 50 s, stays the head.
	mock.Add(time.Hour)
	check("the delayed one visible too", 2, t0.Add(10*time.Second))
	got, err = q.Get(ctx, 1, 30*time.Second)
	if err != nil || len(got) != 1 || got[0].ID != a.ID {
		t.Fatalf("Get: %v %v", got, err)
	}
	check("a leased again, the delayed one the head", 2, t0)
	if err := q.Clear(ctx); err != nil {
		t.Fatal(err)
	}
	check("cleared", 0, time.Time{})
}

// QueueStats pages as ListQueues does, and leaves deleted queues out.
func TestQueueStatsPages(t *testing.T) {
	ctx := context.Background()
	s := NewService()
	defer s.Close()
	for i := range 5 {
		if _, _, err := s.CreateQueue(ctx, fmt.Sprintf("queue%d", i), nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.DeleteQueue(ctx, "queue2"); err != nil {
		t.Fatal(err)
	}
	var names []string
	opts := ListQueuesOptions{MaxResults: 2}
	for {
		page, err := s.QueueStats(ctx, opts)
		if err != nil {
			t.Fatal(err)
		}
		lp, err := s.ListQueues(ctx, opts)
		if err != nil {
			t.Fatal(err)
		}
		if lp.NextMarker != page.NextMarker || len(lp.Queues) != len(page.Queues) {
			t.Fatalf("QueueStats %+v and ListQueues %+v page differently", page, lp)
		}
		for _, st := range page.Queues {
			names = append(names, st.Name)
		}
		if page.NextMarker == "" {
			break
		}
		opts.Marker = page.NextMarker
	}
	if fmt.Sprint(names) != "[queue0 queue1 queue3 queue4]" {
		t.Fatalf("queues %v", names)
	}
	if _, err := s.QueueStats(ctx, ListQueuesOptions{MaxResults: 5001}); !errors.Is(err, ErrOutOfRange) {
		t.Fatalf("MaxResults 5001: %v", err)
	}
	if _, err := s.QueueStats(ctx, ListQueuesOptions{Marker: "nonsense"}); !errors.Is(err, ErrInvalidMarker) {
		t.Fatalf("a made-up marker: %v", err)
	}
}

// Reading a queue's figures touches no message but the head: the
// nodes of every other message are taken away, and QueueStats still
// answers (a walk of the messages, as Inspect makes, would fault on
// them). This is what keeps a scrape of a deep queue from holding its
// lock for longer than a few field reads.
func TestQueueStatsTouchesOnlyTheHead(t *testing.T) {
	ctx := context.Background()
	mock := clock.NewMock()
	s := NewService(WithClock(mock))
	defer s.Close()
	q, _, err := s.CreateQueue(ctx, "deep", nil)
	if err != nil {
		t.Fatal(err)
	}
	const n = 4 * chunkSize
	for i := range n {
		opts := (*PutOptions)(nil)
		if i%3 == 1 {
			opts = &PutOptions{VisibilityTimeout: time.Duration(n-i) * time.Second} // some in the tree, some in a ring
		}
		if _, err := q.Put(ctx, "m", opts); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := q.Get(ctx, 32, time.Minute); err != nil { // some in the ring of leased messages
		t.Fatal(err)
	}
	mock.Add(time.Second)
	want := statsOf(t, s, "deep")
	q.mu.Lock()
	slot, _, _, ok := q.vis.front()
	if !ok || slot>>chunkShift != 0 {
		q.mu.Unlock()
		t.Fatalf("the head is in slot %d", slot)
	}
	// Every chunk but the head's goes; the queue is not used again.
	for i := 1; i < len(q.store.chunks); i++ {
		q.store.chunks[i] = nil
	}
	q.mu.Unlock()
	defer func() {
		if p := recover(); p != nil {
			t.Fatalf("QueueStats read messages beyond the head: %v", p)
		}
	}()
	if got := statsOf(t, s, "deep"); got != want || got.Count != n {
		t.Fatalf("QueueStats %+v, want %+v with count %d", got, want, n)
	}
}
