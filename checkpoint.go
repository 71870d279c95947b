package azq

import (
	"fmt"
	"maps"
	"math"
	"runtime"
	"slices"
	"time"
)

// A checkpoint is written off the request path by the Service's
// checkpointer goroutine, and no operation waits for more than a brief
// lock:
//
//  1. The log prepares its next segment (creates, allots, syncs it and its
//     directory entry) with no lock of the Service held.
//  2. Under the Service's lock alone, the log switches to that segment (no
//     I/O: the old one is sealed by its next write), and the list of
//     queues and the next queue number are taken. Holding the Service's
//     lock orders the switch with queue creations and deletions.
//  3. With no lock held, each queue is copied a chunk of slots at a time:
//     the queue is locked only while one chunk's nodes (at most 4,096, a
//     few hundred kilobytes) are copied and the log's last LSN is read,
//     then the chunk is encoded and written with no lock held. Contents are
//     immutable strings, so the copy is shallow. After each chunk the
//     checkpointer sleeps for as long as the chunk took, and the file
//     writes itself back in steps (wal.CheckpointWriter.Write), so that a
//     checkpoint takes at most about half of a processor and of the disk
//     from the operations, which on two cores would otherwise see their
//     latency's tail grow while it runs.
//  4. The checkpoint file is synced, and renamed into place once the log
//     is durable up to the last record any chunk holds the effect of.
//
// The result is fuzzy, and replay makes it exact (see replay.go). Copying
// each queue at one instant instead would need either every queue's lock
// for as long as a copy of every message takes (a stall of about a second
// at a million messages), or copy-on-write in every operation's path.
//
// Checkpoints are incremental: a chunk that no logged change has touched
// since an older checkpoint copied it goes in as a reference to that copy,
// so a large queue that changes at its two ends, the common case, costs a
// few chunks per checkpoint instead of all of them, and the checkpoint's
// writes compete little with the log's syncs for the disk. A checkpoint
// depends on the older ones it refers to, which the log keeps while it is
// the newest, and recovery reads. To keep them few, once there are more
// than maxCheckpointDeps, each checkpoint also copies again a share of the
// chunks that refer to the oldest (migrateShare), so that it is let go
// after a few checkpoints, instead of copying every chunk at once: the
// first checkpoint of a Service is the only one that copies everything,
// and no later one writes much more than the chunks that changed. The
// log's records name the slots they
// change, and each is appended under its queue's lock, so the LSN of the
// last one that touched each chunk is known (queueLog.changed). The one
// change the log does not record, a purge of expired messages, cannot
// make a chunk's old copy wrong but in its expired messages, which
// recovery purges again.

// recordSink takes encoded records: a checkpoint file, or a backup.
type recordSink interface {
	Append(rec []byte) error
}

// writeCheckpoint writes a checkpoint and returns the log record up to
// which it holds the state.
func (s *Service) writeCheckpoint() (uint64, error) {
	d := s.dur
	if err := d.log.Prepare(); err != nil {
		return 0, fmt.Errorf("azq: %s: preparing the next log segment: %w", d.dir, err)
	}
	s.mu.Lock()
	if s.failure != nil || s.closed {
		s.mu.Unlock()
		return 0, s.closedErr()
	}
	gen, base, err := d.log.Rotate()
	var qs []*Queue
	s.queues.Scan(func(_ string, q *Queue) bool { qs = append(qs, q); return true })
	nextQID := s.nextQID
	s.mu.Unlock()
	if err != nil {
		return 0, d.storageErr(err)
	}
	// The older checkpoints this one may refer to: those holding the
	// copies that the queues' chunks refer to now, unless that is too
	// many, and then none.
	d.mu.Lock()
	deps := slices.Clone(d.copyGens)
	d.mu.Unlock()
	cw, err := d.log.CreateCheckpoint(gen, base, deps...)
	if err != nil {
		return 0, fmt.Errorf("azq: %s: creating a checkpoint: %w", d.dir, err)
	}
	inc := &increment{gen: gen, deps: deps}
	if len(deps) > maxCheckpointDeps {
		inc.migrate = deps[0]
		inc.budget = max(minMigrate, (countCopies(qs, deps[0])+migrateShare-1)/migrateShare)
	}
	var sink recordSink = cw
	if d.testSink != nil {
		sink = d.testSink(cw)
	}
	if err := copyState(sink, qs, nextQID, d.log.LastLSN, d.testSink == nil, inc); err != nil {
		cw.Abort()
		return 0, fmt.Errorf("azq: %s: writing a checkpoint: %w", d.dir, err)
	}
	if err := cw.Commit(); err != nil {
		if e := d.storageErr(err); e != err {
			return 0, e
		}
		return 0, fmt.Errorf("azq: %s: committing a checkpoint: %w", d.dir, err)
	}
	d.adoptCopies(qs, inc)
	return base, nil
}

