package azq

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/tidwall/btree"
)

// durableSeeds returns a real log and a real snapshot made by a short
// workload with every kind of record.
func durableSeeds(tb testing.TB) (log, snap []byte) {
	tb.Helper()
	dir := tb.TempDir()
	clk := clock.NewMock()
	s, err := Open(dir, WithClock(clk))
	if err != nil {
		tb.Fatal(err)
	}
	ctx := context.Background()
	q, _, _ := s.CreateQueue(ctx, "seeds", map[string]string{"a": "b"})
	q.SetMetadata(ctx, map[string]string{"c": "d"})
	q.SetAccessPolicies(ctx, []AccessPolicy{{ID: "id", Start: clk.Now(), Expiry: clk.Now().Add(time.Hour), Permission: "r"}})
	m1, _ := q.Put(ctx, "one", nil)
	q.Put(ctx, "two", &PutOptions{VisibilityTimeout: time.Second, TimeToLive: NeverExpires})
	got, _ := q.Get(ctx, 2, time.Minute)
	c := "changed"
	if len(got) > 0 {
		q.Update(ctx, got[0].ID, got[0].PopReceipt, 0, &c)
	}
	q.Delete(ctx, m1.ID, m1.PopReceipt)
	other, _, _ := s.CreateQueue(ctx, "other", nil)
	other.Put(ctx, "x", nil)
	other.Clear(ctx)
	s.DeleteQueue(ctx, "other")
	log, err = os.ReadFile(filepath.Join(dir, "wal-0000000000000001"))
	if err != nil {
		tb.Fatal(err)
	}
	var b bytes.Buffer
	if err := s.Snapshot(ctx, &b); err != nil {
		tb.Fatal(err)
	}
	s.Close()
	return log, b.Bytes()
}

// unframe turns a file of frames into the fuzzer's short form: each
// payload prefixed by one length byte (payloads of 256 bytes or more are
// left out). reframe is its inverse, with real checksums, so that the
// fuzzer's changes reach the record decoders instead of stopping at the
// checksum.
func unframe(data []byte) []byte {
	var out []byte
	scanFrames("seed", data, true, func(_ int64, p []byte) error {
		if len(p) < 256 {
			out = append(append(out, byte(len(p))), p...)
		}
		return nil
	})
	return out
}

func reframe(short []byte) []byte {
	var out []byte
	for len(short) > 0 {
		n := min(int(short[0]), len(short)-1)
		b, start := beginFrame(out)
		out = endFrame(append(b, short[1:1+n]...), start)
		short = short[1+n:]
	}
	return out
}

// FuzzReplay feeds arbitrary bytes to the log and snapshot decoders, as
// whole files (form 0: log, 1: snapshot) or as records that reframe gives
// valid checksums (form 2: log, 3: snapshot). They must never panic or
// allocate without bound: either they fail with a *CorruptError, or they
// yield a Service that works. A log that replays must replay to the same
// state twice.
func FuzzReplay(f *testing.F) {
	log, snap := durableSeeds(f)
	f.Add(log, byte(0))
	f.Add(snap, byte(1))
	f.Add(unframe(log), byte(2))
	f.Add(unframe(snap), byte(3))
	f.Add(log[:len(log)-3], byte(0))
	f.Add(snap[:len(snap)/2], byte(1))
	f.Add([]byte{}, byte(0))
	f.Add(make([]byte, 20), byte(0))
	defer func(m uint32) { maxRestoreSlot = m }(maxRestoreSlot)
	maxRestoreSlot = 1 << 16
	f.Fuzz(func(t *testing.T, data []byte, form byte) {
		if form >= 2 {
			data = reframe(data)
		}
		isSnapshot := form%2 == 1
		if isSnapshot {
			s, err := Restore(bytes.NewReader(data))
			var ce *CorruptError
			if err != nil {
				if !errors.As(err, &ce) {
					t.Fatalf("Restore: %v is not a CorruptError", err)
				}
				return
			}
			exercise(t, s)
			return
		}
		replay := func() (*Service, error) {
			r := &replayer{s: &Service{cfg: newConfig(nil), queues: new(btree.Map[string, *Queue])}, byQID: map[uint64]*Queue{}, nextQID: 1}
			if _, err := scanFrames("log", data, true, func(_ int64, p []byte) error { return r.apply(p) }); err != nil {
				return nil, err
			}
			for _, q := range r.byQID {
				q.store.rebuildFree()
				r.s.queues.Set(q.name+string(rune('0'+q.qid%10)), q)
			}
			return r.s, nil
		}
		s, err := replay()
		if err != nil {
			var ce *CorruptError
			if !errors.As(err, &ce) {
				t.Fatalf("replay: %v is not a CorruptError", err)
			}
			return
		}
		s2, _ := replay()
		if a, b := dump(t, s), dump(t, s2); a != b {
			t.Fatalf("two replays differ:\n%s\n%s", a, b)
		}
		exercise(t, s)
	})
}

// exercise runs every operation on every queue of a restored Service.
func exercise(t *testing.T, s *Service) {
	ctx := context.Background()
	var qs []*Queue
	s.queues.Scan(func(_ string, q *Queue) bool { qs = append(qs, q); return true })
	for _, q := range qs {
		q.Peek(ctx, 32)
		msgs, err := q.Get(ctx, 32, time.Second)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range msgs {
			if _, err := q.Update(ctx, m.ID, m.PopReceipt, 0, nil); err != nil {
				t.Fatalf("Update with a receipt just issued: %v", err)
			}
		}
		q.Put(ctx, "new", nil)
		q.Clear(ctx)
	}
	s.Close()
}
