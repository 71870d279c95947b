package worker

import (
	"container/heap"
	"sync"
	"time"

	"github.com/benbjohnson/clock"
)

// leases schedules the renewals of all running deliveries with a single
// clock timer armed for the earliest one. A timer per message cost half the
// worker's throughput (the runtime's timer heap and the wake-ups it causes).
//
// First renewals are due half a lease after the fetch, so batches fetched
// one after another fall due in the order they were fetched: they wait in a
// FIFO, where scheduling is an append and settling marks the entry dead,
// to be dropped when it reaches the front. Removing each settled delivery
// from a heap instead cost a tenth of the worker's time per message. Later
// renewals, whose times depend on when the last one succeeded, go to a
// heap of at most Concurrency entries.
type leases struct {
	w       *Worker
	mu      sync.Mutex
	first   []*Delivery // first renewals, due in order from fhead; some dead
	fhead   int
	fdead   int // dead entries in first[fhead:]
	h       leaseHeap
	timer   *leaseTimer // armed for armedAt; nil if none
	armedAt time.Time
	// stopping is set when Run shuts down: from then on a timer with
	// nothing left to renew is stopped at once, so that Run does not wait
	// for it.
	stopping bool
}

// leaseTimer is one arming of the timer. It holds a count in the worker's
// WaitGroup, which exactly one party gives back: Stop, if it prevented the
// callback, or else the callback. claimed records which, under leases.mu,
// rather than trusting Stop alone: the mock clock can report a timer stopped
// and still run its callback when Stop races with Add.
type leaseTimer struct {
	t       *clock.Timer
	claimed bool
}

// schedule (re)sets d's renewal to after from now.
func (l *leases) schedule(d *Delivery, after time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.dropFirstLocked(d)
	d.due = l.w.clk.Now().Add(after)
	if d.hidx >= 0 {
		heap.Fix(&l.h, d.hidx)
	} else {
		heap.Push(&l.h, d)
	}
	if l.timer == nil || d.due.Before(l.armedAt) {
		l.armLocked(d.due)
	}
}

// scheduleBatch schedules the first renewal of each delivery of a batch
// just fetched, after from now. One lock and one reading of the clock serve
// the batch, and the batch is appended to the FIFO of first renewals: none
// already there is due later.
func (l *leases) scheduleBatch(ds []*Delivery, after time.Duration) {
	if len(ds) == 0 {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.scheduleFirstLocked(ds, l.w.clk.Now().Add(after))
}

// scheduleFirstLocked schedules the first renewals of ds at due, no earlier
// than any first renewal already scheduled.
func (l *leases) scheduleFirstLocked(ds []*Delivery, due time.Time) {
	for _, d := range ds {
		d.due = due
		d.first = true
	}
	l.first = append(l.first, ds...)
	if l.timer == nil || due.Before(l.armedAt) {
		l.armLocked(due)
	}
}

// unschedule drops d's renewal. While the worker runs, the timer stays
// armed when nothing is left to renew: the next delivery would only arm it
// again, and arming a clock timer per message cost a quarter of the
// worker's time; a timer that finds nothing due just ends. Once the worker
// is stopping, the timer is stopped with the last renewal, so that Run does
// not wait for it.
func (l *leases) unschedule(d *Delivery) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.dropFirstLocked(d)
	if d.hidx >= 0 {
		heap.Remove(&l.h, d.hidx)
	}
	if l.stopping && l.emptyLocked() {
		l.stopLocked()
	}
}

// dropFirstLocked marks d's entry in first dead, if it has one, and drops
// dead entries from the front. When dead entries pile up behind a live one
// (a long handler fetched early), first is compacted, at a cost that the
// removals since the last compaction pay for.
func (l *leases) dropFirstLocked(d *Delivery) {
	if !d.first {
		return
	}
	d.first = false
	l.fdead++
	for l.fhead < len(l.first) && !l.first[l.fhead].first {
		l.first[l.fhead] = nil
		l.fhead++
		l.fdead--
	}
	live := len(l.first) - l.fhead - l.fdead
	switch {
	case l.fhead == len(l.first):
		l.first, l.fhead = l.first[:0], 0
	case l.fdead > 64 && l.fdead > live:
		n := 0
		for _, e := range l.first[l.fhead:] {
			if e.first {
				l.first[n] = e
				n++
			}
		}
		clear(l.first[n:])
		l.first, l.fhead, l.fdead = l.first[:n], 0, 0
	}
}

