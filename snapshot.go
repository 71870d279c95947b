package azq

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"

	"github.com/tidwall/btree"
)

// image is a copy of a Service's state taken under its locks, to be
// encoded as a snapshot without them.
type image struct {
	nextQID uint64
	queues  []imageQueue
}

type imageQueue struct {
	qid      uint64
	name     string
	seq      uint64
	next     uint32            // the store's next new slot
	metadata map[string]string // never changed in place, so shared
	policies []AccessPolicy    // likewise
	slots    []uint32
	nodes    []node
}

// captureLocked copies the state of the queues qs. s.mu and every q.mu
// must be held. Nodes are copied whole; their contents are strings, so the
// copy is shallow and cheap.
func (s *Service) captureLocked(qs []*Queue) image {
	img := image{nextQID: s.nextQID, queues: make([]imageQueue, 0, len(qs))}
	for _, q := range qs {
		iq := imageQueue{qid: q.qid, name: q.name, seq: q.seq, next: q.store.next, metadata: q.metadata, policies: q.policies}
		iq.slots = make([]uint32, 0, q.count)
		iq.nodes = make([]node, 0, q.count)
		for slot := uint32(0); slot < q.store.next; slot++ {
			if n := q.store.at(slot); n.seq != 0 {
				iq.slots = append(iq.slots, slot)
				iq.nodes = append(iq.nodes, *n)
			}
		}
		img.queues = append(img.queues, iq)
	}
	return img
}

// encode writes img as a snapshot: a header, each queue followed by its
// messages in insertion order, and an end record with the totals, which
// tells a whole snapshot from a cut one.
func (img *image) encode(w io.Writer) error {
	var b []byte
	frame := func(fill func(enc) enc) error {
		b, start := beginFrame(b[:0])
		b = endFrame(fill(enc(b)), start)
		_, err := w.Write(b)
		return err
	}
	err := frame(func(e enc) enc { return append(e, recSnapHeader).str(snapMagic).u(snapFormat).u(img.nextQID) })
	msgs := 0
	for i := range img.queues {
		iq := &img.queues[i]
		if err == nil {
			err = frame(func(e enc) enc {
				return append(e, recSnapQueue).u(iq.qid).str(iq.name).u(iq.seq).u(uint64(iq.next)).metadata(iq.metadata).policies(iq.policies)
			})
		}
		// Insertion order lets loading rebuild the visibility rings as
		// the Puts built them.
		order := make([]int, len(iq.nodes))
		for j := range order {
			order[j] = j
		}
		slices.SortFunc(order, func(a, b int) int {
			if iq.nodes[a].seq < iq.nodes[b].seq {
				return -1
			}
			return 1
		})
		for _, j := range order {
			if err != nil {
				break
			}
			n := &iq.nodes[j]
			err = frame(func(e enc) enc {
				return append(e, recSnapMessage).u(uint64(iq.slots[j])).u(n.seq).id(n.id).i(n.inserted).
					expiry(n.inserted, n.expires).i(n.visible).u64(n.tag).u(uint64(n.dequeues)).u(uint64(n.version)).str(n.content)
			})
			msgs++
		}
	}
	if err == nil {
		err = frame(func(e enc) enc { return append(e, recSnapEnd).u(uint64(len(img.queues))).u(uint64(msgs)) })
	}
	return err
}

// maxRestoreSlot bounds the slots a snapshot may name, so that a damaged
// one cannot make loading allocate without limit: 2^28 slots of nodes are
// tens of gigabytes, more than a queue held in memory can have used.
var maxRestoreSlot uint32 = 1 << 28

