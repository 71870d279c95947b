package wal

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/azqlib/azq/internal/vfs"
)

const dir = "/log"

// replayed is what a Replay collected.
type replayed struct {
	ckpt    []string
	records []string
	lsns    []LSN
}

func (r *replayed) replay() Replay {
	return Replay{
		Checkpoint: func(rec []byte) error { r.ckpt = append(r.ckpt, string(rec)); return nil },
		Record: func(lsn LSN, rec []byte) error {
			r.records = append(r.records, string(rec))
			r.lsns = append(r.lsns, lsn)
			return nil
		},
	}
}

func open(t testing.TB, fs vfs.FS, o Options) (*Log, *replayed, Recovery) {
	t.Helper()
	o.FS = fs
	var r replayed
	l, rec, err := Open(dir, o, r.replay())
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	return l, &r, rec
}

func mustNil(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// appendN appends n records named prefix-i and waits for each.
func appendN(t testing.TB, l *Log, prefix string, n int) []string {
	t.Helper()
	var recs []string
	for i := 0; i < n; i++ {
		r := fmt.Sprintf("%s-%d", prefix, i)
		mustNil(t, l.Wait(l.Append([]byte(r))))
		recs = append(recs, r)
	}
	return recs
}

// checkpoint writes a checkpoint holding the records ckpt.
func checkpoint(t testing.TB, l *Log, ckpt ...string) {
	t.Helper()
	mustNil(t, l.Prepare())
	gen, base, err := l.Rotate()
	mustNil(t, err)
	c, err := l.CreateCheckpoint(gen, base)
	mustNil(t, err)
	for _, r := range ckpt {
		mustNil(t, c.Append([]byte(r)))
	}
	mustNil(t, c.Commit())
}

func equal(a, b []string) bool { return strings.Join(a, "\n") == strings.Join(b, "\n") }

func TestReopenReplaysEverything(t *testing.T) {
	fs := vfs.NewMem()
	l, r, _ := open(t, fs, Options{})
	if len(r.records) != 0 {
		t.Fatalf("a new log replayed %q", r.records)
	}
	want := appendN(t, l, "a", 50)
	mustNil(t, l.Close())

	l, r, rec := open(t, fs, Options{})
	if !equal(r.records, want) || rec.Last != 50 || r.lsns[49] != 50 || r.lsns[0] != 1 {
		t.Fatalf("replayed %d records, last LSN %d; want 50", len(r.records), rec.Last)
	}
	// Appending goes on after the last record.
	want = append(want, appendN(t, l, "b", 3)...)
	checkpoint(t, l, "state")
	want2 := appendN(t, l, "c", 3)
	mustNil(t, l.Close())

	_, r, rec = open(t, fs, Options{})
	if !equal(r.ckpt, []string{"state"}) || !equal(r.records, want2) || r.lsns[0] != 54 || rec.Base != 53 {
		t.Fatalf("after a checkpoint: checkpoint %q, records %q from %v, base %d", r.ckpt, r.records, r.lsns, rec.Base)
	}
	names, _ := fs.List(dir)
	for _, n := range names {
		if n == filepath.Base(SegmentName(dir, 1)) || n == filepath.Base(CheckpointName(dir, 1)) {
			t.Fatalf("%s is still there after the checkpoint that replaces it: %v", n, names)
		}
	}
	_ = want
}

func TestSecondOpenIsRefused(t *testing.T) {
	fs := vfs.NewMem()
	l, _, _ := open(t, fs, Options{})
	if _, _, err := Open(dir, Options{FS: fs}, Replay{}); !errors.Is(err, vfs.ErrLocked) {
		t.Fatalf("second Open: %v, want ErrLocked", err)
	}
	mustNil(t, l.Close())
	l, _, _ = open(t, fs, Options{})
	l.Close()
}

func TestGroupCommitSharesSyncs(t *testing.T) {
	l, _, _ := open(t, vfs.NewMem(), Options{})
	defer l.Close()
	l.ResetStats()
	const callers, each = 8, 200
	var wg sync.WaitGroup
	for c := 0; c < callers; c++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < each; i++ {
				if err := l.Wait(l.Append([]byte("x"))); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	st := l.Stats()
	if st.Syncs >= callers*each {
		t.Fatalf("%d syncs for %d records from %d callers: no sync was shared", st.Syncs, callers*each, callers)
	}
	t.Logf("%d records, %d writes, %d syncs", callers*each, st.Writes, st.Syncs)
}

func TestFailureIsSticky(t *testing.T) {
	mem := vfs.NewMem()
	var failNext bool
	var mu sync.Mutex
	fs := vfs.Inject(mem, func(op vfs.Op) error {
		mu.Lock()
		defer mu.Unlock()
		if failNext && op.Kind == vfs.OpDatasync {
			failNext = false
			return errors.New("injected EIO")
		}
		return nil
	})
	var calls []error
	l, _, _ := open(t, fs, Options{OnFailure: func(err error) { calls = append(calls, err) }})
	appendN(t, l, "ok", 3)
	mu.Lock()
	failNext = true
	mu.Unlock()
	err := l.Wait(l.Append([]byte("fails")))
	var fe *FailedError
	if !errors.As(err, &fe) || fe.Op != "sync" {
		t.Fatalf("Wait with a failing sync: %v, want a FailedError of the sync", err)
	}
	// The disk works again, but the log stays failed.
	if err2 := l.Wait(l.Append([]byte("after"))); err2 != err {
		t.Fatalf("Wait after the failure: %v, want the same %v", err2, err)
	}
	if len(calls) != 1 || calls[0] != err {
		t.Fatalf("OnFailure called with %v, want once with %v", calls, err)
	}
	if cerr := l.Close(); cerr != err {
		t.Fatalf("Close: %v, want %v", cerr, err)
	}
}

func TestWaitAfterCloseIsErrClosed(t *testing.T) {
	l, _, _ := open(t, vfs.NewMem(), Options{})
	lsn := l.Append([]byte("x"))
	mustNil(t, l.Close())
	// The record appended before Close was synced by it.
	mustNil(t, l.Wait(lsn))
	if err := l.Wait(l.Append([]byte("y"))); !errors.Is(err, ErrClosed) {
		t.Fatalf("Wait after Close: %v", err)
	}
}

// TestIntervalSync checks SyncInterval's promise: Wait returns before
// the record is synced, and the sync follows within the interval. The
// timer runs on the real clock, so this is a test of the real clock, in two
// parts that no delay of the machine can fail: with an interval of an hour,
// twenty Waits return and none syncs (it once used 20 ms here, and a
// loaded machine that took longer than that over the Waits saw the timer's
// sync among them); with an interval of a millisecond, the sync of one
// record follows without any other call.
func TestIntervalSync(t *testing.T) {
	l, _, _ := open(t, vfs.NewMem(), Options{SyncInterval: time.Hour})
	mustNil(t, l.Sync())
	l.ResetStats()
	for i := 0; i < 20; i++ {
		mustNil(t, l.Wait(l.Append([]byte("x"))))
	}
	if st := l.Stats(); st.Syncs > 1 {
		t.Fatalf("%d syncs for 20 records with interval sync, want at most the one of the first allotment", st.Syncs)
	}
	mustNil(t, l.Close())

	l, _, _ = open(t, vfs.NewMem(), Options{SyncInterval: time.Millisecond})
	defer l.Close()
	mustNil(t, l.Sync())
	mustNil(t, l.Wait(l.Append([]byte("x"))))
	// A hang guard only: the sync is due a millisecond after the write.
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(time.Millisecond) {
		l.mu.Lock()
		synced, written := l.synced, l.written
		l.mu.Unlock()
		if synced == written {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no sync a minute after a write, with a 1 ms interval")
		}
	}
}

// TestCrashKeepsEveryAcknowledgedRecord crashes a MemFS at every
// mutating operation of a workload that appends from several goroutines,
// rotates and checkpoints, and checks that what recovery finds holds
// every record whose Wait returned, in order.
func TestCrashKeepsEveryAcknowledgedRecord(t *testing.T) {
	if loss := crashSweep(t, nil); len(loss) > 0 {
		t.Fatalf("%d of the crashes lost acknowledged records; the first: %s", len(loss), loss[0])
	}
}

// TestCrashSweepNoticesMissingSyncs is the sweep's own test: with file
// syncs, or directory syncs, turned into no-ops, some crash must lose an
// acknowledged record, and the sweep must say so.
func TestCrashSweepNoticesMissingSyncs(t *testing.T) {
	for _, tc := range []struct {
		name        string
		files, dirs bool
	}{{"no file syncs", true, false}, {"no directory syncs", false, true}} {
		t.Run(tc.name, func(t *testing.T) {
			loss := crashSweep(t, func(m *vfs.MemFS) { m.IgnoreSyncs(tc.files, tc.dirs) })
			if len(loss) == 0 {
				t.Fatal("no crash lost an acknowledged record: the sweep cannot tell a missing sync")
			}
			t.Logf("%d crashes lost data; the first: %s", len(loss), loss[0])
		})
	}
}

// crashSweep runs the workload once to count its operations, then once
// for each operation with a crash there, and returns a description of
// every crash after which recovery failed or lost an acknowledged record.
func crashSweep(t *testing.T, mutate func(*vfs.MemFS)) []string {
	var count atomic.Int64
	crashWorkload(vfs.Inject(vfs.NewMem(), func(op vfs.Op) error {
		if op.Kind.Mutates() {
			count.Add(1)
		}
		return nil
	}), func(string) {})
	var loss []string
	for at := 1; at <= int(count.Load())+5; at++ {
		mem := vfs.NewMem()
		if mutate != nil {
			mutate(mem)
		}
		if at%2 == 0 {
			mem.SetTornWrites(rand.New(rand.NewPCG(uint64(at), 3)))
		}
		var n atomic.Int64
		fs := vfs.Inject(mem, func(op vfs.Op) error {
			if op.Kind.Mutates() && n.Add(1) == int64(at) {
				mem.Crash()
			}
			return nil
		})
		var acked []string
		var mu sync.Mutex
		crashWorkload(fs, func(r string) { mu.Lock(); acked = append(acked, r); mu.Unlock() })
		mem.Crash()
		var got replayed
		_, rec, err := Open(dir, Options{FS: mem.CrashImage(), AllotBytes: 4096}, got.replay())
		if err != nil {
			loss = append(loss, fmt.Sprintf("crash at operation %d of %d: reopening: %v", at, count.Load(), err))
			continue
		}
		have := map[string]bool{}
		for _, r := range got.ckpt {
			have[r] = true
		}
		for i, r := range got.records {
			have[r] = true
			if got.lsns[i] != rec.Base+LSN(i)+1 {
				t.Fatalf("crash at operation %d: LSNs %v do not follow the checkpoint's %d", at, got.lsns, rec.Base)
			}
		}
		for _, r := range acked {
			if !have[r] {
				loss = append(loss, fmt.Sprintf("crash at operation %d of %d: acknowledged record %q is missing (recovered %d records after a checkpoint of %d)", at, count.Load(), r, len(got.records), len(got.ckpt)))
				break
			}
		}
	}
	return loss
}

// crashWorkload appends records from three goroutines and checkpoints
// three times meanwhile, each checkpoint holding the records up to its
// base, as a caller's state would. acked is told of each record whose
// Wait returned.
func crashWorkload(fs vfs.FS, acked func(string)) {
	l, _, err := Open(dir, Options{FS: fs, AllotBytes: 4096}, Replay{Checkpoint: func([]byte) error { return nil }, Record: func(LSN, []byte) error { return nil }})
	if err != nil {
		return
	}
	var (
		mu    sync.Mutex // orders Append with Rotate, as a caller's lock does
		byLSN = map[LSN]string{}
		wg    sync.WaitGroup
	)
	for c := 0; c < 3; c++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 40; i++ {
				r := fmt.Sprintf("c%d-%d-%s", c, i, strings.Repeat("x", i*7%100))
				mu.Lock()
				lsn := l.Append([]byte(r))
				byLSN[lsn] = r
				mu.Unlock()
				if l.Wait(lsn) != nil {
					return
				}
				acked(r)
			}
		}()
	}
	for k := 0; k < 3; k++ {
		if l.Prepare() != nil {
			break
		}
		mu.Lock()
		gen, base, err := l.Rotate()
		var state []string
		for lsn := LSN(1); lsn <= base; lsn++ {
			state = append(state, byLSN[lsn])
		}
		mu.Unlock()
		if err != nil {
			break
		}
		c, err := l.CreateCheckpoint(gen, base)
		if err != nil {
			break
		}
		for _, r := range state {
			c.Append([]byte(r))
		}
		if c.Commit() != nil {
			break
		}
	}
	wg.Wait()
	l.Close()
}

