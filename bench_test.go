package azq

import (
	"context"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// The benchmarks measure the queue with a 16-byte payload and the real clock,
// beside baselines taken in the same run: a buffered channel send and
// receive, a map insert and delete, the same map behind a mutex from one
// and from 8 goroutines, and a write handed from one core to the other. The machine these run on is shared
// and noisy, so compare medians of several counts with benchstat, and read
// the queue's figures as ratios to the baselines.
//
//	go test -run='^$' -bench=. -count=6 -benchmem . | tee new.txt
//	benchstat new.txt

var payload16 = "0123456789abcdef"

// BenchmarkBaselineChannel is one send and one receive on a buffered channel.
func BenchmarkBaselineChannel(b *testing.B) {
	ch := make(chan string, 1024)
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		ch <- payload16
		<-ch
	}
}

// BenchmarkBaselineMap is one insert and one delete in a map keyed like a
// message ID.
func BenchmarkBaselineMap(b *testing.B) {
	m := make(map[MessageID]string)
	var id MessageID
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		id[0], id[1], id[2], id[3] = byte(i), byte(i>>8), byte(i>>16), byte(i>>24)
		m[id] = payload16
		delete(m, id)
	}
}

// BenchmarkBaselineLockedMap is BenchmarkBaselineMap behind a mutex, taken
// once for the insert and once for the delete, from one goroutine and from
// 8 goroutines at once (per insert+delete, all goroutines together). It is
// the simplest shared structure, so its parallel/serial ratio is what this
// machine does to any data that every goroutine writes; compare
// BenchmarkCycleParallel's ratio with it.
func BenchmarkBaselineLockedMap(b *testing.B) {
	type lockedMap struct {
		mu sync.Mutex
		m  map[MessageID]string
		n  uint32
	}
	cycle := func(l *lockedMap) {
		l.mu.Lock()
		l.n++
		var id MessageID
		binary.LittleEndian.PutUint32(id[:], l.n)
		l.m[id] = payload16
		l.mu.Unlock()
		l.mu.Lock()
		delete(l.m, id)
		l.mu.Unlock()
	}
	b.Run("goroutines=1", func(b *testing.B) {
		l := &lockedMap{m: make(map[MessageID]string)}
		for i := 0; i < b.N; i++ {
			cycle(l)
		}
	})
	b.Run("goroutines=8", func(b *testing.B) {
		l := &lockedMap{m: make(map[MessageID]string)}
		b.SetParallelism(max(1, 8/runtime.GOMAXPROCS(0)))
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				cycle(l)
			}
		})
	})
}

// BenchmarkBaselineHandoff is the time for a write by one goroutine to be
// seen by another on a different core: two goroutines take turns
// incrementing one atomic counter, spinning until it is their turn, and
// ns/op is one turn. An operation on a shared queue that runs on the other
// core than the one before waits about this long for the queue's data, so
// where this is near the cost of a whole queue operation, a second core
// adds little to one shared queue.
func BenchmarkBaselineHandoff(b *testing.B) {
	if runtime.GOMAXPROCS(0) < 2 {
		b.Skip("needs GOMAXPROCS of at least 2")
	}
	var turn atomic.Int64
	n := int64(b.N)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := int64(1); i < n; i += 2 {
			for turn.Load() != i {
			}
			turn.Store(i + 1)
		}
	}()
	for i := int64(0); i < n; i += 2 {
		for turn.Load() != i {
		}
		turn.Store(i + 1)
	}
	<-done
}

// BenchmarkBaselineClock is one reading of the real clock as a queue takes
// it (wallNow: one monotonic clock read). Put, Get and Delete each take one,
// since each must act at an instant within the call; on a virtual machine
// whose clock reads are slow, three of them are a good part of a cycle.
func BenchmarkBaselineClock(b *testing.B) {
	var sum int64
	for i := 0; i < b.N; i++ {
		sum += wallNow()
	}
	runtime.KeepAlive(sum)
}

// BenchmarkPut puts messages into a growing queue.
func BenchmarkPut(b *testing.B) {
	ctx := context.Background()
	q := New()
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		if _, err := q.Put(ctx, payload16, nil); err != nil {
			b.Fatal(err)
		}
	}
}

// prefill puts n messages that become visible at random times between one
// hour and seven days from now: a deep queue of scheduled work that the
// measured cycle must pass by.
func prefill(b *testing.B, q *Queue, n int) {
	b.Helper()
	ctx := context.Background()
	r := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < n; i++ {
		vis := time.Hour + time.Duration(r.Int64N(int64(6*24*time.Hour)))
		if _, err := q.Put(ctx, payload16, &PutOptions{VisibilityTimeout: vis}); err != nil {
			b.Fatal(err)
		}
	}
}

