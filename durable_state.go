package azq

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/azqlib/azq/internal/durable"
	"github.com/tidwall/btree"
)

// The views of the state that internal/durable reads to write checkpoints
// and backups (queueView), and builds on recovery and Restore (rebuilder,
// rebuilding).

// queueView is a queue as internal/durable copies it (durable.QueueState).
type queueView Queue

// queueStates returns views of the Service's queues. s.mu must be held.
func (s *Service) queueStates() []durable.QueueState {
	qs := make([]durable.QueueState, 0, s.queues.Len())
	s.queues.Scan(func(_ string, q *Queue) bool { qs = append(qs, (*queueView)(q)); return true })
	return qs
}

func (v *queueView) Lock()        { v.mu.Lock() }
func (v *queueView) Unlock()      { v.mu.Unlock() }
func (v *queueView) Closed() bool { return v.closed }
func (v *queueView) Next() uint32 { return v.store.next }

func (v *queueView) Header() durable.Header {
	return durable.Header{QID: v.qid, Name: v.name, Seq: v.seq, Next: v.store.next,
		Metadata: v.metadata, Policies: durablePolicies(v.policies)}
}

func (v *queueView) AppendMessages(dst []durable.Message, lo, hi uint32) []durable.Message {
	for slot := lo; slot < hi; slot++ {
		if n := v.store.at(slot); n.seq != 0 {
			dst = append(dst, durableMessage(slot, n))
		}
	}
	return dst
}

func (v *queueView) Journal() *durable.Queue {
	if j, ok := v.j.(*queueJournal); ok {
		return j.dq()
	}
	return nil
}

// rebuilder makes the queues that recovery and Restore rebuild
// (durable.Builder).
type rebuilder struct{ cfg config }

func (b rebuilder) NewQueue(qid uint64, name string) durable.Rebuilt {
	q := newQueue(name, b.cfg, nil)
	q.qid = qid
	return (*rebuilding)(q)
}

// rebuilding is a queue being rebuilt (durable.Rebuilt).
type rebuilding Queue

// storeNode returns the message m as the slot store holds it.
func storeNode(m *durable.Message) node {
	return node{content: m.Content, id: m.ID, inserted: m.Inserted, expires: m.Expires, visible: m.Visible,
		seq: m.Seq, tag: m.Tag, dequeues: m.Dequeues, version: m.Version}
}

func (r *rebuilding) Place(m durable.Message) bool {
	p := r.store.allocAt(m.Slot)
	if p == nil {
		return false
	}
	*p = storeNode(&m)
	r.count++
	return true
}

// Index builds the visibility index and the expiry heap of a queue whose
// messages were placed in their slots, in insertion order, so that the
// visibility rings hold them as the Puts built them.
func (r *rebuilding) Index() error {
	q := (*Queue)(r)
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

func (r *rebuilding) Restore(m durable.Message) {
	q := (*Queue)(r)
	p := q.store.allocAt(m.Slot)
	if p == nil {
		q.remove(m.Slot, q.store.at(m.Slot))
		p = q.store.allocAt(m.Slot)
	}
	*p = storeNode(&m)
	if p.expires != neverExpires {
		q.expiry.push(expiryEntry{at: p.expires, slot: m.Slot, stamp: uint32(p.seq)})
	}
	q.vis.add(m.Slot, p, p.version == 0)
	q.count++
}

func (r *rebuilding) Take(visible int64, t durable.Taken) bool {
	n := r.store.lookup(t.Slot)
	if n == nil {
		return false
	}
	r.vis.remove(n)
	n.visible, n.dequeues, n.version, n.tag = visible, t.Dequeues, t.Version, t.Tag
	r.vis.add(t.Slot, n, false)
	return true
}

func (r *rebuilding) Update(slot uint32, visible int64, version uint32, tag uint64, hasContent bool, content string) bool {
	n := r.store.lookup(slot)
	if n == nil {
		return false
	}
	r.vis.remove(n)
	n.visible, n.version, n.tag = visible, version, tag
	if hasContent {
		n.content = content
	}
	r.vis.add(slot, n, false)
	return true
}

func (r *rebuilding) Remove(slot uint32) bool {
	n := r.store.lookup(slot)
	if n == nil {
		return false
	}
	(*Queue)(r).remove(slot, n)
	return true
}

func (r *rebuilding) Clear()       { (*Queue)(r).clearLocked() }
func (r *rebuilding) Next() uint32 { return r.store.next }

// remove deletes the message n in slot, as Delete does.
func (q *Queue) remove(slot uint32, n *node) {
	q.vis.remove(n)
	q.forgetExpiry(n)
	q.store.release(slot)
	q.count--
	q.compactLazy()
}

// rebuilt returns the Service that the replayed res makes, and what it
// holds.
func rebuilt(cfg config, res durable.Result) (*Service, RecoveryStats, error) {
	s := &Service{cfg: cfg, queues: new(btree.Map[string, *Queue]), nextQID: res.NextQID}
	var stats RecoveryStats
	for _, rq := range res.Queues {
		q := (*Queue)(rq.Queue.(*rebuilding))
		if _, dup := s.queues.Get(q.name); dup {
			return nil, RecoveryStats{}, fmt.Errorf("two queues named %s", quoteTrunc(q.name))
		}
		q.seq, q.metadata, q.policies = rq.Seq, rq.Metadata, accessPolicies(rq.Policies)
		if rq.Journal != nil {
			q.j = (*queueJournal)(rq.Journal)
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
	stats.Records = res.Records
	return s, stats, nil
}
