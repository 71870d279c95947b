package azq_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/azqlib/azq"
	"github.com/benbjohnson/clock"
	"pgregory.net/rapid"
)

// Inspect is an action of TestModel's state machine (model_test.go): a
// snapshot must show exactly the model's live messages, oldest first, with
// the right invisible count and oldest insertion time, and must change
// nothing — the invariant Check and every later action would notice a
// receipt issued, a dequeue counted or a visibility moved.
func (s *queueModel) Inspect(t *rapid.T) {
	s.purge()
	max := rapid.SampledFrom([]int{-1, 0, 1, 3, 1000}).Draw(t, "max")
	snap, err := s.q.Inspect(s.ctx, max)
	if err != nil {
		t.Fatalf("Inspect(%d): %v", max, err)
	}
	now := s.clk.Now()
	if !snap.Time.Equal(now) {
		t.Fatalf("Inspect: Time %v, want the clock's %v", snap.Time, now)
	}
	invisible := 0
	var oldest, oldestVisible time.Time
	for i, m := range s.live {
		if !m.visible(now) {
			invisible++
		} else if oldestVisible.IsZero() || m.inserted.Before(oldestVisible) {
			oldestVisible = m.inserted
		}
		if i == 0 || m.inserted.Before(oldest) {
			oldest = m.inserted
		}
	}
	if snap.Count != len(s.live) || snap.Invisible != invisible || !snap.Oldest.Equal(oldest) || !snap.OldestVisible.Equal(oldestVisible) {
		t.Fatalf("Inspect: count %d, invisible %d, oldest %v, oldest visible %v; want %d, %d, %v, %v",
			snap.Count, snap.Invisible, snap.Oldest, snap.OldestVisible, len(s.live), invisible, oldest, oldestVisible)
	}
	want := len(s.live) // s.live is in insertion order
	if max >= 0 {
		want = min(want, max)
	}
	if len(snap.Messages) != want {
		t.Fatalf("Inspect(%d): %d messages, want %d", max, len(snap.Messages), want)
	}
	for i, got := range snap.Messages {
		sameMessage(t, "Inspect", got, s.live[i], false)
	}
}

func TestInspect(t *testing.T) {
	ctx := context.Background()
	clk := clock.NewMock() // starts at the Unix epoch, a zero UnixNano
	q := azq.New(azq.WithClock(clk))

	snap, err := q.Inspect(ctx, -1)
	if err != nil || snap.Count != 0 || !snap.Oldest.IsZero() || snap.Messages != nil {
		t.Fatalf("empty queue: %+v %v", snap, err)
	}

	first, _ := q.Put(ctx, "first", nil)
	clk.Add(time.Second)
	if _, err := q.Put(ctx, "delayed", &azq.PutOptions{VisibilityTimeout: time.Minute}); err != nil {
		t.Fatal(err)
	}
	clk.Add(time.Second)
	if _, err := q.Put(ctx, "short-lived", &azq.PutOptions{TimeToLive: 10 * time.Second}); err != nil {
		t.Fatal(err)
	}
	leased, err := q.Get(ctx, 1, time.Hour)
	if err != nil || len(leased) != 1 || leased[0].ID != first.ID {
		t.Fatalf("get: %v %v", leased, err)
	}

	snap, err = q.Inspect(ctx, -1)
	if err != nil {
		t.Fatal(err)
	}
	if snap.Count != 3 || snap.Invisible != 2 || !snap.Oldest.Equal(time.Unix(0, 0)) || !snap.OldestVisible.Equal(time.Unix(2, 0)) ||
		!snap.Time.Equal(clk.Now()) {
		t.Fatalf("snapshot %+v", snap)
	}
	var got []string
	for _, m := range snap.Messages {
		got = append(got, fmt.Sprintf("%s/%d/%v", m.Content, m.DequeueCount, m.PopReceipt.IsZero()))
	}
	if fmt.Sprint(got) != "[first/1/true delayed/0/true short-lived/0/true]" {
		t.Fatalf("messages %v", got)
	}
	if !snap.Messages[0].NextVisibleTime.Equal(clk.Now().Add(time.Hour)) {
		t.Fatalf("leased message visible at %v", snap.Messages[0].NextVisibleTime)
	}

	// Looking changed nothing: the lease's receipt still deletes, and
	// the counts are as before.
	for _, max := range []int{0, 1, 2} {
		s, err := q.Inspect(ctx, max)
		if err != nil || s.Count != 3 || len(s.Messages) != max {
			t.Fatalf("Inspect(%d): %d messages of %d, %v", max, len(s.Messages), s.Count, err)
		}
	}
	if err := q.Delete(ctx, leased[0].ID, leased[0].PopReceipt); err != nil {
		t.Fatalf("the lease's receipt after Inspect: %v", err)
	}

	// Expired messages are gone from the snapshot.
	clk.Add(10 * time.Second)
	snap, err = q.Inspect(ctx, -1)
	if err != nil || snap.Count != 1 || snap.Messages[0].Content != "delayed" || !snap.Oldest.Equal(time.Unix(1, 0)) {
		t.Fatalf("after expiry: %+v %v", snap, err)
	}

	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := q.Inspect(cctx, 1); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled: %v", err)
	}
	q.Close()
	if _, err := q.Inspect(ctx, 1); !errors.Is(err, azq.ErrQueueNotFound) {
		t.Fatalf("closed: %v", err)
	}
}

// A tool lists what a queue holds without taking anything from it.
func ExampleQueue_Inspect() {
	ctx := context.Background()
	clk := clock.NewMock()
	q := azq.New(azq.WithClock(clk))
	q.Put(ctx, "a", nil)
	q.Put(ctx, "b", &azq.PutOptions{VisibilityTimeout: time.Minute})
	clk.Add(30 * time.Second)

	snap, _ := q.Inspect(ctx, 10)
	fmt.Printf("%d messages, %d invisible, the oldest %v old\n", snap.Count, snap.Invisible, snap.Time.Sub(snap.Oldest))
	for _, m := range snap.Messages {
		fmt.Printf("%s: visible in %v\n", m.Content, max(m.NextVisibleTime.Sub(snap.Time), 0))
	}
	// Output:
	// 2 messages, 1 invisible, the oldest 30s old
	// a: visible in 0s
	// b: visible in 30s
}
