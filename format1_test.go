package azq

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/azqlib/azq/internal/vfs"
	"github.com/benbjohnson/clock"
)

// stateText prints what a Service holds in a form that does not depend
// on azq's internal types: each queue with its metadata, and each message
// with its ID, content, times, dequeue count and current pop receipt, in
// slot order. The format-1 fixtures under testdata/format1 record it.
func stateText(s *Service) string {
	var b strings.Builder
	s.mu.Lock()
	defer s.mu.Unlock()
	s.queues.Scan(func(name string, q *Queue) bool {
		q.mu.Lock()
		defer q.mu.Unlock()
		fmt.Fprintf(&b, "queue %s", name)
		for _, k := range slices.Sorted(maps.Keys(q.metadata)) {
			fmt.Fprintf(&b, " %s=%s", k, q.metadata[k])
		}
		b.WriteString("\n")
		for slot := uint32(0); slot < q.store.next; slot++ {
			n := q.store.at(slot)
			if n.seq == 0 {
				continue
			}
			m := n.message()
			fmt.Fprintf(&b, "  %s %q inserted %s expires %s visible %s dequeued %d receipt %s\n",
				m.ID, m.Content, m.InsertionTime.UTC().Format(time.RFC3339Nano), m.ExpirationTime.UTC().Format(time.RFC3339Nano),
				m.NextVisibleTime.UTC().Format(time.RFC3339Nano), m.DequeueCount, newReceipt(slot, n.version, n.tag))
		}
		return true
	})
	return b.String()
}

// The directories under testdata/format1 were written by azq before
// format 2 of the log (the frame format of internal/wal), by the same
// operations: two queues, 100 messages, a Get, an Update and Deletes, a
// checkpoint in the middle. closed is as Close left it (an incremental
// checkpoint that depends on an older one, and a log holding nothing
// after it), crashed as a killed process left it (records in the log);
// backup is a Backup of the same state, and closed.state what the Service
// held (stateText). The segments' allotted zeros are cut off.
const format1Dir = "testdata/format1"

// format1Clock is the mock clock's time after the operations that wrote
// the fixtures.
var format1Clock = time.Date(2026, 11, 20, 10, 0, 1, 0, time.UTC)

// loadFixture copies the directory testdata/format1/name into a MemFS at
// testDir.
func loadFixture(t *testing.T, name string) *vfs.MemFS {
	t.Helper()
	mem := vfs.NewMem()
	if err := mem.MkdirAll(testDir); err != nil {
		t.Fatal(err)
	}
	ents, err := os.ReadDir(filepath.Join(format1Dir, name))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		data, err := os.ReadFile(filepath.Join(format1Dir, name, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		f, err := mem.Create(path.Join(testDir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.WriteAt(data, 0); err != nil {
			t.Fatal(err)
		}
		if err := f.Sync(); err != nil {
			t.Fatal(err)
		}
		f.Close()
	}
	if err := mem.SyncDir(testDir); err != nil {
		t.Fatal(err)
	}
	return mem
}

func format1State(t *testing.T) string {
	t.Helper()
	want, err := os.ReadFile(filepath.Join(format1Dir, "closed.state"))
	if err != nil {
		t.Fatal(err)
	}
	return string(want)
}

// TestFormat1ClosedDirectoryOpens: a directory of format 1 that Close
// left (everything in checkpoints, which this version reads) opens with
// every message, receipts included, and goes on in format 2.
func TestFormat1ClosedDirectoryOpens(t *testing.T) {
	ctx := context.Background()
	mem := loadFixture(t, "closed")
	clk := clock.NewMock()
	clk.Set(format1Clock)
	s := mustOpen(t, testDir, withFS(mem), WithClock(clk))
	if got, want := stateText(s), format1State(t); got != want {
		t.Fatalf("the format-1 directory opened with\n%s\nwant\n%s", got, want)
	}
	q, _ := s.Queue("beta")
	if _, err := q.Put(ctx, "after the upgrade", &PutOptions{TimeToLive: NeverExpires}); err != nil {
		t.Fatal(err)
	}
	want := stateText(s)
	crash(t, s)
	s = mustOpen(t, testDir, withFS(mem), WithClock(clk))
	if got := stateText(s); got != want {
		t.Fatalf("after a crash in format 2:\n%s\nwant\n%s", got, want)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = mustOpen(t, testDir, withFS(mem), WithClock(clk))
	defer s.Close()
	if got := stateText(s); got != want {
		t.Fatalf("after Close in format 2:\n%s\nwant\n%s", got, want)
	}
}

// TestFormat1LogIsRefused: a directory of format 1 whose log holds
// records (as a crash leaves it) is refused with an error that names the
// segment and says what to do, not replayed by rules this version no
// longer has.
func TestFormat1LogIsRefused(t *testing.T) {
	mem := loadFixture(t, "crashed")
	_, err := Open(testDir, withFS(mem))
	var ce *CorruptError
	if !errors.As(err, &ce) || ce.File != path.Join(testDir, "wal-0000000000000002") || ce.Offset != 0 ||
		!strings.Contains(ce.Reason, "format 1") || !strings.Contains(ce.Reason, "Close") {
		t.Fatalf("Open of a format-1 log with records: %v; want a CorruptError naming its segment, its format and what to do", err)
	}
	// Nothing was changed: the earlier version can still open it.
	for _, n := range []string{"wal-0000000000000002", "ckpt-0000000000000002"} {
		want, _ := os.ReadFile(filepath.Join(format1Dir, "crashed", n))
		if got, err := mem.ReadFile(path.Join(testDir, n)); err != nil || !bytes.Equal(got, want) {
			t.Fatalf("%s changed by the refused Open: %v", n, err)
		}
	}
}

// TestFormat1BackupRestores: a backup written in format 1 restores, in
// memory and into a directory.
func TestFormat1BackupRestores(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(format1Dir, "backup"))
	if err != nil {
		t.Fatal(err)
	}
	s, err := Restore(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := stateText(s), format1State(t); got != want {
		t.Fatalf("Restore of a format-1 backup gave\n%s\nwant\n%s", got, want)
	}
	s.Close()
	mem := vfs.NewMem()
	if err := restoreDir(testDir, bytes.NewReader(data), mem); err != nil {
		t.Fatal(err)
	}
	clk := clock.NewMock()
	clk.Set(format1Clock)
	s = mustOpen(t, testDir, withFS(mem), WithClock(clk))
	defer s.Close()
	if got, want := stateText(s), format1State(t); got != want {
		t.Fatalf("RestoreDir of a format-1 backup gave\n%s\nwant\n%s", got, want)
	}
}
