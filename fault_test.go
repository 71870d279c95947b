package azq

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/azqlib/azq/internal/vfs"
)

// faults fail operations of a file system on demand: the n-th write
// fails, or tears (writes part of its bytes, then fails); the n-th sync
// fails. Counting starts when arm is called, after Open.
type faults struct {
	mu        sync.Mutex
	armed     bool
	writes    int
	syncs     int
	failWrite int  // fail the write with this number (1-based); 0: never
	tear      bool // a failing write writes part of its bytes first
	failSync  int  // fail the sync with this number; 0: never
}

var errInjected = fmt.Errorf("injected fault: %w", syscall.EIO)

func (f *faults) hook(op vfs.Op) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.armed {
		return nil
	}
	switch op.Kind {
	case vfs.OpWrite:
		if f.writes++; f.writes == f.failWrite {
			if f.tear {
				return &vfs.Torn{Err: errInjected}
			}
			return errInjected
		}
	case vfs.OpSync, vfs.OpDatasync:
		if f.syncs++; f.syncs == f.failSync {
			return errInjected
		}
	}
	return nil
}

func (f *faults) arm() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.armed = true
}

func (f *faults) hit() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.writes >= f.failWrite && f.syncs >= f.failSync
}

func (f *faults) off() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.failWrite, f.failSync = 0, 0
}

const testDir = "/db"

// ackLog is what runUntilFailure had acknowledged.
type ackLog struct {
	live    map[MessageID]ackedMsg
	deleted map[MessageID]bool
	// The operation that failed, and the message it was on (zero for a
	// Put or Get).
	failedOp string
	failedID MessageID
}

type ackedMsg struct {
	receipt  PopReceipt
	dequeues int64
}

// runUntilFailure runs random operations on s, recording what was
// acknowledged, until one fails; it returns that error (nil if none did).
func runUntilFailure(t *testing.T, s *Service, seed uint64, ops int) (*ackLog, error) {
	t.Helper()
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(seed, 1))
	a := &ackLog{live: map[MessageID]ackedMsg{}, deleted: map[MessageID]bool{}}
	q, _, err := s.CreateQueue(ctx, "faults", nil)
	if err != nil {
		return a, err
	}
	var ids []MessageID
	for i := 0; i < ops; i++ {
		switch {
		case len(ids) == 0 || rng.IntN(3) == 0:
			a.failedOp = "put"
			m, err := q.Put(ctx, strings.Repeat("x", rng.IntN(300)), &PutOptions{TimeToLive: NeverExpires})
			if err != nil {
				return a, err
			}
			a.live[m.ID] = ackedMsg{m.PopReceipt, 0}
			ids = append(ids, m.ID)
		case rng.IntN(2) == 0:
			a.failedOp = "get"
			msgs, err := q.Get(ctx, 1+rng.IntN(3), time.Hour)
			if err != nil {
				return a, err
			}
			for _, m := range msgs {
				a.live[m.ID] = ackedMsg{m.PopReceipt, m.DequeueCount}
			}
		default:
			k := rng.IntN(len(ids))
			id := ids[k]
			a.failedOp, a.failedID = "delete", id
			if err := q.Delete(ctx, id, a.live[id].receipt); err != nil {
				return a, err
			}
			delete(a.live, id)
			a.deleted[id] = true
			ids = append(ids[:k], ids[k+1:]...)
		}
		a.failedOp, a.failedID = "", MessageID{}
	}
	return a, nil
}

