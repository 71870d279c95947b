package worker

import (
	"context"
	"testing"
	"time"

	"github.com/benbjohnson/clock"
	"pgregory.net/rapid"
)

// TestLeaseScheduleModel checks the renewal schedule (a FIFO of first
// renewals with dead entries dropped lazily, beside a heap of later ones)
// against a plain map from delivery to due time, under batches, settles,
// renewals and due renewals taken in random order. The clock is never
// advanced, so no timer fires; due times are chosen by the test.
func TestLeaseScheduleModel(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		mock := clock.NewMock()
		e := newEnv(rt)
		w := New(e.q, func(context.Context, *Delivery) error { return nil }, Options{Clock: mock})
		l := &w.leases
		t0 := mock.Now()
		model := make(map[*Delivery]time.Time)
		var all []*Delivery
		lastFirst := t0

		live := func() []*Delivery {
			var ds []*Delivery
			for _, d := range all {
				if _, ok := model[d]; ok {
					ds = append(ds, d)
				}
			}
			return ds
		}
		rt.Repeat(map[string]func(*rapid.T){
			"batch": func(rt *rapid.T) {
				n := rapid.IntRange(1, 40).Draw(rt, "n")
				lastFirst = lastFirst.Add(time.Duration(rapid.IntRange(0, 3).Draw(rt, "later")) * time.Second)
				ds := make([]*Delivery, n)
				for i := range ds {
					ds[i] = &Delivery{hidx: -1}
					model[ds[i]] = lastFirst
				}
				all = append(all, ds...)
				l.mu.Lock()
				l.scheduleFirstLocked(ds, lastFirst)
				l.mu.Unlock()
			},
			"settle": func(rt *rapid.T) {
				ds := live()
				if len(ds) == 0 {
					rt.Skip("nothing scheduled")
				}
				d := rapid.SampledFrom(ds).Draw(rt, "d")
				delete(model, d)
				l.unschedule(d)
			},
			"renew": func(rt *rapid.T) {
				ds := live()
				if len(ds) == 0 {
					rt.Skip("nothing scheduled")
				}
				d := rapid.SampledFrom(ds).Draw(rt, "d")
				after := time.Duration(rapid.IntRange(0, 20).Draw(rt, "after")) * time.Second
				model[d] = t0.Add(after)
				l.schedule(d, after)
			},
			"take due": func(rt *rapid.T) {
				now := t0.Add(time.Duration(rapid.IntRange(0, 20).Draw(rt, "now")) * time.Second)
				l.mu.Lock()
				got := l.takeDueLocked(now)
				l.mu.Unlock()
				seen := make(map[*Delivery]bool)
				for _, d := range got {
					due, ok := model[d]
					if !ok || due.After(now) || seen[d] {
						rt.Fatalf("took %p: scheduled %v, due %v, now %v, twice %v", d, ok, due, now, seen[d])
					}
					seen[d] = true
					delete(model, d)
				}
				for _, due := range model {
					if !due.After(now) {
						rt.Fatalf("a renewal due %v was left at %v", due, now)
					}
				}
			},
			"": func(rt *rapid.T) {
				l.mu.Lock()
				defer l.mu.Unlock()
				if l.emptyLocked() != (len(model) == 0) {
					rt.Fatalf("empty = %v with %d scheduled", l.emptyLocked(), len(model))
				}
				want, wantOK := time.Time{}, false
				liveFirst := 0
				for d, due := range model {
					if !wantOK || due.Before(want) {
						want, wantOK = due, true
					}
					if d.first == (d.hidx >= 0) {
						rt.Fatalf("delivery in FIFO %v and heap %v", d.first, d.hidx >= 0)
					}
					if d.first {
						liveFirst++
					}
				}
				if got, ok := l.earliestLocked(); ok != wantOK || !got.Equal(want) {
					rt.Fatalf("earliest %v %v, want %v %v", got, ok, want, wantOK)
				}
				for _, d := range all {
					if _, ok := model[d]; !ok && (d.first || d.hidx >= 0) {
						rt.Fatal("an unscheduled delivery is still scheduled")
					}
				}
				if n := len(l.first) - l.fhead; n > 2*liveFirst+65 {
					rt.Fatalf("FIFO holds %d entries for %d live", n, liveFirst)
				}
			},
		})
	})
}

// TestLeaseFIFOCompacts checks that settled first renewals queued behind one
// that lasts (a long handler fetched early) do not pile up.
func TestLeaseFIFOCompacts(t *testing.T) {
	mock := clock.NewMock()
	e := newEnv(t)
	w := New(e.q, func(context.Context, *Delivery) error { return nil }, Options{Clock: mock})
	l := &w.leases
	long := &Delivery{hidx: -1}
	l.scheduleBatch([]*Delivery{long}, time.Minute)
	for range 1000 {
		d := &Delivery{hidx: -1}
		l.scheduleBatch([]*Delivery{d}, time.Minute)
		l.unschedule(d)
	}
	if n := len(l.first) - l.fhead; n > 66 {
		t.Fatalf("FIFO holds %d entries for 1 live", n)
	}
	if next, ok := l.nextFirstLocked(); !ok || next != long {
		t.Fatal("the lasting renewal is not at the front")
	}
	l.unschedule(long)
	if !l.emptyLocked() || len(l.first) != 0 {
		t.Fatalf("FIFO not empty after the last settle: %d entries", len(l.first))
	}
}
