package azq

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/tidwall/btree"
)

// Replay rebuilds a durable Service from its newest checkpoint and the
// log records after it.
//
// A checkpoint is fuzzy: it is copied while the Service runs, one queue
// and one chunk of 4,096 slots at a time, each under its queue's lock for
// no longer than a copy of that chunk takes, while operations go on and
// append to the log segment that the checkpoint's rotation started. So a
// checkpoint does not hold the state as of one instant: each part of it
// is the state as of the log record (LSN) it names, which is at or after
// the rotation. Replay starts with the first record after the rotation and
// applies a record to a part only if the record is later than the part:
//
//   - a queue's metadata, policies and deletion, against its queue record;
//   - a Put, Get, Update or Delete, against the chunk of the slot it
//     names, as does a Clear, chunk by chunk;
//   - a queue created after the rotation has no parts, so every record of
//     it applies.
//
// Every record the Service appends for a queue is appended under the
// queue's lock, with the change it records, and a chunk is copied under
// the same lock, so a chunk as of LSN L holds exactly the effect of the
// queue's records up to L: skipping those and applying the later ones
// rebuilds it exactly. Since each record sets what it changes (a Get
// records the new visibility, dequeue count, version and tag, not an
// increment), applying one is independent of the parts it does not touch.
// A queue that the checkpoint lacks, numbered below the checkpoint's next
// queue number, was deleted before its turn to be copied: its records are
// skipped. One deleted while it was being copied has the chunks not yet
// copied marked as of the end of time (math.MaxUint64): their records are
// skipped, and the queue's deletion, later than everything copied of it,
// removes it.
type replayer struct {
	cfg     config
	queues  map[uint64]*replayQueue
	nextQID uint64 // every queue created later has a number at least this
	// ckptQIDs is the checkpoint's next queue number: a queue numbered
	// below it that the checkpoint lacks was deleted before it was copied.
	ckptQIDs uint64
	records  int // log records replayed

	// Loading a checkpoint.
	ckpt                 int          // 0: before its service record, 1: inside, 2: after its end
	cur                  *replayQueue // the queue being loaded
	ckptQueues, ckptMsgs int

	// The chunks that the older checkpoints the newest depends on hold:
	// the LSN each is as of, and its Puts.
	depLSN  map[depChunk]uint64
	depPuts map[depChunk][][]byte
	depAt   depChunk // the chunk whose Puts follow
	depIn   bool
}

// ownCheckpoint stands for the generation of the checkpoint being loaded
// in the copies of a replayQueue, until it is known.
const ownCheckpoint = math.MaxUint64

// depChunk names a chunk of a queue that an older checkpoint holds.
type depChunk struct {
	gen, qid uint64
	chunk    uint32
}

// replayQueue is a queue being rebuilt, and the LSNs that its parts in the
// checkpoint are as of (all 0 for a queue created after the checkpoint).
type replayQueue struct {
	q      *Queue
	hdr    uint64   // its metadata, policies and existence
	chunks []uint64 // the slots of chunk c
	rest   uint64   // the slots of the chunks after those
	ended  bool     // the checkpoint's part of it is loaded
	// bound is one past the highest slot a Put may name: the store's next
	// new slot when copied, or past any slot a Put named since.
	bound uint32
	// For the next checkpoints: the copies of its chunks the checkpoint
	// holds or refers to, and the LSNs of the last records replayed that
	// changed them.
	chunkHistory
}

func newReplayer(cfg config) *replayer {
	return &replayer{cfg: cfg, queues: map[uint64]*replayQueue{}, nextQID: 1,
		depLSN: map[depChunk]uint64{}, depPuts: map[depChunk][][]byte{}}
}

// dependencyRecord takes one record of an older checkpoint, gen, that the
// newest depends on: of it, only the chunks are needed, which the
// newest's references stand for.
func (r *replayer) dependencyRecord(gen uint64, rec []byte) error {
	d := dec{b: rec}
	switch op := d.byte(); op {
	case recCkptChunk:
		qid := d.u()
		c, lsn, err := readCkptChunk(&d)
		if err != nil {
			return err
		}
		r.depAt, r.depIn = depChunk{gen, qid, c}, true
		r.depLSN[r.depAt] = lsn
	case recPut:
		if r.depIn {
			r.depPuts[r.depAt] = append(r.depPuts[r.depAt], rec)
		}
	default:
		r.depIn = false
	}
	return nil
}

