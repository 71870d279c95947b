package azq

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/azqlib/azq/internal/durable"
	"github.com/azqlib/azq/internal/longrun"
	"github.com/azqlib/azq/internal/vfs"
	"github.com/azqlib/azq/internal/wal"
	"github.com/benbjohnson/clock"
)

// crash abandons a durable Service as a killed process would: the log
// files and the lock are closed, nothing is written beyond what the
// operations already made durable, and no checkpoint is written.
func crash(t testing.TB, s *Service) {
	t.Helper()
	s.abandon()
}

func mustOpen(t *testing.T, dir string, opts ...DurableOption) *Service {
	t.Helper()
	s, err := Open(dir, opts...)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	return s
}

// dump describes everything a Service holds, receipts included, for
// comparison before and after a restart.
func dump(t *testing.T, s *Service) string {
	t.Helper()
	var b bytes.Buffer
	s.mu.Lock()
	defer s.mu.Unlock()
	s.queues.Scan(func(name string, q *Queue) bool {
		q.mu.Lock()
		defer q.mu.Unlock()
		q.purgeExpired(q.now())
		b.WriteString(name)
		b.WriteString(" ")
		b.WriteString(fmtAny(q.metadata, q.policies, q.count, q.seq))
		for slot := uint32(0); slot < q.store.next; slot++ {
			n := q.store.at(slot)
			if n.seq == 0 {
				continue
			}
			m := n.message()
			m.PopReceipt = newReceipt(slot, n.version, n.tag)
			b.WriteString(fmtAny(slot, m, n.seq))
		}
		b.WriteString("\n")
		return true
	})
	return b.String()
}

func TestDurableReopenKeepsEverything(t *testing.T) {
	ctx := context.Background()
	for _, how := range []string{"close", "crash"} {
		t.Run(how, func(t *testing.T) {
			dir := t.TempDir()
			clk := clock.NewMock()
			clk.Set(time.Date(2025, 1, 2, 3, 4, 5, 6, time.UTC))
			s := mustOpen(t, dir, WithClock(clk))
			a, _, err := s.CreateQueue(ctx, "alpha", map[string]string{"k": "v"})
			if err != nil {
				t.Fatal(err)
			}
			b, _, _ := s.CreateQueue(ctx, "beta", nil)
			gone, _, _ := s.CreateQueue(ctx, "gone", nil)
			gone.Put(ctx, "x", nil)
			if err := s.DeleteQueue(ctx, "gone"); err != nil {
				t.Fatal(err)
			}
			if err := a.SetAccessPolicies(ctx, []AccessPolicy{{ID: "p", Start: clk.Now(), Permission: "rp"}}); err != nil {
				t.Fatal(err)
			}
			if err := b.SetMetadata(ctx, map[string]string{"x": "y"}); err != nil {
				t.Fatal(err)
			}
			var kept []Message
			for i := 0; i < 50; i++ {
				m, err := a.Put(ctx, "m"+string(rune('a'+i%26)), &PutOptions{VisibilityTimeout: time.Duration(i%3) * time.Second, TimeToLive: time.Duration(1+i%5) * time.Hour})
				if err != nil {
					t.Fatal(err)
				}
				kept = append(kept, m)
			}
			clk.Add(5 * time.Second)
			got, _ := a.Get(ctx, 10, time.Minute)
			a.Delete(ctx, got[0].ID, got[0].PopReceipt)
			s2 := "new"
			upd, err := a.Update(ctx, got[1].ID, got[1].PopReceipt, time.Second, &s2)
			if err != nil {
				t.Fatal(err)
			}
			b.Put(ctx, "b1", nil)
			b.Clear(ctx)
			b.Put(ctx, "b2", &PutOptions{TimeToLive: NeverExpires})
			clk.Add(90 * time.Minute) // some expire
			a.Get(ctx, 3, time.Hour)

			before := dump(t, s)
			if how == "close" {
				if err := s.Close(); err != nil {
					t.Fatal(err)
				}
			} else {
				crash(t, s)
			}
			s = mustOpen(t, dir, WithClock(clk))
			defer s.Close()
			if after := dump(t, s); after != before {
				t.Fatalf("after reopening:\n%.3000s\nbefore:\n%.3000s", after, before)
			}
			a, err = s.Queue("alpha")
			if err != nil {
				t.Fatal(err)
			}
			if _, err := s.Queue("gone"); !errors.Is(err, ErrQueueNotFound) {
				t.Fatalf("deleted queue: %v", err)
			}
			// The receipt issued before the restart still works.
			if err := a.Delete(ctx, got[1].ID, upd.PopReceipt); err != nil {
				t.Fatalf("Delete with a receipt from before the restart: %v", err)
			}
		})
	}
}