// Past maxCheckpointDeps older checkpoints to depend on, a checkpoint
// copies again one migrateShare of the chunks whose copies the oldest
// holds (at least minMigrate of them). Variables, so that tests can make
// them small.
var (
	maxCheckpointDeps = 32
	migrateShare      = 32
	minMigrate        = 4
)

// increment is what an incremental checkpoint may refer to, and what it
// copied.
type increment struct {
	gen    uint64   // the checkpoint's generation
	deps   []uint64 // the older checkpoints it may refer to
	copied []copied // the chunks it copied whole
	// migrate is an older checkpoint whose chunks it copies again, up to
	// budget of them, rather than refer to; 0 if none.
	migrate uint64
	budget  int
}

// countCopies counts the chunks of the queues qs whose copy checkpoint gen
// holds.
func countCopies(qs []*Queue, gen uint64) int {
	n := 0
	for _, q := range qs {
		q.mu.Lock()
		if q.wal != nil {
			for _, cp := range q.wal.copies {
				if cp.gen == gen {
					n++
				}
			}
		}
		q.mu.Unlock()
	}
	return n
}

type copied struct {
	q     *Queue
	chunk uint32
	lsn   uint64
}

// adoptCopies makes the chunks a committed checkpoint copied the ones the
// next checkpoint refers to, and records which checkpoints hold the copies
// referred to now.
func (d *durable) adoptCopies(qs []*Queue, inc *increment) {
	for _, c := range inc.copied {
		c.q.mu.Lock()
		if c.q.wal != nil {
			c.q.wal.setCopy(c.chunk, chunkCopy{gen: inc.gen, lsn: c.lsn})
		}
		c.q.mu.Unlock()
	}
	gens := map[uint64]bool{}
	for _, q := range qs {
		q.mu.Lock()
		if q.wal != nil && !q.closed {
			q.wal.addGens(gens)
		}
		q.mu.Unlock()
	}
	d.mu.Lock()
	d.copyGens = slices.Sorted(maps.Keys(gens))
	d.mu.Unlock()
}

// copyState writes a fuzzy checkpoint of the queues qs to sink, reading
// the log's last LSN with lsn while each part is locked.
// With inc, the checkpoint is incremental (see increment).
func copyState(sink recordSink, qs []*Queue, nextQID uint64, lsn func() uint64, pace bool, inc *increment) error {
	c := &copier{sink: sink, pace: pace, inc: inc, worked: time.Now(), nodes: make([]node, 0, chunkSize), slots: make([]uint32, 0, chunkSize)}
	c.emit(appendCkptService(c.b[:0], nextQID))
	for _, q := range qs {
		c.copyQueue(q, lsn)
	}
	c.emit(appendCkptEnd(c.b[:0], c.queues, c.msgs))
	clear(c.nodes[:cap(c.nodes)]) // drop the last contents for the garbage collector
	return c.err
}

