package azq

import (
	"time"

	"github.com/google/uuid"
)

// MessageID identifies a message. It is a random (version 4) UUID, written
// as Azure writes message IDs: 36 lower-case characters with hyphens.
type MessageID [16]byte

// String returns the ID in its canonical form, e.g.
// "663d89aa-d1d9-42a2-9a6a-fcf822a97d2c".
func (id MessageID) String() string { return uuid.UUID(id).String() }

// IsZero reports whether id is the zero ID, which no message has.
func (id MessageID) IsZero() bool { return id == MessageID{} }

// MarshalText encodes the ID in its canonical form.
func (id MessageID) MarshalText() ([]byte, error) { return uuid.UUID(id).MarshalText() }

// UnmarshalText decodes an ID written by MarshalText or String.
func (id *MessageID) UnmarshalText(b []byte) error {
	p, err := ParseMessageID(string(b))
	if err != nil {
		return err
	}
	*id = p
	return nil
}

// ParseMessageID parses the canonical form of a message ID. A string that
// is not a UUID cannot name any message, so the error is ErrMessageNotFound,
// which is what Azure answers for such an ID.
func ParseMessageID(s string) (MessageID, error) {
	u, err := uuid.Parse(s)
	if err != nil {
		return MessageID{}, newError(ErrMessageNotFound, "", "the message ID "+quoteTrunc(s)+" is not a valid message ID")
	}
	return MessageID(u), nil
}

// Message is a message as an operation returns it: a snapshot, never a view
// of the queue's state. Content is a string, and strings are immutable, so a
// Message can be kept and shared freely.
type Message struct {
	// ID identifies the message for its whole life.
	ID MessageID
	// Content is the message text (MessageText in Azure). azq never
	// interprets it; it may hold any bytes.
	Content string
	// InsertionTime is when the message was put.
	InsertionTime time.Time
	// ExpirationTime is when the message expires; for a message that
	// never expires it is 9999-12-31T23:59:59Z, as Azure reports it.
	ExpirationTime time.Time
	// NextVisibleTime is when the message becomes (or became) visible to
	// Get (TimeNextVisible in Azure).
	NextVisibleTime time.Time
	// DequeueCount is the number of times Get has returned the message.
	DequeueCount int64
	// PopReceipt is the receipt that Update and Delete need. Put, Get and
	// Receive set it; Peek leaves it zero.
	PopReceipt PopReceipt
}

// UpdateResult is what Update returns: the message's new receipt, which
// replaces the one passed in, and the time it next becomes visible.
type UpdateResult struct {
	PopReceipt      PopReceipt
	NextVisibleTime time.Time
}

// node is a stored message. Nodes live in the queue's slot store and are
// addressed by slot index, so a pop receipt (which names the slot) finds its
// message without a hash lookup.
type node struct {
	content  string
	id       MessageID
	inserted int64  // insertion time, Unix nanoseconds
	expires  int64  // expiration time, Unix nanoseconds; neverExpires if none
	visible  int64  // next-visible time, Unix nanoseconds
	seq      uint64 // insertion order, unique per queue; 0 marks a free slot
	tag      uint64 // random part of the current pop receipt
	dequeues int32
	version  uint32 // bumped on every Get and Update: the receipt version
}

// message returns the snapshot of n that operations hand out, without a
// receipt.
func (n *node) message() Message {
	var m Message
	n.setMessage(&m, PopReceipt{})
	return m
}

// setMessage writes the snapshot of n, with receipt, to every field of m.
// Filling a Message where it is to be kept spares copying its 144 bytes
// from a temporary, which the hot paths feel.
func (n *node) setMessage(m *Message, receipt PopReceipt) {
	m.ID = n.id
	m.Content = n.content
	m.InsertionTime = fromNanos(n.inserted)
	m.ExpirationTime = expirationTime(n.expires)
	if n.visible == n.inserted { // put visible at once
		m.NextVisibleTime = m.InsertionTime
	} else {
		m.NextVisibleTime = fromNanos(n.visible)
	}
	m.DequeueCount = int64(n.dequeues)
	m.PopReceipt = receipt
}

// fromNanos converts Unix nanoseconds to a UTC time.
func fromNanos(ns int64) time.Time { return time.Unix(0, ns).UTC() }

// quoteTrunc quotes s for an error message, cut short if it is long, so
// that hostile input cannot blow up error text.
func quoteTrunc(s string) string {
	const max = 64
	if len(s) > max {
		s = s[:max] + "…"
	}
	return `"` + s + `"`
}