// TestBackupRestore checks that Restore gives back exactly what Backup
// saw, receipts included, for a Service in memory and a durable one, while
// other goroutines keep changing it.
func TestBackupRestore(t *testing.T) {
	ctx := context.Background()
	for _, durable := range []bool{false, true} {
		s := NewService()
		if durable {
			s = mustOpen(t, t.TempDir(), WithSyncInterval(time.Hour))
		}
		a, _, _ := s.CreateQueue(ctx, "alpha", map[string]string{"k": "v"})
		a.SetAccessPolicies(ctx, []AccessPolicy{{ID: "p", Expiry: time.Date(2031, 1, 1, 0, 0, 0, 0, time.UTC), Permission: "r"}})
		for i := 0; i < 300; i++ {
			a.Put(ctx, fmt.Sprint("m", i), &PutOptions{VisibilityTimeout: time.Duration(i%3) * time.Second})
		}
		got, _ := a.Get(ctx, 32, time.Minute)
		for _, m := range got[:10] {
			a.Delete(ctx, m.ID, m.PopReceipt)
		}
		stop := make(chan struct{})
		done := make(chan struct{})
		go func() { // a concurrent writer on another queue
			defer close(done)
			b, _, _ := s.CreateQueue(ctx, "beta", nil)
			for {
				select {
				case <-stop:
					return
				default:
					b.Put(ctx, "x", nil)
				}
			}
		}()
		var buf bytes.Buffer
		if err := s.Backup(ctx, &buf); err != nil {
			t.Fatal(err)
		}
		close(stop)
		<-done
		r, err := Restore(bytes.NewReader(buf.Bytes()))
		if err != nil {
			t.Fatal(err)
		}
		ra, err := r.Queue("alpha")
		if err != nil {
			t.Fatal(err)
		}
		alphaOnly := func(s *Service) string {
			d := dump(t, s)
			return d[:strings.Index(d, "\n")]
		}
		if x, y := alphaOnly(s), alphaOnly(r); x != y {
			t.Fatalf("durable=%v: restored %.500s\nwant %.500s", durable, y, x)
		}
		if err := ra.Delete(ctx, got[20].ID, got[20].PopReceipt); err != nil {
			t.Fatalf("durable=%v: Delete with a receipt from before the snapshot: %v", durable, err)
		}
		s.Close()
	}
}

func fmtAny(v ...any) string { return fmt.Sprint(v...) }

// mutatingSink is a checkpoint's sink that runs change, with no lock
// held, before every record it passes on: the operations that a
// checkpoint's copy of the queues runs beside.
type mutatingSink struct {
	sink   durable.Sink
	change func()
}

func (m *mutatingSink) Append(rec []byte) error {
	m.change()
	return m.sink.Append(rec)
}

