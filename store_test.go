package azq

import (
	"errors"
	"slices"
	"testing"
	"time"
)

// storeSlots is how many node slots q's store holds, free or not.
func storeSlots(q *Queue) int {
	q.mu.Lock()
	defer q.mu.Unlock()
	n := 0
	for _, c := range q.store.chunks {
		n += len(c)
	}
	return n
}

// TestStoreGrowsWithWhatItHolds: the slot store starts small, doubles up
// to a full chunk, then adds fixed chunks, and every message survives the
// moves of the first chunk with its receipt intact.
func TestStoreGrowsWithWhatItHolds(t *testing.T) {
	q, _ := newMockQueue(t)
	if n := storeSlots(q); n != 0 {
		t.Fatalf("a new queue holds %d slots", n)
	}
	first := mustPut(t, q, "first", nil)
	if n := storeSlots(q); n != firstChunk {
		t.Fatalf("one message: %d slots, want %d", n, firstChunk)
	}
	var puts []Message
	for i := 0; i < chunkSize+100; i++ {
		puts = append(puts, mustPut(t, q, "m", nil))
	}
	if n := storeSlots(q); n != 2*chunkSize {
		t.Fatalf("%d messages: %d slots, want %d", chunkSize+101, n, 2*chunkSize)
	}
	// The receipt Put returned before the first chunk moved still works.
	if _, err := q.Update(ctx, first.ID, first.PopReceipt, 0, ptrString("moved")); err != nil {
		t.Fatalf("Update with a receipt from before the store grew: %v", err)
	}
	for _, m := range puts {
		if err := q.Delete(ctx, m.ID, m.PopReceipt); err != nil {
			t.Fatal(err)
		}
	}
	got := mustGet(t, q, 32, time.Second)
	if len(got) != 1 || got[0].Content != "moved" {
		t.Fatalf("after the deletes: %+v", got)
	}
}

func ptrString(s string) *string { return &s }

// TestEmptiedQueueGivesMemoryBack: when the last message leaves, by
// Delete or by expiry, a store that grew gives its memory back, stale
// receipts stay dead although slots are reused, and the queue works on.
func TestEmptiedQueueGivesMemoryBack(t *testing.T) {
	q, clk := newMockQueue(t)
	var ms []Message
	for i := 0; i < 1000; i++ {
		ms = append(ms, mustPut(t, q, "m", nil))
	}
	// Two Gets, so that the ring of hidden messages outgrows what an
	// emptied queue keeps.
	got := append(mustGet(t, q, 32, time.Minute), mustGet(t, q, 32, time.Minute)...)
	for _, m := range ms {
		receipt := m.PopReceipt
		for _, g := range got {
			if g.ID == m.ID {
				receipt = g.PopReceipt
			}
		}
		if err := q.Delete(ctx, m.ID, receipt); err != nil {
			t.Fatal(err)
		}
	}
	if n := storeSlots(q); n != 0 {
		t.Fatalf("an emptied queue keeps %d slots", n)
	}
	q.mu.Lock()
	var rings [len(q.vis.rings)]int
	for i := range q.vis.rings {
		rings[i] = len(q.vis.rings[i].entries)
	}
	heap := cap(q.expiry.items)
	q.mu.Unlock()
	if slices.Max(rings[:]) > keepRingEntries || heap > keepExpiryEntries {
		t.Fatalf("an emptied queue keeps %v ring entries and %d expiry entries", rings, heap)
	}
	// Slot 0 is reused; the old receipts of slot 0 stay dead.
	fresh := mustPut(t, q, "fresh", nil)
	for _, m := range append(ms[:1], got[0]) {
		if err := q.Delete(ctx, m.ID, m.PopReceipt); !errors.Is(err, ErrMessageNotFound) {
			t.Fatalf("a receipt from before the queue emptied: %v", err)
		}
	}
	if err := q.Delete(ctx, fresh.ID, fresh.PopReceipt); err != nil {
		t.Fatal(err)
	}

	// Expiry empties the queue too.
	for i := 0; i < 100; i++ {
		mustPut(t, q, "short", &PutOptions{TimeToLive: time.Minute})
	}
	clk.Add(2 * time.Minute)
	if n, err := q.ApproximateCount(ctx); err != nil || n != 0 {
		t.Fatalf("count %d, %v", n, err)
	}
	if n := storeSlots(q); n != 0 {
		t.Fatalf("a queue emptied by expiry keeps %d slots", n)
	}
	mustPut(t, q, "after", nil)
	if got := mustGet(t, q, 32, time.Second); len(got) != 1 || got[0].Content != "after" {
		t.Fatalf("after expiry emptied the queue: %+v", got)
	}

	// A queue that only ever held a few messages keeps its small store.
	small, _ := newMockQueue(t)
	for round := 0; round < 3; round++ {
		var batch []Message
		for i := 0; i < keepSlots; i++ {
			batch = append(batch, mustPut(t, small, "b", nil))
		}
		for _, m := range batch {
			if err := small.Delete(ctx, m.ID, m.PopReceipt); err != nil {
				t.Fatal(err)
			}
		}
		if n := storeSlots(small); n != keepSlots {
			t.Fatalf("round %d: a queue cycling %d messages keeps %d slots, want %d", round, keepSlots, n, keepSlots)
		}
	}
}
