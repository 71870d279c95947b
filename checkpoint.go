package azq

import (
	"fmt"
	"math"
	"runtime"
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
	cw, err := d.log.CreateCheckpoint(gen, base)
	if err != nil {
		return 0, fmt.Errorf("azq: %s: creating a checkpoint: %w", d.dir, err)
	}
	if err := copyState(cw, qs, nextQID, d.log.LastLSN, true); err != nil {
		cw.Abort()
		return 0, fmt.Errorf("azq: %s: writing a checkpoint: %w", d.dir, err)
	}
	if err := cw.Commit(); err != nil {
		if e := d.storageErr(err); e != err {
			return 0, e
		}
		return 0, fmt.Errorf("azq: %s: committing a checkpoint: %w", d.dir, err)
	}
	return base, nil
}

// copyState writes a fuzzy checkpoint of the queues qs to sink, reading
// the log's last LSN with lsn while each part is locked.
func copyState(sink recordSink, qs []*Queue, nextQID uint64, lsn func() uint64, pace bool) error {
	c := &copier{sink: sink, pace: pace, worked: time.Now(), nodes: make([]node, 0, chunkSize), slots: make([]uint32, 0, chunkSize)}
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
	pace         bool      // rest as long as it worked (see rest)
	worked       time.Time // the end of the last rest
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
		if !end {
			c.copyChunkLocked(q, lo)
		}
		q.mu.Unlock()
		if chunk == 0 {
			c.emit(appendCkptQueue(c.b[:0], &hdr))
			c.queues++
		}
		if end {
			c.emit(appendCkptQueueEnd(c.b[:0], q.qid, chunk, at))
			return
		}
		c.emitChunk(q.qid, chunk, at)
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
