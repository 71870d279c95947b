package azq

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/azqlib/azq/internal/longrun"
	"github.com/azqlib/azq/internal/vfs"
)

// The crash tests on the strict file system. Unlike the SIGKILL harness
// (crash_test.go), whose kills leave the page cache, so that it passes
// with every sync removed, a power cut of vfs.MemFS keeps only what was
// synced: file data as of the last sync, directory entries as of the last
// directory sync, and a random prefix of what came after, the last write
// possibly torn.

// TestStrictCrash runs operations from several goroutines on a durable
// Service while checkpoints run in the background, cuts the power at a
// random file system operation (often inside a checkpoint), and checks
// every acknowledged operation against what recovery finds, receipts
// included. TestStrictCrashLong runs more seeds.
func TestStrictCrash(t *testing.T) {
	strictCrash(t, 1, 30)
}

// TestStrictCrashLong is TestStrictCrash's long run: 120 more seeds, every
// fourth with the log's default allotment of a megabyte of zeros per
// segment rather than the tests' small one.
func TestStrictCrashLong(t *testing.T) {
	longrun.Skip(t)
	strictCrash(t, 31, 150)
}

// strictCrash runs crashCheck for the seeds from first to last and checks
// that enough of the power cuts fell inside a checkpoint.
func strictCrash(t *testing.T, first, last uint64) {
	inCheckpoint, seeds := 0, int(last-first+1)
	for seed := first; seed <= last; seed++ {
		var opts []DurableOption
		if seed > 30 && seed%4 == 0 {
			opts = append(opts, withAllotBytes(0))
		}
		r := crashCheck(t, seed, nil, opts...)
		if len(r.loss) > 0 {
			t.Fatalf("seed %d: %s", seed, strings.Join(r.loss, "\n"))
		}
		if r.inCheckpoint {
			inCheckpoint++
		}
	}
	t.Logf("%d of %d power cuts fell inside a checkpoint", inCheckpoint, seeds)
	if inCheckpoint < seeds/4 {
		t.Fatalf("only %d of %d power cuts fell inside a checkpoint", inCheckpoint, seeds)
	}
}

// TestStrictCrashNoticesMissingSyncs shows that TestStrictCrash has
// teeth: with file syncs, or directory syncs, turned into no-ops (a
// mutation of the durable mode that the SIGKILL harness cannot see), the
// same check must report lost acknowledged operations.
func TestStrictCrashNoticesMissingSyncs(t *testing.T) {
	for _, tc := range []struct {
		name        string
		files, dirs bool
	}{{"no file syncs", true, false}, {"no directory syncs", false, true}} {
		t.Run(tc.name, func(t *testing.T) {
			caught := 0
			var first string
			const seeds = 10
			for seed := uint64(1); seed <= seeds; seed++ {
				r := crashCheck(t, seed, func(m *vfs.MemFS) { m.IgnoreSyncs(tc.files, tc.dirs) })
				if len(r.loss) > 0 {
					caught++
					if first == "" {
						first = r.loss[0]
					}
				}
			}
			if caught == 0 {
				t.Fatalf("no power cut lost an acknowledged operation with %s: the check cannot tell", tc.name)
			}
			t.Logf("%d of %d runs lost acknowledged operations; the first: %s", caught, seeds, first)
		})
	}
}

// crashResult is what crashCheck found: the acknowledged operations lost
// (or recovery's failure), and whether the power cut fell inside a
// checkpoint.
type crashResult struct {
	loss         []string
	inCheckpoint bool
}

// ackMsg is the check's knowledge of one message.
type ackMsg struct {
	queue    string
	receipt  PopReceipt
	dequeues int64
	content  string
	pending  int  // operations begun and not acknowledged
	deleted  bool // deletion acknowledged
	mayGo    bool // a deletion was begun
}

// ackBook records what the Service acknowledged.
type ackBook struct {
	mu          sync.Mutex
	msgs        map[MessageID]*ackMsg
	puts        map[string]int  // Puts begun and not acknowledged, by queue
	gets        map[string]int  // Gets that failed, by queue
	queues      map[string]bool // queues acknowledged as created (true) or deleted (false)
	queueMayGo  map[string]bool // a deletion was begun
	queueMayBe  map[string]bool // a creation was begun
	acks, fails int
	// The batches that failed, whose items a crash must keep all of or
	// none of: a PutBatch's contents, by queue, and a DeleteBatch's
	// messages.
	failedPuts    []failedPutBatch
	failedDeletes [][]MessageID
}

// failedPutBatch is a PutBatch that failed: its queue and its items'
// contents, which no other Put uses.
type failedPutBatch struct {
	queue    string
	contents []string
}

const crashQueueCount = 3