var depths = []int{0, 1e4, 1e6, 1e7}

// prefilled returns a function that gives a queue prefilled with depth
// messages, made on its first call and the same on later ones: the
// testing package runs a benchmark function several times while it finds
// b.N, and every run leaves the queue as it found it, so the prefill (the
// better part of a minute for 1e7 messages) is paid once.
func prefilled(depth int) func(b *testing.B) *Queue {
	var q *Queue
	return func(b *testing.B) *Queue {
		if q == nil {
			q = New()
			prefill(b, q, depth)
		}
		return q
	}
}

// BenchmarkCycle is Put, Get(1) and Delete of one message, with 0 to 1e7
// other messages queued at random visibility.
func BenchmarkCycle(b *testing.B) {
	for _, depth := range depths {
		queue := prefilled(depth)
		b.Run(fmt.Sprintf("queued=%d", depth), func(b *testing.B) { benchCycle(b, queue, depth, false) })
	}
}

// BenchmarkCycleAppendGet is BenchmarkCycle with AppendGet into a buffer
// that the loop keeps, as a consumer that reuses its buffer takes
// messages: the cycle allocates nothing.
func BenchmarkCycleAppendGet(b *testing.B) {
	for _, depth := range depths {
		queue := prefilled(depth)
		b.Run(fmt.Sprintf("queued=%d", depth), func(b *testing.B) { benchCycle(b, queue, depth, true) })
	}
}

