package azq

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/azqlib/azq/internal/vfs"
)

// The durable mode (Open). Every operation is acknowledged only once it is
// synced (group commit) unless the name says interval. The disk's flush is
// the physical limit, so the benchmarks that wait on it measure a bare
// fdatasync in the same run and report how close they come to it. The
// same-run comparison with maragu.dev/goqite (SQLite) and go.etcd.io/bbolt
// lives in the separate module bench/durable, so that their drivers never
// enter azq's dependencies:
//
//	go test -run='^$' -bench='^BenchmarkDurable' -count=6 . | tee durable.txt
//	go test -run='^$' -bench='^BenchmarkDurableStall$' -benchtime=100000x -count=3 -v .
//	(cd bench/durable && go test -run='^$' -bench=. -count=6 . | tee ../durable-compare.txt)

// BenchmarkFdatasync is the disk's flush: a 64-byte write into allotted
// space and an fdatasync, as the log does for a lone operation.
func BenchmarkFdatasync(b *testing.B) {
	dir := b.TempDir()
	f, err := vfs.OS.Create(filepath.Join(dir, "flush"))
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	f.WriteAt(make([]byte, 1<<20), 0)
	f.Sync()
	rec := []byte(strings.Repeat("r", 64))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		f.WriteAt(rec, int64(i%16000)*64)
		if err := f.Datasync(); err != nil {
			b.Fatal(err)
		}
	}
}

// cycle runs one Put→Get→Delete of a 16-byte message on q, returning the
// latency of each operation.
func cycle(ctx context.Context, q *Queue) (lat [3]time.Duration, err error) {
	t0 := time.Now()
	if _, err = q.Put(ctx, payload16, nil); err != nil {
		return lat, err
	}
	t1 := time.Now()
	// Another caller may have taken the message just put and not yet put
	// its own: take the next one.
	var ms []Message
	for len(ms) == 0 {
		if ms, err = q.Get(ctx, 1, DefaultVisibilityTimeout); err != nil {
			return lat, err
		}
	}
	t2 := time.Now()
	err = q.Delete(ctx, ms[0].ID, ms[0].PopReceipt)
	t3 := time.Now()
	return [3]time.Duration{t1.Sub(t0), t2.Sub(t1), t3.Sub(t2)}, err
}

// durableCycles runs b.N Put→Get→Delete cycles of a 16-byte message on
// the queue of a durable Service in dir, spread over callers goroutines,
// and reports cycles per second. Unless interval sync is on, it also
// measures the disk's bare flush (fdatasync after a small write, back to
// back) in the same directory, in slices between twenty slices of the run
// that take a quarter of the time of each, so that both see the disk under
// the same conditions, and reports the mean flush time and the cycles per
// second as a percentage of the ideal callers/(3 × flush): each cycle needs
// three synced operations, and at best concurrent callers share every
// flush. The mean, not the median, is the ideal's measure, since
// back-to-back flushes run at one per mean flush time, the slow ones
// included; the median is reported beside it.
func durableCycles(b *testing.B, callers int, opts ...DurableOption) {
	ctx := context.Background()
	dir := b.TempDir()
	s, err := Open(dir, opts...)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	q, _, err := s.CreateQueue(ctx, "bench", nil)
	if err != nil {
		b.Fatal(err)
	}
	interval := s.durable().cfg.syncInterval > 0
	var probe flushProbe
	if !interval {
		probe.open(b, dir)
		defer probe.close()
	}
	s.durable().log.WAL().ResetStats()
	b.ReportAllocs()
	b.ResetTimer()
	parts := min(20, b.N)
	for part := 0; part < parts; part++ {
		n := int64(b.N/parts + boolInt(part < b.N%parts))
		var wg sync.WaitGroup
		var next atomic.Int64
		start := time.Now()
		b.StartTimer()
		for c := 0; c < callers; c++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for next.Add(1) <= n {
					if _, err := cycle(ctx, q); err != nil {
						b.Error(err)
						return
					}
				}
			}()
		}
		wg.Wait()
		b.StopTimer()
		if !interval {
			probe.run(b, max(time.Since(start)/4, 5*time.Millisecond))
		}
	}
	perSec := float64(b.N) / b.Elapsed().Seconds()
	b.ReportMetric(perSec, "cycles/s")
	if st := s.durable().log.WAL().Stats(); st.Syncs > 0 {
		b.ReportMetric(float64(st.Syncs)/float64(b.N), "syncs/cycle")
		b.ReportMetric(float64(st.SyncTime.Microseconds())/float64(st.Syncs), "sync-µs")
	}
	if !interval {
		mean := probe.total / time.Duration(len(probe.times))
		slices.Sort(probe.times)
		b.ReportMetric(float64(probe.times[len(probe.times)/2].Microseconds()), "flush-p50-µs")
		b.ReportMetric(float64(mean.Microseconds()), "flush-µs")
		b.ReportMetric(100*perSec/(float64(callers)/(3*mean.Seconds())), "%ideal")
	}
}

