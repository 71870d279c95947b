package azq

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"time"
)

// The records of the log and of snapshots. Each is one frame's payload:
// a type byte, then fields as unsigned or zig-zag varints, fixed 8 or 16
// bytes for random values (IDs, tags), and length-prefixed strings. A
// queue is named by the number it was given at creation, not its name,
// which keeps records small and tells a queue from a later one of the same
// name.
const (
	// log records: one per acknowledged change
	recCreateQueue = 1 // qid, name, metadata
	recDeleteQueue = 2 // qid
	recMetadata    = 3 // qid, metadata
	recPolicies    = 4 // qid, policies
	recPut         = 5 // qid, slot, id, inserted, visible-inserted, expires, tag, content
	recGet         = 6 // qid, visible, count, count × (slot, dequeues, version, tag)
	recUpdate      = 7 // qid, slot, visible, version, tag, has content, [content]
	recDelete      = 8 // qid, slot
	recClear       = 9 // qid

	// snapshot records
	recSnapHeader  = 20 // magic, format, next qid
	recSnapQueue   = 21 // qid, name, seq, next slot, metadata, policies
	recSnapMessage = 22 // slot, seq, id, inserted, expires, visible, tag, dequeues, version, content
	recSnapEnd     = 23 // queues, messages
)

const (
	snapMagic  = "azq-snapshot"
	snapFormat = 1
)

// enc appends record fields to a buffer.
type enc []byte

func (e enc) u(v uint64) enc            { return binary.AppendUvarint(e, v) }
func (e enc) i(v int64) enc             { return binary.AppendVarint(e, v) }
func (e enc) u64(v uint64) enc          { return binary.LittleEndian.AppendUint64(e, v) }
func (e enc) id(id MessageID) enc       { return append(e, id[:]...) }
func (e enc) str(s string) enc          { return append(e.u(uint64(len(s))), s...) }
func (e enc) op(t byte, qid uint64) enc { return append(e, t).u(qid) }

// expiry encodes an expiration time relative to the insertion time, 0
// meaning never.
func (e enc) expiry(inserted, expires int64) enc {
	if expires == neverExpires {
		return e.u(0)
	}
	return e.u(uint64(expires-inserted) + 1)
}

func (e enc) metadata(md map[string]string) enc {
	e = e.u(uint64(len(md)))
	for k, v := range md {
		e = e.str(k).str(v)
	}
	return e
}

func (e enc) time(t time.Time) enc {
	if t.IsZero() {
		return append(e, 0)
	}
	return append(e, 1).i(t.Unix()).u(uint64(t.Nanosecond()))
}

func (e enc) policies(ps []AccessPolicy) enc {
	e = e.u(uint64(len(ps)))
	for _, p := range ps {
		e = e.str(p.ID).time(p.Start).time(p.Expiry).str(p.Permission)
	}
	return e
}

// dec reads record fields; the first failure sticks and later reads
// return zero values, so a decoder checks err once at the end.
type dec struct {
	b   []byte
	err error
}

var errShortRecord = errors.New("record ends early")

func (d *dec) fail(err error) {
	if d.err == nil {
		d.err = err
	}
	d.b = nil
}

func (d *dec) byte() byte {
	if len(d.b) < 1 {
		d.fail(errShortRecord)
		return 0
	}
	c := d.b[0]
	d.b = d.b[1:]
	return c
}

func (d *dec) u() uint64 {
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.fail(errShortRecord)
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *dec) i() int64 {
	v, n := binary.Varint(d.b)
	if n <= 0 {
		d.fail(errShortRecord)
		return 0
	}
	d.b = d.b[n:]
	return v
}

// u32 reads a varint that must fit 32 bits (a slot, a version).
func (d *dec) u32() uint32 {
	v := d.u()
	if v > math.MaxUint32 {
		d.fail(fmt.Errorf("value %d is out of range", v))
	}
	return uint32(v)
}

func (d *dec) u64() uint64 {
	if len(d.b) < 8 {
		d.fail(errShortRecord)
		return 0
	}
	v := binary.LittleEndian.Uint64(d.b)
	d.b = d.b[8:]
	return v
}

func (d *dec) id() (id MessageID) {
	if len(d.b) < len(id) {
		d.fail(errShortRecord)
		return id
	}
	copy(id[:], d.b)
	d.b = d.b[len(id):]
	return id
}

func (d *dec) str() string {
	n := d.u()
	if n > uint64(len(d.b)) {
		d.fail(errShortRecord)
		return ""
	}
	s := string(d.b[:n])
	d.b = d.b[n:]
	return s
}

func (d *dec) expiry(inserted int64) int64 {
	v := d.u()
	if v == 0 {
		return neverExpires
	}
	if v-1 > uint64(neverExpires-inserted) {
		d.fail(fmt.Errorf("expiration time is out of range"))
		return neverExpires
	}
	return inserted + int64(v-1)
}

func (d *dec) metadata() map[string]string {
	n := d.u()
	if n > uint64(len(d.b)) {
		d.fail(errShortRecord)
		return nil
	}
	if n == 0 {
		return nil
	}
	md := make(map[string]string, n)
	for ; n > 0 && d.err == nil; n-- {
		k := d.str()
		md[k] = d.str()
	}
	return md
}

func (d *dec) time() time.Time {
	switch d.byte() {
	case 0:
		return time.Time{}
	case 1:
		sec := d.i()
		ns := d.u()
		if ns >= 1e9 {
			d.fail(fmt.Errorf("nanoseconds %d are out of range", ns))
		}
		return time.Unix(sec, int64(ns)).UTC()
	}
	d.fail(errors.New("bad time"))
	return time.Time{}
}

func (d *dec) policies() []AccessPolicy {
	n := d.u()
	if n > MaxAccessPolicies {
		d.fail(fmt.Errorf("%d access policies", n))
		return nil
	}
	var ps []AccessPolicy
	for ; n > 0 && d.err == nil; n-- {
		ps = append(ps, AccessPolicy{ID: d.str(), Start: d.time(), Expiry: d.time(), Permission: d.str()})
	}
	return ps
}

// done reports the decoder's error, or that bytes are left over.
func (d *dec) done() error {
	if d.err == nil && len(d.b) != 0 {
		return fmt.Errorf("%d bytes left over at the end of the record", len(d.b))
	}
	return d.err
}