func benchCycle(b *testing.B, queue func(*testing.B) *Queue, depth int, reuse bool) {
	if depth >= 1e7 && testing.Short() {
		b.Skip("1e7 messages need about 2 GB and half a minute to prefill")
	}
	ctx := context.Background()
	q := queue(b)
	runtime.GC()
	var buf []Message
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := q.Put(ctx, payload16, nil); err != nil {
			b.Fatal(err)
		}
		var ms []Message
		var err error
		if reuse {
			buf, err = q.AppendGet(ctx, buf[:0], 1, DefaultVisibilityTimeout)
			ms = buf
		} else {
			ms, err = q.Get(ctx, 1, DefaultVisibilityTimeout)
		}
		if err != nil || len(ms) != 1 {
			b.Fatal(err, len(ms))
		}
		if err := q.Delete(ctx, ms[0].ID, ms[0].PopReceipt); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkBatch is 32 Puts, one Get(32) and 32 Deletes; ns/op is per
// message.
func BenchmarkBatch(b *testing.B) {
	for _, depth := range []int{0, 1e6} {
		queue := prefilled(depth)
		b.Run(fmt.Sprintf("queued=%d", depth), func(b *testing.B) {
			ctx := context.Background()
			q := queue(b)
			runtime.GC()
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i += 32 {
				for j := 0; j < 32; j++ {
					if _, err := q.Put(ctx, payload16, nil); err != nil {
						b.Fatal(err)
					}
				}
				ms, err := q.Get(ctx, 32, DefaultVisibilityTimeout)
				if err != nil || len(ms) != 32 {
					b.Fatal(err, len(ms))
				}
				for _, m := range ms {
					if err := q.Delete(ctx, m.ID, m.PopReceipt); err != nil {
						b.Fatal(err)
					}
				}
			}
		})
	}
}

// BenchmarkGetDelete32 is one Get(32) and 32 Deletes on a queue that always
// holds enough visible messages, the consumer side alone; ns/op is per
// message.
func BenchmarkGetDelete32(b *testing.B) {
	for _, depth := range []int{0, 1e6} {
		queue := prefilled(depth)
		b.Run(fmt.Sprintf("queued=%d", depth), func(b *testing.B) { benchGetDelete32(b, queue, false, false) })
	}
}

// BenchmarkAppendGetDelete32 is BenchmarkGetDelete32 with AppendGet into
// a buffer that the loop keeps.
func BenchmarkAppendGetDelete32(b *testing.B) {
	for _, depth := range []int{0, 1e6} {
		queue := prefilled(depth)
		b.Run(fmt.Sprintf("queued=%d", depth), func(b *testing.B) { benchGetDelete32(b, queue, true, false) })
	}
}

// BenchmarkAppendGetDeleteBatch32 is BenchmarkAppendGetDelete32 with one
// DeleteBatch of the 32 messages in place of 32 Deletes; ns/op is per
// message.
func BenchmarkAppendGetDeleteBatch32(b *testing.B) {
	for _, depth := range []int{0, 1e6} {
		queue := prefilled(depth)
		b.Run(fmt.Sprintf("queued=%d", depth), func(b *testing.B) { benchGetDelete32(b, queue, true, true) })
	}
}

// BenchmarkBatchCycle32 is BenchmarkBatch in batches: one PutBatch of 32,
// one AppendGet(32) into a kept buffer and one DeleteBatch of the 32;
// ns/op is per message.
func BenchmarkBatchCycle32(b *testing.B) {
	for _, depth := range []int{0, 1e6} {
		queue := prefilled(depth)
		b.Run(fmt.Sprintf("queued=%d", depth), func(b *testing.B) {
			ctx := context.Background()
			q := queue(b)
			puts := make([]PutRequest, 32)
			for i := range puts {
				puts[i].Content = payload16
			}
			dels := make([]DeleteRequest, 32)
			buf := make([]Message, 0, 32)
			runtime.GC()
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i += 32 {
				if _, err := q.PutBatch(ctx, puts); err != nil {
					b.Fatal(err)
				}
				ms, err := q.AppendGet(ctx, buf[:0], 32, DefaultVisibilityTimeout)
				if err != nil || len(ms) != 32 {
					b.Fatal(err, len(ms))
				}
				for j, m := range ms {
					dels[j] = DeleteRequest{m.ID, m.PopReceipt}
				}
				errs, err := q.DeleteBatch(ctx, dels)
				if err != nil || errs[0] != nil {
					b.Fatal(err, errs)
				}
			}
		})
	}
}

func benchGetDelete32(b *testing.B, queue func(*testing.B) *Queue, reuse, batch bool) {
	ctx := context.Background()
	q := queue(b)
	refill := func() {
		for j := 0; j < 32*1024; j++ {
			if _, err := q.Put(ctx, payload16, nil); err != nil {
				b.Fatal(err)
			}
		}
	}
	dels := make([]DeleteRequest, 0, 32)
	deleteAll := func(ms []Message) {
		if batch {
			dels = dels[:0]
			for _, m := range ms {
				dels = append(dels, DeleteRequest{m.ID, m.PopReceipt})
			}
			errs, err := q.DeleteBatch(ctx, dels)
			if err != nil {
				b.Fatal(err)
			}
			for _, err := range errs {
				if err != nil {
					b.Fatal(err)
				}
			}
			return
		}
		for _, m := range ms {
			if err := q.Delete(ctx, m.ID, m.PopReceipt); err != nil {
				b.Fatal(err)
			}
		}
	}
	refill()
	runtime.GC()
	buf := make([]Message, 0, 32)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i += 32 {
		var ms []Message
		var err error
		if reuse {
			buf, err = q.AppendGet(ctx, buf[:0], 32, DefaultVisibilityTimeout)
			ms = buf
		} else {
			ms, err = q.Get(ctx, 32, DefaultVisibilityTimeout)
		}
		if err != nil {
			b.Fatal(err)
		}
		if len(ms) < 32 {
			b.StopTimer()
			deleteAll(ms) // lest they come back after their lease
			refill()
			b.StartTimer()
			continue
		}
		deleteAll(ms)
	}
	// Take what refill left, so that the next run of this function finds
	// the queue as prefilled made it.
	b.StopTimer()
	for {
		ms, err := q.Get(ctx, 32, DefaultVisibilityTimeout)
		if err != nil {
			b.Fatal(err)
		}
		if len(ms) == 0 {
			break
		}
		deleteAll(ms)
	}
}

// BenchmarkCycleParallel runs Put→Get(1)→Delete cycles from 8 goroutines on
// one queue; compare its ns/op (per cycle, all goroutines together) with
// BenchmarkCycle/queued=0.
func BenchmarkCycleParallel(b *testing.B) {
	ctx := context.Background()
	q := New()
	b.SetParallelism(max(1, 8/runtime.GOMAXPROCS(0)))
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := q.Put(ctx, payload16, nil); err != nil {
				b.Error(err)
				return
			}
			ms, err := q.Get(ctx, 1, DefaultVisibilityTimeout)
			if err != nil {
				b.Error(err)
				return
			}
			// Another goroutine may have taken this goroutine's message;
			// every Put is still matched by one Get of some message.
			for _, m := range ms {
				if err := q.Delete(ctx, m.ID, m.PopReceipt); err != nil {
					b.Error(err)
					return
				}
			}
		}
	})
}

