package durable

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"

	"github.com/azqlib/azq/internal/vfs"
)

// The tests of this package run the state machine against a model of the
// queue package's state: memQueue implements the views a Log reads
// (QueueState) and builds (Rebuilt), with a map of slots instead of a
// slot store, and memService the Service's (Host, Builder).

type memQueue struct {
	mu       sync.Mutex // guards the fields below
	qid      uint64
	name     string
	seq      uint64
	next     uint32
	msgs     map[uint32]Message
	metadata map[string]string
	policies []Policy
	closed   bool
	j        *Queue
	indexed  bool
}

func newMemQueue(qid uint64, name string) *memQueue {
	return &memQueue{qid: qid, name: name, msgs: map[uint32]Message{}}
}

func (q *memQueue) Lock()        { q.mu.Lock() }
func (q *memQueue) Unlock()      { q.mu.Unlock() }
func (q *memQueue) Closed() bool { return q.closed }
func (q *memQueue) Next() uint32 { return q.next }
func (q *memQueue) Journal() *Queue {
	return q.j
}

func (q *memQueue) Header() Header {
	return Header{QID: q.qid, Name: q.name, Seq: q.seq, Next: q.next, Metadata: q.metadata, Policies: q.policies}
}

func (q *memQueue) AppendMessages(dst []Message, lo, hi uint32) []Message {
	for slot := lo; slot < hi; slot++ {
		if m, ok := q.msgs[slot]; ok {
			dst = append(dst, m)
		}
	}
	return dst
}

func (q *memQueue) Place(m Message) bool {
	if _, ok := q.msgs[m.Slot]; ok {
		return false
	}
	q.msgs[m.Slot] = m
	q.next = max(q.next, m.Slot+1)
	return true
}

func (q *memQueue) Index() error {
	seqs := map[uint64]bool{}
	for _, m := range q.msgs {
		if seqs[m.Seq] {
			return fmt.Errorf("two messages with insertion sequence %d", m.Seq)
		}
		seqs[m.Seq] = true
	}
	q.indexed = true
	return nil
}

func (q *memQueue) Restore(m Message) {
	q.msgs[m.Slot] = m
	q.next = max(q.next, m.Slot+1)
}

func (q *memQueue) Take(visible int64, t Taken) bool {
	m, ok := q.msgs[t.Slot]
	if ok {
		m.Visible, m.Dequeues, m.Version, m.Tag = visible, t.Dequeues, t.Version, t.Tag
		q.msgs[t.Slot] = m
	}
	return ok
}

func (q *memQueue) Update(slot uint32, visible int64, version uint32, tag uint64, hasContent bool, content string) bool {
	m, ok := q.msgs[slot]
	if ok {
		m.Visible, m.Version, m.Tag = visible, version, tag
		if hasContent {
			m.Content = content
		}
		q.msgs[slot] = m
	}
	return ok
}

func (q *memQueue) Remove(slot uint32) bool {
	_, ok := q.msgs[slot]
	delete(q.msgs, slot)
	return ok
}

func (q *memQueue) Clear() { clear(q.msgs) }

// freeSlot returns the lowest free slot, as a slot store hands out one.
func (q *memQueue) freeSlot() uint32 {
	for slot := uint32(0); ; slot++ {
		if _, ok := q.msgs[slot]; !ok {
			return slot
		}
	}
}

type memService struct {
	mu      sync.Mutex // guards the fields below
	queues  map[string]*memQueue
	nextQID uint64
	failure error
}

func (s *memService) NewQueue(qid uint64, name string) Rebuilt { return newMemQueue(qid, name) }

func (s *memService) Queues(rotate func()) ([]QueueState, uint64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.failure != nil {
		return nil, 0, s.failure
	}
	rotate()
	var qs []QueueState
	for _, name := range slices.Sorted(maps.Keys(s.queues)) {
		qs = append(qs, s.queues[name])
	}
	return qs, s.nextQID, nil
}

