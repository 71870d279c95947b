package azq

import (
	"encoding/base64"
	"encoding/binary"
	"math/rand/v2"
)

// A pop receipt is 17 bytes, written as 24 characters of standard base64
// (so it may contain '+', '/' and '=' and must be URL-encoded, as Azure's
// receipts must):
//
//	byte 0      format version (1)
//	bytes 1-4   slot of the message in the queue's store (big endian)
//	bytes 5-8   receipt version: the message's count of Gets and Updates
//	bytes 9-16  random tag drawn for this receipt alone, never 0
//
// The slot lets Update and Delete find the message without a hash lookup;
// the version and the tag must both match the message's current ones, so a
// receipt dies as soon as the message is dequeued again, updated, deleted or
// expires, and a forged receipt would have to guess 64 random bits.
const (
	receiptLen     = 17
	receiptTextLen = 24 // base64.StdEncoding.EncodedLen(receiptLen)
	receiptFormat  = 1
)

// PopReceipt is the opaque token that proves the holder is the latest
// consumer of a message. Put, Get and Update issue one; Update and Delete
// require the current one. The zero PopReceipt is never valid.
//
// A receipt is either azq's own, issued by an in-memory Queue, or remote:
// the text a remote queue service issued (Azure's receipts are 28
// characters of base64), carried unchanged by RemotePopReceipt so that a
// client of that service can hand it back. An in-memory Queue answers a
// remote receipt with ErrMessageNotFound, as it answers any receipt that is
// not its message's current one.
//
// A PopReceipt is a small comparable value, so issuing one of azq's own
// allocates nothing. Its String form is what the REST API sends;
// ParsePopReceipt reads azq's own back, and UnmarshalText reads either.
type PopReceipt struct {
	// The parts of one of azq's own receipts; see newReceipt. They are
	// kept decoded, so issuing and checking a receipt encodes nothing.
	slotNo  uint32
	version uint32
	tag     uint64 // never 0 in a receipt azq issued
	// remote is the text of a receipt another service issued; the parts
	// above are zero then.
	remote string
}

// RemotePopReceipt returns a receipt that carries text, a pop receipt
// issued by a remote queue service, unchanged: its String is text. The text
// is opaque to azq and not checked; the service that issued it judges it.
// Empty text gives the zero receipt.
func RemotePopReceipt(text string) PopReceipt {
	return PopReceipt{remote: text}
}

// IsRemote reports whether r carries a receipt that a remote service
// issued (RemotePopReceipt) rather than one of an in-memory Queue.
func (r PopReceipt) IsRemote() bool { return r.remote != "" }

// String returns the receipt's text form: for azq's own receipts 24
// characters of standard base64, for a remote one the text it carries. The
// zero receipt's text is empty.
func (r PopReceipt) String() string {
	if r.remote != "" {
		return r.remote
	}
	var b [receiptTextLen]byte
	t, _ := r.AppendText(b[:0])
	return string(t)
}

// AppendText appends the receipt's text form, as String returns it, to b
// and returns the extended slice; it never fails. A server writing
// receipts into a response buffer spares the string String makes.
func (r PopReceipt) AppendText(b []byte) ([]byte, error) {
	switch {
	case r.remote != "":
		return append(b, r.remote...), nil
	case r.IsZero():
		return b, nil
	}
	var raw [receiptLen]byte
	raw[0] = receiptFormat
	binary.BigEndian.PutUint32(raw[1:5], r.slotNo)
	binary.BigEndian.PutUint32(raw[5:9], r.version)
	binary.BigEndian.PutUint64(raw[9:17], r.tag)
	return base64.StdEncoding.AppendEncode(b, raw[:]), nil
}

// IsZero reports whether r is the zero receipt.
func (r PopReceipt) IsZero() bool { return r == PopReceipt{} }

// MarshalText encodes the receipt's text form.
func (r PopReceipt) MarshalText() ([]byte, error) { return r.AppendText(nil) }

// UnmarshalText decodes a receipt written by MarshalText or String, azq's
// own or remote: text in azq's format gives azq's receipt, any other text a
// remote one (RemotePopReceipt), so that a receipt kept as JSON or in a
// database round-trips whichever back end issued it. It never fails.
func (r *PopReceipt) UnmarshalText(b []byte) error {
	if p, err := ParsePopReceipt(string(b)); err == nil {
		*r = p
		return nil
	}
	*r = RemotePopReceipt(string(b))
	return nil
}

// ParsePopReceipt reads the text form of one of azq's own receipts, as the
// REST front end does for the in-memory queues it serves. Text that azq
// could not have issued (wrong length, not base64, unknown format, a zero
// tag) gives ErrInvalidPopReceipt, Azure's 400 InvalidQueryParameterValue
// with the reason "Invalid pop receipt format". A well-formed receipt that
// is stale or forged parses fine and is refused later with
// ErrMessageNotFound, as Azure refuses it. A client of a remote service wraps that service's
// receipts with RemotePopReceipt instead.
func ParsePopReceipt(s string) (PopReceipt, error) {
	var r PopReceipt
	var buf [18]byte // DecodedLen(24) is 18; the padding leaves 17 bytes
	if len(s) != receiptTextLen {
		return r, invalidReceipt(s)
	}
	n, err := base64.StdEncoding.Strict().Decode(buf[:], []byte(s))
	if err != nil || n != receiptLen || buf[0] != receiptFormat {
		return r, invalidReceipt(s)
	}
	r = newReceipt(binary.BigEndian.Uint32(buf[1:5]), binary.BigEndian.Uint32(buf[5:9]), binary.BigEndian.Uint64(buf[9:17]))
	if r.tag == 0 {
		return PopReceipt{}, invalidReceipt(s) // azq never issues a tag of 0
	}
	return r, nil
}

func invalidReceipt(s string) error {
	return newError(ErrInvalidPopReceipt, "", "the pop receipt "+quoteTrunc(s)+" is not a valid pop receipt",
		Detail{"QueryParameterName", "popreceipt"},
		Detail{"QueryParameterValue", s},
		Detail{"Reason", "Invalid pop receipt format"})
}

// newReceipt builds the receipt for a message at slot with its current
// version and tag.
func newReceipt(slot uint32, version uint32, tag uint64) PopReceipt {
	return PopReceipt{slotNo: slot, version: version, tag: tag}
}

// newTag returns a random receipt tag. It is never 0, so that no receipt
// azq issues is the zero PopReceipt.
func newTag(rng *rand.ChaCha8) uint64 {
	if t := rng.Uint64(); t != 0 {
		return t
	}
	return 1
}

// errZeroReceipt is returned for a zero PopReceipt, which azq never issues:
// the caller forgot to pass the receipt, which Azure reports as a missing
// required parameter.
var errZeroReceipt = &Error{Code: "MissingRequiredQueryParameter", StatusCode: 400,
	Message: "a pop receipt is required", Details: []Detail{{"QueryParameterName", "popreceipt"}}, kind: ErrInvalidPopReceipt}