// crashCheck is one run: a Service on a MemFS whose power is cut at a
// random operation, three goroutines working on three queues, one
// creating and deleting queues, and checkpoints every few kilobytes of
// log and on request.
func crashCheck(t *testing.T, seed uint64, mutate func(*vfs.MemFS), opts ...DurableOption) crashResult {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, 42))
	mem := vfs.NewMem()
	mem.SetTornWrites(rand.New(rand.NewPCG(seed, 43)))
	if mutate != nil {
		mutate(mem)
	}
	// Half the runs cut the power at a random operation; the other half
	// at a random operation of a checkpoint: creating the next segment,
	// writing, syncing and renaming the checkpoint file, syncing the
	// directory, removing what the checkpoint replaces.
	var ops, ckptOps, crashed atomic.Int64
	var armed atomic.Bool // from the end of Open
	var res crashResult
	crashAt := int64(1 + rng.IntN(2500))
	ckptCrashAt := int64(0)
	if seed%2 == 0 {
		crashAt, ckptCrashAt = 0, int64(1+rng.IntN(120))
	}
	fs := vfs.Inject(mem, func(op vfs.Op) error {
		if !op.Kind.Mutates() || !armed.Load() {
			return nil
		}
		inCkpt := strings.Contains(op.Name, "ckpt-") || op.Kind == vfs.OpCreate && strings.Contains(op.Name, "wal-") ||
			op.Kind == vfs.OpSyncDir || op.Kind == vfs.OpRemove
		n := ops.Add(1)
		if inCkpt && ckptOps.Add(1) == ckptCrashAt || n == crashAt {
			res.inCheckpoint = inCkpt
			crashed.Store(n)
			mem.Crash()
		}
		return nil
	})
	opts = append([]DurableOption{withFS(fs), WithCheckpointBytes(int64(2<<10 + rng.IntN(6<<10))), withCheckpointBackoff(time.Millisecond)}, opts...)
	s, err := Open(testDir, opts...)
	if err != nil {
		return crashResult{loss: []string{fmt.Sprintf("Open: %v", err)}}
	}
	armed.Store(true)
	ctx := context.Background()
	book := &ackBook{msgs: map[MessageID]*ackMsg{}, puts: map[string]int{}, gets: map[string]int{},
		queues: map[string]bool{}, queueMayGo: map[string]bool{}, queueMayBe: map[string]bool{}}
	for i := 0; i < crashQueueCount; i++ {
		name := fmt.Sprintf("work%d", i)
		book.queueMayBe[name] = true
		if _, _, err := s.CreateQueue(ctx, name, nil); err != nil {
			break
		}
		book.queues[name] = true
	}

	var wg sync.WaitGroup
	for w := 0; w < 3; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			crashWorker(s, book, w, rand.New(rand.NewPCG(seed, uint64(w))))
		}()
	}
	wg.Add(1)
	go func() { // queue churn and checkpoints on request
		defer wg.Done()
		for i := 0; i < 60; i++ {
			name := fmt.Sprintf("scratch%d", i)
			book.mu.Lock()
			book.queueMayBe[name] = true
			book.mu.Unlock()
			if _, _, err := s.CreateQueue(ctx, name, map[string]string{"i": fmt.Sprint(i)}); err != nil {
				return
			}
			book.mu.Lock()
			book.queues[name] = true
			book.queueMayGo[name] = i%2 == 0
			book.mu.Unlock()
			if i%2 == 0 {
				if err := s.DeleteQueue(ctx, name); err != nil {
					return
				}
				book.mu.Lock()
				book.queues[name] = false
				book.mu.Unlock()
			}
			if i%10 == 0 {
				s.Checkpoint(ctx)
			}
		}
	}()
	wg.Wait()
	mem.Crash()
	s.Close()

	s2, err := Open(testDir, withFS(mem.CrashImage()))
	if err != nil {
		return crashResult{loss: []string{fmt.Sprintf("reopening after a power cut at operation %d: %v", crashed.Load(), err)}, inCheckpoint: res.inCheckpoint}
	}
	defer s2.Close()
	res.loss = book.check(s2, crashed.Load())
	return res
}