// guard returns the LSN that the checkpoint's copy of slot is as of.
func (rq *replayQueue) guard(slot uint32) uint64 {
	if c := int(slot >> chunkShift); c < len(rq.chunks) {
		return rq.chunks[c]
	}
	return rq.rest
}

// maxRestoreSlot bounds the slots a checkpoint or log may name, so that a
// damaged one cannot make loading allocate without limit: 2^28 slots of
// nodes are tens of gigabytes, more than a queue held in memory can have
// used.
var maxRestoreSlot uint32 = 1 << 28

// checkpointRecord loads one record of a checkpoint (or a backup, which
// is one).
func (r *replayer) checkpointRecord(rec []byte) error {
	d := dec{b: rec}
	op := d.byte()
	if r.ckpt == 0 && op != recCkptService || r.ckpt == 2 || r.ckpt == 1 && op == recCkptService {
		return fmt.Errorf("checkpoint record of type %d out of place", op)
	}
	if op == recCkptService {
		n, err := readCkptService(&d)
		if err != nil {
			return err
		}
		r.nextQID, r.ckptQIDs, r.ckpt = max(n, 1), n, 1
		return nil
	}
	if op == recCkptEnd {
		queues, msgs, err := readCkptEnd(&d)
		if err != nil {
			return err
		}
		if r.cur != nil && !r.cur.ended {
			return errors.New("the checkpoint ends inside a queue")
		}
		if queues != uint64(r.ckptQueues) || msgs != uint64(r.ckptMsgs) {
			return errors.New("the totals do not match the content")
		}
		r.ckpt = 2
		return nil
	}
	qid := d.u()
	rq := r.cur
	if op != recCkptQueue && (rq == nil || rq.ended || rq.q.qid != qid) {
		return fmt.Errorf("checkpoint record of type %d for queue %d out of place", op, qid)
	}
	switch op {
	case recCkptQueue:
		if rq != nil && !rq.ended {
			return fmt.Errorf("queue %d starts inside queue %d", qid, rq.q.qid)
		}
		cq, err := readCkptQueue(&d, qid)
		if err != nil {
			return err
		}
		if _, dup := r.queues[qid]; dup || qid >= r.nextQID || cq.next > maxRestoreSlot {
			return fmt.Errorf("queue number %d is repeated or out of range, or its slots are", qid)
		}
		q := newQueue(cq.name, r.cfg, cq.metadata)
		q.qid, q.seq, q.policies = qid, cq.seq, cq.policies
		r.cur = &replayQueue{q: q, hdr: cq.lsn, bound: cq.next}
		r.queues[qid] = r.cur
		r.ckptQueues++
	case recCkptChunk:
		c, lsn, err := readCkptChunk(&d)
		if err != nil {
			return err
		}
		if int(c) != len(rq.chunks) {
			return fmt.Errorf("chunk %d of queue %d out of order", c, qid)
		}
		rq.chunks = append(rq.chunks, lsn)
		rq.setCopy(c, chunkCopy{gen: ownCheckpoint, lsn: lsn})
	case recPut:
		if err := rq.place(&d, uint32(len(rq.chunks))-1); err != nil {
			return err
		}
		r.ckptMsgs++
	case recCkptChunkRef:
		c, gen, lsn, err := readCkptChunkRef(&d)
		if err != nil {
			return err
		}
		key := depChunk{gen, qid, c}
		if int(c) != len(rq.chunks) {
			return fmt.Errorf("chunk %d of queue %d out of order", c, qid)
		}
		if l, ok := r.depLSN[key]; !ok || l != lsn {
			return fmt.Errorf("chunk %d of queue %d refers to checkpoint %d, which does not hold it as of record %d", c, qid, gen, lsn)
		}
		rq.chunks = append(rq.chunks, lsn)
		for _, p := range r.depPuts[key] {
			pd := dec{b: p}
			if op, pqid := pd.header(); op != recPut || pqid != qid {
				return fmt.Errorf("chunk %d of queue %d in checkpoint %d holds a record of another", c, qid, gen)
			}
			if err := rq.place(&pd, c); err != nil {
				return err
			}
		}
		rq.setCopy(c, chunkCopy{gen: gen, lsn: lsn})
	case recCkptQueueEnd:
		chunks, lsn, err := readCkptQueueEnd(&d)
		if err != nil {
			return err
		}
		if int(chunks) != len(rq.chunks) {
			return fmt.Errorf("queue %d ends after %d chunks, not %d", qid, len(rq.chunks), chunks)
		}
		rq.rest, rq.ended = lsn, true
		return indexLoaded(rq.q)
	default:
		return fmt.Errorf("unknown checkpoint record type %d", op)
	}
	return nil
}