// TestMaxRecordFits writes the largest record to a log on disk, not in
// the in-memory file system, which copies every byte written several
// times: under -race that took seconds for these 16 MiB.
func TestMaxRecordFits(t *testing.T) {
	dir := t.TempDir()
	var r replayed
	l, _, err := Open(dir, Options{FS: vfs.OS}, r.replay())
	mustNil(t, err)
	big := bytes.Repeat([]byte{7}, MaxRecord)
	mustNil(t, l.Wait(l.Append(big)))
	mustNil(t, l.Close())
	l, _, err = Open(dir, Options{FS: vfs.OS}, r.replay())
	mustNil(t, err)
	defer l.Close()
	if len(r.records) != 1 || r.records[0] != string(big) {
		t.Fatalf("the largest record did not come back whole")
	}
}

var _ = binary.LittleEndian
var _ = os.ErrNotExist

// TestCheckpointDependencies: a checkpoint that depends on older ones
// keeps them, through its own commit and through Open, and Open gives
// their records to Replay.Dependency, oldest first, before its own; a
// checkpoint that depends on none lets them go.
func TestCheckpointDependencies(t *testing.T) {
	fs := vfs.NewMem()
	l, _, _ := open(t, fs, Options{})
	checkpoint(t, l, "two")
	commit := func(deps []uint64, recs ...string) uint64 {
		mustNil(t, l.Prepare())
		gen, base, err := l.Rotate()
		mustNil(t, err)
		c, err := l.CreateCheckpoint(gen, base, deps...)
		mustNil(t, err)
		for _, r := range recs {
			mustNil(t, c.Append([]byte(r)))
		}
		mustNil(t, c.Commit())
		return gen
	}
	g3 := commit([]uint64{2}, "three")
	g4 := commit([]uint64{2, g3}, "four")
	mustNil(t, l.Close())
	type dep struct {
		gen uint64
		rec string
	}
	var deps []dep
	var own []string
	reopen := func() *Log {
		deps, own = nil, nil
		l, rec, err := Open(dir, Options{FS: fs}, Replay{
			Dependency: func(gen uint64, p []byte) error { deps = append(deps, dep{gen, string(p)}); return nil },
			Checkpoint: func(p []byte) error { own = append(own, string(p)); return nil },
			Record:     func(LSN, []byte) error { return nil },
		})
		mustNil(t, err)
		if len(rec.Dependencies) != len(deps) {
			t.Fatalf("Recovery names %d dependencies, %d were read", len(rec.Dependencies), len(deps))
		}
		return l
	}
	l = reopen()
	if want := []dep{{2, "two"}, {g3, "three"}}; fmt.Sprint(deps) != fmt.Sprint(want) || !equal(own, []string{"four"}) {
		t.Fatalf("replayed dependencies %v and %q, want %v and [four]", deps, own, want)
	}
	_ = g4
	// A checkpoint that depends on none: the older ones go.
	commit(nil, "five")
	mustNil(t, l.Close())
	l = reopen()
	defer l.Close()
	if len(deps) != 0 || !equal(own, []string{"five"}) {
		t.Fatalf("after a whole checkpoint: dependencies %v, records %q", deps, own)
	}
	names, _ := fs.List(dir)
	for _, n := range names {
		if strings.HasPrefix(n, "ckpt-") && n != filepath.Base(CheckpointName(dir, g4+1)) {
			t.Fatalf("%s is still there: %v", n, names)
		}
	}
}

// TestMissingDependencyIsNamed: a checkpoint whose dependency was deleted
// is refused, naming the dependency.
func TestMissingDependencyIsNamed(t *testing.T) {
	fs := vfs.NewMem()
	l, _, _ := open(t, fs, Options{})
	checkpoint(t, l, "two")
	mustNil(t, l.Prepare())
	gen, base, err := l.Rotate()
	mustNil(t, err)
	c, err := l.CreateCheckpoint(gen, base, 2)
	mustNil(t, err)
	mustNil(t, c.Commit())
	mustNil(t, l.Close())
	mustNil(t, fs.Remove(CheckpointName(dir, 2)))
	_, _, err = Open(dir, Options{FS: fs}, Replay{})
	var ce *CorruptError
	if !errors.As(err, &ce) || ce.File != CheckpointName(dir, 2) || ce.Offset != -1 {
		t.Fatalf("Open without a dependency: %v, want a CorruptError naming %s", err, CheckpointName(dir, 2))
	}
}
