package postgres

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/binary"
	"time"

	"github.com/azqlib/azq"
)

// Receipts are azq's own (see azq.ParsePopReceipt): 17 bytes, a format
// byte, a 32-bit slot, the 32-bit receipt version and a 64-bit random tag,
// as 24 characters of base64. The slot holds the low 32 bits of the
// message's insertion sequence, which the statements do not need: the
// message is found by its ID, and the version and tag must match its
// current ones, so a receipt dies when the message is dequeued again,
// updated, deleted or expires, and a forged one would have to guess 64
// random bits.
const (
	receiptLen     = 17
	receiptTextLen = 24
	receiptFormat  = 1
)

// makeReceipt builds the receipt of a message from its parts.
func makeReceipt(seq int64, version int64, tag int64) azq.PopReceipt {
	var raw [receiptLen]byte
	raw[0] = receiptFormat
	binary.BigEndian.PutUint32(raw[1:5], uint32(seq))
	binary.BigEndian.PutUint32(raw[5:9], uint32(version))
	binary.BigEndian.PutUint64(raw[9:17], uint64(tag))
	r, err := azq.ParsePopReceipt(base64.StdEncoding.EncodeToString(raw[:]))
	if err != nil {
		panic("postgres: a receipt azq does not read: " + err.Error()) // tag 0: see newTag
	}
	return r
}

// receiptParts returns the slot, version and tag of one of azq's own
// receipts; ok is false for a remote receipt or the zero one.
func receiptParts(r azq.PopReceipt) (slot, version, tag int64, ok bool) {
	if r.IsZero() || r.IsRemote() {
		return 0, 0, 0, false
	}
	var text [receiptTextLen]byte
	b, _ := r.AppendText(text[:0])
	var raw [18]byte
	n, err := base64.StdEncoding.Decode(raw[:], b)
	if err != nil || n != receiptLen || raw[0] != receiptFormat {
		return 0, 0, 0, false
	}
	return int64(binary.BigEndian.Uint32(raw[1:5])), int64(binary.BigEndian.Uint32(raw[5:9])),
		int64(binary.BigEndian.Uint64(raw[9:17])), true
}

// newTag returns a random receipt tag, never 0, which azq does not issue.
func newTag() int64 {
	var b [8]byte
	for {
		if _, err := rand.Read(b[:]); err != nil {
			panic("postgres: no randomness: " + err.Error())
		}
		if t := int64(binary.LittleEndian.Uint64(b[:])); t != 0 {
			return t
		}
	}
}

// A message's ID carries its key: the sequence number (seq) that orders
// the messages and is the primary key of their table, so that a message
// is found by a bigint key, which PostgreSQL appends to its index, rather
// than by a random UUID, which lands on a random page of a UUID index and
// would need that index beside seq's. An ID is a version 4 UUID: the
// first 8 bytes are random (the version nibble aside) and kept with the
// message (id_rand); the last 8 hold the UUID variant's two bits and seq
// XOR those random bytes, in 62 bits (seq, an identity from 1, stays
// below 2^62). An ID whose variant bits are not these, or whose random
// half is not the message's, names no message.
const (
	idVariant = uint64(0b10) << 62
	idSeqMask = uint64(1)<<62 - 1
)

// newIDRand returns the random half of a new message's ID.
func newIDRand() int64 {
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic("postgres: no randomness: " + err.Error())
	}
	b[6] = b[6]&0x0f | 0x40 // version 4
	return int64(binary.BigEndian.Uint64(b[:]))
}

// messageID is the ID of the message with key seq and random half r.
func messageID(seq, r int64) azq.MessageID {
	var id azq.MessageID
	binary.BigEndian.PutUint64(id[0:8], uint64(r))
	binary.BigEndian.PutUint64(id[8:16], idVariant|(uint64(seq)^uint64(r))&idSeqMask)
	return id
}

// idParts returns the key and the random half an ID carries; ok is false
// for an ID that no message of this back end has.
func idParts(id azq.MessageID) (seq, r int64, ok bool) {
	r = int64(binary.BigEndian.Uint64(id[0:8]))
	low := binary.BigEndian.Uint64(id[8:16])
	if low&^idSeqMask != idVariant {
		return 0, 0, false
	}
	return int64((low ^ uint64(r)) & idSeqMask), r, true
}

// Times are Unix nanoseconds, as in the in-memory queue (see the schema).
const (
	// neverExpires is the expiry of a message that never expires.
	neverExpires int64 = 1<<63 - 1
	// lastInstant is the latest time azq represents: a clock later than
	// it reads as it, so time stands still instead of wrapping to 1678.
	lastInstant = neverExpires - 2
)

// farFuture is the expiration time Azure reports for a message that never
// expires.
var farFuture = time.Date(9999, time.December, 31, 23, 59, 59, 0, time.UTC)

// clockNanos converts a clock reading to Unix nanoseconds, saturating at
// lastInstant as the in-memory queue does.
func clockNanos(t time.Time) int64 {
	if sec := t.Unix(); sec > lastInstant/1e9 ||
		sec == lastInstant/1e9 && int64(t.Nanosecond()) > lastInstant%1e9 {
		return lastInstant
	}
	return t.UnixNano()
}

// fromNanos converts Unix nanoseconds to a UTC time.
func fromNanos(ns int64) time.Time { return time.Unix(0, ns).UTC() }

// expirationTime is the expiration time a message reports: an expiry
// saturated past 2262, like never, reads 9999-12-31T23:59:59Z.
func expirationTime(ns int64) time.Time {
	if ns >= neverExpires-1 {
		return farFuture
	}
	return fromNanos(ns)
}
