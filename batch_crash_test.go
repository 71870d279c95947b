package azq

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/azqlib/azq/internal/vfs"
)

// TestStrictCrashBatches cuts the power of vfs.MemFS at a random file
// system operation while a durable queue takes batches of 32 large
// messages (a batch is more log than one frame of the log holds), each
// batch deleting the previous one's messages, and checks that recovery
// finds every batch whole or not at all: an acknowledged PutBatch's
// messages all there, an acknowledged DeleteBatch's all gone, and of the
// batch the power cut failed, all or none.
func TestStrictCrashBatches(t *testing.T) {
	for seed := uint64(1); seed <= 40; seed++ {
		if loss := batchCrashCheck(t, seed, false); loss != "" {
			t.Fatalf("seed %d: %s", seed, loss)
		}
	}
}

// TestStrictCrashBatchesNoticesUnsyncedBatches shows that the check has
// teeth: with batches acknowledged before their record is synced, a power
// cut loses acknowledged batches, and the check must say so.
func TestStrictCrashBatchesNoticesUnsyncedBatches(t *testing.T) {
	caught := 0
	var first string
	const seeds = 40
	for seed := uint64(1); seed <= seeds; seed++ {
		if loss := batchCrashCheck(t, seed, true); loss != "" {
			caught++
			if first == "" {
				first = loss
			}
		}
	}
	if caught == 0 {
		t.Fatal("no power cut lost a batch acknowledged before its sync: the check cannot tell")
	}
	t.Logf("%d of %d runs lost an acknowledged batch; the first: %s", caught, seeds, first)
}

// unsyncedJournal acknowledges a batch without waiting for its record to
// be durable, as a broken durable mode would.
type unsyncedJournal struct{ journal }

func (j unsyncedJournal) putBatch() uint64    { j.journal.putBatch(); return 0 }
func (j unsyncedJournal) deleteBatch() uint64 { j.journal.deleteBatch(); return 0 }

// batchCrashCheck is one run of TestStrictCrashBatches; unsynced
// acknowledges batches before their sync. It returns what recovery lost,
// or "".
func batchCrashCheck(t *testing.T, seed uint64, unsynced bool) string {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, 31))
	mem := vfs.NewMem()
	mem.SetTornWrites(rand.New(rand.NewPCG(seed, 32)))
	var ops atomic.Int64
	var armed atomic.Bool
	crashAt := int64(1 + rng.IntN(40))
	fs := vfs.Inject(mem, func(op vfs.Op) error {
		if op.Kind.Mutates() && armed.Load() && ops.Add(1) == crashAt {
			mem.Crash()
		}
		return nil
	})
	s, err := Open(testDir, withFS(fs), WithCheckpointBytes(1<<40))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	q, _, err := s.CreateQueue(ctx, "batches", nil)
	if err != nil {
		t.Fatal(err)
	}
	if unsynced {
		q.mu.Lock()
		q.j = unsyncedJournal{q.j}
		q.mu.Unlock()
	}
	armed.Store(true)

	// The rounds' fates: a round's Puts acknowledged, its Deletes begun
	// and acknowledged.
	const rounds = 12
	var putAcked, delBegun, delAcked [rounds]bool
	var prev []DeleteRequest
	for r := 0; r < rounds; r++ {
		reqs := make([]PutRequest, MaxBatchSize)
		for j := range reqs {
			reqs[j] = PutRequest{Content: fmt.Sprintf("r%02d-%02d-%s", r, j, strings.Repeat("z", 40<<10))}
		}
		res, err := q.PutBatch(ctx, reqs)
		if err != nil {
			break
		}
		putAcked[r] = true
		if r > 0 {
			delBegun[r-1] = true
			if _, err := q.DeleteBatch(ctx, prev); err != nil {
				break
			}
			delAcked[r-1] = true
		}
		prev = prev[:0]
		for _, pr := range res {
			prev = append(prev, DeleteRequest{pr.Message.ID, pr.Message.PopReceipt})
		}
	}
	mem.Crash()
	s.Close()

	s2, err := Open(testDir, withFS(mem.CrashImage()))
	if err != nil {
		return fmt.Sprintf("reopening after a power cut at operation %d: %v", crashAt, err)
	}
	defer s2.Close()
	var present [rounds]int
	if q2, err := s2.Queue("batches"); err == nil {
		q2.mu.Lock()
		for slot := uint32(0); slot < q2.store.next; slot++ {
			if n := q2.store.at(slot); n.seq != 0 {
				var r int
				fmt.Sscanf(n.content, "r%02d-", &r)
				present[r]++
			}
		}
		q2.mu.Unlock()
	}
	for r := range rounds {
		n := present[r]
		switch {
		case delAcked[r] && n != 0:
			return fmt.Sprintf("power cut at operation %d: %d messages of round %d, whose DeleteBatch was acknowledged", crashAt, n, r)
		case putAcked[r] && !delBegun[r] && n != MaxBatchSize:
			return fmt.Sprintf("power cut at operation %d: %d messages of round %d, whose PutBatch was acknowledged, want %d", crashAt, n, r, MaxBatchSize)
		case n != 0 && n != MaxBatchSize:
			return fmt.Sprintf("power cut at operation %d: %d of the %d messages of round %d, want all or none", crashAt, n, MaxBatchSize, r)
		}
	}
	return ""
}

