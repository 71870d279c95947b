package azq

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// faultFS is the real file system with faults on demand: the n-th write
// fails, or tears (writes part of its bytes, then fails); the n-th sync
// fails. It also remembers how much of each file was synced and which
// ranges were written since, so that powerCut can drop everything not
// synced, as losing power would.
type faultFS struct {
	osFS
	mu        sync.Mutex
	writes    int
	syncs     int
	failWrite int  // fail the write with this number (1-based); 0: never
	tear      bool // a failing write writes part of its bytes first
	failSync  int  // fail the sync with this number; 0: never
	synced    map[string]int64
	dirty     map[string][][2]int64 // ranges written since the last sync
}

var errInjected = fmt.Errorf("injected fault: %w", syscall.EIO)

type faultFile struct {
	fs   *faultFS
	f    *os.File
	name string
}

func (fs *faultFS) open(name string, flag int) (file, error) {
	f, err := os.OpenFile(name, flag, 0o644)
	if err != nil {
		return nil, err
	}
	fs.mu.Lock()
	if fs.synced == nil {
		fs.synced = map[string]int64{}
		fs.dirty = map[string][][2]int64{}
	}
	if _, ok := fs.synced[name]; !ok || flag&os.O_TRUNC != 0 {
		st, _ := f.Stat()
		fs.synced[name] = st.Size()
		if flag&os.O_TRUNC != 0 {
			fs.synced[name] = 0
		}
	}
	fs.mu.Unlock()
	return &faultFile{fs, f, name}, nil
}

func (fs *faultFS) OpenRW(name string) (file, error) {
	return fs.open(name, os.O_RDWR|os.O_CREATE)
}

func (fs *faultFS) Create(name string) (file, error) {
	return fs.open(name, os.O_WRONLY|os.O_TRUNC|os.O_CREATE)
}

func (fs *faultFS) Rename(from, to string) error {
	fs.mu.Lock()
	if n, ok := fs.synced[from]; ok {
		fs.synced[to] = n
		delete(fs.synced, from)
	}
	fs.mu.Unlock()
	return os.Rename(from, to)
}

func (f *faultFile) Write(b []byte) (int, error) {
	off, err := f.f.Seek(0, io.SeekCurrent)
	if err != nil {
		return 0, err
	}
	n, err := f.WriteAt(b, off)
	f.f.Seek(off+int64(n), io.SeekStart)
	return n, err
}

func (f *faultFile) WriteAt(b []byte, off int64) (int, error) {
	f.fs.mu.Lock()
	f.fs.writes++
	fail := f.fs.writes == f.fs.failWrite
	tear := f.fs.tear
	f.fs.dirty[f.name] = append(f.fs.dirty[f.name], [2]int64{off, off + int64(len(b))})
	f.fs.mu.Unlock()
	if fail {
		if tear && len(b) > 1 {
			n, _ := f.f.WriteAt(b[:len(b)/2], off)
			return n, errInjected
		}
		return 0, errInjected
	}
	return f.f.WriteAt(b, off)
}

func (f *faultFile) Datasync() error { return f.Sync() }

func (f *faultFile) Sync() error {
	f.fs.mu.Lock()
	f.fs.syncs++
	fail := f.fs.syncs == f.fs.failSync
	f.fs.mu.Unlock()
	if fail {
		return errInjected
	}
	if err := f.f.Sync(); err != nil {
		return err
	}
	st, err := f.f.Stat()
	if err != nil {
		return err
	}
	f.fs.mu.Lock()
	f.fs.synced[f.name] = st.Size()
	delete(f.fs.dirty, f.name)
	f.fs.mu.Unlock()
	return nil
}

func (f *faultFile) Truncate(n int64) error { return f.f.Truncate(n) }
func (f *faultFile) Close() error           { return f.f.Close() }

// powerCut cuts every file back to what was synced of it: what was
// written since its last sync is lost (zeroed, the worst a file system
// may leave), and the file has its last synced size.
func (fs *faultFS) powerCut(t *testing.T) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	for name, n := range fs.synced {
		f, err := os.OpenFile(name, os.O_WRONLY, 0)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range fs.dirty[name] {
			if r[0] < n {
				f.WriteAt(make([]byte, min(r[1], n)-r[0]), r[0])
			}
		}
		if err := f.Truncate(n); err != nil {
			t.Fatal(err)
		}
		f.Close()
	}
}