func (s *memService) Fail(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failure = err
}

// openMem opens the Log in mem and returns it with the service it
// rebuilt.
func openMem(t *testing.T, mem vfs.FS) (*Log, *memService) {
	t.Helper()
	s := &memService{queues: map[string]*memQueue{}}
	l, res, _, err := Open(Config{Dir: "/d", FS: mem, CheckpointBytes: 1 << 40, AllotBytes: 16 << 10,
		Failed: func(cause error) error { return fmt.Errorf("failed: %w", cause) },
		Closed: func() error { return errors.New("closed") }}, s)
	if err != nil {
		t.Fatal(err)
	}
	s.nextQID = res.NextQID
	for _, rq := range res.Queues {
		q := rq.Queue.(*memQueue)
		if len(q.msgs) > 0 && !q.indexed && rq.Journal.copies != nil {
			t.Errorf("queue %s came from a checkpoint but was not indexed", q.name)
		}
		q.seq, q.metadata, q.policies, q.j = rq.Seq, rq.Metadata, rq.Policies, rq.Journal
		s.queues[q.name] = q
	}
	l.Start(s)
	return l, s
}

// dumpMem describes the state of s, for comparison.
func dumpMem(s *memService) string {
	out := fmt.Sprintf("next queue %d\n", s.nextQID)
	for _, name := range slices.Sorted(maps.Keys(s.queues)) {
		q := s.queues[name]
		out += fmt.Sprintf("%s #%d seq %d md %v ps %v\n", name, q.qid, q.seq, q.metadata, q.policies)
		slots := slices.Sorted(maps.Keys(q.msgs))
		for _, slot := range slots {
			out += fmt.Sprintf("  %+v\n", q.msgs[slot])
		}
	}
	return out
}