// checkAcked opens dir on fs and checks that it holds every acknowledged
// message with its acknowledged receipt and dequeue count, none
// acknowledged as deleted, and nothing else but what the failed operation
// may have done: a failed Put may have added one message, a failed Get
// may have taken messages (one more dequeue, a new receipt), a failed
// Delete may have removed its message.
func checkAcked(t *testing.T, fs vfs.FS, a *ackLog) *Service {
	t.Helper()
	s, err := Open(testDir, withFS(fs))
	if err != nil {
		t.Fatalf("reopening: %v", err)
	}
	q, err := s.Queue("faults")
	if err != nil {
		t.Fatalf("the queue is gone: %v", err)
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	have := map[MessageID]ackedMsg{}
	for slot := uint32(0); slot < q.store.next; slot++ {
		if n := q.store.at(slot); n.seq != 0 {
			have[n.id] = ackedMsg{newReceipt(slot, n.version, n.tag), int64(n.dequeues)}
		}
	}
	for id, want := range a.live {
		got, ok := have[id]
		switch {
		case !ok && a.failedOp == "delete" && id == a.failedID:
			// Its failed deletion landed.
		case !ok:
			t.Fatalf("acknowledged message %v is missing", id)
		case got == want:
		case a.failedOp == "get" && got.dequeues == want.dequeues+1 && got.receipt != want.receipt:
			// Taken by the failed Get.
		default:
			t.Fatalf("message %v: receipt %v, dequeue count %d; acknowledged %v, %d (failed operation: %q)",
				id, got.receipt, got.dequeues, want.receipt, want.dequeues, a.failedOp)
		}
	}
	unknown := 0
	for id := range have {
		if a.deleted[id] {
			t.Fatalf("message %v, whose deletion was acknowledged, is back", id)
		}
		if _, ok := a.live[id]; !ok {
			unknown++
		}
	}
	if unknown > 0 && !(unknown == 1 && a.failedOp == "put") {
		t.Fatalf("%d messages that were never acknowledged (failed operation: %q)", unknown, a.failedOp)
	}
	return s
}

func TestDurableFaults(t *testing.T) {
	for _, tc := range []struct {
		name string
		f    func(n int) *faults
	}{
		{"failed write", func(n int) *faults { return &faults{failWrite: n} }},
		{"torn write", func(n int) *faults { return &faults{failWrite: n, tear: true} }},
		{"failed sync", func(n int) *faults { return &faults{failSync: n} }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			opFailures := 0
			defer func() {
				if opFailures < 4 {
					t.Errorf("only %d of 8 faults failed an operation", opFailures)
				}
			}()
			for seed := uint64(1); seed <= 8; seed++ {
				mem := vfs.NewMem()
				f := tc.f(3 + int(seed)*7)
				s, err := Open(testDir, withFS(vfs.Inject(mem, f.hook)), WithCheckpointBytes(4<<10), withCheckpointBackoff(time.Millisecond))
				if err != nil {
					t.Fatal(err)
				}
				f.arm()
				a, err := runUntilFailure(t, s, seed, 400)
				if err == nil {
					// The fault hit a checkpoint, which only delays the
					// removal of the log it would replace: every
					// operation goes on, and nothing is lost.
					if !f.hit() {
						t.Fatalf("seed %d: the fault was never injected", seed)
					}
					if err := s.Close(); err != nil {
						t.Fatalf("seed %d: Close: %v", seed, err)
					}
					checkAcked(t, mem, a).Close()
					continue
				}
				opFailures++
				if !errors.Is(err, ErrStorageFailure) || !errors.Is(err, syscall.EIO) {
					t.Fatalf("seed %d: the failing operation returned %v, want ErrStorageFailure wrapping EIO", seed, err)
				}
				// fsyncgate: after a failure the service refuses changes,
				// even though the disk works again.
				f.off()
				if st, _ := s.DurableState(); !errors.Is(st.Failure, ErrStorageFailure) {
					t.Fatalf("seed %d: DurableState reports failure %v", seed, st.Failure)
				}
				q, qerr := s.Queue("faults")
				if qerr == nil {
					if _, err := q.Put(context.Background(), "after", nil); !errors.Is(err, ErrStorageFailure) {
						t.Fatalf("seed %d: Put after the failure: %v, want ErrStorageFailure", seed, err)
					}
					if _, err := q.Get(context.Background(), 1, time.Second); !errors.Is(err, ErrStorageFailure) {
						t.Fatalf("seed %d: Get after the failure: %v, want ErrStorageFailure", seed, err)
					}
				}
				if _, _, err := s.CreateQueue(context.Background(), "other", nil); !errors.Is(err, ErrStorageFailure) {
					t.Fatalf("seed %d: CreateQueue after the failure: %v, want ErrStorageFailure", seed, err)
				}
				if err := s.Close(); !errors.Is(err, ErrStorageFailure) {
					t.Fatalf("seed %d: Close after the failure: %v, want ErrStorageFailure", seed, err)
				}
				// What a power cut leaves: what was synced.
				mem.Crash()
				img := mem.CrashImage()
				s2 := checkAcked(t, img, a)
				// The recovered directory takes new records and reopens
				// cleanly: a torn tail was cut off, not left behind.
				q2, _ := s2.Queue("faults")
				if _, err := q2.Put(context.Background(), "more", nil); err != nil {
					t.Fatal(err)
				}
				crash(t, s2)
				s3, err := Open(testDir, withFS(img))
				if err != nil {
					t.Fatalf("seed %d: reopening a second time: %v", seed, err)
				}
				s3.Close()
			}
		})
	}
}

// TestDurableFailedWriteKeptWhatWasWritten fails a write and reopens
// the directory as a crash of the process leaves it (everything written
// is there, synced or not; a torn write half there).
func TestDurableFailedWriteKeptWhatWasWritten(t *testing.T) {
	for _, tear := range []bool{false, true} {
		for seed := uint64(1); seed <= 6; seed++ {
			mem := vfs.NewMem()
			f := &faults{failWrite: 5 + int(seed)*9, tear: tear}
			s, err := Open(testDir, withFS(vfs.Inject(mem, f.hook)), WithCheckpointBytes(1<<40))
			if err != nil {
				t.Fatal(err)
			}
			f.arm()
			a, err := runUntilFailure(t, s, seed, 400)
			if err == nil {
				t.Fatalf("seed %d: no operation failed", seed)
			}
			f.off()
			s.Close()
			checkAcked(t, mem, a).Close()
		}
	}
}

