package durable

import (
	"fmt"
	"maps"
	"math"
	"runtime"
	"slices"
	"time"
)

// A checkpoint copies a queue's slots a chunk of 1 << chunkShift at a
// time, and an incremental one refers to the chunks not changed since an
// older one copied them. The chunk is the checkpoint's unit, part of the
// format (the chunk records number them), not the slot store's.
const (
	chunkShift = 12
	chunkSize  = 1 << chunkShift
)

// A checkpoint is written off the request path by the Log's
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
// last one that touched each chunk is known (chunkHistory.changed). The one
// change the log does not record, a purge of expired messages, cannot
// make a chunk's old copy wrong but in its expired messages, which
// recovery purges again.

// Sink takes encoded records: a checkpoint file, or a backup.
type Sink interface {
	Append(rec []byte) error
}

// writeCheckpoint writes a checkpoint and returns the log record up to
// which it holds the state. final reports an error after which no
// checkpoint will do: the Service failed or is closing.
func (l *Log) writeCheckpoint() (base uint64, final bool, err error) {
	if err := l.log.Prepare(); err != nil {
		return 0, false, fmt.Errorf("azq: %s: preparing the next log segment: %w", l.dir, err)
	}
	var (
		gen    uint64
		rotErr error
	)
	qs, nextQID, err := l.host.Queues(func() { gen, base, rotErr = l.log.Rotate() })
	if err != nil {
		return 0, true, err
	}
	if rotErr != nil {
		return 0, true, l.storageErr(rotErr)
	}
	// The older checkpoints this one may refer to: those holding the
	// copies that the queues' chunks refer to now, unless that is too
	// many, and then none.
	l.mu.Lock()
	deps := slices.Clone(l.copyGens)
	l.mu.Unlock()
	cw, err := l.log.CreateCheckpoint(gen, base, deps...)
	if err != nil {
		return 0, false, fmt.Errorf("azq: %s: creating a checkpoint: %w", l.dir, err)
	}
	inc := &increment{gen: gen, deps: deps}
	if len(deps) > maxCheckpointDeps {
		inc.migrate = deps[0]
		inc.budget = max(minMigrate, (countCopies(qs, deps[0])+migrateShare-1)/migrateShare)
	}
	var sink Sink = cw
	if l.testSink != nil {
		sink = l.testSink(cw)
	}
	if err := copyState(sink, qs, nextQID, l.log.LastLSN, l.testSink == nil, inc); err != nil {
		cw.Abort()
		return 0, false, fmt.Errorf("azq: %s: writing a checkpoint: %w", l.dir, err)
	}
	if err := cw.Commit(); err != nil {
		if e := l.storageErr(err); e != err {
			return 0, isFinal(err), e
		}
		return 0, false, fmt.Errorf("azq: %s: committing a checkpoint: %w", l.dir, err)
	}
	l.adoptCopies(qs, inc)
	return base, false, nil
}

// Past maxCheckpointDeps older checkpoints to depend on, a checkpoint
// copies again one migrateShare of the chunks whose copies the oldest
// holds (at least minMigrate of them). Variables, so that tests can make
// them small (SetMigration).
var (
	maxCheckpointDeps = 32
	migrateShare      = 32
	minMigrate        = 4
)

// MaxCheckpointDeps returns how many older checkpoints a checkpoint
// depends on before it copies again the chunks of the oldest.
func MaxCheckpointDeps() int { return maxCheckpointDeps }

// SetMigration sets maxCheckpointDeps, migrateShare and minMigrate, and
// returns a function that sets the previous values back. Tests make them
// small, so that a few checkpoints copy an older one's chunks again.
func SetMigration(maxDeps, share, least int) (undo func()) {
	d, s, m := maxCheckpointDeps, migrateShare, minMigrate
	maxCheckpointDeps, migrateShare, minMigrate = maxDeps, share, least
	return func() { maxCheckpointDeps, migrateShare, minMigrate = d, s, m }
}

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
func countCopies(qs []QueueState, gen uint64) int {
	n := 0
	for _, q := range qs {
		q.Lock()
		if j := q.Journal(); j != nil {
			for _, cp := range j.copies {
				if cp.gen == gen {
					n++
				}
			}
		}
		q.Unlock()
	}
	return n
}