// crashWorker, worker number w, puts, gets, updates and deletes messages
// on the work queues, one at a time and in batches, until an operation
// fails (the power is cut) or it has done 300.
func crashWorker(s *Service, book *ackBook, w int, rng *rand.Rand) {
	ctx := context.Background()
	for i := 0; i < 300; i++ {
		name := fmt.Sprintf("work%d", rng.IntN(crashQueueCount))
		q, err := s.Queue(name)
		if err != nil {
			return
		}
		if rng.IntN(6) == 0 {
			if !crashPutBatch(ctx, q, book, w, i, rng) {
				return
			}
			continue
		}
		if rng.IntN(2) == 0 {
			content := fmt.Sprintf("m%d-%s", i, strings.Repeat("x", rng.IntN(200)))
			book.mu.Lock()
			book.puts[name]++
			book.mu.Unlock()
			m, err := q.Put(ctx, content, &PutOptions{TimeToLive: NeverExpires})
			if err != nil {
				return
			}
			book.mu.Lock()
			if book.msgs[m.ID] == nil { // else a Get booked it first
				book.puts[name]--
				book.msgs[m.ID] = &ackMsg{queue: name, receipt: m.PopReceipt, content: content}
			}
			book.acks++
			book.mu.Unlock()
			continue
		}
		msgs, err := q.Get(ctx, 1+rng.IntN(3), time.Hour)
		if err != nil {
			book.mu.Lock()
			book.gets[name]++
			book.mu.Unlock()
			return
		}
		book.mu.Lock()
		for _, m := range msgs {
			a := book.msgs[m.ID]
			if a == nil { // put, and its acknowledgement not yet booked
				a = &ackMsg{queue: name, content: m.Content}
				book.msgs[m.ID] = a
				book.puts[name]--
			}
			a.receipt, a.dequeues = m.PopReceipt, m.DequeueCount
			book.acks++
		}
		book.mu.Unlock()
		if len(msgs) > 1 && rng.IntN(3) == 0 {
			if !crashDeleteBatch(ctx, q, book, msgs) {
				return
			}
			continue
		}
		for _, m := range msgs {
			book.mu.Lock()
			a := book.msgs[m.ID]
			a.pending++
			del := rng.IntN(2) == 0
			a.mayGo = a.mayGo || del
			book.mu.Unlock()
			if del {
				if err := q.Delete(ctx, m.ID, m.PopReceipt); err != nil {
					return
				}
				book.mu.Lock()
				a.pending--
				a.deleted = true
				book.acks++
				book.mu.Unlock()
				continue
			}
			c := "updated " + m.Content
			r, err := q.Update(ctx, m.ID, m.PopReceipt, time.Hour, &c)
			if err != nil {
				return
			}
			book.mu.Lock()
			a.pending--
			a.receipt, a.content = r.PopReceipt, c
			book.acks++
			book.mu.Unlock()
		}
	}
}

// crashPutBatch puts a batch of 2 to 8 messages, with contents no other
// Put uses, books them once acknowledged and the batch if it failed, and
// reports whether it was acknowledged.
func crashPutBatch(ctx context.Context, q *Queue, book *ackBook, w, i int, rng *rand.Rand) bool {
	name := q.Name()
	reqs := make([]PutRequest, 2+rng.IntN(7))
	contents := make([]string, len(reqs))
	for j := range reqs {
		contents[j] = fmt.Sprintf("batch%d-%d-%d-%s", w, i, j, strings.Repeat("y", rng.IntN(200)))
		reqs[j] = PutRequest{Content: contents[j], Options: &PutOptions{TimeToLive: NeverExpires}}
	}
	book.mu.Lock()
	book.puts[name] += len(reqs)
	book.mu.Unlock()
	res, err := q.PutBatch(ctx, reqs)
	book.mu.Lock()
	defer book.mu.Unlock()
	if err != nil {
		book.failedPuts = append(book.failedPuts, failedPutBatch{name, contents})
		return false
	}
	for j, r := range res {
		if r.Err != nil {
			panic(fmt.Sprintf("PutBatch item %d: %v", j, r.Err))
		}
		if book.msgs[r.Message.ID] == nil { // else a Get booked it first
			book.puts[name]--
			book.msgs[r.Message.ID] = &ackMsg{queue: name, receipt: r.Message.PopReceipt, content: contents[j]}
		}
		book.acks++
	}
	return true
}

// crashDeleteBatch deletes the messages msgs, just got, in one batch, and
// books them as deleted once acknowledged, or the batch if it failed; it
// reports whether it was acknowledged.
func crashDeleteBatch(ctx context.Context, q *Queue, book *ackBook, msgs []Message) bool {
	reqs := make([]DeleteRequest, len(msgs))
	ids := make([]MessageID, len(msgs))
	book.mu.Lock()
	for j, m := range msgs {
		reqs[j], ids[j] = DeleteRequest{m.ID, m.PopReceipt}, m.ID
		a := book.msgs[m.ID]
		a.pending++
		a.mayGo = true
	}
	book.mu.Unlock()
	errs, err := q.DeleteBatch(ctx, reqs)
	book.mu.Lock()
	defer book.mu.Unlock()
	if err != nil {
		book.failedDeletes = append(book.failedDeletes, ids)
		return false
	}
	for j, m := range msgs {
		if errs[j] != nil {
			panic(fmt.Sprintf("DeleteBatch item %d: %v", j, errs[j]))
		}
		a := book.msgs[m.ID]
		a.pending--
		a.deleted = true
		book.acks++
	}
	return true
}