func TestDurablePowerCut(t *testing.T) {
	for seed := uint64(1); seed <= 10; seed++ {
		mem := vfs.NewMem()
		mem.SetTornWrites(rand.New(rand.NewPCG(seed, 9)))
		s, err := Open(testDir, withFS(mem), WithCheckpointBytes(8<<10))
		if err != nil {
			t.Fatal(err)
		}
		a, err := runUntilFailure(t, s, seed, 50+int(seed)*40)
		if err != nil {
			t.Fatal(err)
		}
		mem.Crash()
		s.Close()
		checkAcked(t, mem.CrashImage(), a).Close()
	}
}

// TestDurableCorruptionIsAnError flips a bit in the middle of a real
// log on disk.
func TestDurableCorruptionIsAnError(t *testing.T) {
	dir := t.TempDir()
	s := mustOpen(t, dir)
	q, _, _ := s.CreateQueue(context.Background(), "corrupt", nil)
	for i := 0; i < 20; i++ {
		q.Put(context.Background(), "message", nil)
	}
	crash(t, s)
	name := filepath.Join(dir, "wal-0000000000000001")
	data, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	// Damage a record in the middle; everything after it is intact.
	end := len(strings.TrimRight(string(data), "\x00"))
	data[end/2] ^= 0x40
	if err := os.WriteFile(name, data, 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = Open(dir)
	var ce *CorruptError
	if !errors.As(err, &ce) || ce.File != name || ce.Offset <= 0 || ce.Offset > int64(end/2) {
		t.Fatalf("Open of a damaged log: %v, want a CorruptError naming %s and an offset before %d", err, name, end/2)
	}
	if !strings.Contains(err.Error(), name) {
		t.Fatalf("the error %q does not name the file", err)
	}
}

func TestDurableLockedDirectory(t *testing.T) {
	dir := t.TempDir()
	s := mustOpen(t, dir)
	if _, err := Open(dir); err == nil {
		t.Fatal("a second Open of an open directory succeeded")
	}
	s.Close()
	s = mustOpen(t, dir)
	s.Close()
}

// TestDurableLockSurvivesDeletedLockFile deletes every file named LOCK in
// an open directory, as a careless cleanup might: a second Open must still
// fail, since two writers on one log would destroy it.
func TestDurableLockSurvivesDeletedLockFile(t *testing.T) {
	dir := t.TempDir()
	s := mustOpen(t, dir)
	defer s.Close()
	if err := os.Remove(filepath.Join(dir, "LOCK")); err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, "LOCK"), nil, 0o644) // a new one, as a second process would make
	if s2, err := Open(dir); err == nil {
		s2.Close()
		t.Fatal("a second Open succeeded after the lock file was deleted")
	}
}

// TestDurableIntervalSync checks WithSyncInterval's promise: an operation
// returns without a sync, and the sync follows within the interval. The
// timer runs on the real clock, so this is a test of the real clock, in two
// parts that no delay of the machine can fail: with an interval of an hour,
// fifty Puts return and none is synced (it once used 20 ms here, and a
// loaded machine that took longer than that over the Puts saw the timer's
// sync among them); with an interval of a millisecond, one Put is followed
// by a sync without any other operation.
func TestDurableIntervalSync(t *testing.T) {
	var mu sync.Mutex
	syncs := 0
	count := func() int { mu.Lock(); defer mu.Unlock(); return syncs }
	open := func(interval time.Duration) *Service {
		fs := vfs.Inject(vfs.NewMem(), func(op vfs.Op) error {
			if op.Kind == vfs.OpSync || op.Kind == vfs.OpDatasync {
				mu.Lock()
				syncs++
				mu.Unlock()
			}
			return nil
		})
		s, err := Open(testDir, withFS(fs), WithSyncInterval(interval))
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	ctx := context.Background()

	s := open(time.Hour)
	q, _, _ := s.CreateQueue(ctx, "interval", nil)
	if err := s.durable().log.WAL().Sync(); err != nil {
		t.Fatal(err)
	}
	before := count()
	for i := 0; i < 50; i++ {
		if _, err := q.Put(ctx, "m", nil); err != nil {
			t.Fatal(err)
		}
	}
	if n := count() - before; n > 1 {
		t.Fatalf("%d syncs for 50 Puts with interval sync, want at most the one of an allotment", n)
	}
	s.Close()

	s = open(time.Millisecond)
	defer s.Close()
	q, _, _ = s.CreateQueue(ctx, "interval", nil)
	if err := s.durable().log.WAL().Sync(); err != nil {
		t.Fatal(err)
	}
	before = count()
	if _, err := q.Put(ctx, "m", nil); err != nil {
		t.Fatal(err)
	}
	// A hang guard only: the sync is due a millisecond after the Put.
	for deadline := time.Now().Add(time.Minute); count() == before; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("no sync a minute after a Put, with a 1 ms interval")
		}
	}
}