// place puts a message of a checkpoint, a Put that d holds past its
// header, in its slot of chunk c, unindexed.
func (rq *replayQueue) place(d *dec, c uint32) error {
	slot, n, err := readPut(d)
	if err != nil {
		return err
	}
	q := rq.q
	if slot>>chunkShift != c || slot >= maxRestoreSlot {
		return fmt.Errorf("message %v in slot %d, outside its chunk", n.id, slot)
	}
	p := q.store.allocAt(slot)
	if p == nil {
		return fmt.Errorf("slot %d holds two messages", slot)
	}
	*p = n
	q.count++
	q.seq = max(q.seq, n.seq)
	rq.bound = max(rq.bound, slot+1)
	return nil
}

// indexLoaded builds the visibility index and the expiry heap of a queue
// whose messages were placed in their slots, in insertion order, so that
// the visibility rings hold them as the Puts built them.
func indexLoaded(q *Queue) error {
	type ref struct {
		seq  uint64
		slot uint32
	}
	refs := make([]ref, 0, q.count)
	for slot := uint32(0); slot < q.store.next; slot++ {
		if n := q.store.at(slot); n.seq != 0 {
			refs = append(refs, ref{n.seq, slot})
		}
	}
	slices.SortFunc(refs, func(a, b ref) int { return cmp.Compare(a.seq, b.seq) })
	for i, rf := range refs {
		if i > 0 && refs[i-1].seq == rf.seq {
			return fmt.Errorf("two messages with insertion sequence %d", rf.seq)
		}
		n := q.store.at(rf.slot)
		if n.expires != neverExpires {
			q.expiry.push(expiryEntry{at: n.expires, slot: rf.slot, stamp: uint32(n.seq)})
		}
		q.vis.add(rf.slot, n, n.version == 0)
	}
	return nil
}

// logRecord replays one log record, number lsn.
func (r *replayer) logRecord(lsn uint64, rec []byte) error {
	r.records++
	d := dec{b: rec}
	op, qid := d.header()
	if d.err != nil {
		return d.err
	}
	if op == recCreateQueue {
		name, md, err := readCreateQueue(&d)
		if err != nil {
			return err
		}
		if _, ok := r.queues[qid]; ok || qid < r.nextQID {
			return fmt.Errorf("queue %d is created twice", qid)
		}
		q := newQueue(name, r.cfg, md)
		q.qid = qid
		r.queues[qid] = &replayQueue{q: q, chunkHistory: chunkHistory{reset: lsn}}
		r.nextQID = qid + 1
		return nil
	}
	rq := r.queues[qid]
	if rq == nil {
		if qid < r.ckptQIDs {
			return nil // deleted before the checkpoint copied it
		}
		return fmt.Errorf("record of type %d for queue %d, which does not exist", op, qid)
	}
	q := rq.q
	switch op {
	case recDeleteQueue:
		if err := readQueueOp(&d); err != nil {
			return err
		}
		if lsn > rq.hdr {
			delete(r.queues, qid)
		}
	case recMetadata:
		md, err := readMetadata(&d)
		if err != nil {
			return err
		}
		if lsn > rq.hdr {
			q.metadata = md
		}
	case recPolicies:
		ps, err := readPolicies(&d)
		if err != nil {
			return err
		}
		if lsn > rq.hdr {
			q.policies = ps
		}
	case recPut:
		slot, n, err := readPut(&d)
		if err != nil {
			return err
		}
		if slot >= maxRestoreSlot || n.version != 0 || n.dequeues != 0 {
			return fmt.Errorf("put into slot %d, out of range, or of a message already taken", slot)
		}
		if lsn > rq.guard(slot) {
			// Put takes a freed slot or the next new one, never one
			// beyond. (A Put the checkpoint holds the effect of may name
			// one beyond the next new slot the checkpoint copied, if the
			// queue was emptied since and its slots started over.)
			if slot > rq.bound {
				return fmt.Errorf("put into slot %d, beyond the next new slot %d", slot, rq.bound)
			}
			q.restore(slot, n)
			rq.touch(slot, lsn)
		}
		rq.bound = max(rq.bound, slot+1)
		q.seq = max(q.seq, n.seq)
	case recGet:
		return readGet(&d, func(visible int64, g getEntry) error {
			if lsn <= rq.guard(g.slot) {
				return nil
			}
			n := q.store.lookup(g.slot)
			if n == nil {
				return fmt.Errorf("get of slot %d, which is empty", g.slot)
			}
			q.vis.remove(n)
			n.visible, n.dequeues, n.version, n.tag = visible, g.dequeues, g.version, g.tag
			q.vis.add(g.slot, n, false)
			rq.touch(g.slot, lsn)
			return nil
		})
	case recUpdate:
		u, err := readUpdate(&d)
		if err != nil || lsn <= rq.guard(u.slot) {
			return err
		}
		n := q.store.lookup(u.slot)
		if n == nil {
			return fmt.Errorf("update of slot %d, which is empty", u.slot)
		}
		q.vis.remove(n)
		n.visible, n.version, n.tag = u.visible, u.version, u.tag
		if u.hasContent {
			n.content = u.content
		}
		q.vis.add(u.slot, n, false)
		rq.touch(u.slot, lsn)
	case recDelete:
		slot, err := readDelete(&d)
		if err != nil || lsn <= rq.guard(slot) {
			return err
		}
		n := q.store.lookup(slot)
		if n == nil {
			return fmt.Errorf("delete of slot %d, which is empty", slot)
		}
		q.remove(slot, n)
		rq.touch(slot, lsn)
	case recClear:
		if err := readQueueOp(&d); err != nil {
			return err
		}
		rq.clear(lsn)
		rq.reset = lsn
	default:
		return fmt.Errorf("unknown record type %d", op)
	}
	return nil
}