// flushProbe measures the disk's bare flush: a 64-byte write into
// allotted space and an fdatasync, as the log does for a lone operation.
type flushProbe struct {
	f     vfs.File
	name  string
	off   int64
	times []time.Duration
	total time.Duration
}

func (p *flushProbe) open(tb testing.TB, dir string) {
	p.name = filepath.Join(dir, "flush-probe")
	f, err := vfs.OS.Create(p.name)
	if err != nil {
		tb.Fatal(err)
	}
	p.f = f
	if _, err := f.WriteAt(make([]byte, 1<<20), 0); err != nil {
		tb.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		tb.Fatal(err)
	}
}

// run flushes back to back for about d.
func (p *flushProbe) run(tb testing.TB, d time.Duration) {
	rec := []byte(strings.Repeat("r", 64))
	for end := time.Now().Add(d); time.Now().Before(end); {
		if _, err := p.f.WriteAt(rec, p.off); err != nil {
			tb.Fatal(err)
		}
		p.off = (p.off + 64) % (1 << 20)
		start := time.Now()
		if err := p.f.Datasync(); err != nil {
			tb.Fatal(err)
		}
		t := time.Since(start)
		p.times = append(p.times, t)
		p.total += t
	}
}

func (p *flushProbe) close() {
	p.f.Close()
	os.Remove(p.name)
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// BenchmarkDurableCycle is BenchmarkCycle on a durable queue with every
// operation synced before it returns, from 1 and from 8 goroutines at
// once (ns/op is per cycle, all goroutines together), and with interval
// sync for comparison.
func BenchmarkDurableCycle(b *testing.B) {
	for _, callers := range []int{1, 8} {
		b.Run(fmt.Sprintf("callers=%d", callers), func(b *testing.B) { durableCycles(b, callers) })
	}
	for _, callers := range []int{1, 8} {
		b.Run(fmt.Sprintf("interval/callers=%d", callers), func(b *testing.B) {
			durableCycles(b, callers, WithSyncInterval(100*time.Millisecond))
		})
	}
}

// BenchmarkDurableBytes reports the bytes on disk per 16-byte message put:
// in the log (one Put record) and in a checkpoint (one message record).
func BenchmarkDurableBytes(b *testing.B) {
	const n = 10000
	for i := 0; i < b.N; i++ {
		dir := b.TempDir()
		s, err := Open(dir, WithSyncInterval(time.Hour))
		if err != nil {
			b.Fatal(err)
		}
		ctx := context.Background()
		q, _, _ := s.CreateQueue(ctx, "bench", nil)
		before := s.durable().log.WAL().Bytes()
		for j := 0; j < n; j++ {
			if _, err := q.Put(ctx, payload16, nil); err != nil {
				b.Fatal(err)
			}
		}
		if err := s.durable().log.WAL().Sync(); err != nil {
			b.Fatal(err)
		}
		logBytes := s.durable().log.WAL().Bytes() - before
		var snap countWriter
		if err := s.Backup(ctx, &snap); err != nil {
			b.Fatal(err)
		}
		s.Close()
		b.ReportMetric(float64(logBytes)/n, "log-B/msg")
		b.ReportMetric(float64(snap)/n, "checkpoint-B/msg")
	}
}

type countWriter int64

func (c *countWriter) Write(p []byte) (int, error) {
	*c += countWriter(len(p))
	return len(p), nil
}

// preload fills the queue "bench" of a new durable Service in dir with n
// 16-byte messages, quickly (interval sync), and leaves the directory as
// Close leaves it (checkpointed) or, with crashed, as a killed process
// does (all in the log).
func preload(b *testing.B, dir string, n int, crashed bool) {
	s, err := Open(dir, WithSyncInterval(time.Hour), WithCheckpointBytes(1<<40))
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	q, _, _ := s.CreateQueue(ctx, "bench", nil)
	for j := 0; j < n; j++ {
		if _, err := q.Put(ctx, payload16, nil); err != nil {
			b.Fatal(err)
		}
	}
	if crashed {
		if err := s.durable().log.WAL().Sync(); err != nil {
			b.Fatal(err)
		}
		crash(b, s)
	} else if err := s.Close(); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkDurableReplay measures Open of a directory holding 1 million
// 16-byte messages, from the log alone (as a crash leaves it) and from a
// checkpoint (as Close leaves it). ns/op is one whole recovery.
func BenchmarkDurableReplay(b *testing.B) {
	const n = 1_000_000
	for _, from := range []string{"log", "checkpoint"} {
		b.Run("from="+from, func(b *testing.B) {
			dir := b.TempDir()
			preload(b, dir, n, from == "log")
			runtime.GC()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				s, err := Open(dir, WithCheckpointBytes(1<<40))
				if err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				if st, _ := s.DurableState(); st.Recovery.Messages != n {
					b.Fatalf("recovered %d messages, want %d", st.Recovery.Messages, n)
				}
				crash(b, s)
				runtime.GC()
				b.StartTimer()
			}
		})
	}
}

// BenchmarkDurableStall is the stall check of the checkpoints: one queue
// holding 1,000,000 messages, 8 callers cycling Put→Get→Delete with every
// operation synced, with checkpoints (the log's threshold set so that the
// run crosses several) and without (a threshold never reached), in the
// same process. It reports the latency of single operations (p50, p99,
// p99.9, max), the slowest flush of the log in the run, and the number of
// checkpoints written, and logs the latency histogram. ns/op is per
// cycle. Run it with a fixed count, so both halves do the same work:
//
//	go test -run='^$' -bench='^BenchmarkDurableStall$' -benchtime=100000x -count=3 -v .
func BenchmarkDurableStall(b *testing.B) {
	const held, callers = 1_000_000, 8
	dir := b.TempDir()
	preload(b, dir, held, false)
	for _, ckpt := range []bool{false, true} {
		b.Run(fmt.Sprintf("checkpoints=%v", ckpt), func(b *testing.B) {
			// About six checkpoints' worth of log (each cycle logs about
			// 125 bytes: a Put of 80, a Get of 30, a Delete of 15), of
			// which at least three are written: a checkpoint asked for
			// while one is written starts when that one ends. AZQ_STALL_CHECKPOINTS
			// asks for another number.
			threshold := int64(1 << 40)
			if ckpt {
				n := int64(6)
				if v, err := strconv.Atoi(os.Getenv("AZQ_STALL_CHECKPOINTS")); err == nil && v > 0 {
					n = int64(v)
				}
				threshold = max(int64(b.N)*125/n, 64<<10)
			}
			s, err := Open(dir, WithCheckpointBytes(threshold))
			if err != nil {
				b.Fatal(err)
			}
			ctx := context.Background()
			q, err := s.Queue("bench")
			if err != nil {
				b.Fatal(err)
			}
			lats := make([][]time.Duration, callers)
			var next atomic.Int64
			var wg sync.WaitGroup
			runtime.GC()
			s.durable().log.WAL().ResetStats()
			b.ResetTimer()
			for c := range lats {
				lats[c] = make([]time.Duration, 0, 3*b.N/callers+3)
				wg.Add(1)
				go func() {
					defer wg.Done()
					for next.Add(1) <= int64(b.N) {
						l, err := cycle(ctx, q)
						if err != nil {
							b.Error(err)
							return
						}
						lats[c] = append(lats[c], l[:]...)
					}
				}()
			}
			wg.Wait()
			b.StopTimer()
			st, _ := s.DurableState()
			ls := s.durable().log.WAL().Stats()
			maxFlush := ls.MaxSync
			if err := s.Close(); err != nil {
				b.Fatal(err)
			}
			all := slices.Concat(lats...)
			slices.Sort(all)
			pct := func(p float64) time.Duration { return all[min(len(all)-1, int(p*float64(len(all))))] }
			b.ReportMetric(float64(pct(0.5).Microseconds()), "p50-µs")
			b.ReportMetric(float64(pct(0.99).Microseconds()), "p99-µs")
			b.ReportMetric(float64(pct(0.999).Microseconds()), "p99.9-µs")
			b.ReportMetric(float64(all[len(all)-1].Microseconds())/1000, "max-ms")
			b.ReportMetric(float64(maxFlush.Microseconds())/1000, "maxflush-ms")
			b.ReportMetric(float64(ls.MaxWrite.Microseconds())/1000, "maxwrite-ms")
			b.ReportMetric(float64(ls.MaxSwitchWrite.Microseconds())/1000, "maxswitch-ms")
			b.ReportMetric(float64(st.Checkpoints), "checkpoints")
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "cycles/s")
			b.Logf("checkpoints=%v: %d operations, %d checkpoints (the last took %v), slowest flush %v\n%s",
				ckpt, len(all), st.Checkpoints, st.LastCheckpointDuration.Round(time.Millisecond), maxFlush.Round(time.Microsecond), histogram(all))
		})
	}
}

