package azq

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

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