// BenchmarkMemory reports the heap bytes each queued message costs, with a
// 16-byte payload and 1e6 messages, in the bytes/msg metric: messages
// visible at once, delayed by a fixed hour (scheduled work), and delayed
// by random times up to a week (the index's worst case).
func BenchmarkMemory(b *testing.B) {
	const n = 1e6
	ctx := context.Background()
	for _, bc := range []struct {
		name  string
		delay func(r *rand.Rand) time.Duration
	}{
		{"visible", func(*rand.Rand) time.Duration { return 0 }},
		{"delay=1h", func(*rand.Rand) time.Duration { return time.Hour }},
		{"delay=random", func(r *rand.Rand) time.Duration { return time.Duration(r.Int64N(int64(7 * 24 * time.Hour))) }},
	} {
		b.Run(bc.name, func(b *testing.B) {
			r := rand.New(rand.NewPCG(1, 2))
			for i := 0; i < b.N; i++ {
				var before, after runtime.MemStats
				runtime.GC()
				runtime.ReadMemStats(&before)
				q := New()
				for j := 0; j < n; j++ {
					// A fresh string per message, as a real producer's would be.
					content := string(append([]byte(nil), payload16...))
					if _, err := q.Put(ctx, content, &PutOptions{VisibilityTimeout: bc.delay(r)}); err != nil {
						b.Fatal(err)
					}
				}
				runtime.GC()
				runtime.ReadMemStats(&after)
				b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/n, "bytes/msg")
				runtime.KeepAlive(q)
			}
		})
	}
}

// BenchmarkReceiveWakeup measures how long a Receive blocked on an empty
// queue takes to return after another goroutine puts a message.
func BenchmarkReceiveWakeup(b *testing.B) {
	ctx := context.Background()
	q := New()
	got := make(chan struct{})
	go func() {
		for {
			ms, err := q.Receive(ctx, 1, DefaultVisibilityTimeout)
			if err != nil {
				close(got)
				return
			}
			if err := q.Delete(ctx, ms[0].ID, ms[0].PopReceipt); err != nil {
				panic(err)
			}
			got <- struct{}{}
		}
	}()
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		if _, err := q.Put(ctx, payload16, nil); err != nil {
			b.Fatal(err)
		}
		<-got
	}
	b.StopTimer()
	q.Close()
	<-got
}

// BenchmarkReceiveLateness measures, with the real clock, how late Receive
// returns after a message's next-visible time: p50 and p99 in µs. Go's
// timers have a floor of about a millisecond, so the figure is bounded by
// the runtime, not by azq; a poller would add its interval.
func BenchmarkReceiveLateness(b *testing.B) {
	ctx := context.Background()
	q := New()
	late := make([]time.Duration, 0, b.N)
	for i := 0; i < b.N; i++ {
		m, err := q.Put(ctx, payload16, &PutOptions{VisibilityTimeout: 2 * time.Millisecond})
		if err != nil {
			b.Fatal(err)
		}
		ms, err := q.Receive(ctx, 1, DefaultVisibilityTimeout)
		if err != nil {
			b.Fatal(err)
		}
		late = append(late, time.Since(m.NextVisibleTime))
		if err := q.Delete(ctx, ms[0].ID, ms[0].PopReceipt); err != nil {
			b.Fatal(err)
		}
	}
	slices.Sort(late)
	b.ReportMetric(float64(late[len(late)/2].Microseconds()), "p50-µs")
	b.ReportMetric(float64(late[len(late)*99/100].Microseconds()), "p99-µs")
}

// BenchmarkIdleQueue reports, in the bytes/queue metric, the heap each
// idle, empty queue of a Service costs: one never used, and one that held
// 1, 32 or 1,000 messages at once, all since taken and deleted. Many small
// queues are normal (one per tenant, partitioned control queues), so an
// emptied queue gives back what its messages needed.
func BenchmarkIdleQueue(b *testing.B) {
	const queues = 2000
	ctx := context.Background()
	for _, held := range []int{0, 1, 32, 1000} {
		b.Run(fmt.Sprintf("held=%d", held), func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				var before, after runtime.MemStats
				runtime.GC()
				runtime.ReadMemStats(&before)
				svc := NewService()
				for j := 0; j < queues; j++ {
					q, _, err := svc.CreateQueue(ctx, fmt.Sprintf("queue-%06d", j), nil)
					if err != nil {
						b.Fatal(err)
					}
					for m := 0; m < held; m++ {
						if _, err := q.Put(ctx, payload16, nil); err != nil {
							b.Fatal(err)
						}
					}
					for taken := 0; taken < held; {
						ms, err := q.Get(ctx, 32, time.Minute)
						if err != nil {
							b.Fatal(err)
						}
						for _, m := range ms {
							if err := q.Delete(ctx, m.ID, m.PopReceipt); err != nil {
								b.Fatal(err)
							}
						}
						taken += len(ms)
					}
				}
				runtime.GC()
				runtime.ReadMemStats(&after)
				b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/queues, "bytes/queue")
				runtime.KeepAlive(svc)
			}
		})
	}
}