// A durable queue's batch is one log record, replayed after a crash with
// every item as it was acknowledged: the receipts PutBatch returned work,
// and a DeleteBatch's messages stay deleted.
func TestDurableBatchIsOneRecord(t *testing.T) {
	dir := t.TempDir()
	s := mustOpen(t, dir)
	ctx := context.Background()
	q, _, err := s.CreateQueue(ctx, "batches", nil)
	if err != nil {
		t.Fatal(err)
	}
	reqs := make([]PutRequest, MaxBatchSize)
	for i := range reqs {
		reqs[i].Content = fmt.Sprint("m", i)
	}
	reqs[3].Options = &PutOptions{VisibilityTimeout: -1} // refused, and not logged
	res, err := q.PutBatch(ctx, reqs)
	if err != nil {
		t.Fatal(err)
	}
	var dels []DeleteRequest
	for i, r := range res[:20] {
		if i != 3 {
			dels = append(dels, DeleteRequest{r.Message.ID, r.Message.PopReceipt})
		}
	}
	dels = append(dels, dels[0]) // gone by then: fails alone
	errs, err := q.DeleteBatch(ctx, dels)
	if err != nil || errs[0] != nil || errs[len(errs)-1] == nil {
		t.Fatalf("DeleteBatch: %v, %v", errs, err)
	}
	crash(t, s)

	s = mustOpen(t, dir)
	defer s.Close()
	st, _ := s.DurableState()
	// The queue's creation, the PutBatch and the DeleteBatch.
	if r := st.Recovery; r.Records != 3 || r.Messages != MaxBatchSize-20 {
		t.Fatalf("recovered %d records and %d messages, want 3 and %d", r.Records, r.Messages, MaxBatchSize-20)
	}
	q, err = s.Queue("batches")
	if err != nil {
		t.Fatal(err)
	}
	dels = dels[:0]
	for _, r := range res[20:] {
		dels = append(dels, DeleteRequest{r.Message.ID, r.Message.PopReceipt})
	}
	errs, err = q.DeleteBatch(ctx, dels)
	if err != nil {
		t.Fatal(err)
	}
	for i, err := range errs {
		if err != nil {
			t.Errorf("item %d, with the receipt PutBatch returned before the crash: %v", i, err)
		}
	}
	if n, _ := q.ApproximateCount(ctx); n != 0 {
		t.Errorf("%d messages left, want 0", n)
	}
}

// A durable queue refuses a batch whose messages together exceed one log
// record, whole and before changing anything.
func TestDurableBatchBeyondOneRecord(t *testing.T) {
	s, err := Open(t.TempDir(), WithLimits(Limits{MaxMessageSize: 1 << 20}))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	q, _, err := s.CreateQueue(ctx, "big", nil)
	if err != nil {
		t.Fatal(err)
	}
	big := strings.Repeat("b", 1<<20)
	reqs := make([]PutRequest, 17)
	for i := range reqs {
		reqs[i].Content = big
	}
	if _, err := q.PutBatch(ctx, reqs); !errors.Is(err, ErrMessageTooLarge) {
		t.Fatalf("PutBatch of 17 MiB: %v, want ErrMessageTooLarge", err)
	}
	if n, _ := q.ApproximateCount(ctx); n != 0 {
		t.Fatalf("%d messages after the refused batch", n)
	}
	if _, err := q.PutBatch(ctx, reqs[:8]); err != nil {
		t.Fatalf("PutBatch of 8 MiB: %v", err)
	}
}
