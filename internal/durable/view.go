package durable

import (
	"math"
	"time"
)

// NeverExpires is the expiration time of a message that never expires,
// in Unix nanoseconds: the queue's own.
const NeverExpires int64 = math.MaxInt64

// Message is a message as the log and the checkpoints hold it: what its
// queue keeps of it, and the slot it is in, which its pop receipts name.
type Message struct {
	Slot     uint32
	Seq      uint64 // its insertion sequence in its queue; never 0
	ID       [16]byte
	Content  string
	Inserted int64 // Unix nanoseconds
	Visible  int64 // the next-visible time, Unix nanoseconds
	Expires  int64 // Unix nanoseconds; NeverExpires if never
	Tag      uint64
	Dequeues int32
	Version  uint32
}

// Policy is a stored access policy of a queue.
type Policy struct {
	ID            string
	Start, Expiry time.Time
	Permission    string
}

// Header is what a checkpoint holds of a queue but its messages.
type Header struct {
	QID      uint64
	Name     string
	Seq      uint64 // the last insertion sequence handed out
	Next     uint32 // one past the highest slot handed out
	Metadata map[string]string
	Policies []Policy
}

// Taken is what a Get record holds of each message it took.
type Taken struct {
	Slot     uint32
	Dequeues int32
	Version  uint32
	Tag      uint64
}

// Host is the Service a Log keeps on disk, as the checkpointer and the
// failure handling see it.
type Host interface {
	// Queues takes the Service's lock and, unless the Service has failed
	// or is closed (then it returns the error of that), calls rotate and
	// returns its queues and the number of the next queue it creates as
	// they are while it holds the lock: holding it orders the rotation
	// with the creations and deletions of queues.
	Queues(rotate func()) ([]QueueState, uint64, error)
	// Fail stops the Service after the storage failure err: every queue
	// refuses further operations with it.
	Fail(err error)
}

// QueueState is a queue as a checkpoint or a backup copies it. Lock and
// Unlock are the queue's lock; the other methods are called with it held.
type QueueState interface {
	Lock()
	Unlock()
	// Closed reports whether the queue was deleted or closed.
	Closed() bool
	Header() Header
	// Next returns one past the highest slot handed out: Header().Next.
	Next() uint32
	// AppendMessages appends the messages in the slots lo to hi-1 to dst,
	// in slot order.
	AppendMessages(dst []Message, lo, hi uint32) []Message
	// Journal returns the queue's journal; nil for a queue in memory.
	Journal() *Queue
}

// Builder makes the queues that recovery and Restore rebuild.
type Builder interface {
	// NewQueue returns an empty queue named name, number qid.
	NewQueue(qid uint64, name string) Rebuilt
}

// Rebuilt is a queue being rebuilt. Its slot store is filled by slot, as
// the records name them, and its indexes built as the queue's operations
// build them. Messages come by value and no argument is a pointer, so that
// replaying a record allocates nothing for the call (an argument of an
// interface method escapes).
type Rebuilt interface {
	// Place puts m in its slot without indexing it, and reports false if
	// the slot holds a message already. Index indexes them afterwards.
	Place(m Message) bool
	// Index builds the indexes of the messages Place placed, in order of
	// insertion, as their Puts built them; two messages with the same
	// insertion sequence are an error.
	Index() error
	// Restore puts m, replayed from its Put, in its slot and indexes it.
	// A message still in the slot expired and was purged (the one change
	// the log does not record): it goes first.
	Restore(m Message)
	// Take sets what a Get changed of the message in slot; false if the
	// slot is empty.
	Take(visible int64, t Taken) bool
	// Update sets what an Update changed of the message in slot, its
	// content too if hasContent; false if the slot is empty.
	Update(slot uint32, visible int64, version uint32, tag uint64, hasContent bool, content string) bool
	// Remove deletes the message in slot, as Delete does; false if the
	// slot is empty.
	Remove(slot uint32) bool
	// Clear deletes every message.
	Clear()
	// Next returns one past the highest slot in use so far.
	Next() uint32
}