// TestFuzzyCheckpointReplaysExactly writes checkpoints, incremental ones
// among them, while random operations run between each of their records
// (every Put, Get, Update, Delete, Clear, metadata change, queue creation
// and deletion, expiry, queues emptied and refilled), then reopens the
// directory: the newest checkpoint, those it depends on and the log after
// it must give back exactly the state the Service had.
// TestFuzzyCheckpointReplaysExactly writes checkpoints while changes run
// between their records, crashes, and checks that recovery gives exactly
// what the Service held. Each seed fills three queues with several chunks
// of messages, which costs about a second under -race, so the default run
// takes four seeds, whose runs write 8 to 14 checkpoints (past
// maxCheckpointDeps, so the later ones copy the oldest's chunks again);
// TestFuzzyCheckpointReplaysExactlyLong takes twenty more.
func TestFuzzyCheckpointReplaysExactly(t *testing.T) {
	fuzzyCheckpoints(t, []uint64{3, 4, 5, 6})
}

// TestFuzzyCheckpointReplaysExactlyLong is the long run of
// TestFuzzyCheckpointReplaysExactly: seeds 1 to 24 but those it runs.
func TestFuzzyCheckpointReplaysExactlyLong(t *testing.T) {
	longrun.Skip(t)
	seeds := []uint64{1, 2}
	for seed := uint64(7); seed <= 24; seed++ {
		seeds = append(seeds, seed)
	}
	fuzzyCheckpoints(t, seeds)
}

func fuzzyCheckpoints(t *testing.T, seeds []uint64) {
	// Small, so that the later checkpoints copy the oldest's chunks again.
	defer durable.SetMigration(3, 2, 1)()
	maxCheckpointDeps := durable.MaxCheckpointDeps()
	incremental, migrated := 0, 0
	defer func() {
		if incremental == 0 && !t.Failed() {
			t.Error("no recovery used an incremental checkpoint")
		}
		if migrated == 0 && !t.Failed() {
			t.Errorf("no run wrote more than %d checkpoints, so none copied the oldest's chunks again", maxCheckpointDeps+1)
		}
	}()
	for _, seed := range seeds {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 7))
			clk := clock.NewMock()
			mem := vfs.NewMem()
			s, err := Open(testDir, withFS(mem), WithClock(clk), WithCheckpointBytes(1<<40))
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			held := map[string][]Message{}
			names := []string{"alpha", "bravo", "charlie"}
			for _, n := range names {
				q, _, _ := s.CreateQueue(ctx, n, nil)
				for i := 0; i < 3*chunkSize+rng.IntN(chunkSize); i++ {
					ttl := time.Duration(1+rng.IntN(3)) * time.Hour
					if _, err := q.Put(ctx, fmt.Sprint(n, i), &PutOptions{TimeToLive: ttl}); err != nil {
						t.Fatal(err)
					}
				}
			}
			step := 0
			change := func() {
				step++
				name := names[rng.IntN(len(names))]
				q, err := s.Queue(name)
				if err != nil {
					if _, _, err := s.CreateQueue(ctx, name, map[string]string{"step": fmt.Sprint(step)}); err != nil {
						t.Fatal(err)
					}
					return
				}
				switch r := rng.IntN(100); {
				case r < 35:
					q.Put(ctx, fmt.Sprint("new", step), &PutOptions{VisibilityTimeout: time.Duration(rng.IntN(3)) * time.Second})
				case r < 60:
					ms, _ := q.Get(ctx, 1+rng.IntN(32), time.Minute)
					held[name] = append(held[name], ms...)
				case r < 75 && len(held[name]) > 0:
					k := rng.IntN(len(held[name]))
					m := held[name][k]
					held[name] = append(held[name][:k], held[name][k+1:]...)
					q.Delete(ctx, m.ID, m.PopReceipt)
				case r < 85 && len(held[name]) > 0:
					k := rng.IntN(len(held[name]))
					c := fmt.Sprint("updated", step)
					if u, err := q.Update(ctx, held[name][k].ID, held[name][k].PopReceipt, time.Duration(rng.IntN(60))*time.Second, &c); err == nil {
						held[name][k].PopReceipt = u.PopReceipt
					}
				case r < 88:
					q.Clear(ctx)
					held[name] = nil
				case r < 91:
					q.SetMetadata(ctx, map[string]string{"step": fmt.Sprint(step)})
				case r < 93:
					s.DeleteQueue(ctx, name)
					held[name] = nil
				case r < 96:
					clk.Add(time.Duration(rng.IntN(40)) * time.Minute) // some expire
				default:
					// Empty the queue, so that its slots start over.
					for {
						ms, _ := q.Get(ctx, 32, time.Minute)
						if len(ms) == 0 {
							break
						}
						for _, m := range ms {
							q.Delete(ctx, m.ID, m.PopReceipt)
						}
					}
					held[name] = nil
				}
			}
			// Checkpoints as the checkpointer writes them, with the
			// changes running between their records: the first copies
			// every chunk, the next ones refer to the chunks that did not
			// change, and past maxCheckpointDeps they copy the oldest's
			// chunks again.
			s.durable().log.SetTestSink(func(sink durable.Sink) durable.Sink { return &mutatingSink{sink, change} })
			checkpoints := 1 + rng.IntN(16)
			for k := 0; k < checkpoints; k++ {
				if err := s.checkpoint(); err != nil {
					t.Fatal(err)
				}
			}
			for i := 0; i < 50; i++ {
				change()
			}
			want := dump(t, s)
			crash(t, s)
			s2, err := Open(testDir, withFS(mem), WithClock(clk))
			if err != nil {
				t.Fatal(err)
			}
			defer s2.Close()
			st, _ := s2.DurableState()
			if st.Recovery.Checkpoint == "" {
				t.Fatal("recovery did not use the checkpoint")
			}
			if len(st.Recovery.Dependencies) > 0 {
				incremental++
			}
			if checkpoints > maxCheckpointDeps+1 {
				migrated++
			}
			if n := len(st.Recovery.Dependencies); n > maxCheckpointDeps+1 {
				t.Fatalf("after %d checkpoints the newest depends on %d older ones", checkpoints, n)
			}
			if got := dump(t, s2); got != want {
				t.Fatalf("after %d changes during the checkpoint, recovery gives\n%.2000s\nwant\n%.2000s", step, got, want)
			}
		})
	}
}