// check compares the recovered Service s with what was acknowledged.
func (b *ackBook) check(s *Service, crashAt int64) []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	var loss []string
	lose := func(f string, a ...any) {
		loss = append(loss, fmt.Sprintf("power cut at operation %d (0: at the end), after %d acknowledgements: ", crashAt, b.acks)+fmt.Sprintf(f, a...))
	}
	for name, want := range b.queues {
		_, err := s.Queue(name)
		switch {
		case want && err != nil && !b.queueMayGo[name]:
			lose("acknowledged queue %s is missing", name)
		case !want && err == nil:
			lose("queue %s, whose deletion was acknowledged, is back", name)
		}
	}
	type got struct {
		queue    string
		receipt  PopReceipt
		dequeues int64
		content  string
	}
	recovered := map[MessageID]got{}
	s.mu.Lock()
	s.queues.Scan(func(name string, q *Queue) bool {
		if _, ok := b.queues[name]; !ok && !b.queueMayBe[name] {
			lose("queue %s was never created", name)
		}
		q.mu.Lock()
		for slot := uint32(0); slot < q.store.next; slot++ {
			if n := q.store.at(slot); n.seq != 0 {
				recovered[n.id] = got{name, newReceipt(slot, n.version, n.tag), int64(n.dequeues), n.content}
			}
		}
		q.mu.Unlock()
		return true
	})
	s.mu.Unlock()
	unknown := map[string]int{}
	for id, r := range recovered {
		if _, ok := b.msgs[id]; !ok {
			unknown[r.queue]++
		}
	}
	for q, n := range unknown {
		if n > max(0, b.puts[q]) {
			lose("%d unknown messages in %s, but only %d Puts were in flight", n, q, b.puts[q])
		}
	}
	for id, a := range b.msgs {
		r, ok := recovered[id]
		switch {
		case a.deleted && ok:
			lose("message %v, whose deletion was acknowledged, is back", id)
		case a.deleted:
		case !ok && a.pending > 0 && a.mayGo:
			// Its deletion was in flight and may have landed.
		case !ok:
			lose("acknowledged message %v of %s is missing", id, a.queue)
		case r.dequeues < a.dequeues:
			lose("message %v: DequeueCount %d, below the acknowledged %d", id, r.dequeues, a.dequeues)
		case a.pending > 0:
			// An Update in flight may have landed.
		case r.receipt == a.receipt && r.dequeues == a.dequeues && r.content == a.content:
		case b.gets[a.queue] > 0 && r.dequeues == a.dequeues+1 && r.content == a.content:
			// Taken by a Get that the power cut failed.
		default:
			lose("message %v: receipt %v, dequeue count %d, content %.20q; acknowledged %v, %d, %.20q",
				id, r.receipt, r.dequeues, r.content, a.receipt, a.dequeues, a.content)
		}
	}
	// A batch that failed left all of its items or none.
	// A Get may have taken an item of a failed PutBatch, and an Update
	// prefixed its content, or a Delete removed it: those count as
	// recovered if the Delete was acknowledged, and leave the batch
	// unjudged if it was only begun.
	for _, fb := range b.failedPuts {
		found, judged := 0, true
		for _, c := range fb.contents {
			isItem := func(content string) bool { return strings.HasSuffix(content, c) }
			if slices.ContainsFunc(slices.Collect(maps.Values(recovered)), func(r got) bool { return r.queue == fb.queue && isItem(r.content) }) {
				found++
				continue
			}
			for _, a := range b.msgs {
				if a.queue == fb.queue && isItem(a.content) {
					switch {
					case a.deleted:
						found++
					case a.mayGo:
						judged = false
					}
				}
			}
		}
		if judged && found != 0 && found != len(fb.contents) {
			lose("%d of the %d messages of a failed PutBatch to %s recovered, want all or none", found, len(fb.contents), fb.queue)
		}
	}
	for _, ids := range b.failedDeletes {
		left := 0
		for _, id := range ids {
			if _, ok := recovered[id]; ok {
				left++
			}
		}
		if left != 0 && left != len(ids) {
			lose("%d of the %d messages of a failed DeleteBatch recovered, want all or none", left, len(ids))
		}
	}
	// The acknowledged receipts work through the API.
	checked := 0
	for id, a := range b.msgs {
		r, ok := recovered[id]
		if !ok || a.pending > 0 || a.deleted || r.receipt != a.receipt || checked == 5 {
			continue
		}
		checked++
		q, _ := s.Queue(a.queue)
		if _, err := q.Update(context.Background(), id, a.receipt, time.Hour, nil); err != nil {
			lose("Update with the acknowledged receipt of %v: %v", id, err)
		}
	}
	return loss
}