// loadSnapshot restores the state a snapshot holds into r's Service.
func (r *replayer) loadSnapshot(name string, data []byte) error {
	var q *Queue
	queues, msgs := 0, 0
	state := 0 // 0: want header, 1: in body, 2: ended
	_, err := scanFrames(name, data, false, func(_ int64, p []byte) error {
		d := dec{b: p}
		op := d.byte()
		switch {
		case state == 0 && op != recSnapHeader, state == 2:
			return fmt.Errorf("record of type %d out of place", op)
		}
		switch op {
		case recSnapHeader:
			if d.str() != snapMagic || d.u() != snapFormat {
				return errors.New("not an azq snapshot, or one of a newer format")
			}
			r.nextQID = d.u()
			state = 1
		case recSnapQueue:
			qid, name, seq, next, md, ps := d.u(), d.str(), d.u(), d.u32(), d.metadata(), d.policies()
			if d.err != nil {
				break
			}
			if _, ok := r.byQID[qid]; ok || qid >= r.nextQID || next > maxRestoreSlot {
				return fmt.Errorf("queue number %d is repeated or out of range, or its slots are", qid)
			}
			q = newQueue(name, r.s.cfg, md)
			q.svc, q.qid, q.seq, q.policies = r.s, qid, seq, ps
			if next > 0 {
				// Slots below next may be named by Puts replayed later.
				q.store.allocAt(next - 1)
			}
			r.byQID[qid] = q
			queues++
		case recSnapMessage:
			if q == nil {
				return errors.New("message before any queue")
			}
			var n node
			slot := d.u32()
			n.seq = d.u()
			n.id = d.id()
			n.inserted = d.i()
			n.expires = d.expiry(n.inserted)
			n.visible = d.i()
			n.tag = d.u64()
			dq := d.u()
			n.version = d.u32()
			n.content = d.str()
			if d.err != nil {
				break
			}
			if n.seq == 0 || n.seq > q.seq || dq > 1<<31-1 || slot >= q.store.next || q.store.lookup(slot) != nil {
				return fmt.Errorf("message %v is inconsistent (slot %d, sequence %d)", n.id, slot, n.seq)
			}
			n.dequeues = int32(dq)
			q.restore(slot, n, true)
			msgs++
		case recSnapEnd:
			if d.u() != uint64(queues) || d.u() != uint64(msgs) {
				return errors.New("the totals do not match the content")
			}
			state = 2
		default:
			return fmt.Errorf("unknown record type %d", op)
		}
		return d.done()
	})
	if err == nil && state != 2 {
		err = &CorruptError{File: name, Offset: int64(len(data)), Reason: "the snapshot ends early"}
	}
	return err
}

// Snapshot writes a consistent copy of the Service's state (queues,
// metadata, access policies, messages with their IDs, times, dequeue
// counts and current pop receipts) to w, in the format of the durable
// mode's checkpoints. It may run while the Service is in use: the state is
// copied in one brief stop of every queue, then written with no lock
// held. Restore reads it back, for test fixtures and back-ups.
func (s *Service) Snapshot(ctx context.Context, w io.Writer) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return s.closedErr()
	}
	var qs []*Queue
	s.queues.Scan(func(_ string, q *Queue) bool { qs = append(qs, q); return true })
	for _, q := range qs {
		q.mu.Lock()
	}
	img := s.captureLocked(qs)
	for _, q := range qs {
		q.mu.Unlock()
	}
	s.mu.Unlock()
	bw := bufio.NewWriterSize(w, 1<<16)
	if err := img.encode(bw); err != nil {
		return err
	}
	return bw.Flush()
}

// Restore returns an in-memory Service holding the state a Snapshot wrote
// to r: the same queues and messages, and pop receipts that still work.
// Options set the clock and limits as for NewService. A damaged or cut
// snapshot gives a *CorruptError and no Service.
//
// To make a snapshot the starting state of a durable Service, Open an empty
// directory and copy the queues in, or place the snapshot file in the
// directory as snap-0000000000000001 before the first Open.
func Restore(r io.Reader, opts ...Option) (*Service, error) {
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, err
	}
	rp := &replayer{s: &Service{cfg: newConfig(opts), queues: new(btree.Map[string, *Queue])}, byQID: map[uint64]*Queue{}}
	if err := rp.loadSnapshot("snapshot", data); err != nil {
		return nil, err
	}
	s := rp.s
	s.nextQID = rp.nextQID
	for _, q := range rp.byQID {
		if _, dup := s.queues.Get(q.name); dup {
			return nil, &CorruptError{File: "snapshot", Reason: "two queues named " + quoteTrunc(q.name)}
		}
		q.store.rebuildFree()
		s.queues.Set(q.name, q)
	}
	return s, nil
}
