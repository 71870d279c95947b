package durable

import (
	"errors"
	"fmt"
	"math"
	"slices"
)

// A Replayer rebuilds a durable Service from its newest checkpoint and the
// log records after it, through a Builder.
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
//
// What the queues are rebuilt in (slot stores and indexes) is the queue
// package's, behind the Builder and Rebuilt views; the Replayer decides
// which record applies to what, and keeps what the next checkpoints need
// to know of the chunks (chunkHistory).
type Replayer struct {
	build   Builder
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

	log *Log // the Log whose queues' journals Result makes; nil for a backup
}

// ownCheckpoint stands for the generation of the checkpoint being loaded
// in the copies of a replayQueue, until it is known.
const ownCheckpoint = math.MaxUint64

// depChunk names a chunk of a queue that an older checkpoint holds.
type depChunk struct {
	gen, qid uint64
	chunk    uint32
}

// replayQueue is a queue being rebuilt, what of it is the Replayer's own,
// and the LSNs that its parts in the checkpoint are as of (all 0 for a
// queue created after the checkpoint).
type replayQueue struct {
	q        Rebuilt
	qid      uint64
	name     string
	seq      uint64
	metadata map[string]string
	policies []Policy

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

// NewReplayer returns a Replayer that rebuilds queues with b.
func NewReplayer(b Builder) *Replayer {
	return &Replayer{build: b, queues: map[uint64]*replayQueue{}, nextQID: 1,
		depLSN: map[depChunk]uint64{}, depPuts: map[depChunk][][]byte{}}
}

// DependencyRecord takes one record of an older checkpoint, gen, that the
// newest depends on: of it, only the chunks are needed, which the
// newest's references stand for.
func (r *Replayer) DependencyRecord(gen uint64, rec []byte) error {
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

// SetMaxRestoreSlot sets the bound on the slots a checkpoint or log may
// name, and returns a function that sets the previous one back. Fuzz
// tests lower it, so that a damaged record costs them little memory.
func SetMaxRestoreSlot(n uint32) (undo func()) {
	old := maxRestoreSlot
	maxRestoreSlot = n
	return func() { maxRestoreSlot = old }
}

// CheckpointRecord loads one record of a checkpoint (or a backup, which
// is one).
func (r *Replayer) CheckpointRecord(rec []byte) error {
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
	if op != recCkptQueue && (rq == nil || rq.ended || rq.qid != qid) {
		return fmt.Errorf("checkpoint record of type %d for queue %d out of place", op, qid)
	}
	switch op {
	case recCkptQueue:
		if rq != nil && !rq.ended {
			return fmt.Errorf("queue %d starts inside queue %d", qid, rq.qid)
		}
		h, lsn, err := readCkptQueue(&d, qid)
		if err != nil {
			return err
		}
		if _, dup := r.queues[qid]; dup || qid >= r.nextQID || h.Next > maxRestoreSlot {
			return fmt.Errorf("queue number %d is repeated or out of range, or its slots are", qid)
		}
		r.cur = &replayQueue{q: r.build.NewQueue(qid, h.Name), qid: qid, name: h.Name, seq: h.Seq,
			metadata: h.Metadata, policies: h.Policies, hdr: lsn, bound: h.Next}
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
		return rq.q.Index()
	default:
		return fmt.Errorf("unknown checkpoint record type %d", op)
	}
	return nil
}

// place puts a message of a checkpoint, a Put that d holds past its
// header, in its slot of chunk c, unindexed.
func (rq *replayQueue) place(d *dec, c uint32) error {
	m, err := readPut(d)
	if err != nil {
		return err
	}
	if m.Slot>>chunkShift != c || m.Slot >= maxRestoreSlot {
		return fmt.Errorf("message %v in slot %d, outside its chunk", m.ID, m.Slot)
	}
	if !rq.q.Place(m) {
		return fmt.Errorf("slot %d holds two messages", m.Slot)
	}
	rq.seq = max(rq.seq, m.Seq)
	rq.bound = max(rq.bound, m.Slot+1)
	return nil
}

// LogRecord replays one log record, number lsn.
func (r *Replayer) LogRecord(lsn uint64, rec []byte) error {
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
		r.queues[qid] = &replayQueue{q: r.build.NewQueue(qid, name), qid: qid, name: name, metadata: md,
			chunkHistory: chunkHistory{reset: lsn}}
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
			rq.metadata = md
		}
	case recPolicies:
		ps, err := readPolicies(&d)
		if err != nil {
			return err
		}
		if lsn > rq.hdr {
			rq.policies = ps
		}
	case recPut:
		m, err := readPut(&d)
		if err != nil {
			return err
		}
		return rq.put(lsn, m)
	case recPutBatch:
		return readPutBatch(&d, func(m Message) error { return rq.put(lsn, m) })
	case recGet:
		return readGet(&d, func(visible int64, t Taken) error {
			if lsn <= rq.guard(t.Slot) {
				return nil
			}
			if !q.Take(visible, t) {
				return fmt.Errorf("get of slot %d, which is empty", t.Slot)
			}
			rq.touch(t.Slot, lsn)
			return nil
		})
	case recUpdate:
		u, err := readUpdate(&d)
		if err != nil || lsn <= rq.guard(u.slot) {
			return err
		}
		if !q.Update(u.slot, u.visible, u.version, u.tag, u.hasContent, u.content) {
			return fmt.Errorf("update of slot %d, which is empty", u.slot)
		}
		rq.touch(u.slot, lsn)
	case recDelete:
		slot, err := readDelete(&d)
		if err != nil {
			return err
		}
		return rq.delete(lsn, slot)
	case recDeleteBatch:
		return readDeleteBatch(&d, func(slot uint32) error { return rq.delete(lsn, slot) })
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

// put replays the Put of m by record lsn, a Put or a PutBatch.
func (rq *replayQueue) put(lsn uint64, m Message) error {
	if m.Slot >= maxRestoreSlot || m.Version != 0 || m.Dequeues != 0 {
		return fmt.Errorf("put into slot %d, out of range, or of a message already taken", m.Slot)
	}
	if lsn > rq.guard(m.Slot) {
		// Put takes a freed slot or the next new one, never one
		// beyond. (A Put the checkpoint holds the effect of may name
		// one beyond the next new slot the checkpoint copied, if the
		// queue was emptied since and its slots started over.)
		if m.Slot > rq.bound {
			return fmt.Errorf("put into slot %d, beyond the next new slot %d", m.Slot, rq.bound)
		}
		rq.q.Restore(m)
		rq.touch(m.Slot, lsn)
	}
	rq.bound = max(rq.bound, m.Slot+1)
	rq.seq = max(rq.seq, m.Seq)
	return nil
}

// delete replays the deletion of the message in slot by record lsn, a
// Delete or a DeleteBatch.
func (rq *replayQueue) delete(lsn uint64, slot uint32) error {
	if lsn <= rq.guard(slot) {
		return nil
	}
	if !rq.q.Remove(slot) {
		return fmt.Errorf("delete of slot %d, which is empty", slot)
	}
	rq.touch(slot, lsn)
	return nil
}

// clear replays a Clear, number lsn, on the slots whose copy is older.
func (rq *replayQueue) clear(lsn uint64) {
	if lsn > rq.rest && !slices.ContainsFunc(rq.chunks, func(g uint64) bool { return g >= lsn }) {
		rq.q.Clear()
		return
	}
	for slot := uint32(0); slot < rq.q.Next(); slot++ {
		if lsn > rq.guard(slot) {
			rq.q.Remove(slot)
		}
	}
}

// Replayed is a queue that replay rebuilt: the queue, with its messages
// placed and indexed, and what the Replayer kept of it.
type Replayed struct {
	Queue    Rebuilt
	QID      uint64
	Name     string
	Seq      uint64 // the last insertion sequence handed out
	Metadata map[string]string
	Policies []Policy
	// Journal is the queue's journal, for a Log's queue; nil otherwise.
	Journal *Queue
}

// Result is what the records replayed made: the queues, in no order, and
// the number of the next queue to create.
type Result struct {
	Queues  []Replayed
	NextQID uint64
	Records int // log records replayed
}

// Result returns what the records replayed so far made; an error if a
// checkpoint began and did not end.
func (r *Replayer) Result() (Result, error) {
	if r.ckpt == 1 {
		return Result{}, errors.New("the checkpoint has no end record")
	}
	res := Result{NextQID: r.nextQID, Records: r.records}
	for _, rq := range r.queues {
		rp := Replayed{Queue: rq.q, QID: rq.qid, Name: rq.name, Seq: rq.seq, Metadata: rq.metadata, Policies: rq.policies}
		if r.log != nil {
			rp.Journal = &Queue{log: r.log, qid: rq.qid, chunkHistory: rq.chunkHistory}
		}
		res.Queues = append(res.Queues, rp)
	}
	return res, nil
}