// clear replays a Clear, number lsn, on the slots whose copy is older.
func (rq *replayQueue) clear(lsn uint64) {
	q := rq.q
	if lsn > rq.rest && !slices.ContainsFunc(rq.chunks, func(g uint64) bool { return g >= lsn }) {
		q.clearLocked()
		return
	}
	for slot := uint32(0); slot < q.store.next; slot++ {
		if n := q.store.at(slot); n.seq != 0 && lsn > rq.guard(slot) {
			q.remove(slot, n)
		}
	}
}

// restore puts the message n, replayed from its Put, in slot. A slot that
// is still taken held a message that expired and was purged (the one
// change the log does not record, since the clock decides it): it goes
// now.
func (q *Queue) restore(slot uint32, n node) {
	p := q.store.allocAt(slot)
	if p == nil {
		q.remove(slot, q.store.at(slot))
		p = q.store.allocAt(slot)
	}
	*p = n
	if n.expires != neverExpires {
		q.expiry.push(expiryEntry{at: n.expires, slot: slot, stamp: uint32(n.seq)})
	}
	q.vis.add(slot, p, n.version == 0)
	q.count++
}

// remove deletes the message n in slot, as Delete does.
func (q *Queue) remove(slot uint32, n *node) {
	q.vis.remove(n)
	q.forgetExpiry(n)
	q.store.release(slot)
	q.count--
	q.compactLazy()
}

// service returns the Service the replayed records made, and what it
// holds.
func (r *replayer) service() (*Service, RecoveryStats, error) {
	if r.ckpt == 1 {
		return nil, RecoveryStats{}, errors.New("the checkpoint has no end record")
	}
	s := &Service{cfg: r.cfg, queues: new(btree.Map[string, *Queue]), nextQID: r.nextQID}
	var stats RecoveryStats
	for _, rq := range r.queues {
		q := rq.q
		if _, dup := s.queues.Get(q.name); dup {
			return nil, RecoveryStats{}, fmt.Errorf("two queues named %s", quoteTrunc(q.name))
		}
		q.svc = s
		q.store.rebuildFree()
		// Messages that expired while the log was written, or since,
		// go now, as the next operation would purge them.
		q.purgeExpired(q.now())
		s.queues.Set(q.name, q)
		stats.Queues++
		stats.Messages += q.count
	}
	stats.Records = r.records
	return s, stats, nil
}