// histogram draws the distribution of the sorted latencies ds in
// power-of-two buckets.
func histogram(ds []time.Duration) string {
	var sb strings.Builder
	lo := 0
	for bound := 16 * time.Microsecond; lo < len(ds); bound *= 2 {
		hi, _ := slices.BinarySearch(ds, bound)
		if hi > lo || bound >= time.Millisecond {
			n := hi - lo
			fmt.Fprintf(&sb, "  < %9v %8d %7.3f%% %s\n", bound, n, 100*float64(n)/float64(len(ds)), strings.Repeat("#", (60*n+len(ds)-1)/len(ds)))
		}
		lo = hi
	}
	return sb.String()
}

// BenchmarkDurablePut is one caller's Puts of a 16-byte message on a
// durable queue, each synced before it returns; BenchmarkDurablePutBatch
// is the same caller's PutBatch of 32 such messages, one record and one
// sync a batch. ns/op is per message in both, so their ratio is what a
// batch saves; run them in one -bench, interleaved.
func BenchmarkDurablePut(b *testing.B) { durablePuts(b, 1) }

// BenchmarkDurablePutBatch: see BenchmarkDurablePut.
func BenchmarkDurablePutBatch(b *testing.B) { durablePuts(b, MaxBatchSize) }

// BenchmarkDurableDeleteBatch is one caller's DeleteBatch of 32 messages
// put before the timer starts; ns/op is per message.
func BenchmarkDurableDeleteBatch(b *testing.B) {
	ctx := context.Background()
	s, err := Open(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	q, _, err := s.CreateQueue(ctx, "bench", nil)
	if err != nil {
		b.Fatal(err)
	}
	puts := make([]PutRequest, MaxBatchSize)
	for i := range puts {
		puts[i].Content = payload16
	}
	dels := make([]DeleteRequest, MaxBatchSize)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i += MaxBatchSize {
		b.StopTimer()
		res, err := q.PutBatch(ctx, puts)
		if err != nil {
			b.Fatal(err)
		}
		for j, r := range res {
			dels[j] = DeleteRequest{r.Message.ID, r.Message.PopReceipt}
		}
		b.StartTimer()
		if _, err := q.DeleteBatch(ctx, dels); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msgs/s")
}

// durablePuts puts b.N 16-byte messages on a durable queue, batch at a
// time (1: Put), and reports messages per second.
func durablePuts(b *testing.B, batch int) {
	ctx := context.Background()
	s, err := Open(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	q, _, err := s.CreateQueue(ctx, "bench", nil)
	if err != nil {
		b.Fatal(err)
	}
	reqs := make([]PutRequest, batch)
	for i := range reqs {
		reqs[i].Content = payload16
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i += batch {
		if batch == 1 {
			_, err = q.Put(ctx, payload16, nil)
		} else {
			_, err = q.PutBatch(ctx, reqs)
		}
		if err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msgs/s")
}
