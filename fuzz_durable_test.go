package azq

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"time"

	"github.com/azqlib/azq/internal/durable"
	"github.com/azqlib/azq/internal/vfs"
	"github.com/azqlib/azq/internal/wal"
	"github.com/benbjohnson/clock"
)

// durableSeeds returns the records of a real log and of a real backup made
// by a short workload with every kind of record.
func durableSeeds(tb testing.TB) (log, backup [][]byte) {
	tb.Helper()
	mem := vfs.NewMem()
	clk := clock.NewMock()
	s, err := Open(testDir, withFS(mem), WithClock(clk))
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
	if res, err := q.PutBatch(ctx, []PutRequest{{Content: "b1"}, {Content: "b2", Options: &PutOptions{TimeToLive: NeverExpires}}}); err == nil {
		q.DeleteBatch(ctx, []DeleteRequest{{res[0].Message.ID, res[0].Message.PopReceipt}})
	}
	other, _, _ := s.CreateQueue(ctx, "other", nil)
	other.Put(ctx, "x", nil)
	other.Clear(ctx)
	s.DeleteQueue(ctx, "other")
	var b bytes.Buffer
	if err := s.Backup(ctx, &b); err != nil {
		tb.Fatal(err)
	}
	crash(tb, s)
	rp := durable.NewReplayer(rebuilder{newConfig(nil)})
	_, _, err = wal.Open(testDir, wal.Options{FS: mem}, wal.Replay{
		Checkpoint: func([]byte) error { return nil },
		Record: func(_ uint64, rec []byte) error {
			log = append(log, bytes.Clone(rec))
			return rp.LogRecord(0, rec)
		},
	})
	if err != nil {
		tb.Fatal(err)
	}
	if _, _, _, err := wal.ReadCheckpoint("backup", b.Bytes(), func(rec []byte) error {
		backup = append(backup, bytes.Clone(rec))
		return nil
	}); err != nil {
		tb.Fatal(err)
	}
	return log, backup
}

// short turns records into the fuzzer's short form: each prefixed by one
// length byte (records of 256 bytes or more are left out); long is its
// inverse. The log (internal/wal) frames them with real checksums, so
// that the fuzzer's changes reach the record decoders instead of stopping
// at a checksum.
func short(recs [][]byte) []byte {
	var out []byte
	for _, r := range recs {
		if len(r) < 256 {
			out = append(append(out, byte(len(r))), r...)
		}
	}
	return out
}

func long(s []byte) [][]byte {
	var recs [][]byte
	for len(s) > 0 {
		n := min(int(s[0]), len(s)-1)
		recs = append(recs, s[1:1+n])
		s = s[1+n:]
	}
	return recs
}

// FuzzReplay feeds arbitrary records to the log's replay (form 0) and to
// Restore as a backup (form 1). They must never panic or allocate without
// bound: either they fail with a *CorruptError, or they yield a Service
// that works. A log that replays must replay to the same state twice.
func FuzzReplay(f *testing.F) {
	log, backup := durableSeeds(f)
	f.Add(short(log), byte(0))
	f.Add(short(backup), byte(1))
	f.Add(short(log[:len(log)-3]), byte(0))
	f.Add(short(backup[:len(backup)/2]), byte(1))
	f.Add([]byte{}, byte(0))
	f.Add(make([]byte, 20), byte(0))
	defer durable.SetMaxRestoreSlot(1 << 16)()
	f.Fuzz(func(t *testing.T, data []byte, form byte) {
		recs := long(data)
		if form%2 == 1 {
			var b bytes.Buffer
			e := wal.NewEncoder(&b, 0, 0)
			for _, r := range recs {
				e.Append(r)
			}
			e.Close()
			s, err := Restore(&b)
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
		// A log holding the records, written by the log itself.
		mem := vfs.NewMem()
		l, _, err := wal.Open(testDir, wal.Options{FS: mem}, wal.Replay{})
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range recs {
			l.Append(r)
		}
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		replay := func() (*Service, error) {
			s, err := Open(testDir, withFS(mem), WithCheckpointBytes(1<<40))
			if err != nil {
				return nil, err
			}
			return s, nil
		}
		s, err := replay()
		if err != nil {
			var ce *CorruptError
			if !errors.As(err, &ce) {
				t.Fatalf("replay: %v is not a CorruptError", err)
			}
			return
		}
		before := dump(t, s)
		crash(t, s)
		s2, err := replay()
		if err != nil {
			t.Fatalf("a log that replayed once fails the second time: %v", err)
		}
		if after := dump(t, s2); after != before {
			t.Fatalf("two replays differ:\n%s\n%s", before, after)
		}
		exercise(t, s2)
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