// takeDueLocked unschedules and returns the deliveries due by now.
func (l *leases) takeDueLocked(now time.Time) []*Delivery {
	var due []*Delivery
	for len(l.h) > 0 && !l.h[0].due.After(now) {
		due = append(due, heap.Pop(&l.h).(*Delivery))
	}
	for {
		d, ok := l.nextFirstLocked()
		if !ok || d.due.After(now) {
			break
		}
		l.dropFirstLocked(d)
		due = append(due, d)
	}
	return due
}

// earliestLocked returns when the next renewal is due, if any is scheduled.
func (l *leases) earliestLocked() (time.Time, bool) {
	next, ok := time.Time{}, false
	if len(l.h) > 0 {
		next, ok = l.h[0].due, true
	}
	if d, ok1 := l.nextFirstLocked(); ok1 && (!ok || d.due.Before(next)) {
		next, ok = d.due, true
	}
	return next, ok
}

// emptyLocked reports whether no renewal is scheduled.
func (l *leases) emptyLocked() bool {
	return len(l.h) == 0 && len(l.first)-l.fhead == l.fdead
}

// nextFirstLocked returns the earliest live entry of first, if any. Dead
// entries are never at the front.
func (l *leases) nextFirstLocked() (*Delivery, bool) {
	if l.fhead == len(l.first) {
		return nil, false
	}
	return l.first[l.fhead], true
}

// stop is called when Run shuts down: it stops the timer now if nothing
// is left to renew, and makes unschedule stop it with the last renewal.
func (l *leases) stop() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.stopping = true
	if l.emptyLocked() {
		l.stopLocked()
	}
}

// armLocked arms the timer for at, replacing any armed one. The armed timer
// holds a count in the worker's WaitGroup, given back by Stop or by the
// callback. l.mu must be held.
func (l *leases) armLocked(at time.Time) {
	l.stopLocked()
	l.armedAt = at
	tk := &leaseTimer{}
	l.w.wg.Add(1)
	tk.t = l.w.clk.AfterFunc(at.Sub(l.w.clk.Now()), func() { l.fire(tk) })
	l.timer = tk
}

func (l *leases) stopLocked() {
	if tk := l.timer; tk != nil && tk.t.Stop() && !tk.claimed {
		tk.claimed = true
		l.w.wg.Done()
	}
	l.timer = nil
}

// fire starts the renewals that are due and re-arms for the next one.
func (l *leases) fire(tk *leaseTimer) {
	l.mu.Lock()
	if tk.claimed {
		l.mu.Unlock() // stopped, and its count given back by Stop
		return
	}
	tk.claimed = true
	defer l.w.wg.Done()
	if tk != l.timer {
		l.mu.Unlock() // replaced while firing; the new timer does the work
		return
	}
	l.timer = nil
	due := l.takeDueLocked(l.w.clk.Now())
	if next, ok := l.earliestLocked(); ok {
		l.armLocked(next)
	}
	// Counted before l.mu is released, while this callback's own count
	// is still held, so Run cannot stop waiting in between.
	l.w.wg.Add(len(due))
	l.mu.Unlock()
	for _, d := range due {
		go func() {
			defer l.w.wg.Done()
			l.w.renew(d)
		}()
	}
}

// leaseHeap orders deliveries by renewal time.
type leaseHeap []*Delivery

func (h leaseHeap) Len() int           { return len(h) }
func (h leaseHeap) Less(i, j int) bool { return h[i].due.Before(h[j].due) }
func (h leaseHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].hidx, h[j].hidx = i, j
}
func (h *leaseHeap) Push(x any) {
	d := x.(*Delivery)
	d.hidx = len(*h)
	*h = append(*h, d)
}
func (h *leaseHeap) Pop() any {
	old := *h
	d := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	d.hidx = -1
	return d
}