// copier encodes a checkpoint; its buffers are reused from chunk to chunk.
type copier struct {
	sink         recordSink
	pace         bool       // rest as long as it worked (see rest)
	inc          *increment // nil: copy every chunk
	worked       time.Time  // the end of the last rest
	b            []byte
	nodes        []node
	slots        []uint32
	queues, msgs int
	err          error
}

func (c *copier) emit(rec []byte) {
	c.b = rec
	if c.err == nil {
		c.err = c.sink.Append(rec)
	}
}

// copyQueue copies q a chunk at a time, locking it for each. A queue
// deleted before its first chunk is left out. One deleted later ends
// where it was, with the chunks it did not reach marked as holding every
// record (so replay skips what the log has of them): its deletion, which
// the log holds, removes it when replayed.
func (c *copier) copyQueue(q *Queue, lsn func() uint64) {
	for chunk := uint32(0); c.err == nil; chunk++ {
		q.mu.Lock()
		if q.closed {
			q.mu.Unlock()
			if chunk > 0 {
				c.emit(appendCkptQueueEnd(c.b[:0], q.qid, chunk, math.MaxUint64))
			}
			return
		}
		at := lsn()
		var hdr ckptQueue
		if chunk == 0 {
			hdr = ckptQueue{qid: q.qid, name: q.name, seq: q.seq, next: q.store.next, metadata: q.metadata, policies: q.policies, lsn: at}
		}
		lo := chunk << chunkShift
		end := lo >= q.store.next
		ref, isRef := chunkCopy{}, false
		if !end && c.inc != nil && q.wal != nil {
			if cp, ok := q.wal.copyOf(chunk); ok && slices.Contains(c.inc.deps, cp.gen) {
				ref, isRef = cp, true
				if cp.gen == c.inc.migrate && c.inc.budget > 0 {
					c.inc.budget--
					isRef = false
				}
			}
		}
		if !end && !isRef {
			c.copyChunkLocked(q, lo)
		}
		q.mu.Unlock()
		if chunk == 0 {
			c.emit(appendCkptQueue(c.b[:0], &hdr))
			c.queues++
		}
		switch {
		case end:
			c.emit(appendCkptQueueEnd(c.b[:0], q.qid, chunk, at))
			return
		case isRef:
			c.emit(appendCkptChunkRef(c.b[:0], q.qid, chunk, ref.gen, ref.lsn))
		default:
			c.emitChunk(q.qid, chunk, at)
			if c.inc != nil {
				c.inc.copied = append(c.inc.copied, copied{q, chunk, at})
			}
		}
	}
}

// rest leaves the processor to the operations for as long as the copier
// has worked since its last rest, if it paces itself: on a machine with
// few cores, a checkpoint that ran flat out would delay the callers that
// a flush of the log released.
func (c *copier) rest() {
	if !c.pace {
		runtime.Gosched()
		return
	}
	time.Sleep(time.Since(c.worked))
	c.worked = time.Now()
}

// copyChunkLocked copies the messages of the chunk of q starting at slot
// lo. q.mu must be held.
func (c *copier) copyChunkLocked(q *Queue, lo uint32) {
	c.nodes, c.slots = c.nodes[:0], c.slots[:0]
	hi := min(q.store.next, lo+chunkSize)
	for slot := lo; slot < hi; slot++ {
		if n := q.store.at(slot); n.seq != 0 {
			c.nodes = append(c.nodes, *n)
			c.slots = append(c.slots, slot)
		}
	}
}

// emitChunk writes the chunk record and the messages copied.
func (c *copier) emitChunk(qid uint64, chunk uint32, at uint64) {
	c.emit(appendCkptChunk(c.b[:0], qid, chunk, at))
	for i := range c.nodes {
		c.emit(appendPut(c.b[:0], qid, c.slots[i], &c.nodes[i]))
	}
	c.msgs += len(c.nodes)
	c.rest()
}