// ackLog runs random operations on s and records what was acknowledged,
// until one fails; it returns that error (nil if none did).
type ackLog struct {
	live    map[MessageID]PopReceipt
	deleted map[MessageID]bool
	pending MessageID // the message of the operation that failed, if any
}

func runUntilFailure(t *testing.T, s *Service, seed uint64, ops int) (*ackLog, error) {
	t.Helper()
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(seed, 1))
	a := &ackLog{live: map[MessageID]PopReceipt{}, deleted: map[MessageID]bool{}}
	q, _, err := s.CreateQueue(ctx, "faults", nil)
	if err != nil {
		return a, err
	}
	var ids []MessageID
	for i := 0; i < ops; i++ {
		switch {
		case len(ids) == 0 || rng.IntN(3) == 0:
			m, err := q.Put(ctx, strings.Repeat("x", rng.IntN(300)), &PutOptions{TimeToLive: NeverExpires})
			if err != nil {
				return a, err
			}
			a.live[m.ID] = m.PopReceipt
			ids = append(ids, m.ID)
		case rng.IntN(2) == 0:
			msgs, err := q.Get(ctx, 1+rng.IntN(3), time.Hour)
			if err != nil {
				return a, err
			}
			for _, m := range msgs {
				a.live[m.ID] = m.PopReceipt
			}
		default:
			k := rng.IntN(len(ids))
			id := ids[k]
			a.pending = id
			if err := q.Delete(ctx, id, a.live[id]); err != nil {
				return a, err
			}
			delete(a.live, id)
			a.deleted[id] = true
			ids = append(ids[:k], ids[k+1:]...)
		}
	}
	return a, nil
}

// checkAcked reopens dir and checks that it holds every acknowledged
// message with its acknowledged receipt and none acknowledged as deleted.
func checkAcked(t *testing.T, dir string, a *ackLog) *Service {
	t.Helper()
	s, err := Open(dir)
	if err != nil {
		t.Fatalf("reopening: %v", err)
	}
	q, err := s.Queue("faults")
	if err != nil {
		t.Fatalf("the queue is gone: %v", err)
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	have := map[MessageID]PopReceipt{}
	for slot := uint32(0); slot < q.store.next; slot++ {
		if n := q.store.at(slot); n.seq != 0 {
			have[n.id] = newReceipt(slot, n.version, n.tag)
		}
	}
	for id, r := range a.live {
		got, ok := have[id]
		if id == a.pending {
			continue // its failed operation may or may not have landed
		}
		if !ok {
			t.Fatalf("acknowledged message %v is missing", id)
		}
		if got != r {
			// Only a Get in flight when the fault hit can have changed it.
			continue
		}
	}
	for id := range a.deleted {
		if _, ok := have[id]; ok {
			t.Fatalf("message %v, whose deletion was acknowledged, is back", id)
		}
	}
	return s
}

func TestDurableFaults(t *testing.T) {
	for _, tc := range []struct {
		name string
		fs   func(n int) *faultFS
	}{
		{"failed write", func(n int) *faultFS { return &faultFS{failWrite: n} }},
		{"torn write", func(n int) *faultFS { return &faultFS{failWrite: n, tear: true} }},
		{"failed sync", func(n int) *faultFS { return &faultFS{failSync: n} }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			opFailures := 0
			defer func() {
				if opFailures < 4 {
					t.Errorf("only %d of 8 faults failed an operation", opFailures)
				}
			}()
			for seed := uint64(1); seed <= 8; seed++ {
				dir := t.TempDir()
				fs := tc.fs(3 + int(seed)*7)
				s, err := Open(dir, withFS(fs), WithCheckpointBytes(4<<10))
				if err != nil {
					t.Fatal(err)
				}
				a, err := runUntilFailure(t, s, seed, 400)
				if err == nil {
					// The fault hit a checkpoint's snapshot, which only
					// delays the removal of the log it would replace:
					// every operation goes on, and nothing is lost.
					fs.mu.Lock()
					hit := fs.writes >= fs.failWrite && fs.syncs >= fs.failSync
					fs.mu.Unlock()
					if !hit {
						t.Fatalf("seed %d: the fault was never injected", seed)
					}
					if err := s.Close(); err != nil {
						t.Fatalf("seed %d: Close: %v", seed, err)
					}
					checkAcked(t, dir, a).Close()
					continue
				}
				opFailures++
				if !errors.Is(err, ErrStorageFailure) {
					t.Fatalf("seed %d: the failing operation returned %v, want ErrStorageFailure", seed, err)
				}
				// fsyncgate: after a failure the service refuses changes,
				// even though the disk works again.
				fs.mu.Lock()
				fs.failWrite, fs.failSync = 0, 0
				fs.mu.Unlock()
				waitFailed(t, s)
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
				s2 := checkAcked(t, dir, a)
				// The recovered directory takes new records and reopens
				// cleanly: a torn tail was cut off, not left behind.
				q2, _ := s2.Queue("faults")
				if _, err := q2.Put(context.Background(), "more", nil); err != nil {
					t.Fatal(err)
				}
				crash(t, s2)
				s3, err := Open(dir)
				if err != nil {
					t.Fatalf("seed %d: reopening a second time: %v", seed, err)
				}
				s3.Close()
			}
		})
	}
}