// failingCheckpoints is a file system on which creating a checkpoint
// file fails while fail is set, counting the attempts.
type failingCheckpoints struct {
	mu       sync.Mutex
	fail     bool
	attempts int
}

func (f *failingCheckpoints) hook(op vfs.Op) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if op.Kind == vfs.OpCreate && strings.Contains(op.Name, "ckpt-") {
		f.attempts++
		if f.fail {
			return errInjected
		}
	}
	return nil
}

func (f *failingCheckpoints) set(fail bool) (attempts int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.fail = fail
	return f.attempts
}

// TestFailedCheckpointIsReportedAndRetried: a checkpoint that fails is
// reported by DurableState and the logger, and operations go on; the
// checkpointer does not try again on every operation that grows the log,
// only after its back-off or when asked; once the disk works again a
// checkpoint succeeds and the report clears.
func TestFailedCheckpointIsReportedAndRetried(t *testing.T) {
	f := &failingCheckpoints{fail: true}
	var logged safeBuffer
	logger := slog.New(slog.NewTextHandler(&logged, &slog.HandlerOptions{Level: slog.LevelDebug}))
	s, err := Open(testDir, withFS(vfs.Inject(vfs.NewMem(), f.hook)), WithCheckpointBytes(2<<10),
		withCheckpointBackoff(time.Hour), WithLogger(logger))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	q, _, _ := s.CreateQueue(ctx, "queue", nil)
	// Enough for the log to pass the threshold many times over.
	for i := 0; i < 1000; i++ {
		if _, err := q.Put(ctx, strings.Repeat("x", 100), nil); err != nil {
			t.Fatalf("Put while checkpoints fail: %v", err)
		}
	}
	// The first attempt runs on its own goroutine: ask for another, which
	// queues behind it, and see both fail.
	if err := s.Checkpoint(ctx); !errors.Is(err, errInjected) {
		t.Fatalf("Checkpoint on a failing disk: %v, want the injected error", err)
	}
	st, _ := s.DurableState()
	if !errors.Is(st.CheckpointErr, errInjected) || st.FailedCheckpoints != 2 || st.Checkpoints != 0 {
		t.Fatalf("DurableState after two failures: error %v, %d failed, %d written; want the injected error, 2, 0",
			st.CheckpointErr, st.FailedCheckpoints, st.Checkpoints)
	}
	if st.LogBytes < 100*1000 {
		t.Fatalf("LogBytes %d after 1,000 Puts of 100 bytes with no checkpoint", st.LogBytes)
	}
	if !strings.Contains(logged.String(), "checkpoint failed") {
		t.Fatalf("the logger did not report the failed checkpoint:\n%s", logged.String())
	}
	// More growth, and no new attempt: the back-off (an hour) holds.
	for i := 0; i < 300; i++ {
		q.Put(ctx, strings.Repeat("x", 100), nil)
	}
	if attempts := f.set(false); attempts != 2 {
		t.Fatalf("%d attempts at a checkpoint, want 2: the checkpointer retried on operations", attempts)
	}
	if err := s.Checkpoint(ctx); err != nil {
		t.Fatalf("Checkpoint once the disk works: %v", err)
	}
	st, _ = s.DurableState()
	if st.CheckpointErr != nil || st.FailedCheckpoints != 0 || st.Checkpoints != 1 || st.LastCheckpoint.IsZero() {
		t.Fatalf("DurableState after a checkpoint: %+v", st)
	}
	if st.LogBytes > 64<<10 {
		t.Fatalf("LogBytes %d right after a checkpoint", st.LogBytes)
	}
}

