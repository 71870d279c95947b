package worker

import (
	"sync"
	"testing"
)

// TestDispatchStartsEveryBlockedHandler checks that a batch reaches as many
// goroutines as it has deliveries when each goroutine blocks on the one it
// took: the wake-up chain must not stop short.
func TestDispatchStartsEveryBlockedHandler(t *testing.T) {
	const n = 32
	var q dispatch
	q.init()
	got := make(chan *Delivery, n)
	block := make(chan struct{})
	var wg sync.WaitGroup
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				d, ok := q.next()
				if !ok {
					return
				}
				got <- d
				<-block
			}
		}()
	}
	ds := make([]*Delivery, n)
	for i := range ds {
		ds[i] = &Delivery{}
	}
	q.push(ds[:n/2])
	q.push(ds[n/2:])
	seen := make(map[*Delivery]bool)
	for range n {
		seen[<-got] = true // hangs, and the test times out, if one is never taken
	}
	if len(seen) != n {
		t.Fatalf("%d distinct deliveries taken, want %d", len(seen), n)
	}
	q.close()
	close(block)
	wg.Wait()
}

// TestDispatchOrderAndClose checks FIFO order across pushes and that close
// lets queued deliveries be taken before next reports the end.
func TestDispatchOrderAndClose(t *testing.T) {
	var q dispatch
	q.init()
	ds := make([]*Delivery, 5)
	for i := range ds {
		ds[i] = &Delivery{}
	}
	q.push(ds[:2])
	if d, _ := q.next(); d != ds[0] {
		t.Fatal("first out is not first in")
	}
	q.push(ds[2:])
	q.close()
	for i := 1; i < len(ds); i++ {
		d, ok := q.next()
		if !ok || d != ds[i] {
			t.Fatalf("delivery %d: got %p, %v; want %p", i, d, ok, ds[i])
		}
	}
	if d, ok := q.next(); ok || d != nil {
		t.Fatal("next after close and drain returned a delivery")
	}
}