type copied struct {
	q     QueueState
	chunk uint32
	lsn   uint64
}

// adoptCopies makes the chunks a committed checkpoint copied the ones the
// next checkpoint refers to, and records which checkpoints hold the copies
// referred to now.
func (l *Log) adoptCopies(qs []QueueState, inc *increment) {
	for _, c := range inc.copied {
		c.q.Lock()
		if j := c.q.Journal(); j != nil {
			j.setCopy(c.chunk, chunkCopy{gen: inc.gen, lsn: c.lsn})
		}
		c.q.Unlock()
	}
	gens := map[uint64]bool{}
	for _, q := range qs {
		q.Lock()
		if j := q.Journal(); j != nil && !q.Closed() {
			j.addGens(gens)
		}
		q.Unlock()
	}
	l.mu.Lock()
	l.copyGens = slices.Sorted(maps.Keys(gens))
	l.mu.Unlock()
}

// copyState writes a fuzzy checkpoint of the queues qs to sink, reading
// the log's last LSN with lsn while each part is locked.
// With inc, the checkpoint is incremental (see increment).
func copyState(sink Sink, qs []QueueState, nextQID uint64, lsn func() uint64, pace bool, inc *increment) error {
	c := &copier{sink: sink, pace: pace, inc: inc, worked: time.Now(), msgs: make([]Message, 0, chunkSize)}
	c.emit(appendCkptService(c.b[:0], nextQID))
	for _, q := range qs {
		c.copyQueue(q, lsn)
	}
	c.emit(appendCkptEnd(c.b[:0], c.queues, c.total))
	clear(c.msgs[:cap(c.msgs)]) // drop the last contents for the garbage collector
	return c.err
}

// copier encodes a checkpoint; its buffers are reused from chunk to chunk.
type copier struct {
	sink          Sink
	pace          bool       // rest as long as it worked (see rest)
	inc           *increment // nil: copy every chunk
	worked        time.Time  // the end of the last rest
	b             []byte
	msgs          []Message // the chunk's
	queues, total int
	err           error
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
func (c *copier) copyQueue(q QueueState, lsn func() uint64) {
	var hdr Header
	for chunk := uint32(0); c.err == nil; chunk++ {
		q.Lock()
		if q.Closed() {
			q.Unlock()
			if chunk > 0 {
				c.emit(appendCkptQueueEnd(c.b[:0], hdr.QID, chunk, math.MaxUint64))
			}
			return
		}
		at := lsn()
		if chunk == 0 {
			hdr = q.Header()
		}
		next := q.Next()
		lo := chunk << chunkShift
		end := lo >= next
		ref, isRef := chunkCopy{}, false
		if j := q.Journal(); !end && c.inc != nil && j != nil {
			if cp, ok := j.copyOf(chunk); ok && slices.Contains(c.inc.deps, cp.gen) {
				ref, isRef = cp, true
				if cp.gen == c.inc.migrate && c.inc.budget > 0 {
					c.inc.budget--
					isRef = false
				}
			}
		}
		if !end && !isRef {
			c.msgs = q.AppendMessages(c.msgs[:0], lo, min(next, lo+chunkSize))
		}
		q.Unlock()
		if chunk == 0 {
			c.emit(appendCkptQueue(c.b[:0], &hdr, at))
			c.queues++
		}
		switch {
		case end:
			c.emit(appendCkptQueueEnd(c.b[:0], hdr.QID, chunk, at))
			return
		case isRef:
			c.emit(appendCkptChunkRef(c.b[:0], hdr.QID, chunk, ref.gen, ref.lsn))
		default:
			c.emitChunk(hdr.QID, chunk, at)
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

// emitChunk writes the chunk record and the messages copied.
func (c *copier) emitChunk(qid uint64, chunk uint32, at uint64) {
	c.emit(appendCkptChunk(c.b[:0], qid, chunk, at))
	for i := range c.msgs {
		c.emit(appendPut(c.b[:0], qid, &c.msgs[i]))
	}
	c.total += len(c.msgs)
	c.rest()
}