// TestLogReplaysTheModel runs random changes on the model, recording each
// in its queue's journal as the queue package does (under the queue's
// lock, waiting outside it), writes checkpoints among them, abandons the
// Log as a crash would, and checks that Open rebuilds exactly the model.
func TestLogReplaysTheModel(t *testing.T) {
	for seed := uint64(1); seed <= 4; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			defer SetMigration(2, 2, 1)()
			rng := rand.New(rand.NewPCG(seed, 3))
			mem := vfs.NewMem()
			l, s := openMem(t, mem)
			s.nextQID = max(s.nextQID, 1)
			now := int64(1e18)
			for step := 0; step < 3000; step++ {
				now += 1e6
				if step%700 == 400 {
					if err := l.CheckpointNow(); err != nil {
						t.Fatal(err)
					}
					continue
				}
				name := fmt.Sprintf("q%d", rng.IntN(3))
				s.mu.Lock()
				q := s.queues[name]
				if q == nil {
					q = newMemQueue(s.nextQID, name)
					s.nextQID++
					var lsn uint64
					q.j, lsn = l.NewQueue(q.qid, name, map[string]string{"n": name})
					q.metadata = map[string]string{"n": name}
					s.queues[name] = q
					s.mu.Unlock()
					if err := l.Wait(lsn); err != nil {
						t.Fatal(err)
					}
					continue
				}
				if rng.IntN(1000) == 0 {
					delete(s.queues, name)
					q.Lock()
					q.closed = true
					lsn := q.j.DeleteQueue()
					q.Unlock()
					s.mu.Unlock()
					if err := q.j.Wait(lsn); err != nil {
						t.Fatal(err)
					}
					continue
				}
				s.mu.Unlock()
				q.Lock()
				var lsn uint64
				slots := slices.Sorted(maps.Keys(q.msgs))
				switch op := rng.IntN(20); {
				case op < 9 || len(slots) == 0:
					q.seq++
					m := Message{Slot: q.freeSlot(), Seq: q.seq, Content: fmt.Sprint("m", q.seq), Inserted: now,
						Visible: now, Expires: NeverExpires, Tag: rng.Uint64()}
					m.ID[0], m.ID[1] = byte(q.seq), byte(q.seq>>8)
					if rng.IntN(2) == 0 {
						m.Expires = now + 1e12
					}
					q.msgs[m.Slot] = m
					q.next = max(q.next, m.Slot+1)
					lsn = q.j.Put(&m)
				case op < 13:
					for _, slot := range slots[:min(len(slots), 1+rng.IntN(4))] {
						m := q.msgs[slot]
						m.Visible, m.Dequeues, m.Version, m.Tag = now+1e9, m.Dequeues+1, m.Version+1, rng.Uint64()
						q.msgs[slot] = m
						q.j.Take(Taken{Slot: slot, Dequeues: m.Dequeues, Version: m.Version, Tag: m.Tag})
					}
					lsn = q.j.Get(now + 1e9)
				case op < 15:
					m := q.msgs[slots[rng.IntN(len(slots))]]
					m.Visible, m.Version, m.Tag = now, m.Version+1, rng.Uint64()
					content := rng.IntN(2) == 0
					if content {
						m.Content += "+"
					}
					q.msgs[m.Slot] = m
					lsn = q.j.Update(&m, content)
				case op < 18:
					slot := slots[rng.IntN(len(slots))]
					delete(q.msgs, slot)
					lsn = q.j.Delete(slot)
				case op < 19:
					q.metadata = map[string]string{"step": fmt.Sprint(step)}
					lsn = q.j.Metadata(q.metadata)
				default:
					if rng.IntN(4) == 0 {
						clear(q.msgs)
						lsn = q.j.Clear()
					} else {
						q.policies = []Policy{{ID: fmt.Sprint(step), Permission: "r"}}
						lsn = q.j.Policies(q.policies)
					}
				}
				q.Unlock()
				if err := q.j.Wait(lsn); err != nil {
					t.Fatal(err)
				}
			}
			want := dumpMem(s)
			l.Abandon()
			l2, s2 := openMem(t, mem)
			if got := dumpMem(s2); got != want {
				t.Fatalf("replayed\n%s\nwant\n%s", got, want)
			}
			st := l2.State()
			if err := l2.CheckpointNow(); err != nil {
				t.Fatal(err)
			}
			l2.Abandon()
			_, s3 := openMem(t, mem)
			if got := dumpMem(s3); got != want {
				t.Fatalf("replayed from a checkpoint of the replayed state (%d bytes of log before it)\n%s\nwant\n%s", st.LogBytes, got, want)
			}
		})
	}
}

// TestCheckpointerStops: Checkpoint asks the checkpointer, and reports
// ErrStopped once Stop has ended it; Stop tells the first call from the
// next.
func TestCheckpointerStops(t *testing.T) {
	l, _ := openMem(t, vfs.NewMem())
	if err := l.Checkpoint(context.Background()); err != nil {
		t.Fatal(err)
	}
	if st := l.State(); st.Checkpoints != 1 {
		t.Fatalf("%d checkpoints, want 1", st.Checkpoints)
	}
	if !l.Stop() {
		t.Fatal("the first Stop reports it was not the first")
	}
	if l.Stop() {
		t.Fatal("the second Stop reports it was the first")
	}
	if err := l.Checkpoint(context.Background()); !errors.Is(err, ErrStopped) {
		t.Fatalf("Checkpoint after Stop: %v, want ErrStopped", err)
	}
	if err := l.LastCheckpoint(); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(false); err != nil {
		t.Fatal(err)
	}
}

// TestResultOfACheckpointWithoutEnd: a checkpoint cut before its end
// record is no state.
func TestResultOfACheckpointWithoutEnd(t *testing.T) {
	r := NewReplayer(&memService{})
	if err := r.CheckpointRecord(appendCkptService(nil, 1)); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Result(); err == nil {
		t.Fatal("Result of a checkpoint with no end record")
	}
}