// TestFailedCheckpointIsRetriedAfterBackoff waits on the real clock (an
// integration test of the back-off timer) for a failing checkpoint to be
// tried again with no operation to prompt it.
func TestFailedCheckpointIsRetriedAfterBackoff(t *testing.T) {
	f := &failingCheckpoints{fail: true}
	s, err := Open(testDir, withFS(vfs.Inject(vfs.NewMem(), f.hook)), WithCheckpointBytes(1<<10), withCheckpointBackoff(time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	q, _, _ := s.CreateQueue(ctx, "queue", nil)
	for i := 0; i < 20; i++ {
		q.Put(ctx, strings.Repeat("x", 100), nil)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		st, _ := s.DurableState()
		if st.FailedCheckpoints >= 3 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d failed attempts after 10 s with a 1 ms back-off", st.FailedCheckpoints)
		}
		time.Sleep(5 * time.Millisecond)
	}
	f.set(false)
	deadline = time.Now().Add(10 * time.Second)
	for {
		if st, _ := s.DurableState(); st.Checkpoints > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no checkpoint 10 s after the disk recovered")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// safeBuffer is a bytes.Buffer for a logger that goroutines share.
type safeBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *safeBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *safeBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

func TestDurableStateOfAnInMemoryService(t *testing.T) {
	s := NewService()
	if _, ok := s.DurableState(); ok {
		t.Fatal("an in-memory Service reports a durable state")
	}
	if err := s.Checkpoint(context.Background()); err != nil {
		t.Fatalf("Checkpoint of an in-memory Service: %v", err)
	}
}

// TestCloseStopsTheCheckpointer: Close waits for the Service's goroutine.
func TestCloseStopsTheCheckpointer(t *testing.T) {
	s, err := Open(testDir, withFS(vfs.NewMem()))
	if err != nil {
		t.Fatal(err)
	}
	done := s.durable().log.Done()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-done:
	default:
		t.Fatal("the checkpointer still runs after Close")
	}
	if err := s.Checkpoint(context.Background()); !errors.Is(err, ErrQueueNotFound) {
		t.Fatalf("Checkpoint after Close: %v, want the closed Service's error", err)
	}
}

func TestRestoreDir(t *testing.T) {
	ctx := context.Background()
	src := NewService()
	a, _, _ := src.CreateQueue(ctx, "alpha", map[string]string{"k": "v"})
	for i := 0; i < 100; i++ {
		a.Put(ctx, fmt.Sprint("m", i), nil)
	}
	got, _ := a.Get(ctx, 10, time.Minute)
	var backup bytes.Buffer
	if err := src.Backup(ctx, &backup); err != nil {
		t.Fatal(err)
	}
	mem := vfs.NewMem()
	if err := restoreDir(testDir, bytes.NewReader(backup.Bytes()), mem); err != nil {
		t.Fatal(err)
	}
	s, err := Open(testDir, withFS(mem))
	if err != nil {
		t.Fatal(err)
	}
	if x, y := dump(t, src), dump(t, s); x != y {
		t.Fatalf("restored into a directory:\n%.500s\nwant\n%.500s", y, x)
	}
	ra, _ := s.Queue("alpha")
	if err := ra.Delete(ctx, got[3].ID, got[3].PopReceipt); err != nil {
		t.Fatalf("Delete with a receipt from before the backup: %v", err)
	}
	ra.Put(ctx, "after", nil)
	s.Close()
	if err := restoreDir(testDir, bytes.NewReader(backup.Bytes()), mem); err == nil {
		t.Fatal("RestoreDir over a directory with a log succeeded")
	}
	damaged := bytes.Clone(backup.Bytes())
	damaged[len(damaged)/2] ^= 1
	other := vfs.NewMem()
	var ce *CorruptError
	if err := restoreDir(testDir, bytes.NewReader(damaged), other); !errors.As(err, &ce) {
		t.Fatalf("RestoreDir of a damaged backup: %v, want a *CorruptError", err)
	}
	if _, err := other.List(testDir); err == nil {
		t.Fatal("RestoreDir of a damaged backup wrote the directory")
	}
}

// TestRecoveryReportsATornTail: Open moves a torn log tail aside and says
// so in RecoveryStats and to the logger (warn), beside what it recovered
// (info), as WithLogger and RecoveryStats promise.
func TestRecoveryReportsATornTail(t *testing.T) {
	ctx := context.Background()
	mem := vfs.NewMem()
	s := mustOpen(t, testDir, withFS(mem))
	q, _, _ := s.CreateQueue(ctx, "queue", nil)
	for i := 0; i < 10; i++ {
		if _, err := q.Put(ctx, fmt.Sprint("message ", i), nil); err != nil {
			t.Fatal(err)
		}
	}
	crash(t, s)
	// A frame cut short after the last one: a length and a kind, a
	// checksum that does not match, and part of a header.
	seg := wal.SegmentName(testDir, 1)
	data, err := mem.ReadFile(seg)
	if err != nil {
		t.Fatal(err)
	}
	// The frames end where the allotted zeros start: the last one holds
	// a Put, whose record ends with the content, "message 9".
	end := len(bytes.TrimRight(data, "\x00"))
	torn := []byte{100, 0, 0, 1, 0xde, 0xad, 0xbe, 0xef, 'c', 'u', 't'}
	f, err := mem.OpenRW(seg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt(torn, int64(end)); err != nil {
		t.Fatal(err)
	}
	f.Close()

	var logged safeBuffer
	logger := slog.New(slog.NewTextHandler(&logged, &slog.HandlerOptions{Level: slog.LevelInfo}))
	s = mustOpen(t, testDir, withFS(mem), WithLogger(logger))
	defer s.Close()
	st, _ := s.DurableState()
	r := st.Recovery
	if r.TornFile == "" || r.TornBytes != int64(len(torn)) || r.Messages != 10 || r.Records != 11 || r.LogBytes == 0 {
		t.Fatalf("RecoveryStats %+v; want the torn tail's file and %d bytes, 10 messages, 11 records", r, len(torn))
	}
	if aside, err := mem.ReadFile(r.TornFile); err != nil || !bytes.Equal(aside, torn) {
		t.Fatalf("the tail moved aside: %q, %v; want %q", aside, err, torn)
	}
	out := logged.String()
	if !strings.Contains(out, "level=INFO msg=\"azq: recovered\"") || !strings.Contains(out, "level=WARN msg=\"azq: moved a torn log tail aside\"") {
		t.Fatalf("the logger did not report the recovery and the torn tail:\n%s", out)
	}
}

// TestDurableTornTailHoldingAFrame: the last message's content carries
// whole frames, built with the log's own encoder as someone who has read
// the source would build them, and a crash cuts the file inside that
// message's frame, after them. What follows the cut-off frame's start is
// then the torn frame's own payload: Open must set it aside and recover
// the 99 messages acknowledged before it, not take a frame-shaped piece
// of content for a frame written after the torn one and refuse the whole
// directory as corrupt.
func TestDurableTornTailHoldingAFrame(t *testing.T) {
	ctx := context.Background()
	var forged bytes.Buffer
	e := wal.NewEncoder(&forged, 1, 100)
	for i := 0; i < 3; i++ {
		if err := e.Append([]byte(fmt.Sprint("forged record ", i))); err != nil {
			t.Fatal(err)
		}
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	for _, cut := range []string{"file ends", "zeros follow"} {
		t.Run(cut, func(t *testing.T) {
			mem := vfs.NewMem()
			s := mustOpen(t, testDir, withFS(mem))
			q, _, _ := s.CreateQueue(ctx, "queue", nil)
			var want []string
			for i := 0; i < 99; i++ {
				want = append(want, fmt.Sprint("message ", i))
				if _, err := q.Put(ctx, want[i], &PutOptions{TimeToLive: NeverExpires}); err != nil {
					t.Fatal(err)
				}
			}
			content := "frames follow:" + forged.String() + strings.Repeat("-", 300)
			if _, err := q.Put(ctx, content, &PutOptions{TimeToLive: NeverExpires}); err != nil {
				t.Fatal(err)
			}
			crash(t, s)

			seg := wal.SegmentName(testDir, 1)
			data, err := mem.ReadFile(seg)
			if err != nil {
				t.Fatal(err)
			}
			at := bytes.Index(data, forged.Bytes())
			if at < 0 {
				t.Fatal("the forged frames are not in the log")
			}
			end := at + forged.Len() + 100 // inside the message's frame
			if cut == "file ends" {
				data = data[:end]
			} else {
				clear(data[end:])
			}
			f, err := mem.Create(seg)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := f.WriteAt(data, 0); err != nil {
				t.Fatal(err)
			}
			f.Sync()
			f.Close()

			s, err = Open(testDir, withFS(mem))
			if err != nil {
				t.Fatalf("Open after a torn frame holding frames: %v", err)
			}
			st, _ := s.DurableState()
			if st.Recovery.Messages != 99 || st.Recovery.TornFile == "" {
				t.Fatalf("RecoveryStats %+v; want 99 messages and the torn tail set aside", st.Recovery)
			}
			aside, err := mem.ReadFile(st.Recovery.TornFile)
			if err != nil || !bytes.HasSuffix(aside, data[at:end]) {
				t.Fatalf("the tail set aside (%v) does not hold the cut frame's bytes", err)
			}
			q, _ = s.Queue("queue")
			got, err := q.Peek(ctx, 32)
			if err != nil || len(got) != 32 || got[0].Content != want[0] {
				t.Fatalf("Peek after recovery: %d messages, %v", len(got), err)
			}
			// The log goes on after the last acknowledged record.
			if _, err := q.Put(ctx, "after", nil); err != nil {
				t.Fatal(err)
			}
			crash(t, s)
			s = mustOpen(t, testDir, withFS(mem))
			defer s.Close()
			if st, _ := s.DurableState(); st.Recovery.Messages != 100 || st.Recovery.TornFile != "" {
				t.Fatalf("second recovery: %+v; want 100 messages and nothing torn", st.Recovery)
			}
		})
	}
}