// waitFailed waits until the log's failure has reached every queue, which
// happens on a goroutine of its own.
func waitFailed(t *testing.T, s *Service) {
	t.Helper()
	for i := 0; i < 1000; i++ {
		s.mu.Lock()
		f := s.failure
		s.mu.Unlock()
		if f != nil {
			return
		}
		time.Sleep(time.Millisecond)
	}
	t.Fatal("the service did not learn of the failure")
}

func TestDurablePowerCut(t *testing.T) {
	for seed := uint64(1); seed <= 10; seed++ {
		dir := t.TempDir()
		fs := &faultFS{}
		s, err := Open(dir, withFS(fs), WithCheckpointBytes(8<<10))
		if err != nil {
			t.Fatal(err)
		}
		a, err := runUntilFailure(t, s, seed, 50+int(seed)*40)
		if err != nil {
			t.Fatal(err)
		}
		crash(t, s)
		fs.powerCut(t)
		s2 := checkAcked(t, dir, a)
		s2.Close()
	}
}

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
	data[len(data)/2] ^= 0x40
	if err := os.WriteFile(name, data, 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = Open(dir)
	var ce *CorruptError
	if !errors.As(err, &ce) || ce.File != name || ce.Offset <= 0 || ce.Offset > int64(len(data)/2) {
		t.Fatalf("Open of a damaged log: %v, want a CorruptError naming %s and an offset before %d", err, name, len(data)/2)
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

var _ io.Closer = (*faultFile)(nil)

// TestDurableIntervalSync checks SyncInterval's promise on the real clock
// (an integration test of the timer, so it waits): an operation returns
// without a sync, and the sync follows within the interval.
func TestDurableIntervalSync(t *testing.T) {
	fs := &faultFS{}
	s, err := Open(t.TempDir(), withFS(fs), WithSync(SyncInterval(20*time.Millisecond)))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	q, _, _ := s.CreateQueue(ctx, "interval", nil)
	time.Sleep(100 * time.Millisecond) // the creation's sync
	syncs := func() int { fs.mu.Lock(); defer fs.mu.Unlock(); return fs.syncs }
	before := syncs()
	for i := 0; i < 50; i++ {
		if _, err := q.Put(ctx, "m", nil); err != nil {
			t.Fatal(err)
		}
	}
	if n := syncs() - before; n > 1 {
		t.Fatalf("%d syncs for 50 Puts with interval sync, want at most the one of an allotment", n)
	}
	deadline := time.Now().Add(5 * time.Second)
	for syncs() == before {
		if time.Now().After(deadline) {
			t.Fatal("no sync within 5 s of the writes, with a 20 ms interval")
		}
		time.Sleep(5 * time.Millisecond)
	}
	w := s.dur.w
	w.mu.Lock()
	synced, written := w.synced, w.written
	w.mu.Unlock()
	if synced != written {
		t.Fatalf("after the interval sync: %d records synced of %d written", synced, written)
	}
}
