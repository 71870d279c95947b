package azq

import (
	"context"
	"slices"
	"time"
)

// Snapshot is a read-only picture of a queue at one instant, for tools that
// show what a queue holds, such as azqd's web UI. Unlike Peek it includes
// invisible messages, and like Peek it changes nothing.
type Snapshot struct {
	// Time is the queue clock's time when the snapshot was taken; the
	// counts and the messages' states are as of then.
	Time time.Time
	// Count is the number of messages in the queue, visible or not
	// (ApproximateCount's figure).
	Count int
	// Invisible is how many of them are not visible at Time: leased by
	// Get, delayed by Put, or hidden by Update.
	Invisible int
	// Oldest is the insertion time of the oldest message; zero when the
	// queue is empty.
	Oldest time.Time
	// OldestVisible is the insertion time of the oldest visible message;
	// zero when none is visible.
	OldestVisible time.Time
	// Messages holds the oldest messages, up to the number asked for, in
	// insertion order. Their PopReceipt is zero: a snapshot hands out no
	// receipts.
	Messages []Message
}

// Inspect returns a Snapshot of the queue holding up to max of its oldest
// messages (none if max is 0, all if max is negative). It changes nothing:
// no receipt is issued and no message's visibility or DequeueCount moves.
// It costs time in proportion to the number of messages in the queue, with
// the queue locked, so it is meant for looking, not for a hot path.
func (q *Queue) Inspect(ctx context.Context, max int) (Snapshot, error) {
	now := q.now()
	if err := q.lock(ctx, now); err != nil {
		return Snapshot{}, err
	}
	defer q.mu.Unlock()
	s := Snapshot{Time: fromNanos(now), Count: q.count}
	type ref struct {
		seq  uint64
		slot uint32
	}
	var refs []ref
	if max != 0 {
		refs = make([]ref, 0, q.count)
	}
	var (
		oldest    int64 // the earliest insertion time, once seen is set
		seen      bool
		oldestVis int64 // the same for visible messages, once seenVis is set
		seenVis   bool
	)
	for slot := uint32(0); slot < q.store.next; slot++ {
		n := q.store.at(slot)
		if n.seq == 0 {
			continue // a free slot
		}
		if n.visible > now {
			s.Invisible++
		} else if !seenVis || n.inserted < oldestVis {
			oldestVis, seenVis = n.inserted, true
		}
		if !seen || n.inserted < oldest {
			oldest, seen = n.inserted, true
		}
		if max != 0 {
			refs = append(refs, ref{n.seq, slot})
		}
	}
	if seen {
		s.Oldest = fromNanos(oldest)
	}
	if seenVis {
		s.OldestVisible = fromNanos(oldestVis)
	}
	slices.SortFunc(refs, func(a, b ref) int {
		switch {
		case a.seq < b.seq:
			return -1
		case a.seq > b.seq:
			return 1
		}
		return 0
	})
	if max > 0 && len(refs) > max {
		refs = refs[:max]
	}
	if len(refs) > 0 {
		s.Messages = make([]Message, len(refs))
		for i, r := range refs {
			s.Messages[i] = q.store.at(r.slot).message()
		}
	}
	return s, nil
}
